"""Benchmark: how the stack mixes its two readers (issue 33): a weight chosen on validation, or a fixed even mix.

SmolLM2-135M-Instruct on Banking77 (`ilge.default_reader.task_embeddings`), a stratified training sample of
SIZE texts drawn with SEED, all 3,080 test texts. Fitted: logistic regression on every layer and on the
concatenation (C in 0.01, 0.1, 1 chosen on a 10% validation split, then refitted on all), the seed's Cayley GIN
trained on all the texts as `LayerClassifier` trains it (`gin_all`) and on the 90% training part with early stopping
on the 10% (`gin_tr`). Mixes (probabilities): `E1` the encoder weight alpha in {0, .25, .5, .75, 1} chosen on the
validation part (GIN on 90%); `E1b` that alpha with `gin_all`; `half_all` alpha = 0.5 with `gin_all` (what
`StackConfig()` does); `half_tr` the same with `gin_tr`; `three_*` the even mix of GIN, concatenation and best layer;
`E4` weights of the three chosen on validation; `geo_tr` the geometric mean.
Usage: python bench/ilge/stack_weight.py SIZE SEED [THREADS [MODEL [TASK]]] (default smollm2 banking77); prints one
JSON line (kept under bench/.cache). The GIN is `LayerClassifier(CayleyConfig())`: since 0.2 `LayerClassifier()` is the stack.
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from ilge.default_reader import task_embeddings
from layerkit.report import take_layer
from layerkit.stack import fit_logreg, logreg_logits, standard_stats, standardize
from layerkit.training import validation_split
from layerkit.classifier import LayerClassifier
from layerkit.configs import CayleyConfig
from sklearn.model_selection import train_test_split
model = sys.argv[4] if len(sys.argv) > 4 else 'smollm2'
task = sys.argv[5] if len(sys.argv) > 5 else 'banking77'
size, seed = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 2)
X, y, Xt, yt = task_embeddings(model, task)
if size != 'all':
    keep = np.sort(train_test_split(np.arange(len(y)), train_size=int(size), stratify=y, random_state=seed)[0])
    X, y = X[keep], y[keep]
classes, yk = np.unique(y, return_inverse=True); K = len(classes)
ytk = np.searchsorted(classes, yt)
tr, va = validation_split(y, 0.1, seed)
def probe(Z, Zt, Cs=(0.01, 0.1, 1.0)):
    st = standard_stats(Z[tr]); Ztr, Zva = standardize(Z[tr], st), standardize(Z[va], st)
    best, start = None, None
    for C in Cs:
        start = fit_logreg(Ztr, torch.from_numpy(yk[tr]), K, C, start)
        pv = torch.softmax(logreg_logits(Zva, start), 1).numpy()
        acc = (pv.argmax(1) == yk[va]).mean()
        if best is None or acc > best[0]: best = (acc, C, start, pv)
    acc, C, sol, pv = best
    st2 = standard_stats(Z); x = fit_logreg(standardize(Z, st2), torch.from_numpy(yk), K, C, sol)
    pt = torch.softmax(logreg_logits(standardize(Zt, st2), x), 1).numpy()
    return dict(val=acc, pv=pv, pt=pt, C=C)
res = {}; P = {}
t0 = time.perf_counter(); L = X.shape[1]
vals = []
for l in range(L):
    r = probe(X[:, l], Xt[:, l]); vals.append(r['val'])
    if l == L - 1: P['last'] = r
    if r['val'] > max(vals[:-1], default=-1): P['best'] = r
res['t_layers'] = time.perf_counter() - t0
t0 = time.perf_counter(); P['concat'] = probe(X.reshape(len(X), -1), Xt.reshape(len(Xt), -1)); res['t_concat'] = time.perf_counter() - t0
t0 = time.perf_counter()
g = LayerClassifier(CayleyConfig(), random_state=seed).fit(X, y); P['gin_all'] = dict(pt=g.predict_proba(Xt)); res['t_gin_all'] = time.perf_counter() - t0
t0 = time.perf_counter()
g = LayerClassifier(CayleyConfig(), random_state=seed).fit(X[tr], y[tr], X[va], y[va]); P['gin_tr'] = dict(pv=g.predict_proba(X[va]), pt=g.predict_proba(Xt), val=g.best_score_); res['t_gin_tr'] = time.perf_counter() - t0
acc = lambda p: float((p.argmax(1) == ytk).mean())
vacc = lambda p: float((p.argmax(1) == yk[va]).mean())
for k, r in P.items(): res[k] = acc(r['pt']); res[k + '_val'] = float(r.get('val', np.nan) or np.nan)
grid = [0, .25, .5, .75, 1]
# E1: alpha on val between gin_tr and concat(tr)
sc = {a: vacc(a * P['gin_tr']['pv'] + (1 - a) * P['concat']['pv']) for a in grid}
a1 = max(sc, key=lambda a: (sc[a], -abs(a - .5))); res['E1_alpha'] = a1; res['E1_val'] = sc[a1]
res['E1'] = acc(a1 * P['gin_tr']['pt'] + (1 - a1) * P['concat']['pt'])
res['E1b'] = acc(a1 * P['gin_all']['pt'] + (1 - a1) * P['concat']['pt'])
res['half_all'] = acc(.5 * P['gin_all']['pt'] + .5 * P['concat']['pt'])
res['half_tr'] = acc(.5 * P['gin_tr']['pt'] + .5 * P['concat']['pt'])
res['three_tr'] = acc((P['gin_tr']['pt'] + P['concat']['pt'] + P['best']['pt']) / 3)
res['three_all'] = acc((P['gin_all']['pt'] + P['concat']['pt'] + P['best']['pt']) / 3)
res['concat_best'] = acc(.5 * P['best']['pt'] + .5 * P['concat']['pt'])
# log-prob average
lg = lambda p: np.log(np.clip(p, 1e-12, 1))
res['geo_tr'] = acc(lg(P['gin_tr']['pt']) + lg(P['concat']['pt']))
# E4: simplex over gin_tr, concat, best
best = None
for a in np.linspace(0, 1, 5):
    for b in np.linspace(0, 1 - a, int(round((1 - a) / .25)) + 1):
        c = 1 - a - b; v = vacc(a * P['gin_tr']['pv'] + b * P['concat']['pv'] + c * P['best']['pv'])
        if best is None or v > best[0]: best = (v, a, b, c)
v, a, b, c = best; res['E4_w'] = [a, b, c]; res['E4_val'] = v
res['E4'] = acc(a * P['gin_tr']['pt'] + b * P['concat']['pt'] + c * P['best']['pt'])
res.update(model=model, task=task, size=size, seed=seed, n=len(y))
out = common.ROOT/'bench'/'.cache'/'stack_weight'; out.mkdir(parents=True, exist_ok=True)
json.dump(res, open(out/f'r_{model}_{task}_{size}_{seed}.json', 'w'))
print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items()}))
