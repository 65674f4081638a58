"""Benchmark: `layer_report`'s default report on all of Banking77 with SmolLM2-135M (31 x 576, 3 seeds), and its cost.

Issue 33 asked for the whole default report (the probes, the concatenation, the scalar mix, the stack, Cayley GIN and
DeepSet) on all 10,003 training and 3,080 test texts in under 10 minutes on 2 cores, with the same numbers. The
stack's row is built from the rows that train its parts (the Cayley GIN row is its encoder, the concatenation's probe
and, since 0.3, the best layer's probe are its regressions), so each is fitted once. This script times the report.
With `--n-jobs 1` it also times, for seed 0 in the same process, the straightforward stack
(`LayerClassifier(StackConfig(), random_state=0).fit`), which the report used to fit on its own: its predictions must
equal the report's stack row, and its time is what sharing saves a seed. With `--n-jobs N --baseline` it times the
report in N worker processes (`layer_report(..., n_jobs=N)`, each with its share of the torch threads) and, in the
same process, in this one (`n_jobs=None`), and compares the numbers row by row. With `--quick` the report is the
README's quick one: the stack and the logistic regressions only (`encoders={'Stack (default)': StackConfig()},
scalar_mix=False`).
Embeddings: bench/ilge/default_reader.py's (cached under bench/.cache/embeddings).
Usage: python bench/ilge/report_speed.py [--seeds 0 1 2] [--threads 2] [--n-jobs 2 --baseline] [--quick] [--out report_speed_smollm2.md]
Writes bench/ilge/results/report_speed_smollm2.md (or --out).
"""
from __future__ import annotations

import argparse
import os
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import numpy as np
from ilge.default_reader import task_embeddings


def _timed_report(X, y, Xt, yt, seeds, n_jobs, quick=False):
    from layerkit.report import layer_report
    from layerkit.configs import StackConfig
    kw = dict(encoders={'Stack (default)': StackConfig()}, scalar_mix=False) if quick else {}
    t0 = time.perf_counter()
    rep = layer_report(X, y, Xt, yt, seeds=tuple(seeds), progress=True, n_jobs=n_jobs, **kw)
    return rep, time.perf_counter() - t0


def _acc(rs) -> str:
    v = [r['test'] for r in rs]
    return f"{np.mean(v):.4f} ± {np.std(v, ddof=1) if len(v) > 1 else 0:.4f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--n-jobs', type=int, default=1, help="layer_report's n_jobs (worker processes)")
    ap.add_argument('--baseline', action='store_true', help='also time the report in this process (n_jobs=None)')
    ap.add_argument('--quick', action='store_true', help="the stack and the logistic regressions only (the README's quick report)")
    ap.add_argument('--out', default='report_speed_smollm2.md', help='result file under bench/ilge/results')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    from layerkit.classifier import LayerClassifier
    load = ', '.join(f"{x:.1f}" for x in os.getloadavg())
    X, y, Xt, yt = task_embeddings('smollm2', 'banking77')
    rep, t_report = _timed_report(X, y, Xt, yt, a.seeds, a.n_jobs, a.quick)
    secs = lambda rs: ', '.join(f"{r['fit_time']:.0f}" for r in rs)
    quick_kw = ", encoders={'Stack (default)': StackConfig()}, scalar_mix=False" if a.quick else ''
    jobs_kw = f', n_jobs={a.n_jobs}' if a.n_jobs != 1 else ''
    how = f"`layer_report(X, y, X_test, y_test{quick_kw}{jobs_kw})`"
    lines = [
        "# `layer_report` on all of Banking77 with SmolLM2-135M: time and numbers\n",
        f"Run {time.strftime('%Y-%m-%d')}; {common.environment(a.threads)}; load average at the start {load}. "
        f"(10,003, 31, 576) training and (3,080, 31, 576) test embeddings (cached), seeds {a.seeds}, the {'quick' if a.quick else 'default'} report "
        f"({how}). Produced by bench/ilge/report_speed.py.\n",
        f"**The whole report: {t_report:.0f} s ({t_report / 60:.1f} minutes)** for {len(a.seeds)} seeds"
        f"{f', in {a.n_jobs} worker processes' if a.n_jobs != 1 else ''}.\n"]
    stack, gin, cat, lay = (rep.runs.get(m) for m in ('Stack (default)', 'Cayley GIN', 'LogReg, all layers concatenated',
                                                      'LogReg, best layer (validation)'))
    if a.baseline:
        base, t_base = _timed_report(X, y, Xt, yt, a.seeds, None, a.quick)
        rows = [[m, _acc(base.runs[m]), _acc(rs), f"{max(abs(r['test'] - b['test']) for r, b in zip(rs, base.runs[m])) * 100:.2f}",
                 f"{np.mean([(r['pred'] == b['pred']).mean() for r, b in zip(rs, base.runs[m])]) * 100:.1f}%", secs(base.runs[m]), secs(rs)]
                for m, rs in rep.runs.items()]
        lines += [f"In this process (`n_jobs=None`, {a.threads} torch threads), measured next: **{t_base:.0f} s ({t_base / 60:.1f} "
                  f"minutes)**; the {a.n_jobs} worker processes took {t_report / t_base:.2f} of that ({t_base / t_report:.2f}x as fast).\n",
                  common.md_table(['row', 'test accuracy, here', f'test accuracy, {a.n_jobs} processes', 'largest difference (points)',
                                   'test predictions equal', 'fit seconds per seed, here', f'fit seconds, {a.n_jobs} processes'],
                                  rows, 'lrrrrrr'),
                  f"\nThe worker processes run each fit on {max(1, a.threads // a.n_jobs)} torch thread(s) instead of {a.threads}: the "
                  "float sums run in another order, so the numbers agree to within float noise, not to the bit (with the same "
                  "threads per fit they are equal to the bit: a test in the report chapter). A fit's seconds in a worker are "
                  "its own, on its share of the cores.\n"]
    else:
        rows = [[m, _acc(rs), secs(rs)] for m, rs in rep.runs.items()]
        lines += [common.md_table(['row', 'test accuracy (mean ± std)', 'fit seconds per seed'], rows, 'lrr')]
    if a.n_jobs == 1 and not a.quick:
        t0 = time.perf_counter()
        alone = LayerClassifier(random_state=a.seeds[0]).fit(X, y)
        t_alone = time.perf_counter() - t0
        same = bool(np.array_equal(alone.predict(Xt), rep.predictions('Stack (default)')[0]))
        lines += [
            "\nThe stack's row costs its encoder's fit plus its regressions' and the choice of the weights (the 'fit seconds' "
            f"above: {secs(stack)} s, of which Cayley GIN {secs(gin)}, the concatenation {secs(cat)} and the per-layer probes "
            f"{secs(lay)}), each part fitted once for its rows. Its weights (GIN, concatenation, best layer) for seed "
            f"{a.seeds[0]}: {alone.stack_weights_}, the best layer {alone.best_layer_ and alone.best_layer_['layer']}.\n",
            f"The straightforward stack of seed {a.seeds[0]}, `LayerClassifier(random_state={a.seeds[0]}).fit` on the same texts: "
            f"{t_alone:.0f} s; its test predictions {'equal' if same else 'DIFFER FROM'} the report's stack row "
            f"({(alone.predict(Xt) == yt).mean():.4f} against {stack[0]['test']:.4f}). Before the report shared the parts, it fitted "
            f"this beside the GIN and the concatenation rows: about {t_alone:.0f} s more a seed, "
            f"{(t_report + len(a.seeds) * t_alone) / 60:.1f} minutes in all.\n"]
    common.write_result(a.out, '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
