"""Benchmark: pruned models judged on the domain suite, not on the calibration's own text (issue 56).

Every pruning table before this one was measured on held-out windows of WikiText-2, the calibration's text. Here each
pruned model is measured on the four domains of `layerkit.data.domain_suite()` (held-out WikiText-2 prose, the Banking77
test queries, Python source, technical prose; `--windows` windows of 128 tokens each, evenly spread) and by their
geometric mean. The methods, each at every depth of `--depths`:
- SLEB (`recipe='sleb'`) and SLEB healed (`'sleb+heal'`: its cut with a least-squares map per deleted run, kept where it
  lowers the calibration NLL);
- Block Influence's cut, unhealed and healed the same way;
- `checked-comp+heal` (the recommended recipe until this benchmark), calibrated on WikiText-2 (the default), on the shipped
  mix (`data.calibration_texts('mixed')`) and on text the model writes itself (`calibration='self'`);
- `validated-comp+heal` (each step's deletion, of the loop's 3 cheapest, each map's strength and the scales judged on
  `validation.validation_windows`, none of which is in the suite) on the same three calibrations; the rows of the recipe
  as it was until 0.4 (commit 3a67006: `checked-comp+heal`'s steps, only the repair validated) stay in the cache and the
  table as `validated-comp+heal 0.4`.
- `guarded-comp+heal` (WikiText-2 calibration, the default): `validated-comp+heal`'s model, compared with SLEB's own cut,
  unhealed, on each kind of validation text; where it is more than 5% worse on a kind, SLEB's cut healed at the strengths
  the windows choose instead. It replays the validated loop's steps and SLEB's (the same loops, cached beside the scores).
Each model is also scored on the cloze items of the held-out WikiText-2 paragraphs (item by item, paired against SLEB).
- order-2's one-shot cut (`recipe='order2'`, fitted on the same windows; its measurements cached beside the scores), unhealed
  and healed (`'order2+heal'`).
Calibration: `--n` windows of 128 tokens, seed 42 (`layerkit prune`'s), from the first 80% of the WikiText-2 test
paragraphs (or the mix; or the model's own text from those paragraphs' openings).
Each score is cached in bench/.cache/<model>/domains-<n>x128.json and each loop's steps beside it, so a killed run goes on.
Usage: python bench/pruning/domains.py [--model smollm2|gemma3] [--n 16] [--depths 24 20] [--windows 64] [--calibrations wikitext2 mixed self] [--report-only] [--threads 2]
Writes bench/pruning/results/domains_<model>_<n>x128.md, .json (the scores the table is made from) and .tables.json (the
markdown's tables, `common.tables_of`).
"""
from __future__ import annotations

import argparse
import json
import math
import time
import warnings
import sys

import numpy as np
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

CALIBRATIONS = ('wikitext2', 'mixed', 'self')


def suite_windows(tok, windows: int) -> dict:
    "{domain: (n, 128) ids} of the domain suite."
    from layerkit.criteria import heldout_windows
    from layerkit.data import domain_suite
    return {k: heldout_windows(tok, v, 128, max_windows=windows) for k, v in domain_suite().items()}


def cloze_items(tok) -> tuple[list, list[int]]:
    "(items, BOS prefix): every cloze item of the held-out WikiText-2 paragraphs (`pruning.downstream_smollm2.items`: a sentence ending in a one-token word, 4 choices)."
    from pruning.downstream_smollm2 import items
    from layerkit.objectives import bos_prefix
    _, held = common.wikitext_split()
    return items(tok, held, 10**9), bos_prefix(tok)


def pruner_for(model_name: str, calibration: str, n: int):
    "The model from its GGUF in float32, its pruner calibrated on n x 128 tokens of `calibration` (seed 42)."
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.data import calibration_texts
    from layerkit.pruning import Order2Pruner
    p = Order2Pruner(common.gguf_path(model_name), dtype='float32', device_map=None)
    texts = calibration_texts('mixed' if calibration == 'mixed' else 'wikitext2')
    p.calibrate(texts=texts, n_sequences=n, sequence_length=128, seed=42, calibration='self' if calibration == 'self' else 'texts')
    return p


