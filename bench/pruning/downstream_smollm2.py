"""Benchmark: a check beyond perplexity for every pruning criterion on SmolLM2-135M-Instruct, a cloze multiple choice built from held-out text.

Why this check: perplexity rewards getting every token a little more right; a pruned model a user runs must still
pick the right word. No benchmark data can be downloaded here, so the items are built from the shipped WikiText-2 test
split, from the last 20% of its paragraphs (the calibration uses the first 80%; the same split as
bench/pruning/criteria_smollm2.py). An item is a sentence whose last word is one token of the model's vocabulary (with its
leading space): the context is the sentence up to that word, the choices are that word and 3 distractors, the last
words of 3 other items (so answers and distractors share one frequency distribution), in a seeded random order. The
model picks the choice with the highest next-token log-probability after the context (one forward per item). Chance
is 25%. Also: greedy completions of three fixed prompts, 12 tokens each.
The choices are each criterion's at 27, 24, 20 and 15 kept blocks, from the fit of bench/pruning/criteria_smollm2.py (its
checkpoint in bench/.cache/smollm2; SLEB's `iterative` criterion only when its checkpoint is complete).
Usage: python bench/pruning/downstream_smollm2.py [--items 300] [--threads 2]
Writes bench/pruning/results/smollm2_downstream.md.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

DEPTHS = (27, 24, 20, 15)
PROMPTS = ('The capital of France is', 'Water boils at a temperature of', 'The first president of the United States was')


def items(tok, paragraphs: list[str], n: int, seed: int = 0) -> list[tuple[list[int], list[int], int]]:
    "(context ids, 4 candidate token ids, index of the answer) for `n` sentences ending in a one-token word."
    sents = [s.strip() for p in paragraphs for s in re.split(r'(?<=[.!?])\s+', p)]
    found = []
    for s in sents:
        m = re.match(r'^(.{40,300}?) ([A-Za-z]{3,})\s*[.!?]$', s)
        if not m: continue
        ids = tok(' ' + m[2], add_special_tokens=False)['input_ids']
        if len(ids) == 1: found.append((tok(m[1], add_special_tokens=False)['input_ids'], ids[0]))
    rng = random.Random(seed)
    rng.shuffle(found)
    found = found[:n]
    out = []
    for i, (ctx, ans) in enumerate(found):
        pool = [a for _, a in found if a != ans]
        cands = [ans] + rng.sample(sorted(set(pool)), 3)
        rng.shuffle(cands)
        out.append((ctx, cands, cands.index(ans)))
    return out


def accuracy(model, its) -> float:
    "Share of items whose answer gets the highest next-token log-probability among the 4 choices."
    import torch
    right = 0
    with torch.inference_mode():
        for ctx, cands, ans in its:
            logits = model(input_ids=torch.tensor([ctx]), use_cache=False).logits[0, -1]  # (V,)
            right += int(int(torch.argmax(logits[cands])) == ans)
    return right / len(its)


def completions(model, tok) -> list[str]:
    import torch
    outs = []
    with torch.inference_mode():
        for p in PROMPTS:
            ids = tok(p, return_tensors='pt')
            g = model.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.eos_token_id)
            outs.append(tok.decode(g[0, ids['input_ids'].shape[1]:], skip_special_tokens=True).replace('\n', ' ').strip())
    return outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--items', type=int, default=300)
    ap.add_argument('--depths', type=int, nargs='+', default=list(DEPTHS))
    ap.add_argument('--n-sequences', type=int, default=32, help='the fit to read (its checkpoint must exist)')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import CRITERIA, PruningCriteria
    from layerkit.deletion import without_blocks
    _, held = common.wikitext_split()
    it_ck = common.smollm2_checkpoint(a.n_sequences, 'iterative')
    t_all = time.perf_counter()
    with common.smollm2_pruner(a.n_sequences, require_checkpoint=True) as (pruner, _, _):
        crit = PruningCriteria(pruner, checkpoint_path=it_ck)
        names = [c for c in CRITERIA if c != 'iterative']
        if it_ck.exists() and len(json.loads(it_ck.read_text())['steps']) >= pruner.n_layers - min(a.depths): names.append('iterative')
        model, tok = pruner.model, pruner.tokenizer
        its = items(tok, held, a.items)
        full = accuracy(model, its), completions(model, tok)
        rows, gens = [], {}
        for k in a.depths:
            for c in names:
                d = crit.deleted(c, k)
                with without_blocks(model, d):
                    acc = accuracy(model, its)
                    gens[(k, c)] = completions(model, tok) if c in ('order2', 'block_influence') else None
                cal = float(pruner.evaluate(d))  # the calibration objective measured, against the surrogate's prediction
                rows.append(dict(k=k, criterion=c, deleted=d, acc=acc, cal=cal, pred=float(pruner.result.predict(d))))
                print(k, c, d, f'{acc:.3f}', f'{cal:.3f}', flush=True)
    n = len(its)
    se = lambda p: (p * (1 - p) / n) ** .5
    lines = [f"# A cloze check beyond perplexity: SmolLM2-135M-Instruct pruned by each criterion\n",
             f"{n} items from the last 20% of the shipped WikiText-2 test paragraphs (held out from the calibration): "
             f"the last word of a sentence (one token) against 3 distractors, chosen by next-token log-probability; chance "
             f"0.25, one standard error about {se(full[0]):.3f}. Choices from the {a.n_sequences} x 128 fit of "
             f"bench/pruning/criteria_smollm2.py. {common.environment(a.threads)}. {time.perf_counter() - t_all:.0f} s in all.\n",
             "## Cloze accuracy (best in bold)\n",
             '| blocks kept | ' + ' | '.join(names) + ' |', '|---:|' + '---:|' * len(names),
             f'| 30 (full) | ' + ' | '.join(f'{full[0]:.3f}' for _ in names) + ' |']
    for k in a.depths:
        accs = {r['criterion']: r['acc'] for r in rows if r['k'] == k}
        best = max(accs.values())
        lines.append(f'| {k} | ' + ' | '.join(f"**{accs[c]:.3f}**" if accs[c] == best else f'{accs[c]:.3f}' for c in names) + ' |')
    lines += ['', '## The surrogate against the measured calibration NLL\n',
              'Is a choice that looks good on the surrogate but bad on held-out text a surrogate error (the measured '
              'calibration NLL is worse too) or over-fitting to the calibration (the measured calibration NLL is better)?\n',
              '| blocks kept | criterion | deleted | surrogate | measured on the calibration | surrogate error |',
              '|---:|---|---|---:|---:|---:|']
    lines += [f"| {r['k']} | {r['criterion']} | {r['deleted']} | {r['pred']:.3f} | {r['cal']:.3f} | {r['pred'] - r['cal']:+.3f} |"
              for r in rows]
    lines += ['', '## Greedy completions (12 tokens)\n', '| model | ' + ' | '.join(f'"{p}"' for p in PROMPTS) + ' |',
              '|---|' + '---|' * len(PROMPTS), '| full (30 blocks) | ' + ' | '.join(full[1]) + ' |']
    for (k, c), g in gens.items():
        if g: lines.append(f'| {c}, {k} blocks | ' + ' | '.join(x.replace('|', '/') for x in g) + ' |')
    common.write_result('smollm2_downstream.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
