"""Benchmark: `criteria.measured_search` on SmolLM2-135M-Instruct: the surrogate proposes swaps, the calibration NLL decides.

The split and the fit of bench/pruning/criteria_smollm2.py (32 x 128 calibration tokens from the first 80% of the shipped
WikiText-2 test paragraphs; its checkpoint in bench/.cache/smollm2, so the fit resumes at once; 64 held-out 128-token
windows of the last 20%). At 27, 24, 20 and 15 kept blocks: the order-2 greedy, its surrogate-only local search and
`measured_search` from the greedy (--tries swaps measured per step, at most --max-steps swaps), each measured on the
held-out windows; with the number of sets `measured_search` evaluated on the calibration and its wall time.
Usage: python bench/pruning/measured_search_smollm2.py [--tries 3] [--max-steps 5] [--threads 2]
Writes bench/pruning/results/smollm2_measured_search.md.
"""
from __future__ import annotations

import argparse
import math
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

DEPTHS = (27, 24, 20, 15)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--tries', type=int, default=3)
    ap.add_argument('--max-steps', type=int, default=5)
    ap.add_argument('--heldout', type=int, default=64)
    ap.add_argument('--depths', type=int, nargs='+', default=list(DEPTHS))
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import heldout_windows, local_search, measured_search
    _, heldout = common.wikitext_split()
    rows, t_all = [], time.perf_counter()
    with common.smollm2_pruner(32, require_checkpoint=True) as (pruner, res, _):
        held = heldout_windows(pruner.tokenizer, heldout, 128, max_windows=a.heldout)
        for d in a.depths:
            greedy = res.select(d)['deleted_layers']
            t0 = time.perf_counter()
            found, cal, n = measured_search(res, greedy, pruner.evaluate, tries=a.tries, max_steps=a.max_steps)
            secs = time.perf_counter() - t0
            for name, gone, c in (('order-2 greedy', greedy, pruner.evaluate(greedy)),
                                  ('local search (surrogate)', local_search(res, greedy), None),
                                  ('measured_search', found, cal)):
                if c is None: c = pruner.evaluate(gone)
                ppl = math.exp(pruner.evaluate(gone, input_ids=held))
                rows.append(dict(depth=d, method=name, deleted=gone, cal=c, ppl=ppl,
                                 measured=n if name == 'measured_search' else None, secs=secs if name == 'measured_search' else None))
                print(d, name, gone, f'{c:.3f}', f'{ppl:.2f}', flush=True)
    lines = ["# `measured_search` on SmolLM2-135M-Instruct (32 x 128 calibration tokens)\n",
             f"The split and fit of bench/pruning/criteria_smollm2.py; held out: {len(held)} windows of 128 tokens. measured_search "
             f"from the order-2 greedy, {a.tries} swaps measured per step (the surrogate's best), at most {a.max_steps} swaps. "
             f"SLEB's held-out perplexity for comparison (bench/pruning/results/smollm2_pruning_32x128.md): 69.76 / 109.23 / 199.05 / "
             f"547.85 at 27 / 24 / 20 / 15. {common.environment(a.threads)}. {time.perf_counter() - t_all:.0f} s in all.\n",
             "| blocks kept | method | deleted | calibration NLL | held-out perplexity | sets measured | seconds |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        secs = '-' if r['secs'] is None else f"{r['secs']:.0f}"
        lines.append(f"| {r['depth']} | {r['method']} | {r['deleted']} | {r['cal']:.3f} | {r['ppl']:.2f} | "
                     f"{r['measured'] if r['measured'] is not None else '-'} | {secs} |")
    common.write_result('smollm2_measured_search.md', '\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
