"""Benchmark: how the default stack chooses its best layer (issue 33), judged on training texts no reader saw, not on test.

The one row where the default reader misses its goal (SmolLM2 WikiText-2 articles, -0.43) chooses its best layer and
its weights on one small validation split (about 127 paragraphs, 51 classes): on two seeds it picks hidden state 1,
a poor layer on test, and the weights lean on it. This script asks whether another way of choosing the layer, or of
weighing it, does better, on the development texts (the training split outside the sample, as in
bench/ilge/mix_rule.py), with the test split beside it, never used to choose.
For MODEL and TASK, a stratified sample of SIZE training texts (SEED); readers as `StackConfig()` fits them: the
logistic regression on every layer (each started from the previous layer's solution, C in 0.01, 0.1, 1 chosen on the
10% split, refitted on all) and on the concatenation, the GIN kept (trained on all) and the GIN that chooses the
weights (trained on the 90% part, early-stopped on the 10%). Every layer's probabilities are kept, so any layer rule
can be scored. Layer rules: `acc` the best validation accuracy, first of ties (layerkit 0.3); `acc3` (`acc5`) the best mean
accuracy of a layer and its two (four) nearest neighbours; `ll` the least validation log-loss; `acc-ll` the best accuracy, ties to the
least log-loss; `cv5` (added 2026-12-05) the best out-of-fold accuracy on all the sample's texts, stratified 5-fold,
each layer at the C its probe chose on the split (ten times the texts behind each layer's score; the weights are
still chosen on the split). Weights: tenths of the simplex, the best validation accuracy, ties to the simplest mix (layerkit 0.3),
on the validation probabilities of the chosen layer.
`preview RULE MODEL TASK` fits the default stack on all the training texts as layerkit 0.3 does and with its layer
chosen by RULE (a patch of this process; layerkit's default is unchanged), seeds 0-2, and writes
layer_choice_<RULE>_<model>_<task>.md: the test split after the choice, for information, never to choose.
Usage: python bench/ilge/layer_choice.py fit SIZE SEED MODEL TASK   (probabilities kept under bench/.cache/layer_choice)
       python bench/ilge/layer_choice.py summary [OUT]              (writes bench/ilge/results/layer_choice.md, or OUT)
       python bench/ilge/layer_choice.py preview acc5 smollm2 wikitext-articles
"""
import collections
import glob
import sys
import time

import numpy as np
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

OUT = common.ROOT/'bench'/'.cache'/'layer_choice'
LAYER_RULES = ('acc', 'acc3', 'acc5', 'll', 'acc-ll')
CV_RULES = ('cv5',)  # scored where the fit kept the out-of-fold accuracies (`layer_cv`)


def fit(size: str, seed: int, model: str, task: str):
    "Fit every reader on one training sample; save each layer's and each reader's validation, development and test probabilities."
    import torch
    from ilge.mix_rule import development_sample
    from layerkit.classifier import LayerClassifier
    from layerkit.configs import CayleyConfig
    from layerkit.stack import fit_linear, logreg_logits, standardize, stack_split
    common.set_threads(2)
    X, y, Xd, yd, Xt, yt = development_sample(model, task, size, seed)  # the sample, the development texts, test
    classes, yk = np.unique(y, return_inverse=True)
    tr, va = stack_split(yk, 0.1, seed)  # the stack's split
    def probe(Z, Zd, Zt, start=None):
        f = fit_linear(Z, yk, len(classes), (tr, va), (0.01, 0.1, 1.0), start=start)
        p = lambda A: torch.softmax(logreg_logits(standardize(A, f['stats']), f['x']), 1).numpy()
        return dict(pv=f['proba'], pd=p(Zd), pt=p(Zt), C=f['C']), f['first']
    layers, start = [], None
    for l in range(X.shape[1]):
        r, start = probe(X[:, l], Xd[:, l], Xt[:, l], start)
        layers.append(r)
    layer_cv = cv_accuracies(X, yk, len(classes), [r.pop('C') for r in layers], seed)
    cat = probe(X.reshape(len(X), -1), Xd.reshape(len(Xd), -1), Xt.reshape(len(Xt), -1))[0]
    g = LayerClassifier(CayleyConfig(), random_state=seed).fit(X, y)
    gin_all = dict(pd=g.predict_proba(Xd), pt=g.predict_proba(Xt))
    g = LayerClassifier(CayleyConfig(), random_state=seed).fit(X[tr], y[tr], X[va], y[va])
    gin_tr = dict(pv=g.predict_proba(X[va]))
    OUT.mkdir(parents=True, exist_ok=True)
    arrays = {f'layer_{w}': np.stack([r[w] for r in layers]) for w in ('pv', 'pd', 'pt')}  # (L, m, K)
    arrays.update({f'concat_{w}': cat[w] for w in cat if w != 'C'}, layer_cv=layer_cv, gin_all_pd=gin_all['pd'], gin_all_pt=gin_all['pt'], gin_tr_pv=gin_tr['pv'])
    np.savez(OUT/f'p_{model}_{task}_{size}_{seed}.npz', yva=yk[va], yd=np.searchsorted(classes, yd),
             yt=np.searchsorted(classes, yt), **arrays)


