"""Benchmark: `layer_report`'s logistic-regression probes on SmolLM2-135M-Instruct's 31 hidden states of 576 (Banking77).

The straightforward path is one scikit-learn `LinearProbe` per layer (lbfgs, warm from the previous C), as the report
ran until now; the fast path is `report.probe_runs`: the same objective by torch's L-BFGS in float32, each layer's
first fit started from the previous layer's solution. Both run in this process, on the same split and threads, in
turn (fast, straight, fast, ...); each path's best round stands for it. The bound is the GEMM time of the fast path's
own function evaluations (two (n, d) x (d, K) products each, timed alone): what the evaluations would cost with no
other work. Also: the concatenation (31 x 576 = 17,856 features), and how far the two paths' results differ.
Usage: python bench/ilge/probes_smollm2.py [--subset 3000] [--rounds 2] [--threads 2]
Writes bench/ilge/results/smollm2_probes.md.
"""
from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import numpy as np
import torch

from ilge.accuracy_smollm2 import embeddings


def _count_evals():
    "Wrap torch's LBFGS.step to add up its function evaluations; returns the counter (a list of one int)."
    count, step = [0], torch.optim.LBFGS.step
    def counted(self, closure):
        out = step(self, closure)
        count[0] += self.state[self._params[0]]['func_evals']
        return out
    torch.optim.LBFGS.step = counted
    return count


def _gemm_seconds(n: int, d: int, K: int, reps: int = 5) -> float:
    "Seconds of one evaluation's two products at float32: (n, d) @ (d, K) and its transpose (n, d)^T @ (n, K)."
    Z, W, R = torch.randn(n, d), torch.randn(d, K), torch.randn(n, K)
    Z @ W; Z.T @ R
    t = time.perf_counter()
    for _ in range(reps): Z @ W; Z.T @ R
    return (time.perf_counter() - t) / reps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--subset', type=int, default=3000, help='a stratified sample of N training texts (0: all 10,003)')
    ap.add_argument('--rounds', type=int, default=2)
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    threads = common.set_threads(a.threads)
    X, y, Xt, yt, _ = embeddings(a.subset or None)
    from layerkit.report import LinearProbe, probe_runs
    Cs, vf, seed = (0.01, 0.1, 1.0), 0.1, 0
    Xall, yall = np.concatenate([X, Xt]), np.concatenate([y, yt])
    train, test = np.arange(len(X)), np.arange(len(X), len(Xall))
    L, D = X.shape[1:]
    evals = _count_evals()
    def straight(layers):  # one scikit-learn LinearProbe per layer, as the report ran until now
        probes = [LinearProbe(l, Cs, vf, seed).fit(X, y) for l in layers]
        return [dict(C=p.C_, val=p.best_score_, test=float(p.score(Xt, yt))) for p in probes]
    fast = lambda layers: probe_runs(Xall, yall, train, test, Cs, vf, seed, layers)
    rows, out = [], {}
    for what, layers in (('31 single-layer probes', list(range(L))), (f'the concatenation ({L * D:,} features)', [None])):
        best = {'fast': None, 'straight': None}
        for r in range(a.rounds):
            for name, fn in (('fast', fast), ('straight', straight)):
                if name == 'straight' and r and what.startswith('the concat'): continue  # one round: minutes each
                e0 = evals[0]
                with common.Clock() as c: res = fn(layers)
                if name == 'fast': n_evals = evals[0] - e0
                if best[name] is None or c.wall < best[name][0].wall: best[name] = (c.run, res)
                print(f"{what}, {name}: {c.wall:.1f}s", flush=True)
        (tf, rf), (ts, rs) = best['fast'], best['straight']
        d = len(X[0].reshape(-1)) if layers == [None] else D
        bound = n_evals * _gemm_seconds(len(X), d, len(np.unique(y)))
        acc_f, acc_s = np.array([r['test'] for r in rf]), np.array([r['test'] for r in rs])
        same_C = sum(a_['C'] == b_['C'] for a_, b_ in zip(rf, rs))
        bl_f, bl_s = int(np.argmax([r['val'] for r in rf])), int(np.argmax([r['val'] for r in rs]))
        out[what] = dict(fast=rf, straight=rs)
        rows.append([what, f"{ts.wall:.1f}", f"{tf.wall:.1f}", f"**{ts.wall / tf.wall:.2f}x**", f"{bound:.1f}",
                     f"{bound / tf.wall:.2f}", f"{same_C}/{len(rf)}", f"{np.abs(acc_f - acc_s).max():.4f}",
                     f"{bl_f} / {bl_s}" if len(rf) > 1 else '',
                     'clean' if ts.clean() and tf.clean() else f"shared (load {max(ts.load or 0, tf.load or 0):.1f})"])
    table = common.md_table(['probes', 'scikit-learn loop s', 'fast path s', 'speed-up', 'bound s (GEMMs of its evaluations)',
                             'bound / fast', 'same C', 'max |Δ test accuracy|', 'best layer (fast / loop)', 'machine'],
                            rows, 'lrrrrrrrrl')
    text = (f"# `layer_report`'s probes on SmolLM2-135M-Instruct (Banking77)\n\n"
            f"{len(X):,} training and {len(Xt):,} test texts, (N, {L}, {D}) mean-pooled hidden states; Cs {Cs}, "
            f"validation fraction {vf}, seed {seed}; best of {a.rounds} rounds (the concatenation's scikit-learn loop: one). "
            f"{common.environment(threads)}\n\n{table}\n\n"
            "The fast path solves the same objective as scikit-learn's lbfgs (mean cross-entropy + |W|²/2Cn) to the same "
            "gradient tolerance (1e-4), from other starting points, so the two stop at slightly "
            "different places: a C or a prediction near a tie may differ. `nbs/29_report.ipynb` holds the two equal where "
            "both are solved tightly.\n")
    print(text)
    common.write_result('smollm2_probes.md', text)


if __name__ == '__main__':
    main()
