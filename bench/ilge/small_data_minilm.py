"""Small-data study: is `LayerClassifier`'s default training recipe robust on small training sets?

Data: Banking77 (the copy shipped with layerkit) with all-MiniLM-L6-v2 layer embeddings, (N, 7, 384), extracted once
by `LayerEmbedder` and cached under bench/.cache (bench/ilge/accuracy_minilm.py's cache; the same texts, so either script fills it).
Each subset size is "C classes x n training texts per class", drawn per seed from the training split: all 77
classes, or (C < 77) a random anchor class and its C - 1 nearest classes (cosine of the last-layer class centroids,
among the classes with at least n training texts), because C random Banking77 intents are so distinct that every
method scores ~0.99. The held-out texts of those classes come from the test split (40 per class) and are cut in two
halves, disjoint: a *selection* set, the only thing used to choose a default, and a *test* set, reported (each
capped at `--max-eval` texts; ~100 for 5 classes). Every method trains on the same subset with the same seed, so the
comparison is paired.

Methods:
* `default`: `LayerClassifier(CayleyConfig())` with the library's defaults (since this study `early_stopping='auto'`,
  which below `AUTO_EARLY_STOPPING` samples trains every epoch on all the data, i.e. `no early stop`);
* `early stopping (previous default)`: `early_stopping=True`, a stratified 10% held out, patience 10, best epoch kept;
* `research`: the research code's recipe: 30 epochs on all training data, no early stopping, no label smoothing, no
  weight averaging (`validation_fraction=0, label_smoothing=0, ema_decay=None`, `CayleyConfig(epochs=30)`);
* `logreg`: last-layer logistic regression, standardized features, C in (0.01, 0.1, 1, 10) chosen by stratified
  3-fold cross-validation on the training set (`LogisticRegressionCV`);
* candidates for a new default: a larger validation share (`val 0.2`, with early stopping), no early stopping at all
  (`validation_fraction=0`: all data, every epoch, the final averaged weights; 50 or 100 epochs), seed ensembles;
  on top of the new default: standardized inputs (`normalize='standard'`, what the logistic regression sees),
  more dropout (0.3 instead of 0.1), more weight decay (1e-2 instead of 1e-4), smaller batches (16 instead of 64:
  four times the steps) or a larger learning rate (3e-3 instead of 1e-3).

Usage: python bench/ilge/small_data_minilm.py [--seeds 0 1 2 3 4] [--sizes 5x150 20x50 77x13] [--methods ...]
Writes bench/ilge/results/small_data.md (accuracy only, no timing: no lock needed).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import numpy as np

SIZES = ('5x150', '20x50', '77x13', '77x35')


def data():
    "(X_train, y_train, X_test, y_test), the cached MiniLM embeddings of Banking77 (ilge.accuracy_minilm's cache)."
    from ilge import accuracy_minilm
    return accuracy_minilm.embeddings()


def subset(X_last, y_tr, y_te, size: str, seed: int, max_eval: int):
    "(train, selection, test) indices for 'CxN' (C classes, N training texts each), drawn with `seed`."
    # X_last: (N, D) last-layer training embeddings, whose class centroids define "nearest classes"
    C, n = map(int, size.split('x'))
    rng = np.random.RandomState(1000 + seed)
    names, counts = np.unique(y_tr, return_counts=True)
    pool = names[counts >= n]
    if len(pool) < C: raise SystemExit(f"size {size}: only {len(pool)} classes have {n} training texts")
    if C == len(names): classes = names
    else:  # a random anchor class and its C - 1 nearest classes: a fine-grained task, as in practice (random
        # Banking77 classes are so distinct that every method scores ~0.99)
        cent = {c: X_last[y_tr == c].mean(0) for c in pool}
        cent = {c: v / np.linalg.norm(v) for c, v in cent.items()}
        anchor = rng.choice(pool)
        sims = sorted(pool, key=lambda c: -float(cent[c] @ cent[anchor]))
        classes = np.array(sims[:C])
    tr = np.concatenate([rng.choice(np.flatnonzero(y_tr == c), n, replace=False) for c in classes])
    held = rng.permutation(np.flatnonzero(np.isin(y_te, classes)))
    half = min(len(held) // 2, max_eval)
    return np.sort(tr), np.sort(held[:half]), np.sort(held[half:2 * half])


# --- methods: each returns a function of X that gives class probabilities, classes in sorted order ----------------
def _lc(**params):
    def fit(X, y, seed):
        from layerkit.classifier import LayerClassifier
        from layerkit.configs import CayleyConfig
        cfg = CayleyConfig(**params.pop('config', {})) if 'config' in params else CayleyConfig()
        clf = LayerClassifier(cfg, random_state=seed, device='cpu', **params).fit(X, y)
        return clf.predict_proba, dict(best_epoch=clf.best_epoch_, epochs=clf.n_iter_)
    return fit


def _lc_params(**params):
    "A fit function for LayerClassifier(CayleyConfig(**config), **params); copies params on each call."
    def fit(X, y, seed):
        return _lc(**{k: (dict(v) if isinstance(v, dict) else v) for k, v in params.items()})(X, y, seed)
    return fit


def _ensemble(k: int, **params):
    "Average the probabilities of k LayerClassifiers trained with seeds seed*100 + 0..k-1."
    def fit(X, y, seed):
        members = [_lc_params(**params)(X, y, seed * 100 + i)[0] for i in range(k)]
        return (lambda Z: np.mean([m(Z) for m in members], 0)), {}
    return fit


def _logreg(X, y, seed):
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    cv = StratifiedKFold(3, shuffle=True, random_state=seed)
    m = make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=[0.01, 0.1, 1, 10], cv=cv, max_iter=3000)).fit(X[:, -1], y)
    return (lambda Z: m.predict_proba(Z[:, -1])), dict(C=float(m[-1].C_[0]))


METHODS = {
    'default': _lc_params(),  # the library's default: early_stopping='auto'
    'early stopping (previous default)': _lc_params(early_stopping=True),
    'research': _lc_params(config=dict(epochs=30), validation_fraction=0, label_smoothing=0.0, ema_decay=None),
    'logreg': _logreg,
    'val 0.2': _lc_params(validation_fraction=0.2, early_stopping=True),
    'no early stop': _lc_params(validation_fraction=0),
    'no early stop, 100 ep': _lc_params(config=dict(epochs=100), validation_fraction=0),
    'ensemble x3': _ensemble(3, early_stopping=True),
    'ensemble x3, no early stop': _ensemble(3, validation_fraction=0),
    'standardized inputs': _lc_params(normalize='standard'),
    'dropout 0.3': _lc_params(config=dict(dropout=0.3)),
    'weight decay 1e-2': _lc_params(config=dict(weight_decay=1e-2)),
    'batch 16': _lc_params(config=dict(batch_size=16)),
    'lr 3e-3': _lc_params(config=dict(lr=3e-3)),
}


def run(sizes, seeds, methods, max_eval: int, out_json=None):
    X_tr, y_tr, X_te, y_te = data()
    rows = []
    for size in sizes:
        for seed in seeds:
            tr, sel, te = subset(X_tr[:, -1], y_tr, y_te, size, seed, max_eval)
            classes = np.unique(y_tr[tr])
            for name in methods:
                t = time.perf_counter()
                proba, info = METHODS[name](X_tr[tr], y_tr[tr], seed)
                acc = lambda X, y: float(np.mean(classes[proba(X).argmax(1)] == y))
                r = dict(size=size, seed=seed, method=name, sel=acc(X_te[sel], y_te[sel]), test=acc(X_te[te], y_te[te]),
                         secs=time.perf_counter() - t, n_train=len(tr), n_sel=len(sel), n_test=len(te), **info)
                rows.append(r)
                print(json.dumps(r), flush=True)
                if out_json:
                    with open(out_json, 'a') as f: f.write(json.dumps(r) + '\n')
    return rows


def _ms(v) -> str: return f"{np.mean(v):.4f} ± {np.std(v, ddof=1):.4f}" if len(v) > 1 else f"{v[0]:.4f}"


PREVIOUS = 'early stopping (previous default)'


def _delta(d) -> str:
    "Mean ± std of paired differences, in points."
    d = 100 * np.asarray(d)
    return f"{d.mean():+.2f} ± {d.std(ddof=1):.2f}" if len(d) > 1 else f"{d.mean():+.2f}"


def tables(rows) -> str:
    "One table per subset size: selection and test accuracy (mean ± std over seeds), paired gain over the previous default."
    out = []
    sizes = sorted(dict.fromkeys(r['size'] for r in rows), key=lambda z: (SIZES.index(z) if z in SIZES else 99, z))
    for size in sizes:
        rs = [r for r in rows if r['size'] == size]
        r0 = rs[0]
        seeds = sorted({r['seed'] for r in rs})
        out.append(f"\n### {size}: {r0['n_train']} training texts, selection {r0['n_sel']}, test {r0['n_test']}, "
                   f"seeds {seeds}\n")
        base = {r['seed']: r for r in rs if r['method'] == PREVIOUS}
        body = []
        order = ['default', PREVIOUS, 'research', 'logreg']
        for m in sorted(dict.fromkeys(r['method'] for r in rs), key=lambda m: (order.index(m) if m in order else 9)):
            mr = [r for r in rs if r['method'] == m]
            d = [r['test'] - base[r['seed']]['test'] for r in mr if r['seed'] in base]
            ds = [r['sel'] - base[r['seed']]['sel'] for r in mr if r['seed'] in base]
            ep = [r['best_epoch'] for r in mr if r.get('best_epoch') is not None]
            name = f"**{m}**" if m == 'default' else m
            body.append((name, len(mr), _ms([r['sel'] for r in mr]), _delta(ds) if ds else '-', _ms([r['test'] for r in mr]),
                         _delta(d) if d else '-', f"{np.mean(ep):.0f}" if ep else '-'))
        out.append(common.md_table(('method', 'seeds', 'selection acc', 'Δ sel vs previous default (pt)', 'test acc',
                                    'Δ test vs previous default (pt)', 'epoch kept (mean)'), body))
    return '\n'.join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2, 3, 4])
    ap.add_argument('--sizes', nargs='+', default=list(SIZES[:3]))
    ap.add_argument('--methods', nargs='+', default=list(METHODS), choices=list(METHODS))
    ap.add_argument('--max-eval', type=int, default=500, help='cap on the selection and on the test set')
    ap.add_argument('--jsonl', default=None, help='append every run as a JSON line to this file')
    ap.add_argument('--from-jsonl', default=None, help='only rebuild the tables from a file written by --jsonl')
    ap.add_argument('--no-write', action='store_true', help='print the tables, do not write bench/ilge/results/small_data.md')
    common.add_threads_arg(ap, 1)
    args = ap.parse_args(argv)
    if args.from_jsonl: rows = [json.loads(l) for l in open(args.from_jsonl)]
    else:
        common.set_threads(args.threads)
        rows = run(args.sizes, args.seeds, args.methods, args.max_eval, args.jsonl)
    text = tables(rows)
    print(text)
    if not args.no_write: common.write_result('small_data.md', HEADER + text + FOOTER)


HEADER = """# Small training sets

