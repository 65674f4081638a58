"""The run's state (`Ctx`: the device, the sizes, what the parts found), the tolerances, and the device's clock and memory."""
from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path

import common
import torch

from gpu.checks import Log

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
            temb_n=None, temb_batch=256, temb_pack=128, tbud_big_n=3000,
            t2=dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, vocab_size=32000), t2_n=8, t2_T=128, t2_block_rounds=5)
DRY = dict(tiny_texts=12, b77_classes=8, b77_train=160, b77_test=64, clf_epochs=4, acc_gap=0.25,
           order2_n=2, order2_T=16,
           off=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=512), off_n=2, off_T=16, gen_prompt=6, gen_new=8,
           enc_N=6, enc_L=7, enc_D=12, enc_H=16,
           tenc=[(64, 7, 16), (64, 9, 24)], tenc_batch=32, tenc_epochs=1,
           temb_n=48, temb_batch=16, temb_pack=32, tbud_big_n=24,
           t2=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=512), t2_n=2, t2_T=16, t2_block_rounds=2)


class Ctx:
    "The device, the sizes, and what the run found: the checks (`log`), tables, skips, errors and data for gpu.json."
    def __init__(self, args):
        self.args, self.dry = args, args.dry_run
        self.S = DRY if self.dry else REAL
        self.dev = torch.device('cpu' if self.dry else 'cuda')
        self.cuda = self.dev.type == 'cuda'
        self.lm_dtype = torch.bfloat16  # what LayerEmbedder picks on CUDA; the dry run asks for it on the CPU
        self.log = Log(args.perturb)
        self.tables, self.skips, self.errors, self.data = {}, [], [], {}
        self.tmp = Path(tempfile.mkdtemp(prefix='layerkit-gpu-check-work-'))

    @property
    def checks(self) -> list[dict]: return self.log.checks

    def check(self, name: str, compare, got, want, *args, **kwargs):
        "One check (see `gpu.checks`): `compare(got, want, ...)` recorded under `name`; returns its `Outcome`."
        return self.log.check(name, compare, got, want, *args, **kwargs)

    def skip(self, part: str, why: str):
        print(f"SKIPPED {part}: {why}", flush=True)
        self.skips.append(f"{part}: {why}")

    def table(self, title: str, header, rows, align=None, note: str = ''):
        text = common.md_table(header, rows, align) + ('\n\n' + note if note else '')
        self.tables[title] = text
        print(f"\n### {title}\n\n{text}\n", flush=True)

    # the device's clock and memory
    def sync(self):
        if self.cuda: torch.cuda.synchronize()

    def mem_reset(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

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


def mark(ok) -> str: return 'ok' if ok else '**FAIL**'


def free(*objs):
    "Drop references the caller passes (as a reminder) and return the device memory."
    del objs
    gc.collect()
    if torch.cuda.is_available(): torch.cuda.empty_cache()
