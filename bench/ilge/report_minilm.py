"""Benchmark: the cost of `layer_report` on Banking77, and its logistic-regression path against a grid search.

Data: Banking77 (the copy shipped with layerkit) with all-MiniLM-L6-v2 layer embeddings, (N, 7, 384), from
ilge.accuracy_minilm's cache (10,003 training texts, 3,080 test texts, 77 classes).

Part 1, one layer's logistic regression with C chosen on a 10% validation split and refitted on all training texts,
Cs = (0.01, 0.1, 1.0), one process, the methods alternating (`common.interleaved`):
* `GridSearchCV`: the straightforward recipe, and what `layer_report` used before: a pipeline (StandardScaler,
  LogisticRegression) in `GridSearchCV(cv=<the split>, refit=True)`, every fit from zero;
* `LinearProbe`: what `layer_report` uses: C from the smallest up, each fit warm-started from the previous solution,
  the refit warm-started from the chosen one;
* bound: a single cold fit at the C that was chosen, on all training texts (what one pays knowing C in advance).
Each on the last hidden state (384 features) and on all seven concatenated (2,688). The test accuracy of each is
reported too (the two recipes stop at the same lbfgs tolerance from different starts).

Part 2, the whole default `layer_report` (3 seeds; the probing curve, the last/best/concatenated logistic
regressions, the scalar mix, Cayley GIN and DeepSet), once, with the seconds per method.

Usage: python bench/ilge/report_minilm.py [--repeats 2] [--seeds 0 1 2] [--threads 2]
Writes bench/ilge/results/report.md. Timing: run it alone (flock /tmp/lk-bench.lock).
"""
from __future__ import annotations

import argparse
import time
import warnings
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
from ilge import accuracy_minilm
import common
import numpy as np


CS = (0.01, 0.1, 1.0)


def recipes(X, y, Xt, layer):
    "name -> a call that fits one recipe on (X, y) and returns (test predictions, chosen C)."
    from sklearn.model_selection import GridSearchCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from layerkit.training import validation_split
    from layerkit.report import LinearProbe, take_layer
    tr, va = validation_split(y, 0.1, 0)

    def grid():
        pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        g = GridSearchCV(pipe, {'logisticregression__C': list(CS)}, cv=[(tr, va)], refit=True).fit(take_layer(X, layer), y)
        return g.predict(take_layer(Xt, layer)), g.best_params_['logisticregression__C']

    def path():
        m = LinearProbe(layer, CS, 0.1, 0).fit(X, y)
        return m.predict(Xt), m.C_

    def bound():
        C = chosen[0]
        pipe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000)).fit(take_layer(X, layer), y)
        return pipe.predict(take_layer(Xt, layer)), C

    chosen = [path()[1]]
    return {'GridSearchCV (cold fits)': grid, 'LinearProbe (warm path)': path, 'bound: one cold fit at the chosen C': bound}


def part1(X, y, Xt, yt, repeats):
    rows, notes = [], []
    for layer, what in ((X.shape[1] - 1, 'last layer, 384 features'), (None, 'all 7 layers, 2,688 features')):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            times, results = common.interleaved(recipes(X, y, Xt, layer), repeats=repeats, log=print)
        grid = times['GridSearchCV (cold fits)'].wall
        bound = times['bound: one cold fit at the chosen C'].wall
        for name, t in times.items():
            pred, C = results[name]
            rows.append([what, name, f"{t.wall:.1f} s", t.walls(), f"{grid / t.wall:.2f}x", f"{bound / t.wall:.2f}",
                         f"{C:g}", f"{np.mean(pred == yt):.4f}"])
        notes.append(f"{what}: {common.timing_note(times)}")
    table = common.md_table(['input', 'recipe', 'wall time', 'runs', 'speed-up vs GridSearchCV', 'of the bound', 'C chosen',
                             'test accuracy'], rows, 'llrlrrrr')
    return table, notes


def part2(X, y, Xt, yt, seeds):
    from layerkit.report import layer_report
    with common.Clock() as c:
        rep = layer_report(X, y, Xt, yt, seeds=tuple(seeds), progress=True, classifier_params=dict(device='cpu'))
    return rep, c.run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--repeats', type=int, default=2)
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--skip-report', action='store_true', help='part 1 only')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args()
    threads = common.set_threads(a.threads)
    X, y, Xt, yt = accuracy_minilm.embeddings()  # its cache: the (N, 7, 384) MiniLM embeddings
    table, notes = part1(X, y, Xt, yt, a.repeats)
    out = [f"# Benchmark: the layer report\n",
           f"Banking77 with all-MiniLM-L6-v2 layer embeddings, 10,003 training / 3,080 test texts, 77 classes. "
           f"{common.environment(threads)}.\n",
           "## One logistic regression with C chosen on validation (Cs = 0.01, 0.1, 1; 10% validation split; refit on "
           "all training texts)\n",
           "`LinearProbe` is what `layer_report` uses: the values of C from the smallest up, each fit starting from the "
           "previous solution, the refit from the chosen one. `GridSearchCV` is the straightforward recipe (and the "
           "report's before): every fit from zero. The bound is a single cold fit at the chosen C on all training "
           "texts, what one would pay knowing C in advance; \"of the bound\" is bound time / recipe time.\n",
           table, '', *notes, '']
    if not a.skip_report:
        rep, run = part2(X, y, Xt, yt, a.seeds)
        per = {m: np.mean([r['fit_time'] for r in runs]) for m, runs in rep.runs.items()}
        out += [f"## The default report, {len(a.seeds)} seeds\n",
                f"`layer_report(X, y, X_test, y_test)` with its defaults (seeds {list(a.seeds)}, Cs = (0.01, 0.1, 1), "
                f"concatenation, scalar mix, Cayley GIN, DeepSet): **{run.wall / 60:.1f} minutes** wall "
                f"({run.cpu / 60:.1f} CPU minutes), {run.wall / len(a.seeds):.0f} s per seed. Seconds per fit, "
                f"mean over the seeds: " + ', '.join(f"{m} {s:.1f}" for m, s in per.items()) +
                " (the best-layer row is the sum of the per-layer fits, the probing curve).\n",
                rep.table(layers=True)]
    text = '\n'.join(out)
    print(text)
    common.write_result('report.md', text)


if __name__ == '__main__':
    main()
