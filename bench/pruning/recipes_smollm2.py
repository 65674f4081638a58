"""Benchmark: pruning recipes on SmolLM2-135M-Instruct (30 blocks): one-shot and re-fitted order-2, SLEB, Block Influence,
each without and with Prune&Comp's magnitude compensation, on held-out WikiText-2 (issue 32).

The model, the split and the one-shot fit are those of bench/pruning/criteria_smollm2.py (`common.smollm2_pruner`:
--n-sequences windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs, seed 0; the fit is
resumed from its checkpoint under bench/.cache/smollm2). Every choice is measured on --heldout non-overlapping
128-token windows of the last 20% (perplexity = exp of the token-weighted mean NLL).

Recipes (X + comp: the cut X chose, with the compensation of that cut folded in once, its scales read off the full
model's calibration states; `layerkit.compensation.compensate`):
- order2: the one-shot fit's greedy (`Order2Result.select`);
- refit-k: `layerkit.refit.refit_order2` with refit_every=k (--refit-every), one run per depth, the rounds shared
  through their checkpoints;
- refit-k + comp in loop: the same with compensate=True (each round compensates before the next measures);
- refit-checked: refit-k with max_error=--max-error (a round takes only the longest prefix of its k deletions that the
  surrogate predicts within that many nats of the measured calibration NLL, then re-fits);
- sleb: SLEB's iterative re-measurement (`PruningCriteria`, 'iterative');
- prune&comp: SLEB's loop with the compensation folded in after each deletion (Prune&Comp), written here;
- block_influence: ShortGPT's Block Influence.
Cost: block evaluations of the choice (capture passes included) and the wall time of each recipe.
Usage: python bench/pruning/recipes_smollm2.py [--n-sequences 32] [--heldout 64] [--depths 27 24 20 15]
       [--refit-every 3] [--max-error 0.01] [--threads 2] [--recipes ...] [--tag TAG]
Writes bench/pruning/results/smollm2_recipes_<n>x128[_TAG].md (and prints it).
"""
from __future__ import annotations

import argparse
import math
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.refit_error import rounds_table

DEPTHS = (27, 24, 20, 15)
RECIPES = ('order2', 'order2+comp', 'refit', 'refit+comp', 'refit+comp-in-loop', 'refit-checked', 'sleb', 'sleb+comp', 'prune&comp',
           'block_influence', 'block_influence+comp')


def _ppl(nll: float) -> float: return math.exp(nll)


