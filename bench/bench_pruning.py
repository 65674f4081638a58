"""Wall time of `Order2Pruner.fit` (prefix reuse) against the straightforward method, on the same calibration tokens.

The straightforward method measures every deletion variant (baseline, each single, each pair) with one full forward
pass of the model with those blocks physically deleted (`layerkit.order2.deletion_nll`, the same deletion that
pruning applies). `fit` runs the prefix-reuse engine: one capture pass, then every variant starts from a hidden state
it already has. Both use the same objective (next-token NLL from the logits) and the same tokens; the script asserts
that every one of the 1 + L + L(L-1)/2 values agrees to 1e-5 before it reports anything.

The model is a tiny randomly initialised Llama with 24 blocks (layerkit's test fixture, widened a little so that the
blocks, not Python overhead, dominate), on the CPU. To be fair on a shared machine the two methods alternate
`--repeats` times and each keeps its fastest run; the process CPU time is reported too, as it is less disturbed by
other work on the machine. One thread by default: on a busy 2-core machine, multi-threaded kernels mostly measure
how long their threads wait for each other.

Usage: python bench/bench_pruning.py [--blocks 24] [--hidden 128] [--n 8] [--length 64] [--repeats 3] [--threads 1]
Prints a markdown table and writes it to bench/results/pruning.md.
"""
import argparse, platform, sys, time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import transformers  # noqa: E402
from layerkit.order2 import block_evaluations, calibration_windows, deletion_nll, measurement_plan  # noqa: E402
from layerkit.pruning import Order2Pruner  # noqa: E402
from layerkit.testing import load_tiny, tiny_texts  # noqa: E402


def straightforward(model, ids):
    "Every variant by physical deletion and a full forward pass."
    return {k: deletion_nll(model, ids, k) for k in measurement_plan(len(model.model.layers))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--blocks', type=int, default=24)
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--n', type=int, default=8, help='calibration sequences')
    ap.add_argument('--length', type=int, default=64, help='tokens per sequence')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--threads', type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    transformers.utils.logging.disable_progress_bar()
    model, tok = load_tiny('llama', num_hidden_layers=a.blocks, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                           num_attention_heads=4, num_key_value_heads=2)
    ids = calibration_windows(tok, tiny_texts(2000), a.n, a.length, seed=0)
    L = a.blocks
    fast_t, slow_t, fast_c, slow_c = [], [], [], []
    for _ in range(a.repeats):
        t, c = time.perf_counter(), time.process_time()
        res = Order2Pruner(model, tokenizer=tok).fit(input_ids=ids, progress=False)
        fast_t.append(time.perf_counter() - t); fast_c.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        ref = straightforward(model, ids)
        slow_t.append(time.perf_counter() - t); slow_c.append(time.process_time() - c)
    fast = {(): res.baseline_nll, **{(i,): v for i, v in res.single_nll.items()}, **res.pair_nll}
    assert set(fast) == set(ref), 'the two methods measured different variants'
    worst = max(abs(fast[k] - ref[k]) for k in ref)
    assert worst <= 1e-5, f'prefix reuse disagrees with physical deletion by {worst:.2e}'
    assert res.block_evaluations == block_evaluations(L), (res.block_evaluations, block_evaluations(L))
    f, s, fc, sc = min(fast_t), min(slow_t), min(fast_c), min(slow_c)
    ev_fast, ev_slow = res.block_evaluations, block_evaluations(L, prefix_reuse=False)
    lines = [
        "# Order-2 measurement: prefix reuse vs one full forward pass per variant",
        "",
        f"Tiny random Llama, {L} blocks, hidden {a.hidden}, intermediate {2 * a.hidden}, vocabulary {len(tok)}; "
        f"calibration {a.n} x {a.length} tokens; {len(ref)} measurements (1 + {L} + {L * (L - 1) // 2}); "
        f"CPU, {a.threads} thread(s), best of {a.repeats}; torch {torch.__version__}, transformers "
        f"{transformers.__version__}, Python {platform.python_version()}.",
        "",
        "| method | wall time (s) | CPU time (s) | block evaluations | speed-up (wall) | speed-up (CPU) |",
        "|---|---|---|---|---|---|",
        f"| one full forward pass per variant | {s:.2f} | {sc:.2f} | {ev_slow} | 1.00x | 1.00x |",
        f"| `Order2Pruner.fit` (prefix reuse) | {f:.2f} | {fc:.2f} | {ev_fast} | {s / f:.2f}x | {sc / fc:.2f}x |",
        "",
        f"Largest difference between the two methods over all {len(ref)} values: {worst:.1e} (required: <= 1e-5). "
        f"Block-evaluation ratio {ev_slow / ev_fast:.2f}x. Both methods also run the embedding, final norm and LM head "
        f"once per variant ({len(ref)} times), which the block count leaves out.",
        "",
    ]
    text = '\n'.join(lines)
    print(text)
    out = ROOT/'bench'/'results'/'pruning.md'
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if s / f < 2.5: print(f'WARNING: speed-up {s / f:.2f}x is below the 2.5x target', file=sys.stderr)


if __name__ == '__main__':
    main()
