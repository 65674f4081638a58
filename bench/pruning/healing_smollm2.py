"""Benchmark: healing deleted blocks (layerkit.healing) on SmolLM2-135M-Instruct (30 blocks), WikiText-2 held out.

The split of bench/pruning/criteria_smollm2.py exactly: calibration is 32 windows of 128 tokens (seed 0) from the first 80% of
the shipped WikiText-2 test paragraphs (order-2 resumes from bench/.cache/smollm2/order2-32x128.json), held out are
--heldout of the non-overlapping 128-token windows of the last 20%, evenly spread. At 27, 24, 20 and 15 kept blocks:
order-2 without and with healing; ReplaceMe's recipe (the angular-distance contiguous span, `criteria`' 'angular',
then healing); Block Influence + healing; the deepest blocks + healing. Every map is fitted on the same calibration
tokens; the statistics of every run any of those choices needs come from one pass over the calibration.
Usage: python bench/pruning/healing_smollm2.py [--heldout 64] [--threads 1]
Writes bench/pruning/results/smollm2_healing.md.
"""
from __future__ import annotations

import argparse
import math
import resource
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

DEPTHS = (27, 24, 20, 15)
METHODS = (('order2', 'order2', False), ('order2 + heal', 'order2', True), ('ReplaceMe (angular span + heal)', 'angular', True),
           ('Block Influence + heal', 'block_influence', True), ('deepest + heal', 'deepest', True))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--heldout', type=int, default=64, help='held-out 128-token windows (evenly spread over the last 20%%)')
    ap.add_argument('--depths', type=int, nargs='+', default=list(DEPTHS))
    ap.add_argument('--ridge', type=float, default=1e-4)
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import PruningCriteria, heldout_windows
    from layerkit.healing import deleted_runs, fit_healing, fold_healing, healing_statistics, unfold_healing
    _, held = common.wikitext_split()
    t_all = time.perf_counter()
    with common.smollm2_pruner(32) as (pruner, res, _):
        n_windows = len(heldout_windows(pruner.tokenizer, held, 128))
        held_ids = heldout_windows(pruner.tokenizer, held, 128, max_windows=a.heldout)  # evenly spread
        crit = PruningCriteria(pruner)
        ids, mask = pruner.calibration
        L = res.n_layers
        choice = {(c, d): crit.deleted(c, d) for _, c, _ in METHODS for d in a.depths}
        runs = sorted({r for g in choice.values() for r in deleted_runs(L, g)})
        rss0, t0 = _rss_mib(), time.perf_counter()
        stats = healing_statistics(pruner.model, runs, ids, mask, batch_size=8)
        t_stats, rss_stats = time.perf_counter() - t0, _rss_mib() - rss0
        t0 = time.perf_counter()
        one = fit_healing(pruner.model, choice[('order2', 24)], ids, mask, ridge=a.ridge, batch_size=8)  # one call, alone
        t_one = time.perf_counter() - t0
        base = pruner.evaluate([], input_ids=held_ids)
        print(f"statistics for {len(runs)} runs: {t_stats:.1f} s; full model held-out PPL {math.exp(base):.2f}", flush=True)
        rows = []
        for d in sorted(a.depths, reverse=True):
            for name, c, healed in METHODS:
                gone, undo, t_solve, fit = choice[(c, d)], [], 0.0, None
                if healed:
                    t0 = time.perf_counter()
                    fit = fit_healing(pruner.model, gone, ids, mask, ridge=a.ridge, statistics=stats)
                    t_solve = time.perf_counter() - t0
                    undo = fold_healing(pruner.model, fit)
                try:
                    nll = pruner.evaluate(gone, input_ids=held_ids)
                    cal_healed = pruner.evaluate(gone) if healed else None  # what save_healed compares on the calibration
                finally: unfold_healing(undo)
                cal_plain = pruner.evaluate(gone) if healed else None
                rows.append(dict(method=name, depth=d, deleted=gone, ppl=math.exp(nll), solve=t_solve,
                                 cal=(cal_plain, cal_healed), kept=None if not healed else cal_healed <= cal_plain,
                                 unhealed=[] if fit is None else [f"{r.first}..{r.last}" for r in fit.runs if r.T is None]))
                print(f"{d:3d} {name:32s} {math.exp(nll):9.2f}  {gone}  calibration {rows[-1]['cal']}", flush=True)
    names = [m for m, _, _ in METHODS]
    best = {d: min(r['ppl'] for r in rows if r['depth'] == d) for d in a.depths}
    table = [f"| blocks kept | {' | '.join(names)} |", f"|---:|{'---:|' * len(names)}",
             f"| {L} (full) | {' | '.join(f'{math.exp(base):.2f}' for _ in names)} |"]
    for d in sorted(a.depths, reverse=True):
        cells = {r['method']: r for r in rows if r['depth'] == d}
        table.append(f"| {d} | " + ' | '.join(f"**{cells[m]['ppl']:.2f}**" if cells[m]['ppl'] <= best[d] + 1e-9 else f"{cells[m]['ppl']:.2f}"
                                              for m in names) + ' |')
    rerank = ["| blocks kept | chosen (lowest healed calibration NLL) | its held-out perplexity | best healed held-out |", "|---:|---|---:|---:|"]
    for d in sorted(a.depths, reverse=True):  # the re-ranking: among the healed candidates, the calibration decides
        hs = [r for r in rows if r['depth'] == d and r['kept'] is not None]
        pick = min(hs, key=lambda r: r['cal'][1])
        rerank.append(f"| {d} | {pick['method']} | {pick['ppl']:.2f} | {min(r['ppl'] for r in hs):.2f} |")
    choices = ["| blocks kept | method | deleted | runs left unhealed | calibration NLL, unhealed -> healed | `save_healed` keeps the maps | solve + fold (s) |",
               "|---:|---|---|---|---|---|---:|"]
    for r in rows:
        if r['method'] == 'order2': continue
        choices.append(f"| {r['depth']} | {r['method']} | {r['deleted']} | {', '.join(r['unhealed']) or '-'} | "
                       f"{r['cal'][0]:.3f} -> {r['cal'][1]:.3f} | {'yes' if r['kept'] else '**no**'} | {r['solve']:.2f} |")
    D = pruner_width = stats[runs[0]]['gram'].shape[0]
    lines = ["# Healing deleted blocks on SmolLM2-135M-Instruct (32 x 128 calibration tokens)\n",
             f"SmolLM2-135M-Instruct (30 blocks, width {D}) from its Q4_1 GGUF, dequantized, float32. Calibration: 32 windows "
             f"of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs (seed 0), the order-2 fit's; held "
             f"out: {len(held_ids)} of the {n_windows} non-overlapping 128-token windows of the last 20%, evenly spread. "
             f"Ridge {a.ridge} (relative, towards the identity). {common.environment(a.threads)}.\n",
             "## Held-out perplexity (best in bold)\n", '\n'.join(table), "",
             "Healing = one least-squares map per maximal run of deleted blocks, folded into the MLP down-projection of "
             "the kept block before it (`layerkit.healing`). SmolLM2 ties its embeddings, so a run that starts at block 0 "
             "has no home and stays unhealed (listed below). The table applies every map as fitted; `save_healed` keeps "
             "them only where the pruned model's calibration NLL is no worse with them (the 'keeps' column below).\n",
             "## Cost\n",
             f"- one `fit_healing` call (order-2 at 24 blocks, capture on 4,096 calibration tokens in batches of 8 and solve): "
             f"{t_one:.1f} s;",
             f"- the shared capture for all {len(runs)} distinct runs of the {len(choice)} choices: {t_stats:.1f} s, "
             f"statistics {len(runs) * 2 * D * D * 8 / 2**20:.1f} MiB of float64 (2 D x D per run), peak RSS growth "
             f"{rss_stats:.0f} MiB (activations of one batch);",
             f"- each choice's solves and fold from those statistics: see the last column below. "
             f"{time.perf_counter() - t_all:.0f} s in all.\n",
             "## Re-ranking the candidates by their healed calibration NLL\n",
             "Each criterion proposes its blocks; heal each proposal and keep the one whose healed model has the lowest "
             "calibration NLL (no new measurements beyond one evaluation per candidate):\n", '\n'.join(rerank), "",
             "## Choices\n", '\n'.join(choices)]
    common.write_result('smollm2_healing.md', '\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
