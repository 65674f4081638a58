"""Benchmark: would a pool of healed cuts, judged on the calibration, close the recipe's misses? (issue 32; it does not)

The recipe (`checked-comp+heal`) misses the perplexity goal at Gemma 3's 13 blocks: `choose_healed` picks order-2's
cut [7, 8, 9, 14, 15], heals it and measures 197.9 on held-out text against the recipe's 204.0
(`cloze_paired_gemma3.md`). The obvious mend is a pool: heal the loop's cut and order-2's, Block Influence's and
angular distance's cuts (`choose_healed`'s three), and keep the one the calibration prefers. This script measures, on
each model at its recipe tables' budget, what two judges would pick at every depth:
- 'in-sample': `choose_healed`'s own rule, the healed calibration NLL with the maps fitted on the same windows
  (`pruning.checked.healed_model`; the lower of healed and not);
- 'split': the recipe's final check's rule (`recipes.split_objective`), the maps fitted on the first 3/4 of the
  calibration windows and the NLL taken on the last 1/4.
The loop's candidate is the recipe's model as `cloze_paired_<model>.md` rebuilt it (the kept scales folded where the
final check kept them, the head untied for a cut at block 0). Each pick's held-out perplexity and cloze are read
from `cloze_paired_<model>.md`, where every candidate was measured on the same held-out windows and items.
Usage: python bench/pruning/pool.py --model smollm2|gemma3 [--threads 2]
Writes bench/pruning/results/pool_judge_<model>.md (and prints it).
"""
from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.checked import MODELS, calibrated, healed_model

RECIPE = 'checked-comp+heal'
POOL = ((RECIPE, RECIPE), ('order2+heal', 'order2 (one-shot)'), ('block influence + heal', 'block influence'),
        ('ReplaceMe (angular + LS map)', 'angular distance'))  # (row of cloze_paired_<model>.md, the criterion whose cut it heals); ties: the first


def measured(model_name: str) -> dict:
    "{(method, depth): (held-out perplexity, cloze)} from the 'Every method' table of cloze_paired_<model>.md."
    out = {}
    for line in (common.results_dir('pruning')/f'cloze_paired_{model_name}.md').read_text().splitlines():
        c = [x.strip() for x in line.strip('|').split('|')]
        if len(c) == 9 and c[0].isdigit(): out[c[1], int(c[0])] = (float(c[4].replace(',', '')), float(c[6]))
    return out


def run(model_name: str) -> list[dict]:
    "Every depth: each candidate's cut and its two judges' values."
    from pruning.cloze_paired import recorded
    from layerkit.hub import tie_lm_head, untie_lm_head
    from layerkit.recipes import replay_steps, split_objective
    rec = recorded(model_name)
    p, _, _ = calibrated(model_name)
    model, path, (ids, mask) = p.model, p.layer_path, p.calibration
    orig = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rows = []
    for d in MODELS[model_name][2]:
        for name, crit in POOL:
            untied = False
            if name == RECIPE:
                steps = rec['steps'][:p.n_layers - d]
                cut = sorted(s['deleted'] for s in steps)
                if rec['keeps'][d] == 'with': replay_steps(model, steps, path)
                untied = 0 in cut and untie_lm_head(model)
            else: cut = rec['cuts'][crit, d]
            with healed_model(model, path, cut, ids, mask) as (_, cal, _): pass
            rows.append(dict(d=d, method=name, cut=cut, cal=cal, split=split_objective(p, cut)))
            model.load_state_dict(orig)
            if untied: tie_lm_head(model)
            print(rows[-1], flush=True)
    return rows


def report(model_name: str, rows: list[dict], seconds: float, threads: int) -> str:
    "The result file: per depth, each judge's pick and what it measures on held-out text, and every candidate's values."
    title, n, depths = MODELS[model_name]
    held = measured(model_name)
    def pick(d, key):  # the candidate of the lowest `key`, ties the first
        return min(enumerate(r for r in rows if r['d'] == d), key=lambda t: (t[1][key], t[0]))[1]
    def best(d):  # the best of the pool on held-out perplexity
        return min((r for r in rows if r['d'] == d), key=lambda r: held[r['method'], d][0])
    lines = []
    for d in depths:
        me, bi, sp, top = held[RECIPE, d], pick(d, 'cal'), pick(d, 'split'), best(d)
        lines.append([d, f"{me[0]:,.1f} / {me[1]:.3f}", f"{top['method']}: {held[top['method'], d][0]:,.1f}",
                      f"{bi['method']}: {held[bi['method'], d][0]:,.1f} / {held[bi['method'], d][1]:.3f}",
                      f"{sp['method']}: {held[sp['method'], d][0]:,.1f} / {held[sp['method'], d][1]:.3f}"])
    picks = common.md_table(['blocks kept', f'{RECIPE}: ppl / cloze', 'best of the pool (held-out ppl)',
                             "in-sample judge picks: ppl / cloze", 'split judge picks: ppl / cloze'], lines, 'rrlll')
    every = common.md_table(['blocks kept', 'candidate', 'deleted', 'in-sample calibration NLL', 'split NLL (last 1/4)', 'held-out ppl', 'cloze'],
                            ([r['d'], r['method'], r['cut'], f"{r['cal']:.4f}", f"{r['split']:.4f}", f"{held[r['method'], r['d']][0]:,.1f}",
                              f"{held[r['method'], r['d']][1]:.3f}"] for r in rows), 'rllrrrr')
    return '\n'.join([
        f"# A pool of healed cuts judged on the calibration: {title} ({n} x 128 calibration tokens)\n",
        f"{time.strftime('%Y-%m-%d')}. `bench/pruning/pool.py --model {model_name}`; {common.environment(threads)}. The pool: the "
        f"recipe's model (`{RECIPE}`, rebuilt as `cloze_paired_{model_name}.md` rebuilt it) and order-2's, Block Influence's and angular "
        "distance's recorded cuts, each healed (maps kept where they lower the calibration NLL). In-sample judge: "
        "`choose_healed`'s rule, the healed calibration NLL with the maps fitted on the same windows. Split judge: the final "
        "check's rule (`recipes.split_objective`), maps fitted on the first 3/4 of the windows, NLL on the last 1/4. Ties: the "
        f"first candidate (the recipe's). Held-out perplexity and cloze ({'826' if model_name == 'smollm2' else '890'} items) "
        f"of each candidate from `cloze_paired_{model_name}.md`. {seconds:.0f} s.\n",
        "## What each judge picks\n", picks,
        "\n## Every candidate\n", every])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=sorted(MODELS), required=True)
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    t0 = time.time()
    rows = run(a.model)
    text = report(a.model, rows, time.time() - t0, a.threads)
    print(text)
    common.write_result(f'pool_judge_{a.model}.md', text)


if __name__ == '__main__':
    main()