def run(model_name: str, n: int, depths: list[int], windows: int, threads: int, calibrations=CALIBRATIONS) -> dict:
    from layerkit.criteria import block_influence
    from layerkit.deletion import without_blocks
    from layerkit.order2 import deletion_nll
    from layerkit.recipes import prune_with_recipe
    from pruning.checked import healed_model
    from pruning.cloze_paired import cloze_right
    cache_dir = common.ROOT/'bench'/'.cache'/model_name
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_dir/f'domains-{n}x128.json'
    seen = json.loads(cache.read_text()) if cache.exists() else {}
    def save(): cache.write_text(json.dumps(seen, indent=1))
    depths = sorted(depths)  # the deepest cut first: it measures every step, the shallower replay
    t0 = time.time()
    for cal in calibrations:
        p = pruner_for(model_name, cal, n)
        model, path, tok = p.model, p.layer_path, p.tokenizer
        suite, (its, pre) = suite_windows(tok, windows), cloze_items(tok)
        def score(m) -> dict:  # the model as it is now, on every domain
            return {k: float(deletion_nll(m, ids, [], path)) for k, ids in suite.items()}
        def cloze(m) -> str:  # the model as it is now: each cloze item right (1) or not (0)
            return ''.join('1' if r else '0' for r in cloze_right(m, its, pre))
        if 'full' not in seen or 'cloze' not in seen['full']:
            seen['full'] = dict(nll=score(model), blocks=p.n_layers, cloze=cloze(model)); save()
        if cal == 'self': seen['self_calibration'] = p.self_calibration
        L = p.n_layers
        methods = [('sleb', 'sleb'), ('sleb+heal', 'sleb+heal')] if cal == 'wikitext2' else []
        methods += [(r, r) for r in ('checked-comp+heal', 'validated-comp+heal')]  # the recipes judged
        if cal == 'wikitext2': methods.append(('guarded-comp+heal', 'guarded-comp+heal'))  # on the default calibration
        for name, recipe in methods:
            for d in depths:
                key = f'{cal} {name} {d}'
                if key in seen and 'cloze' in seen[key]: continue  # (a score from before the cloze column: made again)
                t1 = time.time()
                loop = recipe.split('+')[0] if recipe.startswith('sleb') else recipe.split('-')[0]  # 'checked', 'validated': their own loops
                if loop == 'guarded':  # the validated loop's steps, and SLEB's beside them (`recipes.guard_steps_path`): the same loops
                    loop, ref = 'validated', cache_dir/f'domains-steps-validated-{cal}-{n}x128-sleb.json'
                    if not ref.exists() and (cache_dir/f'domains-steps-sleb-{cal}-{n}x128.json').exists():
                        ref.write_text((cache_dir/f'domains-steps-sleb-{cal}-{n}x128.json').read_text())
                rec = prune_with_recipe(p, d, recipe, checkpoint_path=cache_dir/f'domains-steps-{loop}-{cal}-{n}x128.json',
                                        skip_unsupported=True, progress=True)
                seen[key] = dict(nll=score(model), cloze=cloze(model), deleted=p.selection['deleted_layers'], seconds=time.time() - t1,
                                 healed=rec['healed'], compensated=rec['compensated'],
                                 strengths=(rec.get('validation') or {}).get('strengths'),
                                 scales_kept=(rec.get('scales_checked') or {}).get('kept'),
                                 **({'guard': rec['guard']} if 'guard' in rec else {}))
                p.unprune(); save()
                print(f"{key}: {seen[key]['deleted']} geo ppl {geo(seen[key]['nll']):.2f} ({time.time() - t1:.0f} s)", flush=True)
        if cal == 'wikitext2' and any('cloze' not in seen.get(f'{cal} {m} {d}', {}) for m in ('order2', 'order2+heal') for d in depths):
            p.fit(input_ids=p.calibration[0], attention_mask=p.calibration[1], progress=False,  # order-2 on the same windows
                  checkpoint_path=cache_dir/f'domains-order2-{cal}-{n}x128.json')
            for name in ('order2', 'order2+heal'):
                for d in depths:
                    key = f'{cal} {name} {d}'
                    if 'cloze' in seen.get(key, {}): continue
                    t1 = time.time()
                    rec = prune_with_recipe(p, d, name, skip_unsupported=True)
                    seen[key] = dict(nll=score(model), cloze=cloze(model), deleted=p.selection['deleted_layers'], seconds=time.time() - t1,
                                     healed=rec['healed'], compensated=rec['compensated'])
                    p.unprune(); save()
                    print(f"{key}: {seen[key]['deleted']} geo ppl {geo(seen[key]['nll']):.2f} ({time.time() - t1:.0f} s)", flush=True)
        if cal == 'wikitext2':  # Block Influence's cut on this calibration, unhealed and healed
            hs, mask = p.baseline_engine().hidden_states, p.calibration[1]
            bi = block_influence(hs, mask)
            for d in depths:
                cut = sorted(sorted(range(L), key=lambda i: (bi[i], i))[:L - d])
                if 'cloze' not in seen.get(f'{cal} block influence {d}', {}):
                    with without_blocks(model, cut, path): seen[f'{cal} block influence {d}'] = dict(nll=score(model), cloze=cloze(model), deleted=cut)
                    save()
                if 'cloze' not in seen.get(f'{cal} block influence + heal {d}', {}):
                    with warnings.catch_warnings():
                        warnings.simplefilter('ignore')
                        with healed_model(model, path, cut, *p.calibration) as (kept, _, _):
                            seen[f'{cal} block influence + heal {d}'] = dict(nll=score(model), cloze=cloze(model), deleted=cut, healed=kept)
                    save()
        p.close()
    seen['seconds_this_run'] = time.time() - t0
    save()
    return seen


