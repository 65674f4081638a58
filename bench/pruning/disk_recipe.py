"""Benchmark: a recipe that folds, in memory, block by block, and with the blocks' weights on disk (issue 58), float32, CPU.

`Order2Pruner(folder, device_map=None)` measures with the seed's engine, the whole model in memory;
`Order2Pruner(folder, sequential=True)` measures block by block, every block's weights in CPU memory; with `weights_on_disk=True` it holds
the weights outside the blocks and reads each block from the folder's safetensors file when its turn comes. A recipe
that folds (each step's compensation scale into the writers after the cut, a healing map into the block before it)
changes blocks that are not in memory: the change is noted for its block and applied each time the block is read
(`disk_weights.update_`). Every run prunes with `--recipe` (default `validated-comp+heal`, the loop and folds of the recommended
`guarded-comp+heal` without its SLEB loop, which folds nothing; its model also writes its validation text: on
disk with each block read just before its turn, `DiskBlocks.streamed`) and save the pruned checkpoint; each run is a
fresh process.

Per run: the recipe's and the save's wall time (and, for a validated recipe, the time its model took to write its
validation text, in the recipe's; each run has a cache of its own, so each writes it); the process's peak anonymous resident memory (RssAnon, its own
allocations, sampled every 20 ms) during the recipe and the save; the most block-weight bytes any engine held at once
and all it read; the steps (deleted block, scale kept or not), whether healing was kept, how many tensors changed; and
whether the choices and the saved weights are the in-memory run's (the largest difference of any saved weight).

The model is cut to its first --blocks blocks (its embedding, final norm and head kept), written once as a float32 folder,
as in `sequential.py`. `--model gemma3` runs Gemma 3 270M (18 blocks, from its Q4_K_M GGUF, dequantized).

Usage: python bench/pruning/disk_recipe.py [--model smollm2|gemma3] [--blocks 10] [--keep 7] [--recipe validated-comp+heal]
       [--n-sequences 8] [--sequence-length 128] [--threads 1]
Writes bench/pruning/results/disk_recipe_<model>_<recipe, + as ->.md, .json (the markdown's tables) and .runs.json (the runs' records).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning.sequential import NAMES, _AnonPeak, _status, make_folder

RUNS = ('in memory', 'sequential, in memory', 'sequential, on disk')


def child(folder: str, run: str, keep: int, recipe: str, n: int, T: int, out: str, threads: int) -> dict:
    "One recipe and save in this process: time, memory, what the engines held and read, and the record."
    common.set_threads(threads)
    import torch
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.pruning import Order2Pruner
    from layerkit.recipes import prune_with_recipe
    from layerkit.sequential import SequentialEngine
    held = dict(peak=0, read=0)
    load = SequentialEngine._load
    def counted(self, k):  # every engine the recipe makes: the most block bytes at once, and all read
        w = load(self, k)
        held['peak'], held['read'] = max(held['peak'], self.peak_block_bytes), held['read'] + self.block_bytes[k]
        return w
    SequentialEngine._load = counted
    from layerkit.disk_weights import DiskBlocks
    read_disk, disk_load = dict(bytes=0), DiskBlocks.load
    def counted_disk(self, k):  # every block read from disk: the engines' and `streamed`'s (the model writing its text)
        read_disk['bytes'] += self.nbytes(k)
        return disk_load(self, k)
    DiskBlocks.load = counted_disk
    import layerkit.recipes as recipes
    windows, timed = recipes.validation_windows, dict(seconds=None)
    def timed_windows(*args, **kw):  # the validated recipes' own text: written by the model (a block read at a time on disk)
        t = time.perf_counter(); out = windows(*args, **kw); timed['seconds'] = time.perf_counter() - t
        return out
    recipes.validation_windows = timed_windows
    calib, _ = common.wikitext_split()
    kw = dict(device_map=None) if run == 'in memory' else dict(sequential=True, **({'weights_on_disk': True} if run.endswith('on disk') else {}))
    with Order2Pruner(folder, dtype='float32', **kw) as p:
        p.calibrate(texts=calib, n_sequences=n, sequence_length=T, seed=0)
        blocks = sum(t.numel() * t.element_size() for t in p.model.model.layers.parameters()) if p.disk_blocks is None else None  # as loaded
        anon_base = _status('RssAnon')
        t0 = time.perf_counter()
        with _AnonPeak() as anon:
            rec = prune_with_recipe(p, keep, recipe)
            t1 = time.perf_counter()
            p.save_pruned(out, keep)
        t2 = time.perf_counter()
        edits = 0 if p.disk_blocks is None else sum(len(v) for v in p.disk_blocks.edits.values())
        sequential = p.sequential
    return dict(run=run, recipe_seconds=t1 - t0, save_seconds=t2 - t1, text_seconds=timed['seconds'], anon_base=anon_base, anon_peak=anon.peak,
                sequential=sequential, peak_block_bytes=held['peak'], block_bytes_read=held['read'], disk_bytes_read=read_disk['bytes'] if run.endswith('on disk') else None, edits=edits, block_bytes=blocks,
                steps=[(s['deleted'], s['scale'] is not None) for s in rec['steps']], deleted=rec['delete_order'],
                compensated=rec['compensated'], healed=rec['healed'], changed=len(rec['changed_tensors']),
                block_evaluations=rec['block_evaluations'])


def max_diff(a: Path, b: Path) -> float:
    "The largest difference of any tensor of two saved checkpoints (the same names and shapes required)."
    from safetensors.torch import load_file
    ta = {k: v for f in sorted(a.glob('*.safetensors')) for k, v in load_file(f).items()}
    tb = {k: v for f in sorted(b.glob('*.safetensors')) for k, v in load_file(f).items()}
    if sorted(ta) != sorted(tb): raise SystemExit(f'the saved checkpoints hold different tensors: {sorted(set(ta) ^ set(tb))[:5]}')
    return max(float((ta[k].double() - tb[k].double()).abs().max()) for k in ta)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', default='smollm2', choices=sorted(NAMES), help='the model (default smollm2)')
    ap.add_argument('--blocks', type=int, default=10, help="the model's first blocks (default 10; more than it has: the whole model)")
    ap.add_argument('--keep', type=int, default=7, help='blocks the pruned model keeps (default 7)')
    ap.add_argument('--recipe', default='validated-comp+heal', help='the recipe (default validated-comp+heal: the recommended guarded-comp+heal\'s loop and folds)')
    ap.add_argument('--n-sequences', type=int, default=8, help='calibration windows (default 8)')
    ap.add_argument('--sequence-length', type=int, default=128, help='tokens per window (default 128)')
    ap.add_argument('--child', nargs=3, metavar=('FOLDER', 'RUN', 'OUT'), help=argparse.SUPPRESS)
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    if a.child:
        r = child(a.child[0], a.child[1], a.keep, a.recipe, a.n_sequences, a.sequence_length, a.child[2], a.threads)
        print('RESULT ' + json.dumps(r), flush=True)
        return
    cmd = ' '.join(['python bench/pruning/disk_recipe.py', *(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))])
    load, rows, t_all = os.getloadavg(), [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='layerkit-disk-recipe-') as d:
        folder = make_folder(a.model, a.blocks, Path(d)/a.model)
        outs = [Path(d)/f'pruned-{i}' for i in range(len(RUNS))]
        for run, out in zip(RUNS, outs):
            cache = Path(d)/f'cache-{len(rows)}'  # each run writes its own validation text (none read from the other's cache)
            p = subprocess.run([sys.executable, str(Path(__file__).resolve()), '--child', str(folder), run, str(out), '--model', a.model,
                                '--keep', str(a.keep), '--recipe', a.recipe, '--n-sequences', str(a.n_sequences),
                                '--sequence-length', str(a.sequence_length), '--threads', str(a.threads)], capture_output=True, text=True,
                               env={**os.environ, 'LAYERKIT_CACHE': str(cache)})
            line = next((l for l in p.stdout.splitlines() if l.startswith('RESULT ')), None)
            if p.returncode or line is None: raise SystemExit(f'{run}: the child failed\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}')
            rows.append(json.loads(line[7:]))
            print(rows[-1], flush=True)
        diffs = [max_diff(outs[0], o) for o in outs]  # each run's saved weights against the plain in-memory run's
    render(a, rows, diffs, cmd, time.perf_counter() - t_all, load, os.getloadavg())


def render(a, rows: list[dict], diffs: list[float], cmd: str, seconds: float, load_before, load_after) -> None:
    "Write and print the table of the runs."
    mib = lambda b: '-' if b is None else f'{b / 2**20:.1f}'
    mem = rows[0]  # the plain in-memory run: the reference
    keys = ('steps', 'deleted', 'compensated', 'healed', 'changed')
    table = common.md_table(
        ['run', 'recipe (s)', 'its text written (s)', 'save (s)', 'vs in memory (recipe)', 'anonymous RSS after load (MiB)', 'its peak (MiB)',
         'block weights held at once (MiB)', 'block weights read by the engines (MiB)', 'read from disk (MiB)', 'steps: deleted (scale kept)', 'healed',
         'tensors changed', 'notes on disk', 'block evaluations', 'same choices as in memory', 'saved weights: max |diff| vs in memory'],
        ([r['run'], f"{r['recipe_seconds']:.1f}", '-' if r['text_seconds'] is None else f"{r['text_seconds']:.1f}", f"{r['save_seconds']:.1f}", f"{r['recipe_seconds'] / mem['recipe_seconds']:.2f}x",
          mib(r['anon_base']), mib(r['anon_peak']),
          '-' if not r['sequential'] else mib(r['peak_block_bytes'] if r['run'].endswith('on disk') else r['block_bytes'] + r['peak_block_bytes']),
          mib(r['block_bytes_read']) if r['sequential'] else '-', mib(r['disk_bytes_read']), ', '.join(f"{b} ({'yes' if s else 'no'})" for b, s in r['steps']),
          'yes' if r['healed'] else 'no', r['changed'], r['edits'] if r['run'].endswith('on disk') else '-', f"{r['block_evaluations']:,}",
          'yes' if all(r[k] == mem[k] for k in keys) else 'NO', f'{d:.1e}']
         for r, d in zip(rows, diffs)), 'lrrrrrrrrrlllrrlr')
    same = all(r[k] == mem[k] for r in rows for k in keys)
    lines = [f"# A recipe that folds, in memory, block by block and with the blocks' weights on disk: {NAMES[a.model]}, first {a.blocks} blocks, "
             f"{a.n_sequences} x {a.sequence_length} tokens, `{a.recipe}` to {a.keep} blocks\n",
             f"{time.strftime('%Y-%m-%d')}. `{cmd}`: each run a fresh process, float32, CPU. {common.environment(a.threads)}. "
             f"Load average (1, 5, 15 min) {', '.join(f'{x:.1f}' for x in load_before)} before and "
             f"{', '.join(f'{x:.1f}' for x in load_after)} after: the machine was shared, so the seconds are indicative. "
             f"{seconds:.0f} s in all.\n",
             table,
             f"\nThe same steps, repairs and changed tensors in every run: {'yes' if same else 'NO'}. In memory: the seed's "
             "engine (`PrefixEngine`), the whole model in memory; sequential: each block through the block-by-block engine, its "
             "weights in CPU memory or read from disk. Saved weights: the largest difference of any tensor of the saved "
             "checkpoint from the in-memory run's. Block weights held at once: every block plus the engine's copy of one for "
             "the sequential run in memory (the compute device is the CPU here), the engine's one block read from disk for the "
             "run on disk. Read from disk: every block read from the files, by the engines, by the model writing "
             "its text and by the save (the same bytes again where a block is read twice). Anonymous RSS: the process's own allocations (RssAnon), not pages of the memory-mapped "
             "files; its peak is sampled every 20 ms during the recipe and the save. Notes on disk: the changes noted for the "
             "blocks (`DiskBlocks.edits`), applied each time a block is read.\n"]
    text = '\n'.join(lines)
    name = f"disk_recipe_{a.model}_{a.recipe.replace('+', '-')}"  # a file name without '+'
    common.write_result(f'{name}.runs.json', json.dumps(dict(command=cmd, runs=rows, max_saved_diff=diffs, same=same, seconds=seconds,
                                                             load_before=list(load_before), load_after=list(load_after)), indent=1))
    out = common.write_result(f'{name}.md', text)  # its tables in .json beside it
    print(text)
    print(f'written: {out}')


if __name__ == '__main__':
    main()
