"""Benchmark: the checked compensation's scales, kept or dropped at the end, before healing (issue 32).

`checked-comp+heal` keeps a deletion's Prune&Comp scale where it lowers the calibration NLL of that deletion, then
heals the cut with least-squares maps. On Gemma 3 at 13 blocks it deletes the very blocks SLEB + heal deletes, yet
measures worse on held-out text (214.5 against 204.0): the scale it kept at step 4 helped the unhealed deletion and
hurts once the cut is healed. This script measures, at each depth of the same checked loop, the cut healed with the
loop's scales (the recipe) and without them (the weights as loaded), and whether the calibration NLL of the two healed
models, which a recipe can see, picks the one that is better on held-out text and the cloze: measured on all the
calibration windows the maps were fitted on, and on the last quarter with maps fitted on the rest (the recipe's rule).
Same model loading, calibration, held-out windows and cloze as `bench/pruning/checked.py`.
Usage: python bench/pruning/final_check.py --model gemma3|smollm2 [--threads 1]
Writes bench/pruning/results/final_check_<model>_<n>x128.md (and prints it).
"""
from __future__ import annotations

import argparse
import json
import math
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.checked import MODELS, calibrated


def _split_nll(model, path: str, cut: list[int], ids, mask) -> float:
    "The cut healed on the first 3/4 of the calibration windows, its NLL on the last 1/4 (the lower of healed and not): the recipe's own rule."
    from types import SimpleNamespace
    from layerkit.recipes import split_objective  # the rule `checked-comp+heal`'s final check applies, run on this bench's model
    pruner = SimpleNamespace(model=model, calibration=(ids, mask), layer_path=path, objective='nll', batch_size=None)
    v = split_objective(pruner, cut)
    if v is None: raise SystemExit(f'{len(ids)} calibration windows are too few to split 3:1 for the healing maps')
    return v


def _healed(model, path: str, cut: list[int], ids, mask, held, its, pre) -> dict:
    "`pruning.checked.heal_and_measure` (calibration and held-out NLL, cloze) and the split's NLL; weights put back."
    from pruning.checked import heal_and_measure
    return dict(heal_and_measure(model, path, cut, ids, mask, held, its, pre), split=_split_nll(model, path, cut, ids, mask))


def report(model: str, rows: list[dict], loop_s: float, threads: int) -> str:
    "The result file: per depth, both healed models' calibration NLL (all windows, and the split's), held-out perplexity and cloze, and what each rule picks."
    title, n, _ = MODELS[model]
    def picks(r, key):
        return '-' if not r['kept'] else 'without' if r['without'][key] < r['with_s'][key] else 'with'
    def agrees(r, key):
        return '-' if not r['kept'] else 'yes' if (picks(r, key) == 'without') == (r['without']['nll'] < r['with_s']['nll']) else 'no'
    split = all('split' in r['with_s'] for r in rows)
    table = common.md_table(
        ['blocks kept', 'scales kept by the loop', 'with: calibration NLL', *(['split NLL'] if split else []), 'held-out ppl', 'cloze',
         'without: calibration NLL', *(['split NLL'] if split else []), 'held-out ppl', 'cloze', 'calibration picks', 'held-out agrees',
         *(['split picks', 'held-out agrees'] if split else []), 'the recipe keeps'],
        [[r['d'], r['kept'], *[x for v in (r['with_s'], r['without']) for x in (
            f"{v['cal']:.4f}", *([f"{v['split']:.4f}"] if split else []), f"{math.exp(v['nll']):,.1f}", f"{v['cloze']:.3f}")],
          picks(r, 'cal'), agrees(r, 'cal'), *([picks(r, 'split'), agrees(r, 'split')] if split else []),
          picks(r, 'split') if split else '?'] for r in rows],
        'rr' + 'r' * (6 + 2 * split) + 'l' * (3 + 2 * split))
    return '\n'.join([
        f"# The checked compensation's scales kept or dropped before healing: {title} ({n} x 128 calibration tokens)\n",
        f"{time.strftime('%Y-%m-%d')}. `bench/pruning/final_check.py --model {model}`; {common.environment(threads)}. "
        f"The checked loop down to {min(r['d'] for r in rows)} blocks: {loop_s:.0f} s. Each depth's cut healed twice: with the "
        "scales the loop kept for its first steps and on the weights as loaded; each healing kept only where it lowers the "
        "calibration NLL. 'split NLL': the maps fitted on the first 3/4 of the calibration windows, the NLL on the last 1/4 "
        "(a comparison a recipe can make without held-out text). 'the recipe keeps': what `checked-comp+heal` saves since "
        "its final check, which judges on that split.\n",
        table])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=sorted(MODELS), required=True)
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    from pruning.downstream_smollm2 import items
    from layerkit.objectives import bos_prefix
    from layerkit.recipes import replay_steps, sleb_steps
    title, n, depths = MODELS[a.model]
    p, held, held_texts = calibrated(a.model)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    ids, mask = p.calibration
    L = p.n_layers
    its, pre = items(tok, held_texts, 200), bos_prefix(tok)
    orig = {k: v.detach().clone() for k, v in model.state_dict().items()}
    raw = common.ROOT/'bench'/'.cache'/a.model/f'final-check-steps-{n}x128.json'  # the loop's steps, reused by a re-run
    t0 = time.time()
    if raw.exists(): steps, loop_s = (lambda d: (d['steps'], d['seconds']))(json.loads(raw.read_text()))
    else:
        steps = sleb_steps(p, L - min(depths), True, checked=True)
        loop_s = time.time() - t0
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(dict(steps=steps, seconds=loop_s)))
    model.load_state_dict(orig)
    rows = []
    for d in depths:
        k = L - d
        cut = sorted(s['deleted'] for s in steps[:k])
        replay_steps(model, steps[:k], path)  # the kept folds of the first k steps, as prune_with_recipe's replay folds them
        kept = sum(s['scale'] is not None for s in steps[:k])
        with_s = _healed(model, path, cut, ids, mask, held, its, pre)
        model.load_state_dict(orig)
        without = _healed(model, path, cut, ids, mask, held, its, pre) if kept else with_s
        rows.append(dict(d=d, cut=cut, kept=kept, with_s=with_s, without=without))
        print(d, cut, kept, with_s, without, flush=True)
    text = report(a.model, rows, loop_s, a.threads)
    print(text)
    common.write_result(f"final_check_{a.model}_{MODELS[a.model][1]}x128.md", text)


if __name__ == '__main__':
    main()
