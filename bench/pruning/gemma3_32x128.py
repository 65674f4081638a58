"""Benchmark: Gemma 3 270M at the issue's calibration budget, 32 x 128 tokens, where the recipe missed at 8 x 128 (issue 32).

The recipe tables measured Gemma 3 on 8 x 128 calibration tokens for the 2 cores' sake, and there the recommended
recipe misses the perplexity goal at 13 blocks: `choose_healed` heals order-2's cut to 197.9 against the recipe's 204.0
(`cloze_paired_gemma3.md`); the pool judge of `bench/pruning/pool.py` showed that the recipe's own judge, 2 held-out
calibration windows, prefers its cut. This script repeats the comparison at the budget issue 32 set for SmolLM2
(`bench/pruning/recipe_32x128.py`): Gemma 3 calibrated on 32 windows of 128 tokens of the first 80% of the shipped
WikiText-2 test paragraphs (seed 0), held out on 64 evenly spread windows of the last 20% and every cloze item of that
text (the recipe against each method on the same items, exact McNemar). At --depths (default 15 and 13):
order-2 (its fit, checkpointed), SLEB (`PruningCriteria`'s iterative criterion, checkpointed), Block Influence and
angular distance, each unhealed and healed (maps kept where they lower the calibration NLL,
`pruning.checked.healed_model`; the head untied where a cut starts at block 0, as the recipes heal),
`choose_healed` by its rule (order-2's, Block Influence's and angular distance's cuts healed, the lowest calibration
NLL), and the recipe through `recipes.recipe_depths`. Prune&Comp is left out (its loop costs the recipe's again and it
lost at every depth at 8 x 128). Every score is cached in bench/.cache/gemma3/32x128.json, so a killed run goes on.
Usage: python bench/pruning/gemma3_32x128.py [--depths 15 13] [--no-sleb] [--threads 2]
(the recipe's loop runs once for the depths not yet cached: to the deepest of them, the others replayed).
Writes bench/pruning/results/gemma3_recipe_32x128.md (and prints it).
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.checked import calibrated, choose_by_rule, healed_model, verdict_table
from pruning.cloze_paired import cloze_right

RECIPE = 'checked-comp+heal'
CRITERIA = (('order2 (one-shot)', 'order2'), ('sleb', 'iterative'), ('block influence', 'block_influence'), ('angular distance', 'angular'))
HEALED = (('order2+heal', 'order2'), ('sleb+heal', 'iterative'), ('block influence + heal', 'block_influence'),
          ('ReplaceMe (angular + LS map)', 'angular'))
CHOOSE = ('order2', 'block_influence', 'angular')  # `choose_healed`'s criteria, in its order (ties: the first)


def _without_sleb(methods: tuple, sleb: bool) -> list:
    "The (row name, criterion) pairs to run: all, or all but SLEB's (--no-sleb)."
    return [(n, c) for n, c in methods if sleb or c != 'iterative']


def run(depths: tuple, threads: int, sleb: bool = True) -> str:
    from pruning.downstream_smollm2 import items
    from layerkit.criteria import PruningCriteria
    from layerkit.deletion import without_blocks
    from layerkit.hub import tie_lm_head, untie_lm_head
    from layerkit.objectives import bos_prefix
    from layerkit.order2 import deletion_nll
    from layerkit.recipes import recipe_depths
    from layerkit.report import paired_test
    calib, _ = common.wikitext_split()
    p, held, held_texts = calibrated('gemma3', n=32, windows=64)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    ids, mask = p.calibration
    its, pre = items(tok, held_texts, 10**9), bos_prefix(tok)
    cdir = common.ROOT/'bench'/'.cache'/'gemma3'
    cdir.mkdir(parents=True, exist_ok=True)
    cache = cdir/'32x128.json'
    seen = json.loads(cache.read_text()) if cache.exists() else {}
    def save(): cache.write_text(json.dumps(seen))
    def score(m) -> dict:  # the model as it is now: held-out NLL and the cloze item by item
        return dict(nll=deletion_nll(m, held, [], path), right=''.join('01'[int(x)] for x in cloze_right(m, its, pre)))
    def measure(cut, heal: bool) -> dict:
        key = f"{cut} healed={heal}"
        if key not in seen:
            if heal:
                untied = 0 in cut and untie_lm_head(model)
                with healed_model(model, path, cut, ids, mask) as (kept, cal, _): seen[key] = dict(score(model), cal=cal, kept=kept, untied=untied)
                if untied: tie_lm_head(model)
            else:
                with without_blocks(model, cut, path): seen[key] = score(model)
            save()
        return seen[key]
    t0 = time.time()
    full = measure([], False)
    print(f"{len(its)} cloze items; full model: ppl {math.exp(full['nll']):.2f}, cloze {full['right'].count('1') / len(its):.3f}", flush=True)
    rec = seen.setdefault('recipe', dict(depths={}))
    want = tuple(d for d in depths if str(d) not in rec['depths'])
    if want:  # first: the comparison's point, before the longer fits; one loop to the deepest of the depths not yet cached
        t1 = time.time()
        recs = recipe_depths(p, want, measure=score)
        rec.setdefault('loops', []).append(dict(depths=sorted(want), seconds=time.time() - t1))
        rec['depths'].update({str(d): dict(
            measured=r['measured'], deleted=r['deleted_layers'], block_evaluations=r['block_evaluations'], seconds=r['seconds'],
            delete_order=r['delete_order'], scales=[s['scale'] for s in r['steps']], kept=(r.get('scales_checked') or {}).get('kept'),
            healed=r['healed'], untied=r['untied_lm_head']) for d, r in recs.items()})
        save()
    t1 = time.time()
    p.fit(texts=calib, n_sequences=32, sequence_length=128, seed=0, checkpoint_path=cdir/'order2-32x128.json', progress=False)
    seen.setdefault('order2_fit', dict(seconds=time.time() - t1, block_evaluations=p.result.metadata.get('total_block_evaluations')))
    save()
    crit = PruningCriteria(p, checkpoint_path=cdir/'sleb-32x128.json')
    cuts = {}
    for d in depths:
        for c in [c for _, c in _without_sleb(CRITERIA, sleb)]:
            key = f"cut {c} {d}"
            if key not in seen: seen[key] = crit.deleted(c, d); save()
            cuts[c, d] = seen[key]
    rows = [dict(d=18, method='full model', cut=[], **full)]
    for d in depths:
        crits, heals = _without_sleb(CRITERIA, sleb), _without_sleb(HEALED, sleb)
        for name, c in crits: rows.append(dict(d=d, method=name, cut=cuts[c, d], **measure(cuts[c, d], False)))
        for name, c in heals: rows.append(dict(d=d, method=name, cut=cuts[c, d], **measure(cuts[c, d], True)))
        pick = choose_by_rule([cuts[c, d] for c in CHOOSE], lambda cut: measure(cut, True)['cal'])
        rows.append(dict(d=d, method='choose_healed', cut=pick, **measure(pick, True)))
        r = seen['recipe']['depths'][str(d)]
        rows.append(dict(d=d, method=RECIPE, cut=r['deleted'], **r['measured']))
        for x in rows[-(len(crits) + len(heals) + 2):]:
            print(f"{d:3d} {x['method']:30s} {x['cut']} ppl {math.exp(x['nll']):10.1f} cloze {x['right'].count('1') / len(its):.3f}", flush=True)
    for x in rows: x['ok'] = np.array([ch == '1' for ch in x['right']], float)
    mine = {x['d']: x['ok'] for x in rows if x['method'] == RECIPE}
    for x in rows: x['test'] = paired_test(np.ones(len(its)), mine[x['d']], x['ok']) if x['d'] in mine and x['method'] != RECIPE else None
    return report(rows, depths, len(its), time.time() - t0, seen, threads, sleb)


def report(rows: list[dict], depths, m: int, seconds: float, seen: dict, threads: int, sleb: bool = True) -> str:
    "The result file: the recipe against the best other, every model, the cost."
    by = {(r['d'], r['method']): r for r in rows}
    names = [n for n, _ in _without_sleb(CRITERIA + HEALED, sleb)] + ['choose_healed', RECIPE]
    ppl, acc = (lambda r: math.exp(r['nll'])), (lambda r: r['ok'].mean())
    vtab = verdict_table(by, names, depths, RECIPE)
    every = common.md_table(['blocks kept', 'method', 'deleted', 'held-out ppl', f'cloze ({m} items)', 'recipe minus method (points)', 'McNemar p'],
                            ([r['d'], r['method'], r['cut'], f"{ppl(r):,.1f}", f"{acc(r):.3f}",
                              '' if r['test'] is None else f"{100 * r['test']['difference']:+.1f}",
                              '' if r['test'] is None else f"{r['test']['p_value']:.3f}"] for r in rows), 'rllrrrr')
    rec = seen['recipe']
    cost = common.md_table(['blocks kept', 'block evaluations', 'seconds', 'delete order', 'scales kept by the loop', 'final check keeps', 'head untied'],
                           ([d, f"{r['block_evaluations']:,}", f"{r['seconds']:.0f}", r['delete_order'], sum(s is not None for s in r['scales']),
                             r['kept'] or '-', 'yes' if r['untied'] else 'no'] for d, r in ((d, rec['depths'][str(d)]) for d in depths)), 'rrrllll')
    full = by[18, 'full model']
    loops = '; '.join(f"{x['seconds']:.0f} s for {', '.join(map(str, x['depths']))} blocks" for x in rec['loops'])
    skipped = '' if sleb else ("; SLEB not run either (--no-sleb: at 8 x 128 its cuts at 15 and 13 blocks were the recipe's, "
                               "which the recipe healed without scales)")
    return '\n'.join([
        "# Gemma 3 270M at 32 x 128 calibration tokens: the recommended recipe against the other methods\n",
        f"{time.strftime('%Y-%m-%d')}. `bench/pruning/gemma3_32x128.py`; {common.environment(threads)}. Gemma 3 270M (Q4_K_M) from its "
        "GGUF, dequantized, float32; calibration: 32 windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs "
        f"(seed 0); held out: 64 evenly spread windows of the last 20%, and every cloze item of that text ({m}; chance 0.25). `{RECIPE}` "
        "(`RECOMMENDED`) through `recipes.recipe_depths`; order-2 from its fit, SLEB from `PruningCriteria`'s iterative criterion, "
        "Block Influence and angular distance, each healed as the recipe tables heal (each map kept where it lowers the calibration "
        f"NLL; the head untied where a cut starts at block 0), `choose_healed` by its rule. Prune&Comp not run{skipped}. Full model: held-out "
        f"perplexity {ppl(full):.2f}, cloze {acc(full):.3f}. {seconds:.0f} s in this run (cached in bench/.cache/gemma3/32x128.json).\n",
        "## The recipe against the best other method\n", vtab,
        "\n## The recipe's cost and what it kept\n", cost,
        f"\nThe recipe's loop: {loops} (a loop's shallower depths replay its deepest's steps). Order-2's fit: "
        f"{seen['order2_fit']['block_evaluations']:,} block evaluations, {seen['order2_fit']['seconds']:.0f} s (less where it resumed "
        "from its checkpoint).\n",
        "## Every model\n", every])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--depths', type=int, nargs='+', default=[15, 13])
    ap.add_argument('--no-sleb', action='store_true', help="leave SLEB's loop out (its cut, healed or not)")
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    text = run(tuple(a.depths), a.threads, sleb=not a.no_sleb)
    print(text)
    common.write_result('gemma3_recipe_32x128.md', text)


if __name__ == '__main__':
    main()
