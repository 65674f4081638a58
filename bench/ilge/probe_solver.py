"""Benchmark: can the report's logistic regressions be solved in fewer L-BFGS function evaluations? (issue 33's speed)

`layer_report`'s probes and concatenation are about half of its time on all of Banking77 with SmolLM2 (31 x 576), and
each function evaluation already runs near the two cores' matrix-product rate, so the only way left to make them
faster without changing what is solved is fewer evaluations to the same tolerance (scikit-learn's 1e-4). Measured
here, on the real embeddings and seed 0's validation split, each for C in (0.01, 0.1, 1) as the report chains them:
1. the report's scheme: each layer's smallest C starts from the previous layer's solution, each C from the last;
2. the same, preconditioned: L-BFGS on U with W = P U, P = (c S + lambda I)^(-1/2), S the features' second moment,
   lambda = 1/(C n) the penalty's curvature (a Kronecker-factored Newton step's feature side), for c in 1/K, 0.1, 1;
3. the same layers, seed 1's split, started from seed 0's solution of the same layer instead of the previous layer's;
4. a tolerance of 1e-3 instead of 1e-4 for the C search (the report's chain otherwise);
5. the concatenation (17,856 features) from zero, and from the per-layer solutions averaged (whose logits are the mean
   of the layers' logits: a reader of all layers before any fit).
Evaluations are what costs (each is one product with the features and one with its transpose); the loss and the
validation accuracy at the stopping point show how far apart tolerance-converged solutions are.
Embeddings: bench/ilge/default_reader.py's (cached under bench/.cache/embeddings).
Usage: python bench/ilge/probe_solver.py [--layers 8 9 10 11 12 13] [--threads 2]
Writes bench/ilge/results/probe_solver.md.
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
import torch.nn.functional as F
from ilge.default_reader import task_embeddings

CS = (0.01, 0.1, 1.0)


def _count(fn):
    "`fn` wrapped to count its calls: (wrapped, a one-item list holding the count)."
    n = [0]
    def wrapped(*a):
        n[0] += 1
        return fn(*a)
    return wrapped, n


def fit_plain(Z, y, K, C, start, tol=1e-4):
    "The report's solver (`layerkit.stack.fit_logreg`), counting its function evaluations."
    import layerkit.stack as S
    orig = S.logreg_logits
    S.logreg_logits, n = _count(orig)
    try: x = S.fit_logreg(Z, y, K, C, start, tol)
    finally: S.logreg_logits = orig
    return x, n[0]


def fit_preconditioned(Z, y, K, C, start, c, tol=1e-4, max_iter=2000):
    "The same objective, L-BFGS on U with W = P U, P = (c S + lambda I)^(-1/2); returns x = [W; b] and the evaluations."
    n, d = Z.shape
    s, V = torch.linalg.eigh((Z.T @ Z).double() / n)  # (d,), (d, d)
    P = ((V * (c * s.clamp_min(0) + 1 / (C * n)).rsqrt()) @ V.T).float()  # (d, d), symmetric
    x0 = torch.zeros(d + 1, K) if start is None else start.clone()
    u = torch.cat([torch.linalg.solve(P, x0[:-1]), x0[-1:]]).requires_grad_()
    opt = torch.optim.LBFGS([u], max_iter=max_iter, tolerance_grad=tol, tolerance_change=0.0, line_search_fn='strong_wolfe')
    evals = [0]
    def closure():
        evals[0] += 1
        opt.zero_grad()
        W = P @ u[:-1]
        loss = F.cross_entropy(Z @ W + u[-1], y) + (W ** 2).sum() / (2 * C * n)
        loss.backward()
        return loss
    opt.step(closure)
    u = u.detach()
    return torch.cat([P @ u[:-1], u[-1:]]), evals[0]


def _loss_acc(Ztr, ytr, Zva, yva, x, C):
    "The objective and the validation accuracy at x."
    from layerkit.stack import logreg_logits
    n = len(Ztr)
    loss = float(F.cross_entropy(logreg_logits(Ztr, x), ytr) + (x[:-1] ** 2).sum() / (2 * C * n))
    return loss, float((logreg_logits(Zva, x).argmax(1).numpy() == yva).mean())


def _layer_data(X, yk, split, l):
    "Layer l standardised on the split's training part: (Z_train, y_train) as tensors, (Z_validation, y_validation)."
    import layerkit.stack as S
    tr, va = split
    st = S.standard_stats(X[:, l][tr])
    return S.standardize(X[:, l][tr], st), torch.from_numpy(yk[tr]), S.standardize(X[:, l][va], st), yk[va]


def chain(X, yk, K, split, layers, fit, starts=None):
    "The report's chain over `layers` and CS with `fit`; per layer and C: evaluations, loss, validation accuracy; the C=0.01 solutions."
    rows, start, firsts = [], None, {}
    for l in layers:
        Ztr, ytr, Zva, yva = _layer_data(X, yk, split, l)
        x = starts[l] if starts is not None else start
        for C in CS:
            x, n = fit(Ztr, ytr, K, C, x)
            rows.append((l, C, n, *_loss_acc(Ztr, ytr, Zva, yva, x, C)))
            if C == CS[0]: start = firsts[l] = x
    return rows, firsts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--layers', type=int, nargs='+', default=[8, 9, 10, 11, 12, 13])
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    from layerkit.stack import fit_logreg, logreg_logits, standard_stats, standardize
    from layerkit.training import validation_split
    X, y, _, _ = task_embeddings('smollm2', 'banking77')
    classes, yk = np.unique(y, return_inverse=True)
    K, L = len(classes), X.shape[1]
    splits = [validation_split(y, 0.1, s) for s in (0, 1)]
    t0 = time.perf_counter()
    out = ["# Fewer L-BFGS evaluations for the report's logistic regressions? SmolLM2-135M, Banking77 (all 10,003 texts)\n",
           f"Run {time.strftime('%Y-%m-%d')}; {common.environment(a.threads)}. Produced by bench/ilge/probe_solver.py "
           f"(the questions in its docstring). Layers {a.layers}, validation split of seed 0 (9,003 training, 1,000 "
           "validation texts), C in (0.01, 0.1, 1) chained as `layer_report` chains them, tolerance 1e-4.\n"]
    plain, firsts0 = chain(X, yk, K, splits[0], a.layers, fit_plain)
    total = {'the report (L-BFGS)': sum(r[2] for r in plain)}
    table = [[l, C, n, f"{loss:.6f}", f"{acc:.3f}"] for l, C, n, loss, acc in plain]
    for c, name in ((1 / K, '1/K'), (0.1, '0.1'), (1.0, '1')):
        pre, _ = chain(X, yk, K, splits[0], a.layers, lambda Z, yv, K_, C, s: fit_preconditioned(Z, yv, K_, C, s, c))
        total[f'preconditioned, c = {name}'] = sum(r[2] for r in pre)
        for row, r in zip(table, pre): row += [r[2], f"{r[3]:.6f}", f"{r[4]:.3f}"] if name == '1/K' else [r[2]]
    loose, _ = chain(X, yk, K, splits[0], a.layers, lambda Z, yv, K_, C, s: fit_plain(Z, yv, K_, C, s, tol=1e-3))
    total['tolerance 1e-3'] = sum(r[2] for r in loose)
    for row, r in zip(table, loose): row += [r[2], f"{r[4]:.3f}"]
    prev, _ = chain(X, yk, K, splits[1], a.layers, fit_plain)
    same, _ = chain(X, yk, K, splits[1], a.layers, fit_plain, starts=firsts0)
    total["seed 1, from the previous layer (the report)"] = sum(r[2] for r in prev)
    total["seed 1, from seed 0's same layer"] = sum(r[2] for r in same)
    out.append("## Function evaluations in all, per scheme\n")
    out.append(common.md_table(['scheme', 'evaluations'], [[k, v] for k, v in total.items()]))
    out.append("\n## Per layer and C (seed 0): evaluations, the objective and the validation accuracy where each stopped\n")
    out.append(common.md_table(['layer', 'C', 'evals (report)', 'loss (report)', 'val acc (report)', 'evals (precond. 1/K)',
                                'loss (precond. 1/K)', 'val acc (precond. 1/K)', 'evals (precond. 0.1)', 'evals (precond. 1)',
                                'evals (tol 1e-3)', 'val acc (tol 1e-3)'], table))
    # the concatenation: from zero, and from the per-layer C=0.01 solutions averaged
    tr, va = splits[0]
    sols, start = [], None
    for l in range(L):
        Ztr, ytr, _, _ = _layer_data(X, yk, splits[0], l)
        start = fit_logreg(Ztr, ytr, K, CS[0], start)
        sols.append(start)
    Zc = X.reshape(len(X), -1)
    st = standard_stats(Zc[tr])
    Ztr, Zva, ytr = standardize(Zc[tr], st), standardize(Zc[va], st), torch.from_numpy(yk[tr])
    avg = torch.cat([torch.cat([s[:-1] for s in sols]) / L, torch.stack([s[-1] for s in sols]).mean(0, keepdim=True)])
    cat_rows = []
    for name, x in (('zero', None), ('the layers averaged', avg)):
        t = time.perf_counter()
        for C in CS:
            x, n = fit_plain(Ztr, ytr, K, C, x)
            cat_rows.append([name, C, n, *(f"{v:.6f}" if i == 0 else f"{v:.3f}" for i, v in enumerate(_loss_acc(Ztr, ytr, Zva, yk[va], x, C)))])
        cat_rows[-1].append(f"{time.perf_counter() - t:.0f} s for the three")
    out.append(f"\n## The concatenation ({L} x {X.shape[2]} features), from zero and from the per-layer solutions averaged "
               f"(validation accuracy of the average itself: {float((logreg_logits(Zva, avg).argmax(1).numpy() == yk[va]).mean()):.3f})\n")
    out.append(common.md_table(['start', 'C', 'evaluations', 'loss', 'val acc', 'time'], [r + [''] * (6 - len(r)) for r in cat_rows]))
    out.append(f"\nTotal {time.perf_counter() - t0:.0f} s.\n")
    text = '\n'.join(out)
    print(text)
    common.write_result('probe_solver.md', text)


if __name__ == '__main__':
    main()
