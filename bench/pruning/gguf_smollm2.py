"""Benchmark: pruned SmolLM2 GGUF files, run by llama.cpp itself (llama-perplexity), next to layerkit's own measurement.

The blocks are order-2's choice for SmolLM2-135M-Instruct at 27, 24 and 20 kept blocks, from the checkpoint that
bench/pruning/criteria_smollm2.py wrote (32 x 128 calibration tokens from the first 80% of the shipped WikiText-2 test
paragraphs; the fit resumes from it, or runs). `layerkit.gguf_deletion.write_pruned_gguf` writes each pruned file
from the Q4_1 original. The same blocks are also deleted with llama.cpp's own `llama-quantize --prune-layers ... COPY`,
to show whether that file loads.

Held-out text: the last 20% of the paragraphs, as one file. llama.cpp's perplexity: `llama-perplexity -c 128` over
--chunks windows of 128 tokens, which (llama.cpp's protocol) scores the second half of each window; the speed is
`llama-bench -p 128 -n 32` (prompt and generation tokens per second). layerkit's: the token-weighted NLL of every position
of 64 evenly spread held-out 128-token windows of the dequantized float32 model (bench/pruning/criteria_smollm2.py's set).
The two protocols differ, so compare each column with its own full-model row.
Usage: python bench/pruning/gguf_smollm2.py [--chunks 96] [--threads 2]   (build llama.cpp first: bench/pruning/llama_cpp.py)
Writes bench/pruning/results/gguf_llamacpp.md.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from pruning import llama_cpp

DEPTHS = (27, 24, 20)


def perplexity(bin_dir, model, text, chunks: int, threads: int) -> dict:
    "llama-perplexity's final estimate on `text` (or the error when the file fails to load)."
    cmd = [str(bin_dir/'llama-perplexity'), '-m', str(model), '-f', str(text), '-c', '128', '-b', '128',
           '--chunks', str(chunks), '-t', str(threads), '--no-warmup']
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    out = r.stdout + r.stderr
    ppl = re.search(r'Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)', out)
    if ppl is None:
        err = next((l.strip() for l in out.splitlines() if 'error' in l.lower() or 'failed' in l.lower()), out.strip()[-200:])
        return dict(ok=False, error=err, secs=time.perf_counter() - t0)
    return dict(ok=True, ppl=float(ppl[1]), pm=float(ppl[2]), secs=time.perf_counter() - t0)


def speed(bin_dir, model, threads: int) -> tuple[float, float] | None:
    "llama-bench's prompt (128 tokens) and generation (32 tokens) throughput, tokens per second; None if it fails."
    r = subprocess.run([str(bin_dir/'llama-bench'), '-m', str(model), '-p', '128', '-n', '32', '-t', str(threads), '-r', '3',
                        '-o', 'json'], capture_output=True, text=True)
    try: runs = json.loads(r.stdout)
    except ValueError: return None
    pp = next((x['avg_ts'] for x in runs if x['n_prompt'] and not x['n_gen']), None)
    tg = next((x['avg_ts'] for x in runs if x['n_gen'] and not x['n_prompt']), None)
    return (pp, tg) if pp and tg else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--chunks', type=int, default=96)
    ap.add_argument('--n-sequences', type=int, default=32)
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import heldout_windows
    from layerkit.gguf_deletion import prune_layers_arg, write_pruned_gguf
    bins = llama_cpp.binaries()
    src = common.smollm2_path()
    _, heldout = common.wikitext_split()
    cache = common.SMOLLM2_CACHE
    cache.mkdir(parents=True, exist_ok=True)
    text = cache/'heldout.txt'
    text.write_text('\n\n'.join(heldout) + '\n', encoding='utf-8')
    with common.smollm2_pruner(a.n_sequences) as (pruner, res, _):
        held = heldout_windows(pruner.tokenizer, heldout, 128, max_windows=64)
        chosen = {k: res.select(k)['deleted_layers'] for k in DEPTHS}
        memo = cache/f'heldout-nll-{a.n_sequences}x128.json'  # layerkit's held-out NLL per deletion, kept between runs
        known = json.loads(memo.read_text()) if memo.is_file() else {}
        for gone in [[], *chosen.values()]:
            key = ','.join(map(str, gone))
            if key not in known: known[key] = pruner.evaluate(gone, input_ids=held)
        memo.write_text(json.dumps(known, indent=1))
        ours = {k: known[','.join(map(str, chosen.get(k, [])))] for k in (30, *DEPTHS)}
    rows, files = [], {30: Path(src)}
    for k in DEPTHS:
        files[k] = write_pruned_gguf(src, cache/f'SmolLM2-135M-Instruct.Q4_1.order2-{k}.gguf', chosen[k], overwrite=True)
    for k in (30, *DEPTHS):
        r, sp = perplexity(bins, files[k], text, a.chunks, a.threads), speed(bins, files[k], a.threads)
        gone = chosen.get(k, [])
        rows.append([k, gone or '-', 'layerkit' if k != 30 else 'original', f"{r['ppl']:.2f} ± {r['pm']:.2f}" if r['ok'] else f"fails: {r['error']}",
                     f"{sp[0]:.0f} / {sp[1]:.0f}" if sp else '-', f"{math.exp(ours[k]):.2f}",
                     f"{files[k].stat().st_size / 2**20:.1f}"])
        print(rows[-1], flush=True)
    # llama.cpp's own deletion, same blocks, tensors copied
    for k in DEPTHS:
        q = cache/f'SmolLM2-135M-Instruct.Q4_1.prune-layers-{k}.gguf'
        qr = subprocess.run([str(bins/'llama-quantize'), '--allow-requantize', '--prune-layers', prune_layers_arg(chosen[k]), str(src), str(q), 'COPY'],
                            capture_output=True, text=True)
        if qr.returncode != 0 or not q.is_file():
            rows.append([k, chosen[k], 'llama-quantize --prune-layers', f"not written: {(qr.stderr or qr.stdout).strip().splitlines()[-1][:160]}", '-', '-', '-'])
        else:
            r, sp = perplexity(bins, q, text, a.chunks, a.threads), speed(bins, q, a.threads)
            rows.append([k, chosen[k], 'llama-quantize --prune-layers', f"{r['ppl']:.2f} ± {r['pm']:.2f}" if r['ok'] else f"fails to load: {r['error'][:160]}",
                         f"{sp[0]:.0f} / {sp[1]:.0f}" if sp else '-', '-', f"{q.stat().st_size / 2**20:.1f}"])
        print(rows[-1], flush=True)
    lines = ["# Pruned SmolLM2 GGUF files in llama.cpp\n",
             f"SmolLM2-135M-Instruct.Q4_1.gguf (30 blocks) and order-2's choices at {', '.join(map(str, DEPTHS))} blocks "
             f"({a.n_sequences} x 128 calibration tokens from the first 80% of the shipped WikiText-2 test paragraphs). "
             f"llama.cpp: `llama-perplexity -c 128 --chunks {a.chunks}` on the last 20% of the paragraphs (it scores the second "
             f"half of each window); tokens per second from `llama-bench -p 128 -n 32` (prompt / generation, {a.threads} thread(s), mean of 3). layerkit: perplexity over every position of 64 "
             "held-out 128-token windows, dequantized float32 model. "
             f"llama.cpp from the llama-cpp-python sdist; {common.environment(a.threads)}.\n",
             common.md_table(['blocks', 'deleted', 'written by', 'llama.cpp perplexity', 'llama.cpp tokens/s (prompt / generation)',
                              'layerkit perplexity', 'MiB'], rows, 'rlllrrr')]
    common.write_result('gguf_llamacpp.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