def cv_accuracies(X: np.ndarray, yk: np.ndarray, K: int, Cs: list, seed: int, folds: int = 5) -> np.ndarray:
    "(L,) each layer's out-of-fold accuracy on all of X: stratified `folds`-fold, at the C its probe chose on the stack's split."
    from sklearn.model_selection import StratifiedKFold
    from layerkit.stack import fit_linear, logreg_logits, standardize
    right = np.zeros(X.shape[1])
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X[:, 0], yk):
        for l in range(X.shape[1]):
            f = fit_linear(X[:, l], yk, K, None, (Cs[l],), refit=tr)
            right[l] += (logreg_logits(standardize(X[te, l], f['stats']), f['x']).argmax(1).numpy() == yk[te]).sum()
    return right / len(yk)


def choose_layer(pv: np.ndarray, yva: np.ndarray, rule: str, cv: np.ndarray | None = None) -> int:
    "The layer a rule picks from the (L, m, K) validation probabilities (`cv5`: from the (L,) out-of-fold accuracies)."
    if rule == 'cv5': return int(np.argmax(cv))
    acc = (pv.argmax(2) == yva).mean(1)  # (L,)
    ll = -np.log(np.clip(pv[:, np.arange(len(yva)), yva], 1e-12, 1)).mean(1)  # (L,)
    if rule == 'acc': return int(np.argmax(acc))
    if rule in ('acc3', 'acc5'):  # the mean over the layer and its neighbours (fewer at the ends), first of ties
        h = int(rule[-1]) // 2
        return int(np.argmax([acc[max(l - h, 0):l + h + 1].mean() for l in range(len(acc))]))
    if rule == 'll': return int(np.argmin(ll))
    if rule == 'acc-ll': return int(min(np.flatnonzero(acc == acc.max()), key=lambda l: ll[l]))
    raise KeyError(rule)


def summary(out: str = 'layer_choice.md'):
    "Per setting and layer rule: the chosen layers, the best layer's and the stack's gap to max(best layer, concatenation) of layerkit 0.3."
    from layerkit.stack import mix_weights  # layerkit 0.3's rule: tenths of the simplex, ties to the simplest mix
    R, chosen = collections.defaultdict(list), collections.defaultdict(list)
    for f in sorted(glob.glob(str(OUT/'p_*.npz'))):
        d = np.load(f); setting = f.split('p_')[1][:-4].rsplit('_', 1)[0]
        for rule in LAYER_RULES + (CV_RULES if 'layer_cv' in d else ()):
            l = choose_layer(d['layer_pv'], d['yva'], rule, d['layer_cv'] if 'layer_cv' in d else None)
            chosen[(setting, rule)].append(l)
            w = mix_weights([d['gin_tr_pv'], d['concat_pv'], d['layer_pv'][l]], d['yva'])
            for split, yy, sfx in (('development', d['yd'], 'pd'), ('test', d['yt'], 'pt')):
                acc = lambda p: 100 * float((p.argmax(1) == yy).mean())
                ref = max(acc(d['concat_' + sfx]), acc(d['layer_' + sfx][choose_layer(d['layer_pv'], d['yva'], 'acc')]))
                ps = [d['gin_all_' + sfx], d['concat_' + sfx], d['layer_' + sfx][l]]
                R[(setting, rule, split, 'layer')].append(acc(ps[2]) - ref)
                R[(setting, rule, split, 'stack')].append(acc(sum(a * p for a, p in zip(w, ps))) - ref)
    settings = sorted({k[0] for k in R})
    rules = [r for r in LAYER_RULES + CV_RULES if any(k[1] == r for k in R)]
    cell = lambda v: f"{np.mean(v):+.2f} ({len(v)})" if v else '-'
    lines = ["# How the default stack chooses its best layer\n",
             f"{time.strftime('%Y-%m-%d')}, `bench/ilge/layer_choice.py` (see its docstring). Points against max(best layer, "
             "concatenation) as layerkit 0.3 chooses them (per seed, then the mean over the seeds run); 'layer' is the chosen "
             "layer's own accuracy, 'stack' the three-reader mix with that layer. Development: training texts outside the "
             "sample, which no reader saw; test: shown beside it, not used to choose.\n"]
    rows = [[s, r, ', '.join(map(str, chosen[(s, r)]))] for s in settings for r in rules if chosen[(s, r)]]
    lines += ["\n## Layers chosen (per seed)\n", common.md_table(['setting', 'rule', 'layers'], rows, 'lll')]
    for split in ('development', 'test'):
        rows = [[r, what, *[cell(R.get((s, r, split, what))) for s in settings]] for what in ('layer', 'stack') for r in rules]
        lines += [f"\n## {split}\n", common.md_table(['rule', 'reader', *settings], rows, 'll' + 'r' * len(settings))]
    common.write_result(out, '\n'.join(lines))
    print('\n'.join(lines))