Banking77 subsets, all-MiniLM-L6-v2 layer embeddings (N, 7, 384), Cayley GIN (`CayleyConfig()`: 50 epochs, Adam 1e-3,
label smoothing 0.1, weight EMA 0.999) unless said otherwise. "C x n" is C classes with n training texts each; for
C < 77 the classes are a random anchor and its nearest intents (a fine-grained task; C random intents score ~0.99
whatever the method). Each seed draws its own subset and trains every method on it; the *selection* set (half of
those classes' test-split texts, at most 500) is the only evidence used to choose a default, the *test* set (the
other half) is reported. Mean ± std over the seeds; the Δ columns are paired differences against the previous
default, in points (mean ± std over seeds).

**What changed.** The previous default held out a stratified 10% for early stopping (patience 10, best epoch
restored). On ~1,000 texts that split is ~100 samples: the runs stopped early and kept epoch 9-14 (column "epoch
kept"), chosen on a noisy score, and the held-out texts were missing from training. The new default
`early_stopping='auto'` holds nothing out below `AUTO_EARLY_STOPPING = 5000` training samples: every epoch on all
the data, the final averaged weights (that is `validation_fraction=0`, bit for bit; the `default` rows of the sizes
below 5,000 samples were run as `validation_fraction=0`, the `early stopping` rows as the library was before).
From 5,000 samples, or with an explicit `X_val`, nothing changed, so the full-Banking77 numbers of
`training_defaults.md` and `accuracy.md` stand as they are.

**Validation evidence.** Selection accuracy, new default vs previous: +2.12 ± 0.46 (77 x 13), +1.35 ± 0.68 (20 x 50),
+0.47 ± 0.70 (77 x 35, 3 seeds), -0.80 ± 1.30 (5 x 150, a 100-text selection set: within the noise). The other
candidates did not beat it on selection: a 20% validation split (-0.2 to +0.1), 100 epochs instead of 50 (+0.25, +0.06
and 0.00 over the new default, 4-5 seeds, twice the time). A 3-seed ensemble of the new default is better still at
77 x 13 (+0.9 over it on selection, +2.0 on test) but costs three fits; it is not a default. Five changes on top of
the new default, aimed at the gap to logistic regression at 77 x 13 (5 seeds, selection accuracy against the new
default, paired): standardized inputs (what the logistic regression sees) -1.36 ± 1.83 points, dropout 0.3 +0.08 ±
1.29, weight decay 1e-2 -1.36 ± 1.21, batches of 16 (four times the steps) +0.08 ± 1.80, learning rate 3e-3 +0.08 ±
1.12. None is evidence for a change, and none closes the gap (logistic regression: +2.44 ± 1.01), so the defaults
stay as they are.

**The target** (the default at least as good as last-layer logistic regression and the research recipe on every
size) is met at 20 x 50, but not at 77 x 13, where last-layer logistic regression leads by 2.4 points on selection
and 3.0 on test (13 texts per class favour a linear probe over a 400k-parameter encoder) and the research recipe is
level (-0.6 selection, -0.1 test), nor, on the selection set, at 5 x 150 (-0.4 to -1.0 points, within the noise of
100 texts; on test the default is ahead of both). At 77 x 35 (2,695 texts, 3 seeds) the default beats the research
recipe (+2.1 selection, +1.3 test) and still trails logistic regression (-1.0 selection, -2.0 test). So with 77
classes and 13-35 texts each, a linear probe on the last layer remains the better choice for this model; the
layer report (`layerkit.report`) shows it on your own data.
"""
FOOTER = """

Produced by `python bench/ilge/small_data_minilm.py --jsonl runs.jsonl` (sizes 5x150 20x50 77x13, seeds 0-4; 77x35 with
`--seeds 0 1 2`; some candidates with fewer seeds, see the column; the five last candidates at 77x13 only, with
`--methods`) and `--from-jsonl runs.jsonl` for the tables; see
the script's docstring for the methods. Accuracy only (no timing): run on a shared 2-core machine, load 4-10.
"""

if __name__ == '__main__':
    main(sys.argv[1:])
