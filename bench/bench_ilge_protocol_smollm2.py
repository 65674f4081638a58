"""Benchmark: the ILGE paper's protocol (MTEB classification) beside the equal-footing few-shot regime, SmolLM2-135M.

The ILGE authors score the single-layer baselines with MTEB's classification protocol: 10 repeats, each a logistic
regression (scikit-learn, max_iter=100, raw features) on 8 training texts per label undersampled from the train split,
scored on the test split; their encoders train on the whole train split. This script puts that protocol beside the
equal-footing comparison: every reader on the SAME 8, 16 and 64 training texts per label (3 seeds each).

Data: Banking77 (shipped with layerkit). A pool of 64 training texts per label (fewer where a label has fewer: 4 labels
have 35-61) drawn from the train split with seed 0, and a stratified 1,540 of the 3,080 test texts (20 per label).
Layer embeddings from `LayerEmbedder` on SmolLM2-135M-Instruct's GGUF (`layerkit.gguf_models.smollm2_gguf`), mean-pooled,
float32 on CPU as in bench_ilge_accuracy_smollm2.py, cached under bench/.cache/embeddings.

1. MTEB protocol (mteb's AbsTaskClassification defaults): n_experiments=10, samples_per_label=8, numpy seed 42, the
   index list reshuffled each repeat and undersampled to 8 per label, LogisticRegression(max_iter=100,
   random_state=42) on the raw features, accuracy on the test texts. For every layer; reported: the last layer, the
   best layer chosen on validation (the pool texts the repeat did not sample), and the best layer chosen on the test
   split (an oracle: what a paper's "best layer" row may be, labelled as such).
2. Equal footing: for k in 8, 16, 64 per label and seeds 0, 1, 2, the k texts per label (the same for every reader),
   through `layerkit.report.layer_report` (LogReg last layer, best layer on validation, concatenation, C chosen on a
   10% validation split) with the default reader `LayerClassifier()` (CayleyConfig(), Cayley GIN) as its one encoder.
   Paired test (exact McNemar, `layerkit.report.paired_test`) of the GIN default against the best simple reader.
Usage: python bench/bench_ilge_protocol_smollm2.py [--shots 8 16 64] [--seeds 0 1 2] [--threads 2] [--embed-only]
Writes bench/results/smollm2_protocol.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import time
from collections import defaultdict

import common
import numpy as np
from bench_ilge_accuracy_smollm2 import CACHE

POOL_PER_LABEL = 64  # training texts per label embedded (the largest few-shot size)
TEST_PER_LABEL = 20  # test texts per label (1,540 of Banking77's 3,080)


def _per_label(y: np.ndarray, n: int, seed: int) -> np.ndarray:
    "Sorted indices of up to n samples of each label, drawn at random with `seed`."
    rng = np.random.default_rng(seed)
    return np.sort(np.concatenate([rng.permutation(np.flatnonzero(y == c))[:n] for c in np.unique(y)]))


def embeddings():
    "(X_pool, y_pool, X_test, y_test, seconds): the pool and test texts' (N, 31, 576) SmolLM2 embeddings, cached."
    from layerkit.embeddings import LayerEmbedder
    (tr, y_tr), (te, y_te) = common.banking77('train'), common.banking77('test')
    pool, test = _per_label(y_tr, POOL_PER_LABEL, 0), _per_label(y_te, TEST_PER_LABEL, 0)
    emb = LayerEmbedder(common.smollm2_path(), token_pooling='mean', batch_size=64, dtype='float32', device='cpu',
                        cache_dir=CACHE, progress=True)
    with common.Clock() as c:
        X_te = emb.transform([te[i] for i in test])
        X_po = emb.transform([tr[i] for i in pool])
    emb.unload()
    print(f"embeddings: pool {X_po.shape}, test {X_te.shape} in {c.wall:.0f}s", flush=True)
    return X_po, y_tr[pool], X_te, y_te[test], c.wall



def mteb_protocol(X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, n_experiments: int = 10,
                  samples_per_label: int = 8, seed: int = 42) -> dict:
    "MTEB's AbsTaskClassification on every layer: per repeat, the per-layer test and validation accuracies and the time."
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits
    rng, idxs = np.random.RandomState(seed), np.arange(len(y))
    test, val, secs = [], [], []
    for _ in range(n_experiments):
        rng.shuffle(idxs)  # mteb's _undersample_data: shuffle the (kept) index list, take the first n of each label
        count, pick = defaultdict(int), []
        for i in idxs:
            if count[y[i]] < samples_per_label: pick.append(i); count[y[i]] += 1
        pick = np.array(pick)
        rest = np.setdiff1d(np.arange(len(y)), pick)  # the pool texts this repeat did not sample: its validation split
        t0, te, va = time.perf_counter(), [], []
        for l in range(X.shape[1]):
            # one BLAS thread: on a shared 2-core machine, a multi-threaded BLAS made one fit take 37 s instead of 0.5 s
            with warnings.catch_warnings(), threadpool_limits(1):
                warnings.simplefilter('ignore', ConvergenceWarning)  # max_iter=100 stops early: that is the protocol
                lr = LogisticRegression(max_iter=100, random_state=seed).fit(X[pick, l], y[pick])
            te.append(float((lr.predict(Xt[:, l]) == yt).mean())); va.append(float((lr.predict(X[rest, l]) == y[rest]).mean()))
        test.append(te); val.append(va); secs.append(time.perf_counter() - t0)
        print(f"mteb repeat {len(test)}: last {te[-1]:.3f}, best-val layer {int(np.argmax(va))} {te[int(np.argmax(va))]:.3f}, "
              f"best-test {max(te):.3f}, {secs[-1]:.0f}s", flush=True)
    test, val = np.array(test), np.array(val)  # (repeats, L)
    b = val.argmax(1)
    return dict(last=test[:, -1], best_val=test[np.arange(len(b)), b], best_val_layers=b,
                best_test=test.max(1), best_test_layers=test.argmax(1), secs=float(np.sum(secs)))


def equal_footing(X, y, Xt, yt, k: int, seed: int) -> dict:
    "One run on k training texts per label: `layer_report`'s LogReg rows and the default `LayerClassifier()`'s."
    from layerkit.configs import CayleyConfig
    from layerkit.report import layer_report
    train = _per_label(y, k, seed)
    t0 = time.perf_counter()
    rep = layer_report(X[train], y[train], Xt, yt, encoders={GIN: CayleyConfig()}, scalar_mix=False, seeds=(seed,),
                       progress=False)
    out = {m: dict(test=r[0]['test'], fit=r[0]['fit_time'], pred=r[0]['pred'], note=r[0]['note']) for m, r in rep.runs.items()}
    print(f"k={k} seed={seed} n={len(train)}: " + ', '.join(f"{m} {r['test']:.3f}" for m, r in out.items())
          + f" ({time.perf_counter() - t0:.0f}s)", flush=True)
    return dict(n=len(train), runs=out, truth=rep.truth[0])


GIN = 'LayerClassifier() (Cayley GIN default)'
SIMPLE = ('LogReg, last layer', 'LogReg, best layer (validation)', 'LogReg, all layers concatenated')
FULL = [  # cited from bench/results/smollm2_ilge.md and smollm2_ilge_full.md (all 3,080 test texts, seeds 0-2)
    ('Banking77, 3,000 train (smollm2_ilge.md)', 0.786, 0.852, 0.866, 0.869),
    ('Banking77, all 10,003 train (smollm2_ilge_full.md)', 0.863, 0.901, 0.913, 0.906)]


def _ms(v) -> str:
    v = np.asarray(v, float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def report(mteb: dict | None, runs: dict, shots, seeds, n_pool: int, n_test: int, t_embed: float, t_start: float,
           threads: int, load: str) -> str:
    "The markdown of what has run so far."
    from layerkit.report import paired_test
    L = []
    L.append(f"# The ILGE paper's protocol (MTEB) beside equal footing: SmolLM2-135M-Instruct, Banking77\n")
    L.append(f"Run {datetime.date.today().isoformat()}; {common.environment(threads)}; load average at the start "
             f"{load}; embedding {t_embed:.0f} s (or cached), total {time.perf_counter() - t_start:.0f} s. Pool: "
             f"{n_pool:,} Banking77 training texts (up to {POOL_PER_LABEL} per label, seed 0; 4 labels have only 35-61); "
             f"test: {n_test:,} texts ({TEST_PER_LABEL} per label, stratified, seed 0). SmolLM2-135M-Instruct Q4_1 GGUF, "
             f"mean-pooled hidden states (N, 31, 576), float32. Produced by bench/bench_ilge_protocol_smollm2.py.\n")
    if mteb:
        L.append("## 1. The paper's protocol (MTEB classification defaults) on single layers\n")
        L.append("10 repeats (numpy seed 42), each 8 training texts per label undersampled from the pool, scikit-learn "
                 "LogisticRegression(max_iter=100) on the raw layer features, accuracy on the test texts. Mean ± std over "
                 f"the repeats; {mteb['secs']:.0f} s for 10 × 31 fits.\n")
        L.append(common.md_table(['reader (MTEB protocol, 8 per label)', 'test accuracy', 'layers chosen'], [
            ['LogReg, last layer', _ms(mteb['last']), '30'],
            ['LogReg, best layer (chosen on validation: the pool texts not sampled)', _ms(mteb['best_val']),
             ', '.join(map(str, mteb['best_val_layers']))],
            ['LogReg, best layer chosen on the test split (oracle, not a fair baseline)', _ms(mteb['best_test']),
             ', '.join(map(str, mteb['best_test_layers']))]]))
    L.append("\n## 2. Equal footing: every reader on the same k texts per label\n")
    L.append("`layer_report` (C of each LogReg chosen on a 10% validation split, the best layer on it) with the default "
             f"reader `LayerClassifier()` (CayleyConfig()) as its one encoder; seeds {list(seeds)} (the draw of the k "
             "texts, the validation split, the initialisation; at k = 64 the draw is the whole pool, so only the split "
             "and the initialisation vary). Mean ± std over the seeds that ran; fit s: mean seconds per run.\n")
    rows, tests = [], []
    for k in shots:
        rs = [runs[(k, s)] for s in seeds if (k, s) in runs]
        if not rs: continue
        acc = {m: [r['runs'][m]['test'] for r in rs] for m in (*SIMPLE, GIN)}
        fit = {m: np.mean([r['runs'][m]['fit'] for r in rs]) for m in (*SIMPLE, GIN)}
        best = max(SIMPLE, key=lambda m: np.mean(acc[m]))
        rows.append([f"{k} per label ({rs[0]['n']:,} texts, {len(rs)} seed{'s' if len(rs) > 1 else ''})",
                     *[f"{_ms(acc[m])} ({fit[m]:.0f} s)" for m in (*SIMPLE, GIN)]])
        pt = [paired_test(r['truth'], r['runs'][GIN]['pred'], r['runs'][best]['pred']) for r in rs]
        tests.append([str(k), best, f"{np.mean(acc[GIN]) - np.mean(acc[best]):+.3f}",
                      ', '.join(f"{t['difference']:+.3f} (p = {t['p_value']:.2g}, {t['verdict']})" for t in pt)])
    L.append(common.md_table(['training data', *SIMPLE, GIN], rows))
    L.append("\n### The GIN default against the best simple reader (exact McNemar per seed, on the same test texts)\n")
    L.append(common.md_table(['k per label', 'best simple reader (by mean)', 'GIN − it (mean)', 'per seed: difference (p, GIN)'], tests))
    kmax = max((k for k in shots if any((k, s) in runs for s in seeds)), default=None)
    if mteb and kmax is not None:
        rs = [runs[(kmax, s)] for s in seeds if (kmax, s) in runs]
        m = {r: np.mean([x['runs'][r]['test'] for x in rs]) for r in (*SIMPLE, GIN)}
        L.append(f"\n### Where the paper-style gain comes from (GIN at {kmax} per label against MTEB's 8-per-label baselines)\n")
        L.append("Paper-style gain = the GIN default at the largest k that ran minus the baseline scored by the MTEB protocol. "
                 "It splits into the protocol's part (the same single-layer reader, fitted by layerkit's LogReg on the "
                 "same data as the GIN, minus its MTEB score) and the method's part (GIN minus that reader, equal data).\n")
        L.append(common.md_table(['baseline', 'MTEB score', 'paper-style gain (pt)', 'from the protocol (pt)', 'from the method (pt)'], [
            [name, f"{mteb[key].mean():.3f}", f"{100 * (m[GIN] - mteb[key].mean()):+.1f}",
             f"{100 * (m[r] - mteb[key].mean()):+.1f}", f"{100 * (m[GIN] - m[r]):+.1f}"]
            for name, key, r in (('last layer', 'last', SIMPLE[0]), ('best layer (validation)', 'best_val', SIMPLE[1]))]))
        L.append(f"\nAt {kmax} per label the concatenation LogReg scores {m[SIMPLE[2]]:.3f}, the GIN default {m[GIN]:.3f}.\n")
    L.append("\n## 3. Full data (cited, not recomputed: all 3,080 test texts, seeds 0-2)\n")
    L.append(common.md_table(['training data', 'last layer', 'best layer (validation)', 'concatenation', 'Cayley GIN (default)'],
                             [[n, *(f"{v:.3f}" for v in vs)] for n, *vs in FULL]))
    return '\n'.join(L)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--shots', type=int, nargs='+', default=[8, 16, 64])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--embed-only', action='store_true')
    ap.add_argument('--out', default='smollm2_protocol.md')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    warnings.filterwarnings('ignore', category=ConvergenceWarning)  # MTEB's max_iter=100 stops early, on purpose
    t_start, load = time.perf_counter(), ', '.join(f"{x:.1f}" for x in os.getloadavg())
    X, y, Xt, yt, t_embed = embeddings()
    if a.embed_only: return
    write = lambda: common.write_result(a.out, report(mteb, runs, a.shots, a.seeds, len(y), len(yt), t_embed, t_start,
                                                      a.threads, load))
    runs, mteb = {}, None
    mteb = mteb_protocol(X, y, Xt, yt); write()
    for k in a.shots:  # the cheap sizes first; the file is rewritten after every run, so a cut-short run still reports
        for s in a.seeds: runs[(k, s)] = equal_footing(X, y, Xt, yt, k, s); write()
    print(report(mteb, runs, a.shots, a.seeds, len(y), len(yt), t_embed, t_start, a.threads, load))


if __name__ == '__main__':
    main()
