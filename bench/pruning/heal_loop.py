"""Benchmark: healing inside SLEB's loop (issue 32: "the cost of a candidate taken after its least-squares map").

At each step SLEB measures every single deletion of the model pruned (and healed) so far. Here the `--top` cheapest
of them are then healed one by one: a least-squares map for that one deletion, fitted on the current model's
activations (one capture pass shared by the candidates; a diagonal map on Gemma 3's post-norm blocks), folded into the
block before it, and the calibration NLL measured again. The candidate with the lowest NLL (healed where the map
lowers it, `fold_if_better`'s rule) is deleted, its map kept folded, and the loop goes on from that model.
`sleb+heal` heals once after the loop instead (maps fitted on the unpruned model, one per deleted run).

Same model loading, calibration (--n-sequences windows of 128 tokens, seed 0), held-out windows (32) and cloze
(200 items) as `bench/pruning/checked.py`, whose table (`recipes_<model>_<n>x128_checked.md`) gives the rows compared
with: `sleb+heal` and the recommended `checked-comp+heal`.
Usage: python bench/pruning/heal_loop.py --model smollm2|gemma3 [--top 3] [--threads 2]
       python bench/pruning/heal_loop.py --model gemma3 --report   (the table again from bench/.cache)
Writes bench/pruning/results/heal_loop_<model>_<n>x128.md (and prints it); the raw steps go to bench/.cache/<model>/.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import resource
import time
import warnings
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.checked import MODELS


def run(model_name: str, top: int) -> dict:
    "SLEB's loop with the `top` cheapest candidates of each step healed and measured again; every depth measured in passing."
    import transformers; transformers.utils.logging.disable_progress_bar()
    from pruning.downstream_smollm2 import items
    from pruning.recipes import cloze
    from layerkit.criteria import heldout_windows
    from layerkit.deletion import remove_blocks
    from layerkit.healing import fit_healing, fold_healing, healing_statistics, unfold_healing
    from layerkit.objectives import bos_prefix
    from layerkit.order2 import PrefixEngine, deletion_nll
    from layerkit.pruning import Order2Pruner
    _, n, depths = MODELS[model_name]
    calib, held_texts = common.wikitext_split()
    p = Order2Pruner(common.gguf_path(model_name), dtype='float32', device_map=None)
    model, path, tok = p.model, p.layer_path, p.tokenizer
    p.calibrate(texts=calib, n_sequences=n, sequence_length=128, seed=0)  # bench/pruning/checked.py's calibration
    ids, mask = p.calibration
    L = p.n_layers
    held = heldout_windows(tok, held_texts, 128, max_windows=32)
    its, pre = items(tok, held_texts, 200), bos_prefix(tok)
    alive, steps, rows, t_all = list(range(L)), [], {}, time.time()
    for _ in range(L - min(depths)):
        t0 = time.time()
        eng = PrefixEngine(model, ids, path, p.objective, p.batch_size, mask)
        values = dict(eng.measure([(i,) for i in range(len(alive))]))
        evals = eng.block_evaluations
        del eng
        cands = sorted(range(len(alive)), key=lambda i: (values[(i,)], i))[:top]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # a map that would not help is reported in the step record
            stats = healing_statistics(model, [(c, c) for c in cands], ids, mask, None, path)
            evals += max(cands) + 1  # the capture pass stops after the deepest candidate
            tried = []
            for c in cands:
                h = fit_healing(model, [c], ids, mask, layer_path=path, statistics=stats)
                healed = None
                if h.runs[0].T is not None:
                    undo = fold_healing(model, h, path)
                    healed = deletion_nll(model, ids, [c], path)
                    evals += len(alive) - 1
                    unfold_healing(undo)
                tried.append(dict(local=c, block=alive[c], plain=float(values[(c,)]), healed=healed, h=h))
        best = min(tried, key=lambda t: (min(t['plain'], t['healed'] if t['healed'] is not None else math.inf), t['local']))
        kept = best['healed'] is not None and best['healed'] < best['plain']
        if kept: fold_healing(model, best['h'], path)
        remove_blocks(model, [best['local']], path)
        alive.pop(best['local'])
        steps.append(dict(deleted=best['block'], value=best['plain'], healed_value=best['healed'], map_kept=kept,
                          sleb_pick=tried[0]['block'], block_evaluations=evals, seconds=time.time() - t0,
                          candidates=[{k: v for k, v in t.items() if k != 'h'} for t in tried]))
        s = steps[-1]
        print(f"step {len(steps):2d}: deleted {s['deleted']:2d} (SLEB's pick {s['sleb_pick']:2d}) plain {s['value']:.4f} "
              f"healed {s['healed_value']} kept={kept} evals {evals} {s['seconds']:.0f}s", flush=True)
        if len(alive) in depths:
            d = len(alive)
            rows[d] = dict(nll=deletion_nll(model, held, [], path), cloze=cloze(model, its, pre),
                           deleted=sorted(x['deleted'] for x in steps), maps=sum(x['map_kept'] for x in steps))
            print(f"  {d} kept: ppl {math.exp(rows[d]['nll']):.2f} cloze {rows[d]['cloze']:.3f} maps kept {rows[d]['maps']}", flush=True)
    return dict(rows=rows, steps=steps, L=L, top=top, seconds=time.time() - t_all,
                evals=sum(s['block_evaluations'] for s in steps),
                peak_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)


def _checked_rows(model_name: str) -> tuple[dict, dict, str]:
    "Held-out perplexity and cloze rows of `bench/pruning/checked.py`'s table: {method: {depth: value}}, twice, and its file name."
    _, n, depths = MODELS[model_name]
    f = common.results_dir('pruning')/f'recipes_{model_name}_{n}x128_checked.md'
    text, ppl, clz = f.read_text(), {}, {}
    head, tail = text.split('## Cloze accuracy')
    for part, out in ((head, ppl), (tail.split('\n## ')[0], clz)):
        for m in re.finditer(r'^\| (sleb\+heal|checked-comp\+heal) \| (.*?) \|$', part, re.M):
            cells = [c.strip().strip('*').replace(',', '') for c in m.group(2).split('|')]
            out[m.group(1)] = dict(zip(depths, map(float, cells[:len(depths)])))
            if out is ppl: out[m.group(1)]['evals'], out[m.group(1)]['seconds'] = cells[len(depths)], cells[len(depths) + 1]
    return ppl, clz, f.name


def report(model_name: str, res: dict, threads: int) -> str:
    "The markdown table: perplexity and cloze at each depth against SLEB healed after the loop and the recommended recipe."
    title, n, depths = MODELS[model_name]
    ppl, clz, src = _checked_rows(model_name)
    name = f"SLEB, top-{res['top']} healed in the loop"
    mine_p = {d: math.exp(res['rows'][str(d)]['nll']) for d in depths}
    mine_c = {d: res['rows'][str(d)]['cloze'] for d in depths}
    def row(label, vals, best, fmt, extra=''):
        return f"| {label} | " + ' | '.join(f"**{fmt(vals[d])}**" if fmt(vals[d]) == fmt(best[d]) else fmt(vals[d]) for d in depths) + f" |{extra}"
    bp = {d: min(mine_p[d], *(ppl[k][d] for k in ppl)) for d in depths}
    bc = {d: max(mine_c[d], *(clz[k][d] for k in clz)) for d in depths}
    fp, fc = (lambda v: f"{v:,.1f}"), (lambda v: f"{v:.3f}")
    cols = ' | '.join(f'{d} kept' for d in depths)
    lines = [f"# Healing inside SLEB's loop on {title} ({n} x 128 calibration tokens, 32 held-out windows, 200 cloze items)\n",
             f"{time.strftime('%Y-%m-%d')}. `bench/pruning/heal_loop.py --model {model_name} --top {res['top']}`: at each step "
             f"the {res['top']} cheapest single deletions (SLEB's measurement) are healed one by one (a least-squares map for that "
             "deletion, fitted on the current model; diagonal on post-norm blocks), measured again on the calibration, and the "
             "lowest is deleted with its map kept where it lowers the calibration NLL. The other rows are read from "
             f"`{src}` (same calibration, held-out windows and cloze). {common.environment(threads)}.\n",
             '## Held-out perplexity (best in bold)\n', f"| method | {cols} | block evaluations | loop seconds |",
             '|---|' + '---:|' * (len(depths) + 2),
             row(name, mine_p, bp, fp, f" {res['evals']:,} | {res['seconds']:.0f} |")]
    for k in ('sleb+heal', 'checked-comp+heal'): lines.append(row(k, ppl[k], bp, fp, f" {int(ppl[k]['evals']):,} | {ppl[k]['seconds']} |"))
    lines += ['', '## Cloze accuracy (best in bold)\n', f"| method | {cols} |", '|---|' + '---:|' * len(depths), row(name, mine_c, bc, fc)]
    for k in ('sleb+heal', 'checked-comp+heal'): lines.append(row(k, clz[k], bc, fc))
    st = res['steps']
    lines += ['', f"Loop seconds: the other rows' were measured in `{src}`; this row's at the threads given above, beside "
              "the other model's run on the same cores, so compare block evaluations. Healing after the loop (`sleb+heal`) adds one capture pass and two "
              "calibration evaluations per depth; in the loop each step adds a capture pass up to the deepest candidate and "
              f"one calibration evaluation (blocks - 1 and the LM head) per candidate healed. Peak memory {res['peak_gib']:.1f} GiB.\n",
              '## Step by step\n',
              f"Maps kept at {sum(s['map_kept'] for s in st)} of {len(st)} steps; the healed pick differs from SLEB's at "
              f"{sum(s['deleted'] != s['sleb_pick'] for s in st)} steps.\n",
              '| step | deleted | SLEB\'s pick | calibration NLL, unhealed | healed | map kept | block evaluations | seconds |',
              '|---:|---:|---:|---:|---:|---|---:|---:|']
    for i, s in enumerate(st, 1):
        hv = '-' if s['healed_value'] is None else f"{s['healed_value']:.4f}"
        lines.append(f"| {i} | {s['deleted']} | {s['sleb_pick']} | {s['value']:.4f} | {hv} | {'yes' if s['map_kept'] else 'no'} | "
                     f"{s['block_evaluations']:,} | {s['seconds']:.0f} |")
    return '\n'.join(lines) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=MODELS, default='gemma3')
    ap.add_argument('--top', type=int, default=3, help='candidates healed per step (default 3)')
    ap.add_argument('--report', action='store_true', help='write the table from the cached record, measure nothing')
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    n = MODELS[a.model][1]
    raw = common.ROOT/'bench'/'.cache'/a.model/f'heal-loop-top{a.top}-{n}x128.json'
    if not a.report:
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(run(a.model, a.top), indent=1, default=str))
    text = report(a.model, json.loads(raw.read_text()), a.threads)
    out = common.write_result(f'heal_loop_{a.model}_{n}x128.md', text)
    print(text)
    print(f'written: {out}')


if __name__ == '__main__':
    main()
