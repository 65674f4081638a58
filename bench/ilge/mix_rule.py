"""Benchmark: how the default stack chooses its weights (issue 33), judged on training texts no reader saw, not on test.

For MODEL and TASK (`ilge.default_reader.task_embeddings`), a stratified training sample of SIZE texts is drawn
with SEED; the rest of the training split is the *development* set on which the rules are compared (the test split
is reported beside it, never used to choose). Readers, as `StackConfig()` fits them: logistic regression on every
layer and on the concatenation (C in 0.01, 0.1, 1 chosen on a 10% validation split, refitted on all), the best layer
(validation), the seed's Cayley GIN trained on all the texts (`gin_all`, what the stack keeps) and on the 90% part with
early stopping on the 10% (`gin_tr`, whose validation predictions choose the weights). Rules, each choosing weights
(GIN, concatenation, best layer) from validation predictions only:
`order` a grid of quarters, the best validation accuracy, ties to the least GIN weight then the least concatenation
weight (the simplest mix); `order10`, `order20` the same on grids of tenths and twentieths; `avg*` the mean of the
tied weights; `even*` the tie nearest to even thirds; `soft` an exponential weighting of the grid by validation
correct count; `ll` the least validation log-loss; `thirds`, `half` (layerkit 0.2's stack: GIN and concatenation
evenly) fixed; `nogin` the order rule without the GIN.
Usage: python bench/ilge/mix_rule.py fit SIZE SEED MODEL TASK   (predictions kept under bench/.cache/mix_rule)
       python bench/ilge/mix_rule.py summary                    (writes bench/ilge/results/mix_rule.md)
"""
import collections
import glob
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

OUT = common.ROOT/'bench'/'.cache'/'mix_rule'
RULES = ('order', 'avg', 'even', 'soft', 'order10', 'avg10', 'even10', 'order20', 'avg20', 'll', 'thirds', 'half', 'nogin',
         'orderfx', 'order10fx', 'avg10fx', 'order20fx', 'softfx')


def development_sample(model: str, task: str, size: str, seed: int) -> tuple:
    "(X, y, X_dev, y_dev, X_test, y_test): a stratified sample of SIZE training texts, the rest of the training split, the test split."
    from sklearn.model_selection import train_test_split
    from ilge.default_reader import task_embeddings
    X, y, Xt, yt = task_embeddings(model, task)
    keep = np.sort(train_test_split(np.arange(len(y)), train_size=int(size), stratify=y, random_state=seed)[0])
    rest = np.setdiff1d(np.arange(len(y)), keep)
    return X[keep], y[keep], X[rest], y[rest], Xt, yt


def fit(size: str, seed: int, model: str, task: str):
    "Fit every reader on one training sample; save validation, development and test probabilities."
    import torch
    from layerkit.classifier import LayerClassifier
    from layerkit.configs import CayleyConfig
    from layerkit.stack import fit_linear, logreg_logits, standardize
    from layerkit.training import validation_split
    common.set_threads(2)
    X, y, Xd, yd, Xt, yt = development_sample(model, task, size, seed)
    classes, yk = np.unique(y, return_inverse=True)
    tr, va = validation_split(y, 0.1, seed)
    def probe(Z, Zd, Zt):
        f = fit_linear(Z, yk, len(classes), (tr, va), (0.01, 0.1, 1.0))
        p = lambda A: torch.softmax(logreg_logits(standardize(A, f['stats']), f['x']), 1).numpy()
        return dict(pv=f['proba'], pd=p(Zd), pt=p(Zt), val=f['val'])
    P, best = {}, None
    for l in range(X.shape[1]):  # each layer from a cold start (the stack starts each from the previous one's solution)
        r = probe(X[:, l], Xd[:, l], Xt[:, l])
        if best is None or r['val'] > best['val']: best = r
    P['best'] = best
    P['concat'] = probe(X.reshape(len(X), -1), Xd.reshape(len(Xd), -1), Xt.reshape(len(Xt), -1))
    g = LayerClassifier(CayleyConfig(), random_state=seed).fit(X, y)
    P['gin_all'] = dict(pd=g.predict_proba(Xd), pt=g.predict_proba(Xt))
    g = LayerClassifier(CayleyConfig(), random_state=seed).fit(X[tr], y[tr], X[va], y[va])
    P['gin_tr'] = dict(pv=g.predict_proba(X[va]), pd=g.predict_proba(Xd), pt=g.predict_proba(Xt))
    P['gin_fx'] = _gin_fixed(X, y, tr, va, Xd, Xt, seed)
    OUT.mkdir(parents=True, exist_ok=True)
    arrays = {f'{k}_{w}': v[w] for k, v in P.items() for w in ('pv', 'pd', 'pt') if w in v}
    np.savez(OUT/f'p_{model}_{task}_{size}_{seed}.npz', yva=yk[va], yd=np.searchsorted(classes, yd),
             yt=np.searchsorted(classes, yt), **arrays)


def _gin_fixed(X, y, tr, va, Xd, Xt, seed: int) -> dict:
    "The GIN trained on the 90% part for every epoch, as `gin_all` is trained (no early stopping): unbiased on the 10%."
    from layerkit.classifier import LayerClassifier
    from layerkit.configs import CayleyConfig
    g = LayerClassifier(CayleyConfig(), random_state=seed, early_stopping=False).fit(X[tr], y[tr])
    return dict(pv=g.predict_proba(X[va]), pd=g.predict_proba(Xd), pt=g.predict_proba(Xt))