def _prune_and_comp(model, layer_path, ids, mask, n_delete, held, depths):
    "Prune&Comp: delete the block whose single deletion costs least on the model pruned (and compensated) so far, fold the compensation, repeat; held-out NLL at `depths`."
    from layerkit.compensation import compensate
    from layerkit.deletion import remove_blocks, restore_blocks
    from layerkit.hub import find_layers
    from layerkit.order2 import PrefixEngine, deletion_nll
    L = len(find_layers(model, layer_path)[1])
    alive, order, undo, evals, out = list(range(L)), [], [], 0, {}
    try:
        for step in range(n_delete):
            eng = PrefixEngine(model, ids, layer_path, 'nll', None, mask)
            vals = dict(eng.measure([(i,) for i in range(len(alive))]))
            evals += eng.block_evaluations
            best = min(range(len(alive)), key=lambda i: (vals[(i,)], i))
            compensate(model, [best], hidden_states=eng.hidden_states, attention_mask=mask, layer_path=layer_path)
            undo.append(remove_blocks(model, [best], layer_path))
            order.append(alive.pop(best))
            if L - len(order) in depths:
                out[L - len(order)] = dict(deleted=sorted(order), nll=deletion_nll(model, held, [], layer_path), evals=evals)
    finally:
        for u in reversed(undo): restore_blocks(model, u)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n-sequences', type=int, default=32)
    ap.add_argument('--heldout', type=int, default=64, help='held-out 128-token windows (evenly spread over the last 20%%)')
    ap.add_argument('--depths', type=int, nargs='+', default=list(DEPTHS))
    ap.add_argument('--refit-every', type=int, default=3, help='deletions between re-fits of order-2')
    ap.add_argument('--max-error', type=float, default=0.01, help="refit-checked's max_error (nats)")
    ap.add_argument('--tag', default='', help='suffix of the result file (smollm2_recipes_<n>x128_<tag>.md), so a partial run keeps the full table')
    ap.add_argument('--recipes', nargs='+', default=list(RECIPES), choices=RECIPES)
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import torch
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.compensation import compensate
    from layerkit.criteria import PruningCriteria, heldout_windows
    from layerkit.deletion import without_blocks
    from layerkit.order2 import deletion_nll
    from layerkit.pruning import Order2Pruner
    from layerkit.refit import refit_order2
    _, held_texts = common.wikitext_split()
    depths, k, n = sorted(set(a.depths), reverse=True), a.refit_every, a.n_sequences
    rows, cost, t_all = {}, {}, time.perf_counter()
    with common.smollm2_pruner(n, progress=True) as (pruner, res, t_fit):
        model, path = pruner.model, pruner.layer_path
        L, n_max = res.n_layers, res.n_layers - min(depths)
        held = heldout_windows(pruner.tokenizer, held_texts, 128, max_windows=a.heldout)
        ids, mask = pruner.calibration
        states = [h.clone() for h in pruner.hidden_states]  # the full model's calibration states (the compensation's scales)
        orig = {name: t.detach().clone() for name, t in model.state_dict().items()}
        restore = lambda: model.load_state_dict(orig)
        heldout = lambda gone: deletion_nll(model, held, gone, path)
        full = heldout([])
        fit_evals = res.metadata.get('total_block_evaluations', res.block_evaluations)

        def comp_nll(gone):
            "Held-out NLL of the cut `gone` with its compensation folded in once (then the weights are put back)."
            try:
                rec = compensate(model, gone, hidden_states=states, attention_mask=mask, layer_path=path)
                return heldout(gone), rec
            finally: restore()

        choice = {}  # recipe -> depth -> deleted
        t0 = time.perf_counter()
        choice['order2'] = {d: res.select(d)['deleted_layers'] for d in depths}
        cost['order2'] = (fit_evals, t_fit)
        crit = PruningCriteria(pruner, common.smollm2_checkpoint(n, 'iterative'))
        if {'sleb', 'sleb+comp'} & set(a.recipes):
            t0 = time.perf_counter()
            choice['sleb'] = {d: crit.deleted('iterative', d) for d in depths}
            cost['sleb'] = (crit.block_evaluations('iterative'), time.perf_counter() - t0)
        if {'block_influence', 'block_influence+comp'} & set(a.recipes):
            t0 = time.perf_counter()
            choice['block_influence'] = {d: crit.deleted('block_influence', d) for d in depths}
            cost['block_influence'] = (crit.block_evaluations('block_influence'), time.perf_counter() - t0)
        if {'refit', 'refit+comp'} & set(a.recipes):
            t0 = time.perf_counter()
            run = refit_order2(pruner, n_max, refit_every=min(k, n_max), progress=True,
                               checkpoint_path=common.smollm2_checkpoint(n, f'refit{k}'))
            choice['refit'] = {d: run.select(d)['deleted_layers'] for d in depths}
            cost['refit'] = (run.block_evaluations, time.perf_counter() - t0)
            rows['refit-rounds'] = run.rounds
        if 'refit-checked' in a.recipes:
            t0 = time.perf_counter()
            run = refit_order2(pruner, n_max, refit_every=min(k, n_max), progress=True, max_error=a.max_error,
                               checkpoint_path=common.smollm2_checkpoint(n, f'refit{k}-e{a.max_error:g}'))
            rows['refit-checked'] = {d: dict(deleted=g, nll=heldout(g), evals=run.block_evaluations)
                                     for d, g in ((d, run.select(d)['deleted_layers']) for d in depths)}
            cost['refit-checked'] = (run.block_evaluations, time.perf_counter() - t0)
            rows['refit-checked-rounds'] = run.rounds
        for r in ('order2', 'sleb', 'block_influence', 'refit'):
            if r in choice and r in a.recipes:
                rows[r] = {d: dict(deleted=g, nll=heldout(g), evals=cost[r][0]) for d, g in choice[r].items()}
            if r in choice and f'{r}+comp' in a.recipes:
                t0 = time.perf_counter()
                rows[f'{r}+comp'] = {d: dict(deleted=g, nll=comp_nll(g)[0], evals=cost[r][0] + L) for d, g in choice[r].items()}
                cost[f'{r}+comp'] = (cost[r][0] + L, cost[r][1] + time.perf_counter() - t0)
        if 'refit+comp-in-loop' in a.recipes:
            t0, out, evals = time.perf_counter(), {}, 0
            for d in depths:  # one run per depth (the compensation is that of the whole path); rounds resume from the checkpoints
                sub = Order2Pruner(model, tokenizer=pruner.tokenizer)  # round 0: the one-shot fit, read from its checkpoint
                sub.fit(texts=common.wikitext_split()[0], n_sequences=n, sequence_length=128, seed=0, progress=False,
                        checkpoint_path=common.smollm2_checkpoint(n))
                try:
                    run = refit_order2(sub, L - d, refit_every=min(k, L - d), compensate=True, progress=True,
                                       checkpoint_path=common.smollm2_checkpoint(n, f'refit{k}-comp'))
                    evals = max(evals, run.block_evaluations + sum(r_['n_blocks'] for r_ in run.rounds))  # + a capture per round
                    out[d] = dict(deleted=sorted(run.delete_order), nll=heldout(run.delete_order), evals=evals)
                finally: restore()
            rows['refit+comp-in-loop'] = out
            cost['refit+comp-in-loop'] = (evals, time.perf_counter() - t0)
        if 'prune&comp' in a.recipes:
            t0 = time.perf_counter()
            try: out = _prune_and_comp(model, path, ids, mask, n_max, held, set(depths))
            finally: restore()
            for d in out: out[d]['evals'] = out[min(out)]['evals']
            rows['prune&comp'] = out
            cost['prune&comp'] = (out[min(out)]['evals'], time.perf_counter() - t0)
        n_windows = len(heldout_windows(pruner.tokenizer, held_texts, 128))
    names = [r for r in a.recipes if r in rows]
    best = {d: min(rows[r][d]['nll'] for r in names) for d in depths}
    cell = lambda r, d: (f"**{_ppl(rows[r][d]['nll']):.1f}**" if rows[r][d]['nll'] == best[d] else f"{_ppl(rows[r][d]['nll']):.1f}")
    lines = [f"# Pruning recipes on SmolLM2-135M-Instruct ({n} x 128 calibration tokens, {len(held)} held-out windows)\n",
             f"{time.strftime('%Y-%m-%d')}. SmolLM2-135M-Instruct (30 blocks) from its Q4_1 GGUF, dequantized, float32, CPU. "
             f"Calibration: {n} windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs (seed 0); "
             f"held out: {len(held)} of the {n_windows} non-overlapping 128-token windows of the last 20%, evenly spread. "
             f"Full model: held-out perplexity {_ppl(full):.1f}. refit-k: k = {k}. {common.environment(a.threads)}. "
             f"{time.perf_counter() - t_all:.0f} s in all.\n",
             "## Held-out perplexity (best in bold)\n",
             common.md_table(['recipe', *[f'{d} kept' for d in depths], 'block evaluations', 'seconds'],
                             ([r, *[cell(r, d) for d in depths], f'{cost[r][0]:,}', f'{cost[r][1]:.0f}'] for r in names),
                             'l' + 'r' * (len(depths) + 2)),
             "\nblock evaluations: of the deepest choice (the fits, SLEB's re-measurements, the compensation's capture passes; "
             "the held-out evaluation not counted). seconds: wall time of the recipe's choice (the one-shot fit: 0 when resumed "
             "from its checkpoint).\n",
             "## Choices\n",
             common.md_table(['blocks kept', 'recipe', 'deleted', 'held-out NLL'],
                             ([d, r, rows[r][d]['deleted'], f"{rows[r][d]['nll']:.4f}"] for d in depths for r in names), 'rllr')]
    if 'refit-rounds' in rows:
        lines += ["\n## Re-fitted order-2: the surrogate's error per round (calibration NLL)\n", rounds_table(rows['refit-rounds'])]
    if 'refit-checked-rounds' in rows:
        lines += [f"\n## refit-checked (max_error = {a.max_error:g}): the surrogate's error per round (calibration NLL)\n",
                  "prefixes tried: each prefix of the round's greedy deletions measured, longest first, with its error "
                  "(predicted - measured); the round takes the first within max_error.\n", rounds_table(rows['refit-checked-rounds'])]
    out = common.write_result(f"smollm2_recipes_{n}x128{f'_{a.tag}' if a.tag else ''}.md", '\n'.join(lines))
    print('\n'.join(lines))
    print(f'written: {out}')


if __name__ == '__main__':
    main()