def geo(nll: dict) -> float:
    "The geometric-mean perplexity of per-domain NLLs."
    return math.exp(sum(nll.values()) / len(nll))


OLD = 'validated-comp+heal 0.4'  # the recipe as it was until 0.4 (commit 3a67006): checked-comp+heal's steps, only the repair validated
RECIPES_JUDGED = ('checked-comp+heal', OLD, 'validated-comp+heal', 'guarded-comp+heal')
ORDER = ('sleb', 'sleb+heal', 'block influence', 'block influence + heal', 'order2', 'order2+heal', *RECIPES_JUDGED)


def _acc(e: dict) -> str:
    "The cloze accuracy of a score, or '' where it has none."
    return f"{e['cloze'].count('1') / len(e['cloze']):.3f}" if 'cloze' in e else ''


def _paired(e: dict, sleb: dict | None) -> dict | None:
    "{'points': e's cloze minus SLEB's in points, 'p': McNemar's exact p on the same items}; None where either has no cloze."
    from layerkit.probes import paired_test
    if sleb is None or 'cloze' not in e or 'cloze' not in sleb: return None
    a, b = (np.array([ch == '1' for ch in x['cloze']]) for x in (e, sleb))
    t = paired_test(np.ones(len(a), bool), a, b)
    return dict(points=100 * t['difference'], p=t['p_value'])


def _versus(e: dict, sleb: dict | None) -> str:
    "'+1.2 (p 0.04)': `_paired` as the table shows it; '' where there is none."
    t = _paired(e, sleb)
    return '' if t is None else f"{t['points']:+.1f} (p {t['p']:.2f})"


