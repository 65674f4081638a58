"""Benchmark: SLEB healed, and the checked compensation, on both decoder families (issue 32).

What `bench/pruning/recipes.py` measures for the recipes, for three of them: SLEB (`sleb`), SLEB then a least-squares
map per deleted run (`sleb+heal`; on Gemma 3's post-norm blocks the map is diagonal, folded into
`post_feedforward_layernorm`), and `checked-comp+heal` (Prune&Comp's loop, each deletion's compensation kept only where
it lowers the calibration objective, then the maps). Same model loading, calibration (--n-sequences windows of 128
tokens, seed 0), held-out windows (32) and cloze (200 items) as that script, so its tables and these line up.
Healing as `prune_with_recipe` does it: fitted on the unpruned (compensated) model, folded into the pruned one and
kept only if it lowers the calibration NLL (`fold_if_better`'s rule).

The loops use layerkit's own `sleb_steps` directly, on a pruner that was only calibrated (`Order2Pruner.calibrate`):
these recipes never read the order-2 fit, and `prune_with_recipe` and `layerkit prune` no longer pay for one either.
With --healed-criteria it adds Block Influence + heal and ReplaceMe (the angular-distance cut healed) on the cuts that
`bench/pruning/recipes.py` recorded in its table (healing there needed post-norm support when that table was made).
Usage: python bench/pruning/checked.py --model gemma3|smollm2 [--threads 1] [--healed-criteria]
       python bench/pruning/checked.py --model gemma3 --report   (the table again from bench/.cache)
Writes bench/pruning/results/recipes_<model>_<n>x128_checked.md (and prints it); the raw steps go to bench/.cache/<model>/.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import time
import warnings
from contextlib import contextmanager
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

MODELS = {'smollm2': ('SmolLM2-135M-Instruct', 16, (27, 24, 20, 15)), 'gemma3': ('Gemma 3 270M (Q4_K_M)', 8, (15, 13, 11, 9))}


@contextmanager
def healed_model(model, path: str, cut: list[int], ids, mask):
    "`model` without `cut`, its least-squares maps (fitted on the unpruned model) folded where they lower the calibration NLL (`fold_if_better`'s rule): yields (healed?, calibration NLL, each map's form); all put back on exit."
    from layerkit.deletion import without_blocks
    from layerkit.healing import fit_healing, fold_healing, unfold_healing
    from layerkit.order2 import deletion_nll
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        h = fit_healing(model, cut, ids, mask, layer_path=path)
    with without_blocks(model, cut, path):
        plain = deletion_nll(model, ids, [], path)
        undo = fold_healing(model, h, path)
        cal = deletion_nll(model, ids, [], path)
        kept = cal <= plain
        if not kept: unfold_healing(undo); undo = []
        try: yield kept, min(cal, plain), [x.diagonal for x in h.runs if x.T is not None]
        finally: unfold_healing(undo)


def heal_and_measure(model, path: str, cut: list[int], ids, mask, held, its, pre) -> dict:
    "Heal `cut` (`healed_model`), measure held-out NLL and cloze; weights put back."
    from pruning.recipes import cloze
    from layerkit.order2 import deletion_nll
    with healed_model(model, path, cut, ids, mask) as (kept, cal, forms):
        return dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre), deleted=sorted(cut), healed=kept, cal=cal, forms=forms)


def choose_by_rule(cuts: list, cal) -> list:
    "`choose_healed`'s rule on given cuts (in its order: order-2's, Block Influence's, angular distance's): the lowest healed calibration NLL `cal(cut)`, ties the first."
    return cuts[min(range(len(cuts)), key=lambda i: (cal(cuts[i]), i))]


def verdict_table(by: dict, names: list, depths, recipe: str) -> str:
    "The recipe against the best other method per depth: perplexity, cloze, the paired test; `by[d, name]` has nll, ok and test."
    ppl, acc = (lambda r: math.exp(r['nll'])), (lambda r: r['ok'].mean())
    def verdict(d):
        me, others = by[d, recipe], [by[d, n] for n in names if n != recipe]
        bp, bc = min(others, key=ppl), max(others, key=acc)
        worse = [r['method'] for r in others if r['test']['verdict'] == 'loses']
        return [d, f"{ppl(me):,.1f}", f"{ppl(bp):,.1f} {bp['method']}", f"{100 * (ppl(me) / ppl(bp) - 1):+.1f}%", f"{acc(me):.3f}",
                f"{acc(bc):.3f} {bc['method']}", f"{100 * (acc(me) - acc(bc)):+.1f}", f"{bc['test']['p_value']:.3f}", ', '.join(worse) or 'none']
    return common.md_table(['blocks kept', f'{recipe} ppl', 'best other ppl', 'recipe vs best', f'{recipe} cloze', 'best other cloze',
                            'difference (points)', 'McNemar p', 'significantly better cloze than the recipe'],
                           (verdict(d) for d in depths), 'rrlrrlrrl')


def calibrated(model_name: str, n: int | None = None, windows: int = 32) -> tuple:
    "(pruner, held-out windows, held-out paragraphs): the model from its GGUF in float32, its pruner calibrated on n x 128 tokens of the first 80% (seed 0; None: the model's budget in MODELS), `windows` windows of the last 20%."
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import heldout_windows
    from layerkit.pruning import Order2Pruner
    n = n or MODELS[model_name][1]
    calib, held_texts = common.wikitext_split()
    p = Order2Pruner(common.gguf_path(model_name), dtype='float32', device_map=None)
    p.calibrate(texts=calib, n_sequences=n, sequence_length=128, seed=0)  # fit's own draw, without the order-2 measurements
    return p, heldout_windows(p.tokenizer, held_texts, 128, max_windows=windows), held_texts


def run(model_name: str) -> dict:
    "Both loops, then every depth's SLEB, SLEB healed and checked-comp healed: held-out NLL, cloze, what was kept."
    from pruning.downstream_smollm2 import items
    from pruning.recipes import cloze
    from layerkit.deletion import without_blocks
    from layerkit.objectives import bos_prefix
    from layerkit.order2 import deletion_nll
    from layerkit.recipes import replay_steps, sleb_steps
    _, n, depths = MODELS[model_name]
    p, held, held_texts = calibrated(model_name)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    ids, mask = p.calibration
    L = p.n_layers
    its, pre = items(tok, held_texts, 200), bos_prefix(tok)
    orig = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rows = {}

    def measure(name, d, cut):
        with without_blocks(model, cut, path):
            r = dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre), deleted=sorted(cut))
        rows.setdefault(name, {})[d] = r
        print(f"{name:22s} {d:3d} kept ppl {math.exp(r['nll']):9.2f} cloze {r['cloze']:.3f} {r['deleted']}", flush=True)

    def healed(name, d, cut):
        r = heal_and_measure(model, path, cut, ids, mask, held, its, pre)
        rows.setdefault(name, {})[d] = r
        print(f"{name:22s} {d:3d} kept ppl {math.exp(r['nll']):9.2f} cloze {r['cloze']:.3f} {r['deleted']} healed={r['healed']} diag={r['forms']}", flush=True)

    out = {}
    for label, comp, checked in (('sleb', False, False), ('checked-comp', True, True)):
        t0 = time.time()
        steps = sleb_steps(p, L - min(depths), comp, checked=checked)
        out[label] = dict(steps=steps, seconds=time.time() - t0, evals=sum(s['block_evaluations'] for s in steps))
        print(label, 'loop', round(time.time() - t0), 's', out[label]['evals'], 'block evaluations', flush=True)
        for s in steps: print('  ', s['deleted'], round(s['value'], 4), s.get('compensated_value'), s['scale'], flush=True)
        model.load_state_dict(orig)
        for d in depths:
            k = L - d
            cut = sorted(s['deleted'] for s in steps[:k])
            if comp:  # the kept folds of the first k steps, as prune_with_recipe's replay folds them
                replay_steps(model, steps[:k], path)
                healed(label + '+heal', d, cut)
                model.load_state_dict(orig)
            else:
                measure('sleb', d, cut)
                healed('sleb+heal', d, cut)
    full = dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre))
    return dict(rows=rows, full=full, L=L, peak_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                loops={k: dict(seconds=v['seconds'], evals=v['evals'], steps=v['steps']) for k, v in out.items()})


def healed_criteria(model_name: str, res: dict) -> dict:
    "Block Influence + heal and ReplaceMe (angular + heal) on the cuts `bench/pruning/recipes.py` recorded, healed as `run` heals."
    import re
    from pruning.downstream_smollm2 import items
    from layerkit.objectives import bos_prefix
    _, n, depths = MODELS[model_name]
    table = (common.results_dir('pruning')/f'recipes_{model_name}_{n}x128.md').read_text()
    cuts = {(m, int(d)): json.loads(c) for d, m, c in re.findall(r'^\| (\d+) \| (block influence|angular distance) \| (\[[\d, ]*\]) \|', table, re.M)}
    p, held, held_texts = calibrated(model_name)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    ids, mask = p.calibration
    its, pre = items(tok, held_texts, 200), bos_prefix(tok)
    for crit, name in (('block influence', 'block influence + heal'), ('angular distance', 'ReplaceMe (angular + LS map)')):
        for d in depths:
            cut = cuts[(crit, d)]
            r = res['rows'].setdefault(name, {})[str(d)] = heal_and_measure(model, path, cut, ids, mask, held, its, pre)
            print(f"{name:30s} {d:3d} kept ppl {math.exp(r['nll']):9.2f} cloze {r['cloze']:.3f} {cut} healed={r['healed']}", flush=True)
    return res


def _healed(row: dict) -> str:
    "How a row was healed: '' (not a healed method), 'no (fell back)', or each run's map form."
    if 'healed' not in row: return ''
    if not row['healed']: return 'no (fell back)'
    return ', '.join('diagonal' if f else 'full' for f in row['forms'])


def report(model_name: str, res: dict, threads: int) -> str:
    "The markdown tables of `run`'s record."
    title, n, depths = MODELS[model_name]
    rows, names = res['rows'], list(res['rows'])
    best_ppl = {d: min(rows[m][str(d)]['nll'] for m in names) for d in depths}
    best_cl = {d: max(rows[m][str(d)]['cloze'] for m in names) for d in depths}
    b = lambda s, on: f"**{s}**" if on else s
    steps = res['loops']['checked-comp']['steps']
    kept = [s['deleted'] for s in steps if s['scale'] is not None]
    cost = {'sleb': res['loops']['sleb'], 'sleb+heal': res['loops']['sleb'], 'checked-comp+heal': res['loops']['checked-comp']}
    capture = dict(evals=res.get('L', 0), seconds=0.0)  # the one-shot criteria: one capture pass of the full model
    cost.update({m: capture for m in names if m not in cost})
    lines = [f"# SLEB healed and the checked compensation on {title} ({n} x 128 calibration tokens, 32 held-out windows, 200 cloze items)\n",
             f"{time.strftime('%Y-%m-%d')}. `bench/pruning/checked.py --model {model_name}`: the calibration, held-out windows "
             f"and cloze of `bench/pruning/recipes.py` (whose table `recipes_{model_name}_{n}x128.md` has the other methods). "
             f"Full model: held-out perplexity {math.exp(res['full']['nll']):.1f}, cloze {res['full']['cloze']:.3f}. "
             f"{common.environment(threads)}. " + (f"Peak resident memory {res['peak_gib']:.1f} GiB." if "peak_gib" in res else "") + "\n",
             *(["Block Influence + heal and ReplaceMe (`--healed-criteria`): healed as the others, on the one-shot cuts that "
                f"`recipes_{model_name}_{n}x128.md` recorded (Block Influence and angular distance from the full model's states).\n"]
               if 'block influence + heal' in rows else []),
             "## Held-out perplexity (best of these in bold)\n",
             common.md_table(['method', *[f'{d} kept' for d in depths], 'block evaluations', 'loop seconds'],
                             ([m, *[b(f"{math.exp(rows[m][str(d)]['nll']):,.1f}", rows[m][str(d)]['nll'] == best_ppl[d]) for d in depths],
                               f"{cost[m]['evals']:,}", f"{cost[m]['seconds']:.0f}"] for m in names), 'l' + 'r' * (len(depths) + 2)),
             "\n## Cloze accuracy (best of these in bold)\n",
             common.md_table(['method', *[f'{d} kept' for d in depths]],
                             ([m, *[b(f"{rows[m][str(d)]['cloze']:.3f}", rows[m][str(d)]['cloze'] == best_cl[d]) for d in depths]] for m in names),
                             'l' + 'r' * len(depths)),
             f"\nblock evaluations and loop seconds: of the loop down to {min(depths)} blocks (the checked loop's include its one "
             f"extra measurement per step); healing adds one capture pass and two calibration evaluations per depth.\n",
             "## The checked compensation, step by step\n",
             f"Kept for {len(kept)} of {len(steps)} deletions (deleted blocks {kept}); calibration NLL of each deletion without and "
             "with its scale:\n",
             common.md_table(['step', 'deleted', 'without', 'with', 'scale', 'kept'],
                             ([i + 1, s['deleted'], f"{s['value']:.4f}", f"{s['compensated_value']:.4f}", f"{s['scale']:.4f}" if s['scale'] is not None else '-',
                               'yes' if s['scale'] is not None else 'no'] for i, s in enumerate(steps)), 'rrrrrl'),
             "\n## Choices\n",
             common.md_table(['blocks kept', 'method', 'deleted', 'held-out NLL', 'cloze', 'healed (form)'],
                             ([d, m, rows[m][str(d)]['deleted'], f"{rows[m][str(d)]['nll']:.4f}", f"{rows[m][str(d)]['cloze']:.3f}",
                               _healed(rows[m][str(d)])] for d in depths for m in names), 'rllrrl')]
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=MODELS, default='gemma3')
    ap.add_argument('--report', action='store_true', help='write the table from the cached record, measure nothing')
    ap.add_argument('--healed-criteria', action='store_true',
                    help="add Block Influence + heal and ReplaceMe, healed on the cuts recipes_<model>_<n>x128.md recorded, to the cached record")
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    raw = common.ROOT/'bench'/'.cache'/a.model/f'checked-{MODELS[a.model][1]}x128.json'
    if a.healed_criteria: raw.write_text(json.dumps(healed_criteria(a.model, json.loads(raw.read_text())), indent=1, default=str))
    elif not a.report:
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(run(a.model), indent=1, default=str))
    text = report(a.model, json.loads(raw.read_text()), a.threads)
    out = common.write_result(f'recipes_{a.model}_{MODELS[a.model][1]}x128_checked.md', text)
    print(text)
    print(f'written: {out}')


if __name__ == '__main__':
    main()
