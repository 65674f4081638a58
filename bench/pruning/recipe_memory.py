"""Benchmark: the memory each pruning recipe needs on top of the model, each in a fresh process (issue 32's cost).

The recipe tables (`bench/pruning/recipes.py`, `bench/pruning/checked.py`) give each method's block evaluations and
seconds, and one peak for their whole process. This script gives each recipe's own peak: a fresh process loads the
model as those benches do (its GGUF, dequantized, float32, CPU), draws the same calibration (--n-sequences windows of
128 tokens from the first 80% of the shipped WikiText-2 test paragraphs, seed 0), resets the kernel's peak-RSS
counter (`/proc/self/clear_refs`), runs the recipe to --depth blocks, and reads the peak back (`VmHWM`). The recipe's
working memory is that peak minus the resident memory before it (the model and the calibration). The weights are
memory-mapped from the cached checkpoint and only the pages a forward pass touches become resident, so every weight
is read once before the reset: else the first pass through the LM head (on Gemma 3 its 0.67 GiB embedding, which the
calibration's lookups barely touch) would count as the recipe's memory (the tables before 2026-12-04 evening did). The first
deletions are where a loop measures the most blocks, so the first depth of the tables is the default; the order-2
recipe's cost is its fit (the same at any depth).

Usage: python bench/pruning/recipe_memory.py --model smollm2|gemma3 [--recipes order2 sleb checked-comp+heal]
       [--depth D] [--n-sequences N] [--threads 2] [--rows LOG] [--tag T]
Writes bench/pruning/results/recipe_memory_<model>_<n>x128_keep<depth>[_<tag>].md (and prints it).
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common

MODELS = {'smollm2': ('SmolLM2-135M-Instruct', 16, 27), 'gemma3': ('Gemma 3 270M (Q4_K_M)', 8, 15)}  # calibration windows, first depth


def _status(key: str) -> int:
    "A field of /proc/self/status in bytes (VmRSS: resident now; VmHWM: the peak since the last reset)."
    for line in open('/proc/self/status'):
        if line.startswith(key + ':'): return int(line.split()[1]) * 1024
    raise RuntimeError(f'/proc/self/status has no {key}')


def _reset_peak() -> None:
    "Set the kernel's peak-RSS counter (VmHWM) to the resident memory now."
    with open('/proc/self/clear_refs', 'w') as f: f.write('5')


def child(model: str, recipe: str, n: int, depth: int, threads: int) -> dict:
    "Load, calibrate, run `recipe` to `depth` blocks in this process; its memory and cost."
    common.set_threads(threads)
    import torch
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.pruning import Order2Pruner
    from layerkit.recipes import prune_with_recipe
    calib, _ = common.wikitext_split()
    t0 = time.perf_counter()
    with Order2Pruner(common.gguf_path(model), dtype='float32', device_map=None) as pruner:
        load_peak, loaded = _status('VmHWM'), _status('VmRSS')
        pruner.calibrate(texts=calib, n_sequences=n, sequence_length=128, seed=0)
        t_load = time.perf_counter() - t0
        unpaged = _status('VmRSS')
        with torch.no_grad():  # the weights are mapped from the cached checkpoint: page them all in, so the model's
            for prm in pruner.model.parameters(): prm.sum()  # own pages (its LM head) do not count as the recipe's memory
        base = _status('VmRSS')
        weights = sum(p.numel() * p.element_size() for p in pruner.model.parameters())  # the whole model's
        _reset_peak()
        t0 = time.perf_counter()
        evals = 0
        if recipe == 'order2':
            res = pruner.fit(texts=calib, n_sequences=n, sequence_length=128, seed=0, progress=False)
            evals = res.metadata.get('total_block_evaluations', res.block_evaluations)
        out = prune_with_recipe(pruner, depth, recipe)
        seconds = time.perf_counter() - t0
        peak = _status('VmHWM')
    return dict(recipe=recipe, loaded=loaded, load_peak=load_peak, unpaged=unpaged, base=base, peak=peak, seconds=seconds,
                load_seconds=t_load, block_evaluations=evals + out['block_evaluations'], weights=weights,
                deleted=out['delete_order'], steps=[(x['deleted'], x['value'], x.get('compensated_value'), x['scale']) for x in out['steps'] or []])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=MODELS, default='smollm2')
    ap.add_argument('--recipes', nargs='+', default=['order2', 'sleb', 'checked-comp+heal'])
    ap.add_argument('--depth', type=int, default=None, help='blocks to keep (default: the tables\' first depth)')
    ap.add_argument('--n-sequences', type=int, default=None, help='calibration windows (default: the recipe table\'s)')
    ap.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--rows', type=Path, default=None, help="the table again from a run's log (its printed rows); measures nothing")
    ap.add_argument('--tag', default='', help='a suffix for the table\'s file name, so that a run of some recipes keeps the full table')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    title, n0, d0 = MODELS[a.model]
    n, depth = a.n_sequences or n0, a.depth or d0
    if a.child:
        print('RESULT ' + json.dumps(child(a.model, a.recipes[0], n, depth, a.threads)), flush=True)
        return
    from layerkit.recipes import RECIPES
    bad = [r for r in a.recipes if r not in RECIPES]
    if bad: ap.error(f"--recipes: unknown {bad}; choose from {list(RECIPES)}")
    if a.rows is not None:  # the table again from a run's printed rows, nothing measured
        text = a.rows.read_text()
        rows = [ast.literal_eval(l) for l in text.splitlines() if l.startswith("{'recipe'")]
        total = re.search(r'(\d+) s in all', text)
        return render(a.model, n, depth, a.threads, rows, float(total.group(1)) if total else None, a.tag)
    rows, t_all = [], time.perf_counter()
    for r in a.recipes:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), '--child', '--model', a.model, '--recipes', r,
                            '--depth', str(depth), '--n-sequences', str(n), '--threads', str(a.threads)],
                           capture_output=True, text=True)
        line = next((l for l in p.stdout.splitlines() if l.startswith('RESULT ')), None)
        if p.returncode or line is None: raise SystemExit(f'{r}: the child failed\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}')
        rows.append(json.loads(line[7:]))
        print(rows[-1], flush=True)
    render(a.model, n, depth, a.threads, rows, time.perf_counter() - t_all, a.tag)


def render(model: str, n: int, depth: int, threads: int, rows: list[dict], seconds: float | None, tag: str = '') -> None:
    "Write and print the table of `rows` (one per recipe, from `child`)."
    title = MODELS[model][0]
    gib = lambda b: f'{b / 2**30:.2f}'
    loads = sorted(r['load_peak'] for r in rows)
    lines = [f"# Memory of each pruning recipe on {title} ({n} x 128 calibration tokens, to {depth} blocks)\n",
             f"{time.strftime('%Y-%m-%d')}. `bench/pruning/recipe_memory.py --model {model}`: each recipe in a fresh "
             f"process; the model from its GGUF, dequantized, float32, CPU, calibrated as in the recipe tables. "
             f"{common.environment(threads)}." + (f" {seconds:.0f} s in all." if seconds is not None else '') + "\n",
             common.md_table(['recipe', 'resident before (GiB)', 'peak during the recipe (GiB)', 'working memory (GiB)',
                              'working / model weights', 'block evaluations', 'seconds', 'deleted'],
                             ([r['recipe'], gib(r['base']), gib(r['peak']), gib(r['peak'] - r['base']),
                               f"{(r['peak'] - r['base']) / r['weights']:.2f}x",
                               f"{r['block_evaluations']:,}", f"{r['seconds']:.0f}", r['deleted']] for r in rows), 'lrrrrrrl'),
             (f"\nresident before: the process after loading the model, drawing the calibration and reading every weight once "
              f"(the weights are mapped from the cached checkpoint; {gib(rows[0]['unpaged'])} GiB were resident before that)"
              if 'unpaged' in rows[0] else  # a log of the bench before 2026-12-04: the weights were not read first
              "\nresident before: the process after loading the model and drawing the calibration (a log of the old bench: the "
              "weights, mapped from the cached checkpoint, were not read first, so pages the recipe touched first count as its memory)")
             + f"; the model's float32 weights are {gib(rows[0]['weights'])} GiB. Loading peaked at {gib(loads[0])} GiB from the cached float "
             f"checkpoint" + (f" and at {gib(loads[-1])} GiB the first time, when the GGUF file is dequantized into the cache "
             f"(the first row here)" if loads[-1] > 1.5 * loads[0] else '') + ". Peak: the kernel's VmHWM, reset just "
             f"before the recipe. block evaluations: the order-2 fit's for `order2`, the loop's measurements for the "
             f"others. seconds: the recipe alone (loading and calibration not counted).\n"]
    for r in rows:  # the loop's measurements, to compare runs (older logs have none)
        if r.get('steps') and any(x[2] is not None for x in r['steps']):
            lines.append(f"{r['recipe']}, calibration NLL of each deletion without / with its scale: " + '; '.join(
                f"block {d}: {v:.4f} / {c:.4f} ({'kept' if s is not None else 'not kept'})" for d, v, c, s in r['steps']) + '.\n')
    out = common.write_result(f"recipe_memory_{model}_{n}x128_keep{depth}{'_' + tag if tag else ''}.md", '\n'.join(lines))
    print('\n'.join(lines))
    print(f'written: {out}')


if __name__ == '__main__':
    main()