def add_fixed(path: str):
    "Add `gin_fx` to a prediction file written before it existed (the same sample, split and seed)."
    from sklearn.model_selection import train_test_split
    from ilge.default_reader import task_embeddings
    from layerkit.training import validation_split
    common.set_threads(2)
    d = dict(np.load(path))
    if 'gin_fx_pv' in d: return
    model, task, size, seed = Path(path).stem[2:].rsplit('_', 3)[0], *Path(path).stem[2:].rsplit('_', 3)[1:]
    X, y, Xt, yt = task_embeddings(model, task)
    keep = np.sort(train_test_split(np.arange(len(y)), train_size=int(size), stratify=y, random_state=int(seed))[0])
    rest = np.setdiff1d(np.arange(len(y)), keep)
    tr, va = validation_split(y[keep], 0.1, int(seed))
    g = _gin_fixed(X[keep], y[keep], tr, va, X[rest], Xt, int(seed))
    np.savez(path, **d, **{f'gin_fx_{w}': v for w, v in g.items()})


def _grid(n: int) -> list:
    return [(i / n, j / n, (n - i - j) / n) for i in range(n + 1) for j in range(n + 1 - i)]


def choose(pv: list, yva: np.ndarray, rule: str) -> tuple:
    "The weights (GIN, concatenation, best layer) a rule picks from the validation probabilities."
    base = rule.removesuffix('fx')
    n = 20 if base.endswith('20') else 10 if base.endswith('10') else 4
    r = base.rstrip('0123456789')
    G = _grid(n)
    mix = lambda w: sum(a * p for a, p in zip(w, pv))
    va = {w: float((mix(w).argmax(1) == yva).mean()) for w in G}
    top = max(va.values()); ties = [w for w in G if va[w] == top]
    if r == 'order': return ties[0]
    if r == 'avg': return tuple(np.mean(ties, 0))
    if r == 'even': return min(ties, key=lambda w: sum((a - 1 / 3) ** 2 for a in w))
    if r == 'thirds': return (1 / 3, 1 / 3, 1 / 3)
    if r == 'half': return (0.5, 0.5, 0.0)
    if r == 'soft':
        s = np.array([va[w] for w in G]) * len(yva); e = np.exp(s - s.max())
        return tuple((e[:, None] * np.array(G)).sum(0) / e.sum())
    if r == 'nogin':
        sub = [w for w in G if w[0] == 0]; t = max(va[w] for w in sub); return [w for w in sub if va[w] == t][0]
    if r == 'll':
        ll = {w: -np.log(np.clip(mix(w)[np.arange(len(yva)), yva], 1e-12, 1)).mean() for w in G}; return min(G, key=ll.get)
    raise KeyError(rule)


def summary():
    "The gap of each rule to max(best layer, concatenation), per setting, on the development texts and on test."
    R = collections.defaultdict(list)
    for f in sorted(glob.glob(str(OUT/'p_*.npz'))):
        d = np.load(f); setting = f.split('p_')[1][:-4].rsplit('_', 1)[0]
        for split, yy, sfx in (('development', d['yd'], 'pd'), ('test', d['yt'], 'pt')):
            ps = [d['gin_all_' + sfx], d['concat_' + sfx], d['best_' + sfx]]  # the stack keeps the GIN trained on all
            acc = lambda p: float((p.argmax(1) == yy).mean())
            ref = max(acc(ps[1]), acc(ps[2]))
            for r in RULES:
                if r.endswith('fx') and 'gin_fx_pv' not in d: continue
                pv = [d['gin_fx_pv' if r.endswith('fx') else 'gin_tr_pv'], d['concat_pv'], d['best_pv']]
                R[(setting, r, split)].append(100 * (acc(sum(a * p for a, p in zip(choose(pv, d['yva'], r), ps))) - ref))
    settings = sorted({k[0] for k in R})
    lines = ["# How the default stack chooses its weights\n",
             f"{time.strftime('%Y-%m-%d')}, `bench/ilge/mix_rule.py` (see its docstring). Gap of each rule to max(best layer, "
             "concatenation) in points, per seed, mean over the seeds run (their number in brackets). Development: "
             "the training texts outside the sample, which no reader saw and which chose the rule; test: the test "
             "split, shown beside it, not used to choose.\n"]
    for split in ('development', 'test'):
        rows = []
        for r in RULES:
            m = [np.mean(R[(s, r, split)]) if R[(s, r, split)] else np.nan for s in settings]
            rows.append([r, *[f"{x:+.2f} ({len(R[(s, r, split)])})" for s, x in zip(settings, m)], f"{np.nanmin(m):+.2f}"])
        lines += [f"\n## {split}\n", common.md_table(['rule', *settings, 'worst'], rows, 'l' + 'r' * (len(settings) + 1))]
    common.write_result('mix_rule.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    if sys.argv[1] == 'fit': fit(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif sys.argv[1] == 'add': [add_fixed(p) for p in sys.argv[2:]]
    else: summary()
