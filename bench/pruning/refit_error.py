"""Benchmark: the re-fitted order-2 surrogate's prediction error as the cut deepens, with and without `max_error` (issue 32).

Issue 32 asked that the surrogate's prediction error against the measured objective stay as small at 15 blocks as at
27. `refit_order2(pruner, n, refit_every=k)` re-fits order-2 on the pruned model every k deletions; each round
predicts the calibration NLL of its k deletions from its single and pair measurements and then measures it. With
`max_error=e` a round takes only the longest prefix of its k deletions predicted within e nats (one deletion is always
exact) and re-fits after that. This script runs both down to the shallowest depth, prints each round's prediction,
measurement and error, the held-out perplexity of each cut and of SLEB's, and the block evaluations of each.

Models as bench/pruning/recipes.py (`--model smollm2|gemma3`, from the GGUF, float32, CPU); calibration: --n-sequences
windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs (seed 0); held out: --heldout
128-token windows of the last 20%. Fits and rounds are checkpointed under bench/.cache/<model>/ (a re-run resumes).
Usage: python bench/pruning/refit_error.py --model smollm2|gemma3 [--n-sequences 4] [--heldout 32]
       [--refit-every 3] [--max-error 0.01] [--depths ...] [--threads 1]
Writes bench/pruning/results/refit_error_<model>_<n>x128.md (and prints it).
"""
from __future__ import annotations

import argparse
import math
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

MODELS = {'smollm2': ('SmolLM2-135M-Instruct', (27, 24, 20, 15)), 'gemma3': ('Gemma 3 270M (Q4_K_M)', (15, 13, 11, 9))}


def rounds_table(rounds: list[dict]) -> str:
    "One row per round: blocks, deletions, predicted and measured calibration NLL, the error, the prefixes tried, the cost."
    return common.md_table(
        ['round', 'blocks', 'deletes', 'predicted', 'measured', 'error', 'prefixes tried (n: error)', 'block evaluations'],
        ([x['round'], x['n_blocks'], x['deleted'], f"{x['predicted_nll']:.4f}", f"{x['measured_nll']:.4f}",
          f"{x['predicted_nll'] - x['measured_nll']:+.4f}",
          ', '.join(f"{t['n']}: {t['predicted'] - t['measured']:+.4f}" for t in x.get('tried', [])) or '',
          f"{x['block_evaluations']:,}"] for x in rounds), 'rrlrrrlr')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=MODELS, default='smollm2')
    ap.add_argument('--n-sequences', type=int, default=4)
    ap.add_argument('--heldout', type=int, default=32)
    ap.add_argument('--refit-every', type=int, default=3)
    ap.add_argument('--max-error', type=float, default=0.01)
    ap.add_argument('--depths', type=int, nargs='+')
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import PruningCriteria, heldout_windows
    from layerkit.order2 import deletion_nll
    from layerkit.pruning import Order2Pruner
    from layerkit.refit import refit_order2
    title, default_depths = MODELS[a.model]
    depths, n, k = sorted(set(a.depths or default_depths), reverse=True), a.n_sequences, a.refit_every
    cache = common.ROOT/'bench'/'.cache'/a.model
    cache.mkdir(parents=True, exist_ok=True)
    calib, held_texts = common.wikitext_split()
    t_all, runs, cost = time.perf_counter(), {}, {}
    with Order2Pruner(common.gguf_path(a.model), dtype='float32', device_map=None) as pruner:
        t0 = time.perf_counter()
        res = pruner.fit(texts=calib, n_sequences=n, sequence_length=128, seed=0, progress=True,
                         checkpoint_path=cache/f'order2-{n}x128.json')
        cost['order-2 (one-shot)'] = (res.metadata.get('total_block_evaluations', res.block_evaluations), time.perf_counter() - t0)
        L, n_max, path = res.n_layers, res.n_layers - min(depths), pruner.layer_path
        held = heldout_windows(pruner.tokenizer, held_texts, 128, max_windows=a.heldout)
        cuts = {'order-2 (one-shot)': {d: res.select(d)['deleted_layers'] for d in depths}}
        for name, e in ((f'refit every {k}', None), (f'refit every {k}, max_error {a.max_error:g}', a.max_error)):
            t0 = time.perf_counter()
            run = refit_order2(pruner, n_max, refit_every=min(k, n_max), max_error=e, progress=True,
                               checkpoint_path=cache/f"refit{k}{'' if e is None else f'-e{e:g}'}-{n}x128.json")
            runs[name], cost[name] = run, (run.block_evaluations, time.perf_counter() - t0)
            cuts[name] = {d: run.select(d)['deleted_layers'] for d in depths}
        t0 = time.perf_counter()
        crit = PruningCriteria(pruner, cache/f'iterative-{n}x128.json')
        cuts['SLEB'] = {d: crit.deleted('iterative', d) for d in depths}
        cost['SLEB'] = (crit.block_evaluations('iterative'), time.perf_counter() - t0)
        full = deletion_nll(pruner.model, held, [], path)
        ppl = {m: {d: math.exp(deletion_nll(pruner.model, held, c[d], path)) for d in depths} for m, c in cuts.items()}
    best = {d: min(p[d] for p in ppl.values()) for d in depths}
    lines = [f"# Re-fitted order-2: the surrogate's error as the cut deepens, {title} ({n} x 128 calibration tokens)\n",
             f"{time.strftime('%Y-%m-%d')}. {title} ({L} blocks) from its GGUF, dequantized, float32, CPU. Calibration: {n} "
             f"windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs (seed 0); held out: "
             f"{len(held)} 128-token windows of the last 20% (full model: perplexity {math.exp(full):.1f}). "
             f"{common.environment(a.threads)}. {time.perf_counter() - t_all:.0f} s in all. Produced by "
             f"bench/pruning/refit_error.py.\n",
             "## Held-out perplexity and cost (best in bold)\n",
             common.md_table(['method', *[f'{d} kept' for d in depths], 'block evaluations', 'seconds'],
                             ([m, *[f"**{p[d]:.1f}**" if p[d] == best[d] else f"{p[d]:.1f}" for d in depths],
                               f"{cost[m][0]:,}", f"{cost[m][1]:.0f}"] for m, p in ppl.items()),
                             'l' + 'r' * (len(depths) + 2)),
             "\nblock evaluations: of the deepest cut (each round's fit, capture passes included; with max_error also the "
             "full passes that check a round's prefixes; the one-shot fit's when resumed from its checkpoint). seconds: "
             "wall time here (0 when resumed).\n"]
    for name, run in runs.items():
        lines += [f"## {name}: each round's prediction against the measured calibration NLL\n", rounds_table(run.rounds), '']
    out = common.write_result(f'refit_error_{a.model}_{n}x128.md', '\n'.join(lines))
    print('\n'.join(lines))
    print(f'written: {out}')


if __name__ == '__main__':
    main()
