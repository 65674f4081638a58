"""Benchmark: a cut's run at block 0 healed with the LM head untied (`untie=True`), against left unhealed (issue 32).

On a model whose LM head is its token embedding (SmolLM2, Gemma 3), `save_healed` and `choose_healed` leave a cut's
run at block 0 unhealed by default: its map would change the head too. The recipes untie the head first; `untie=True`
now lets those two do the same. This script takes every recorded cut of the recipe tables that starts at block 0 and
is not the recipe's own (order-2's, Block Influence's, angular distance's, SLEB's), heals it both ways (maps kept where
they lower the calibration NLL, `pruning.checked.healed_model`) and measures held-out perplexity and the cloze on
the items of `cloze_paired_<model>.md` (the ones the tables' 200 did not use), paired (exact McNemar).
Usage: python bench/pruning/untie.py --model gemma3|smollm2 [--threads 2]
Writes bench/pruning/results/untie_<model>.md (and prints it).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.checked import MODELS, calibrated, healed_model

CRITERIA = ('order2 (one-shot)', 'block influence', 'angular distance', 'sleb')


def run(model_name: str) -> tuple[list[dict], int]:
    "Each recorded cut at block 0: held-out NLL, calibration NLL and cloze, healed with the head tied and untied; and the number of cloze items."
    from pruning.cloze_paired import cloze_right, recorded
    from pruning.downstream_smollm2 import items
    from layerkit.hub import tie_lm_head, untie_lm_head
    from layerkit.objectives import bos_prefix
    from layerkit.order2 import deletion_nll
    rec = recorded(model_name)
    p, held, held_texts = calibrated(model_name)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    ids, mask = p.calibration
    old = {tuple(c) for c, _, _ in items(tok, held_texts, 200)}
    its, pre = [it for it in items(tok, held_texts, 10**9) if tuple(it[0]) not in old], bos_prefix(tok)
    cuts = {}
    for (crit, d), cut in sorted(rec['cuts'].items(), key=lambda kv: (-kv[0][1], kv[0][0])):
        if crit in CRITERIA and 0 in cut: cuts.setdefault(tuple(cut), []).append((crit, d))
    rows = []
    for cut, who in cuts.items():
        for untie in (False, True):
            untied = untie and untie_lm_head(model)
            with healed_model(model, path, list(cut), ids, mask) as (kept, cal, forms):
                rows.append(dict(cut=list(cut), who=who, untie=untie, kept=kept, cal=cal, nll=deletion_nll(model, held, [], path),
                                 right=cloze_right(model, its, pre)))
            if untied: tie_lm_head(model)
            r = rows[-1]
            print(who, cut, 'untied' if untie else 'tied', f"ppl {math.exp(r['nll']):,.1f} cal {r['cal']:.4f} cloze {r['right'].mean():.3f}", flush=True)
    return rows, len(its)


def report(model_name: str, rows: list[dict], m: int, seconds: float, threads: int) -> str:
    "The result file: per cut, healed with the head tied (the run at block 0 unhealed) and untied."
    from layerkit.report import paired_test
    title, n, _ = MODELS[model_name]
    lines = []
    for tied, un in zip(rows[::2], rows[1::2]):
        t = paired_test(np.ones(m), un['right'].astype(float), tied['right'].astype(float))
        lines.append([', '.join(f"{c} at {d}" for c, d in tied['who']), tied['cut'], f"{tied['cal']:.4f}", f"{un['cal']:.4f}",
                      f"{math.exp(tied['nll']):,.1f}", f"{math.exp(un['nll']):,.1f}", f"{tied['right'].mean():.3f}", f"{un['right'].mean():.3f}",
                      f"{t['p_value']:.3f}"])
    tab = common.md_table(['recorded cut of', 'deleted', 'calibration NLL, tied', 'untied', 'held-out ppl, tied', 'untied',
                           f'cloze ({m} items), tied', 'untied', 'McNemar p'], lines, 'llrrrrrrr')
    return '\n'.join([
        f"# A cut's run at block 0 healed with the LM head untied: {title} ({n} x 128 calibration tokens)\n",
        f"{time.strftime('%Y-%m-%d')}. `bench/pruning/untie.py --model {model_name}`; {common.environment(threads)}. Every recorded cut "
        f"of `recipes_{model_name}_{n}x128.md` that starts at block 0 (the recipe's own cuts are already healed untied), healed as the "
        "recipe tables heal (maps kept where they lower the calibration NLL): 'tied' as `save_healed` does by default (the run at "
        "block 0 unhealed, the head tied to the embedding), 'untied' with `untie=True` (the head its own copy, the run's map in the "
        f"embedding). Held-out perplexity on the tables' windows; the cloze on the items of `cloze_paired_{model_name}.md`, paired "
        f"(exact McNemar, untied against tied). {seconds:.0f} s.\n", tab])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=sorted(MODELS), required=True)
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    t0 = time.time()
    rows, m = run(a.model)
    text = report(a.model, rows, m, time.time() - t0, a.threads)
    print(text)
    common.write_result(f'untie_{a.model}.md', text)


if __name__ == '__main__':
    main()