def preview(rule: str, model: str, task: str, seeds: str = '0,1,2'):
    "On all the training texts: the default stack as layerkit 0.3 fits it and with its layer chosen by `rule` (patched here only), on test."
    import torch
    import layerkit.classifier as lc
    from ilge.default_reader import task_embeddings
    from layerkit.classifier import LayerClassifier
    from layerkit.stack import fit_linear, logreg_logits, standardize
    common.set_threads(2)
    X, y, Xt, yt = task_embeddings(model, task)
    original, got = lc.fit_best_layer, {}
    def patched(X, yk, K, split, Cs, refit=None):  # the same fits; the layer chosen by `rule` on the same split
        got['acc'] = f = original(X, yk, K, split, Cs, refit)
        def chain():  # fit_best_layer's chain, kept this time
            fits, start = [], None
            for l in range(X.shape[1]):
                fits.append(fit_linear(X[:, l], yk, K, split, Cs, start=start, final=False)); start = fits[-1]['first']
            return fits
        fits = None
        if rule in CV_RULES:  # out of fold, on the rows the final fit uses, each layer at its chosen C
            fits, rows_ = chain(), np.arange(len(yk)) if refit is None else refit
            layer = int(np.argmax(cv_accuracies(X[rows_], yk[rows_], K, [g['C'] for g in fits], seed)))
        else: layer = _choose_from_vals(np.array(f['vals']), rule)
        if layer == f['layer']: return f
        fits = fits or chain()
        chosen = fit_linear(X[:, layer], yk, K, None, (fits[layer]['C'],), refit, start=fits[layer]['sol'])
        return {**fits[layer], 'stats': chosen['stats'], 'x': chosen['x'], 'layer': layer, 'vals': f['vals']}
    rows, acc = [], lambda p: 100 * float((p == yt).mean())
    for seed in map(int, seeds.split(',')):
        base = LayerClassifier(random_state=seed).fit(X, y)
        lc.fit_best_layer = patched
        try: new = LayerClassifier(random_state=seed).fit(X, y)
        finally: lc.fit_best_layer = original
        f, net, a = got['acc'], base.net_, torch.from_numpy(Xt)
        with torch.no_grad():
            cat = base.classes_[logreg_logits((a.flatten(1) - net.mean) / net.scale, net.coef).argmax(1).numpy()]
        lay = base.classes_[logreg_logits(standardize(Xt[:, f['layer']], f['stats']), f['x']).argmax(1).numpy()]
        rows.append([seed, f['layer'], new.best_layer_['layer'], acc(lay), acc(cat), acc(base.predict(Xt)), acc(new.predict(Xt)),
                     base.stack_weights_, new.stack_weights_])
        print(rows[-1], flush=True)
    m = np.array([r[3:7] for r in rows]).mean(0)
    lines = [f"# The default stack with its layer chosen by `{rule}`: {model}, {task}, all training texts (test, for information)\n",
             f"{time.strftime('%Y-%m-%d')}, `bench/ilge/layer_choice.py preview {rule} {model} {task}`; "
             f"{common.environment(2)}. layerkit's default is unchanged: the rule is patched into this process only. The "
             "best layer and the concatenation are layerkit 0.3's readers (argmax of validation accuracy), the baseline of "
             "issue 33's goal. Test accuracy in percent.\n",
             common.md_table(['seed', 'best layer (acc)', f'layer ({rule})', 'best layer', 'concatenation', 'stack 0.3',
                              f'stack, {rule}', 'weights 0.3', f'weights, {rule}'],
                             [[r[0], r[1], r[2], *[f"{v:.2f}" for v in r[3:7]], r[7], r[8]] for r in rows], 'rrrrrrrll'),
             f"\nMeans: best layer {m[0]:.2f}, concatenation {m[1]:.2f}, stack 0.3 {m[2]:.2f} (gap {m[2] - max(m[0], m[1]):+.2f}), "
             f"stack with `{rule}` {m[3]:.2f} (gap {m[3] - max(m[0], m[1]):+.2f}).\n"]
    common.write_result(f'layer_choice_{rule}_{model}_{task}.md', '\n'.join(lines))
    print('\n'.join(lines))


def _choose_from_vals(acc: np.ndarray, rule: str) -> int:
    "`choose_layer` for the accuracy rules, from the (L,) validation accuracies."
    if rule == 'acc': return int(np.argmax(acc))
    h = int(rule[-1]) // 2
    return int(np.argmax([acc[max(l - h, 0):l + h + 1].mean() for l in range(len(acc))]))


if __name__ == '__main__':
    if sys.argv[1] == 'fit': fit(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif sys.argv[1] == 'preview': preview(*sys.argv[2:])
    else: summary(*sys.argv[2:3])
