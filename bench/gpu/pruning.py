"""The pruning side's correctness parts: `Order2Pruner.fit` on the device (`order2`), offloading and `save_pruned` (`offload`)."""
from __future__ import annotations

import time

import torch

from gpu.checks import Outcome, at_least, at_most, equal, values
from gpu.context import F32_REL, NLL_REL, Ctx, free, gib, mark
from gpu.data import n_params, random_llama


def measurements(res) -> dict:
    "An `Order2Result`'s measured NLLs by deleted blocks: () the full model, (i,) one block, (i, j) a pair."
    return {(): res.baseline_nll, **{(i,): v for i, v in res.single_nll.items()}, **res.pair_nll}


def part_order2(ctx: Ctx):
    from layerkit.objectives import calibration_windows
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_model_path, tiny_texts
    rows = []
    for arch in ('llama', 'qwen3', 'gpt2'):
        model, tok = load_tiny(arch)
        ids = calibration_windows(tok, tiny_texts(400), ctx.S['order2_n'], ctx.S['order2_T'], seed=0)
        ref = Order2Pruner(model, tokenizer=tok).fit(input_ids=ids, progress=False)
        with Order2Pruner(str(tiny_model_path(arch)), dtype='float32') as p:  # device_map='auto': the GPU
            ctx.check(f'order2/{arch}-on-device', equal, next(p.model.parameters()).device.type, ctx.dev.type)
            res = p.fit(input_ids=ids, progress=False)
        r = ctx.check(f'order2/{arch}', values, measurements(res), measurements(ref), F32_REL)
        rows.append((arch, len(measurements(ref)), r.value.split(' over')[0],
                     'same' if res.delete_order == ref.delete_order else f'{res.delete_order} vs {ref.delete_order}', mark(r)))
    ctx.table('Order2Pruner: float32 on CUDA against the CPU', ('fixture', 'measurements', 'difference',
              'greedy deletion order', f'within {F32_REL:.0e}'), rows, 'lrlll')


def part_offload(ctx: Ctx):
    import transformers
    from layerkit.order2 import deletion_nll
    from layerkit.pruning import Order2Pruner
    S = ctx.S
    L = S['off']['num_hidden_layers']
    model = random_llama(S['off'], torch.bfloat16, ctx.dev)
    size, count = sum(p.numel() * p.element_size() for p in model.parameters()), n_params(model)
    folder = ctx.tmp/'llama-offload'
    model.save_pretrained(folder)
    free(); del model; free()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(S['off']['vocab_size'], (S['off_n'], S['off_T']), generator=g)

    ctx.mem_reset()
    t = time.perf_counter()
    with Order2Pruner(str(folder), dtype='bfloat16') as a:
        map_a = dict(getattr(a.model, 'hf_device_map', {}) or {})
        res_a = a.fit(input_ids=ids, progress=False)
        ctx.sync()
    t_a, peak_a = time.perf_counter() - t, ctx.mem_peak()
    free()

    budget = 0.5 * size / 2**30
    ctx.mem_reset()
    t = time.perf_counter()
    b = Order2Pruner(str(folder), dtype='bfloat16', gpu_memory_gib=budget, cpu_memory_gib=max(4 * size / 2**30, 1.0))
    map_b = dict(getattr(b.model, 'hf_device_map', {}) or {})
    on_cpu = sorted(k for k, v in map_b.items() if v == 'cpu')
    on_disk = sorted(k for k, v in map_b.items() if v == 'disk')
    blocks_cpu = [k for k in on_cpu if k.startswith('model.layers.')]
    if on_disk: ctx.log.fail('offload/nothing-on-disk', f"{len(on_disk)} modules on disk ({', '.join(on_disk[:4])}...)",
                             'none (the CPU budget holds the rest)')
    if ctx.cuda: ctx.check('offload/blocks-in-cpu-ram', at_least, len(blocks_cpu), 1, 'blocks offloaded')
    else: ctx.skip('offload/blocks-in-cpu-ram', 'no GPU: device_map="auto" puts everything on the CPU, nothing to offload')
    res_b = b.fit(input_ids=ids, progress=False)
    ctx.sync()
    t_b, peak_b = time.perf_counter() - t, ctx.mem_peak()
    ctx.check('offload/same-values-as-all-on-gpu', values, measurements(res_b), measurements(res_a), F32_REL)

    # a budget nothing fits in: accelerate's error, named after the budget arguments
    wanted = 'a ValueError naming gpu_memory_gib/cpu_memory_gib'
    try:
        Order2Pruner(str(folder), dtype='bfloat16', gpu_memory_gib=0.0001, cpu_memory_gib=0.0001).close()
        ctx.log.fail('offload/budget-error', 'no error', wanted)
    except Exception as e:  # noqa: BLE001 (any other type is the finding)
        msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        ok = isinstance(e, ValueError) and ('gpu_memory_gib' in str(e) or 'cpu_memory_gib' in str(e))
        ctx.log.record('offload/budget-error', Outcome(ok, msg[:200], wanted))
    free()

    # save_pruned of the offloaded model, reloaded: its NLL is the measured one; generate with and without the KV cache
    keep = L - 2
    out = b.save_pruned(ctx.tmp/'llama-pruned', target_layers=keep)
    deleted = tuple(sorted(b.selection['deleted_layers']))
    b.close(); del b; free()
    re = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16).to(ctx.dev).eval()
    ctx.check('save/blocks-after-reload', equal, [len(re.model.layers), re.config.num_hidden_layers], [keep, keep])
    nll = deletion_nll(re, ids)
    want = res_b.pair_nll[deleted]
    ctx.check('save/nll-equals-measured', at_most, abs(nll - want) / abs(want), NLL_REL,
              f'relative difference (reloaded {nll:.6f}, measured {want:.6f})')
    del re; free()
    re = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).to(ctx.dev).eval()
    prompt = ids[:4, :S['gen_prompt']].to(ctx.dev)
    kw = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=S['gen_new'], min_new_tokens=S['gen_new'],
              do_sample=False, pad_token_id=0)
    with torch.no_grad():
        g_cache = re.generate(prompt, use_cache=True, **kw).cpu()
        g_none = re.generate(prompt, use_cache=False, **kw).cpu()
    ctx.check('save/generate-kv-cache', equal, g_cache.numpy(), g_none.numpy())
    del re; free()
    ctx.table('Order2Pruner with device_map="auto": all on the GPU against blocks offloaded to CPU RAM',
              ('run', 'gpu_memory_gib', 'modules in CPU RAM (on disk)', 'load + fit (s)', 'block evaluations', 'peak GPU memory (GiB)'),
              [('all on the GPU', 'None (free memory - 4)', f"{sum(v == 'cpu' for v in map_a.values())} ({sum(v == 'disk' for v in map_a.values())})",
                f'{t_a:.1f}', res_a.block_evaluations, gib(peak_a)),
               ('offloaded', f'{budget:.2f}', f"{len(on_cpu)}, {len(blocks_cpu)} of {L} blocks ({len(on_disk)})", f'{t_b:.1f}',
                res_b.block_evaluations, gib(peak_b))], 'llrrrr',
              note=f"Random Llama, {count / 1e9:.2f} B parameters ({size / 2**30:.2f} GiB in bf16), {L} blocks, "
                   f"{S['off_n']} x {S['off_T']} calibration tokens. Then `save_pruned(target_layers={keep})` "
                   f"(deleted {list(deleted)}) of the offloaded model, reloaded.")
