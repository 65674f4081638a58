"""Benchmark: the recommended recipe at the issue's own budget, SmolLM2-135M at 32 x 128 calibration tokens and 64 held-out windows (issue 32).

Issue 32 opened on one table (`smollm2_pruning_32x128.md`, `smollm2_healing.md`): order-2, SLEB, Block Influence, their
healed forms and `choose_healed` on SmolLM2-135M-Instruct, calibrated on 32 windows of 128 tokens of the first 80% of the
shipped WikiText-2 test paragraphs (seed 0) and held out on 64 evenly spread windows of the last 20%. The recipe tables
measured the recommended recipe at 16 x 128 on 32 windows, for the 2 cores' sake. This script runs the library's own
`recipes.recipe_depths(pruner, (27, 24, 20, 15))` (`RECOMMENDED`: its loop measured once, down to 15 blocks; the
shallower depths replay its steps, each with its own final check and healing) on that calibration, and measures each
pruned model on the same 64 windows. Every method of the issue's table (and angular distance and ReplaceMe) is rebuilt
from the cuts those tables recorded and measured again beside it (the healed ones as the recipe tables heal: each
least-squares map kept where it lowers the calibration NLL; `choose_healed` by its rule, of order-2's, Block
Influence's and angular distance's cuts healed, the lowest calibration NLL). The cloze: all the held-out text's items
(`pruning.downstream_smollm2.items`, 1,026 on SmolLM2; nothing at this budget was chosen on them), the recipe
against each method on the same items (exact McNemar, `layerkit.report.paired_test`).
Scores are cached in bench/.cache/smollm2/recipe-32x128.json, so a killed run goes on (the recipe's loop starts over).
Usage: python bench/pruning/recipe_32x128.py [--threads 2]
Writes bench/pruning/results/smollm2_recipe_32x128.md (and prints it).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import time

import numpy as np
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.checked import calibrated, choose_by_rule, healed_model, verdict_table
from pruning.cloze_paired import cloze_right

DEPTHS = (27, 24, 20, 15)
RECIPE = 'checked-comp+heal'
# (row name, the criterion whose recorded cut it takes, healed?)
METHODS = (('order2 (one-shot)', 'order2', False), ('sleb', 'iterative', False), ('block influence', 'block_influence', False),
           ('angular distance', 'angular', False), ('order2+heal', 'order2', True), ('sleb+heal', 'iterative', True),
           ('block influence + heal', 'block_influence', True), ('ReplaceMe (angular + LS map)', 'angular', True),
           ('choose_healed', None, True))
CHOOSE = ('order2', 'block_influence', 'angular')  # `choose_healed`'s criteria, in its order (ties: the first)
# the table: held-out perplexity as those files recorded it (every map applied as fitted in smollm2_healing.md)
TABLE_COLUMNS = {'order2 (one-shot)': ('smollm2_pruning_32x128.md', 'order2'), 'sleb': ('smollm2_pruning_32x128.md', 'iterative'),
                 'block influence': ('smollm2_pruning_32x128.md', 'block_influence'), 'angular distance': ('smollm2_pruning_32x128.md', 'angular'),
                 'order2+heal': ('smollm2_healing.md', 'order2 + heal'), 'block influence + heal': ('smollm2_healing.md', 'Block Influence + heal'),
                 'ReplaceMe (angular + LS map)': ('smollm2_healing.md', 'ReplaceMe (angular span + heal)')}


def recorded_cuts() -> dict:
    "{(criterion, depth): cut} from the 'Choices' table of smollm2_pruning_32x128.md."
    text = (common.results_dir('pruning')/'smollm2_pruning_32x128.md').read_text()
    return {(c, int(d)): json.loads(cut) for d, c, cut in re.findall(r'^\| (\d+) \| (\w+) \| (\[[\d, ]*\]) \|', text, re.M)}


def recorded_ppl() -> dict:
    "{(method, depth): held-out perplexity} of the issue's table, read off the files' first tables."
    out = {}
    for name, (f, col) in TABLE_COLUMNS.items():
        lines = [l for l in (common.results_dir('pruning')/f).read_text().splitlines() if l.startswith('|')]
        head = [c.strip() for c in lines[0].strip('|').split('|')]
        for l in lines[2:]:
            c = [x.strip().strip('*') for x in l.strip('|').split('|')]
            if c[0].isdigit() and int(c[0]) in DEPTHS: out[name, int(c[0])] = float(c[head.index(col)].replace(',', ''))
            if not c[0].split()[0].isdigit(): break
    return out


def run(threads: int) -> str:
    from pruning.downstream_smollm2 import items
    from layerkit.objectives import bos_prefix
    from layerkit.order2 import deletion_nll
    from layerkit.deletion import without_blocks
    from layerkit.recipes import recipe_depths
    from layerkit.report import paired_test
    p, held, held_texts = calibrated('smollm2', n=32, windows=64)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    ids, mask = p.calibration
    its, pre = items(tok, held_texts, 10**9), bos_prefix(tok)
    cuts, ref = recorded_cuts(), recorded_ppl()
    cache = common.ROOT/'bench'/'.cache'/'smollm2'/'recipe-32x128.json'
    seen = json.loads(cache.read_text()) if cache.exists() else {}
    def save(): cache.parent.mkdir(parents=True, exist_ok=True); cache.write_text(json.dumps(seen))
    def score(m) -> dict:  # the model as it is now: held-out NLL and the cloze item by item
        return dict(nll=deletion_nll(m, held, [], path), right=''.join('01'[int(x)] for x in cloze_right(m, its, pre)))
    def measure(key: str, heal: bool, cut):
        if key not in seen:
            if heal:
                with healed_model(model, path, cut, ids, mask) as (kept, cal, _): seen[key] = dict(score(model), cal=cal, kept=kept)
            else:
                with without_blocks(model, cut, path): seen[key] = score(model)
            save()
        return seen[key]
    chosen = lambda d: choose_by_rule([cuts[c, d] for c in CHOOSE], lambda cut: measure(f"{cut} healed=True", True, cut)['cal'])  # `choose_healed`'s rule on the recorded cuts
    t0 = time.time()
    rows = [dict(d=30, method='full model', cut=[], **measure('[] healed=False', False, []))]
    print(f"{len(its)} cloze items; full model: ppl {math.exp(rows[0]['nll']):.2f}, cloze {rows[0]['right'].count('1') / len(its):.3f}", flush=True)
    for d in DEPTHS:
        for name, crit, heal in METHODS:
            cut = chosen(d) if crit is None else cuts[crit, d]
            rows.append(dict(d=d, method=name, cut=cut, **measure(f"{cut} healed={heal}", heal, cut), ref=ref.get((name, d))))
            print(f"{d:3d} {name:30s} {cut} ppl {math.exp(rows[-1]['nll']):9.2f} (table {ref.get((name, d), float('nan')):9.2f}) "
                  f"cloze {rows[-1]['right'].count('1') / len(its):.3f}", flush=True)
    if 'recipe' not in seen:
        t1 = time.time()
        recs = recipe_depths(p, DEPTHS, measure=score)
        seen['recipe'] = dict(seconds=time.time() - t1, depths={str(d): dict(
            measured=r['measured'], deleted=r['deleted_layers'], block_evaluations=r['block_evaluations'], seconds=r['seconds'],
            compensated=r['compensated'], healed=r['healed'], untied=r['untied_lm_head'],
            kept=(r.get('scales_checked') or {}).get('kept'), scales=[s['scale'] for s in r['steps']]) for d, r in recs.items()})
        save()
    for d in DEPTHS:
        r = seen['recipe']['depths'][str(d)]
        rows.append(dict(d=d, method=RECIPE, cut=r['deleted'], **r['measured'], ref=None, rec=r))
        print(f"{d:3d} {RECIPE:30s} {r['deleted']} ppl {math.exp(r['measured']['nll']):9.2f} cloze {r['measured']['right'].count('1') / len(its):.3f}", flush=True)
    for r in rows:
        r['ok'] = np.array([c == '1' for c in r['right']], float)
    mine = {r['d']: r['ok'] for r in rows if r['method'] == RECIPE}
    for r in rows:
        r['test'] = paired_test(np.ones(len(its)), mine[r['d']], r['ok']) if r['d'] in mine and r['method'] != RECIPE else None
    return report(rows, len(its), time.time() - t0, seen['recipe'], threads)


def report(rows: list[dict], m: int, seconds: float, recipe: dict, threads: int) -> str:
    "The result file: perplexity against the issue's table, the cloze with the paired test, the recipe's cost."
    by = {(r['d'], r['method']): r for r in rows}
    names = [n for n, _, _ in METHODS] + [RECIPE]
    ppl = lambda r: math.exp(r['nll'])
    def best(d, key, low):
        vals = [key(by[d, n]) for n in names]
        return min(vals) if low else max(vals)
    def cell(d, n, key, fmt, low):
        v = key(by[d, n])
        return f"**{fmt(v)}**" if v == best(d, key, low) else fmt(v)
    ptab = common.md_table(['method', *[f'{d} kept' for d in DEPTHS]],
                           ([n, *[cell(d, n, ppl, lambda v: f"{v:,.1f}", True) for d in DEPTHS]] for n in names), 'l' + 'r' * len(DEPTHS))
    acc = lambda r: r['ok'].mean()
    ctab = common.md_table(['method', *[f'{d} kept' for d in DEPTHS]],
                           ([n, *[cell(d, n, acc, lambda v: f"{v:.3f}", False) for d in DEPTHS]] for n in names), 'l' + 'r' * len(DEPTHS))
    vtab = verdict_table(by, names, DEPTHS, RECIPE)
    every = common.md_table(['blocks kept', 'method', 'deleted', "held-out ppl (the issue's tables)", 'now', f'cloze ({m} items)',
                             'recipe minus method (points)', 'McNemar p'],
                            ([r['d'], r['method'], r['cut'], f"{r['ref']:,.2f}" if r.get('ref') else '-', f"{ppl(r):,.2f}", f"{acc(r):.3f}",
                              '' if r['test'] is None else f"{100 * r['test']['difference']:+.1f}",
                              '' if r['test'] is None else f"{r['test']['p_value']:.3f}"] for r in rows), 'rllrrrrr')
    deep = recipe['depths'][str(min(DEPTHS))]
    cost = common.md_table(['blocks kept', 'block evaluations', 'seconds', 'scales kept by the loop', 'final check keeps', 'healed', 'head untied'],
                           ([d, f"{r['block_evaluations']:,}", f"{r['seconds']:.0f}", sum(s is not None for s in r['scales']), r['kept'] or '-',
                             'yes' if r['healed'] else 'no', 'yes' if r['untied'] else 'no']
                            for d, r in ((d, recipe['depths'][str(d)]) for d in DEPTHS)), 'rrrrlll')
    full = by[30, 'full model']
    return '\n'.join([
        "# The recommended recipe at the issue's budget: SmolLM2-135M-Instruct, 32 x 128 calibration tokens, 64 held-out windows\n",
        f"{time.strftime('%Y-%m-%d')}. `bench/pruning/recipe_32x128.py`; {common.environment(threads)}. SmolLM2-135M-Instruct from its "
        "GGUF, dequantized, float32; calibration: 32 windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs "
        "(seed 0), the order-2 fit's of `smollm2_pruning_32x128.md`; held out: its 64 evenly spread windows of the last 20%, and every "
        f"cloze item of that text ({m}; chance 0.25). `{RECIPE}` (`RECOMMENDED`) through `recipes.recipe_depths`; every other method rebuilt "
        "from the cuts `smollm2_pruning_32x128.md` recorded (`sleb` is its `iterative` criterion), healed as the recipe tables heal (each "
        "map kept where it lowers the calibration NLL; `smollm2_healing.md` applied every map as fitted, hence small differences from "
        "its column), `choose_healed` by its rule. Prune&Comp was not run at this budget (its loop, as long as the recipe's, "
        f"was measured at 16 x 128: `recipes_smollm2_16x128.md`). Full model: held-out perplexity {ppl(full):.2f}, cloze {acc(full):.3f}. "
        f"{seconds:.0f} s in this run (scores cached in bench/.cache/smollm2/recipe-32x128.json).\n",
        "## The recipe against the best other method\n", vtab,
        "\n'recipe vs best': the recipe's held-out perplexity over the best other method's, minus 1 (negative: the recipe is lower). "
        "'significantly better cloze': methods whose cloze beats the recipe's on the same items at p < 0.05.\n",
        "## Held-out perplexity (best in bold)\n", ptab,
        f"\n## Cloze accuracy, {m} items (best in bold)\n", ctab,
        "\n## The recipe's cost and what it kept\n", cost,
        f"\nblock evaluations: the loop's measurements down to that depth (the shallower depths replay the deepest run's steps); "
        f"seconds: each depth's `prune_with_recipe` (the deepest one's loop included: {deep['seconds']:.0f} s). For comparison, at this "
        "budget order-2's fit made 4,525 block evaluations and SLEB's loop 4,280 (`smollm2_pruning_32x128.md`).\n",
        "## Every model\n", every])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    text = run(a.threads)
    print(text)
    common.write_result('smollm2_recipe_32x128.md', text)


if __name__ == '__main__':
    main()