def report(seen: dict, model_name: str, n: int, depths: list[int], windows: int, threads: int) -> str:
    domains = list(seen['full']['nll'])
    head = ['blocks kept', 'method', 'calibration', *domains, 'geometric mean', 'vs best other', 'worst domain vs SLEB',
            'cloze', 'cloze vs SLEB (points, McNemar p)']
    rows, data = [], []
    full = seen['full']['nll']
    rows.append([seen['full']['blocks'], 'full model', '', *[f'{math.exp(full[k]):.2f}' for k in domains], f'{geo(full):.2f}', '', '',
                 _acc(seen['full']), ''])
    for d in sorted(depths, reverse=True):
        entries = [(m, c, seen[f'{c} {m} {d}']) for m in ORDER for c in CALIBRATIONS if f'{c} {m} {d}' in seen]
        sleb = seen.get(f'wikitext2 sleb {d}')
        others = [e for e in entries if e[0] not in RECIPES_JUDGED]
        best_other = min((geo(e[2]['nll']) for e in others), default=float('nan'))
        for m, c, e in entries:
            g = geo(e['nll'])
            worst = max(math.exp(e['nll'][k] - sleb['nll'][k]) for k in domains) - 1 if sleb else float('nan')
            vs = f'{g / best_other - 1:+.1%}' if m in RECIPES_JUDGED else ''
            rows.append([d, m, c, *[f'{math.exp(e["nll"][k]):.2f}' for k in domains], f'{g:.2f}', vs, f'{worst:+.1%}',
                         _acc(e), _versus(e, sleb) if (m, c) != ('sleb', 'wikitext2') else ''])
            data.append(dict(blocks_kept=d, method=m, calibration=c, judged=m in RECIPES_JUDGED, deleted=e.get('deleted'),
                             perplexity={k: math.exp(e['nll'][k]) for k in domains}, geometric_mean=g,
                             cloze=None if 'cloze' not in e else e['cloze'].count('1') / len(e['cloze']),
                             cloze_vs_sleb=None if (m, c) == ('sleb', 'wikitext2') else _paired(e, sleb),
                             strengths=e.get('strengths'), scales_kept=e.get('scales_kept'),
                             **({'guard': {k: e['guard'][k] for k in ('ratios', 'worst', 'bar', 'fell_back', 'sleb_deleted', 'recipe_deleted')}}
                                if 'guard' in e else {}),  # on the validation windows, not the suite
                             seconds=e.get('seconds')))  # this row's run: a loop's steps replayed where a deeper cut measured them
    table = common.md_table(head, rows, 'rll' + 'r' * (len(head) - 3))
    sc = seen.get('self_calibration') or {}
    text = f"""# Pruned {model_name} judged on the domain suite: {n} x 128 calibration tokens, {windows} windows per domain

{time.strftime('%Y-%m-%d')}. `bench/pruning/domains.py --model {model_name} --n {n} --depths {' '.join(map(str, depths))} --windows {windows}`; {common.environment(threads)}. The model from its GGUF, dequantized, float32. Calibration: {n} windows of 128 tokens, seed 42 (`layerkit prune`'s), of the first 80% of the WikiText-2 test paragraphs (`wikitext2`), of those interleaved with the Banking77 train queries (`mixed`), or written by the model from those paragraphs' openings (`self`{f": {sc['n_generated']} written, the {sc['n_generated'] - sc['n_kept']} of highest perplexity dropped, {sc['seconds']:.0f} s" if sc else ', not run in this file'}). Held out: {windows} evenly spread windows of 128 tokens of each domain of `layerkit.data.domain_suite()` (none of it calibration text). Perplexity per domain; 'geometric mean' over the four domains; 'vs best other': a recipe's geometric mean over the best of the other methods measured at that depth (SLEB, Block Influence and order-2's one-shot cut, each unhealed and healed), minus 1; 'worst domain vs SLEB': the largest per-domain perplexity ratio to unhealed SLEB (WikiText-2 calibration), minus 1 (the issue's bar: at most +5%); 'cloze': the share of the {len(seen['full'].get('cloze', ''))} cloze items answered right (every sentence of the held-out WikiText-2 paragraphs that ends in a one-token word, that word against 3 others, `pruning.downstream_smollm2.items`; the LM head on the last position), and 'cloze vs SLEB' its difference from unhealed SLEB's in points with McNemar's exact p on the same items. Scores cached in bench/.cache/{model_name}/domains-{n}x128.json{f"; {seen['seconds_this_run']:.0f} s in the last run" if 'seconds_this_run' in seen else ''}. The calibrations and depths present are those measured so far.

{table}
"""
    common.write_result(f'domains_{model_name}_{n}x128.json', json.dumps(dict(
        command=f'python bench/pruning/domains.py --model {model_name} --n {n} --depths {" ".join(map(str, depths))} --windows {windows}',
        date=time.strftime('%Y-%m-%d'), environment=common.environment(threads), full_model=dict(blocks=seen['full']['blocks'],
        perplexity={k: math.exp(full[k]) for k in domains}, geometric_mean=geo(full),
        cloze=None if 'cloze' not in seen['full'] else seen['full']['cloze'].count('1') / len(seen['full']['cloze']),
        cloze_items=len(seen['full'].get('cloze', ''))), rows=data, self_calibration=sc), indent=1))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', default='smollm2', choices=['smollm2', 'gemma3'])
    ap.add_argument('--n', type=int, default=16, help='calibration windows of 128 tokens (default 16)')
    ap.add_argument('--depths', type=int, nargs='+', default=[24, 20])
    ap.add_argument('--windows', type=int, default=64, help='held-out windows per domain (default 64)')
    ap.add_argument('--calibrations', nargs='+', default=list(CALIBRATIONS), choices=CALIBRATIONS, help='which calibrations (default: all three)')
    ap.add_argument('--report-only', action='store_true', help='write the results from the cached scores, measuring nothing')
    common.add_threads_arg(ap, 2)
    a = ap.parse_args()
    threads = common.set_threads(a.threads)
    cache = common.ROOT/'bench'/'.cache'/a.model/f'domains-{a.n}x128.json'
    seen = json.loads(cache.read_text()) if a.report_only else run(a.model, a.n, a.depths, a.windows, threads, a.calibrations)
    text = report(seen, a.model, a.n, a.depths, a.windows, threads)
    print(text)
    common.write_result(f'domains_{a.model}_{a.n}x128.md', text, tables=f'domains_{a.model}_{a.n}x128.tables.json')  # .json: the scores


if __name__ == '__main__':
    main()
