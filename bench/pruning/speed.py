"""Time of `Order2Pruner.fit` (prefix reuse) against the straightforward method, on the same calibration tokens.

The straightforward method measures every deletion variant (baseline, each single, each pair) with one full forward
pass of the model with those blocks physically deleted (`layerkit.order2.deletion_nll`, the same deletion that
pruning applies). `fit` runs the prefix-reuse engine: one capture pass, then every variant starts from a hidden state
it already has. Both use the same objective (next-token NLL from the logits) and the same tokens; the script asserts
that every one of the 1 + L + L(L-1)/2 values agrees to 1e-5 before it reports anything.

The model is a tiny randomly initialised Llama with L blocks (layerkit's test fixture, widened a little so that the
blocks, not Python overhead, dominate), on the CPU, for each `--blocks` L. The two methods alternate `--repeats`
times and each keeps its fastest run (`common.interleaved`); wall and CPU time are both recorded, and a run whose wall
time exceeds its CPU time was disturbed by other work on the machine: more rounds are run, and a table that still
has one says so. One thread by default: on a busy 2-core machine, multi-threaded kernels mostly measure how long
their threads wait for each other.

Usage: python bench/pruning/speed.py [--blocks 24 32] [--hidden 128] [--n 8] [--length 64] [--repeats 3] [--threads 1]
Prints a markdown table and writes it to bench/pruning/results/pruning.md.
"""
import argparse, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import torch
import transformers
from layerkit.objectives import calibration_windows
from layerkit.order2 import block_evaluations, deletion_nll, measurement_plan
from layerkit.pruning import Order2Pruner
from layerkit.testing import load_tiny, tiny_texts


def straightforward(model, ids):
    "Every variant by physical deletion and a full forward pass."
    return {k: deletion_nll(model, ids, k) for k in measurement_plan(len(model.model.layers))}


def measure(L: int, a) -> dict:
    "Both methods on an L-block model: their timings, the block evaluations, and the largest difference of values."
    model, tok = load_tiny('llama', num_hidden_layers=L, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                           num_attention_heads=4, num_key_value_heads=2)
    ids = calibration_windows(tok, tiny_texts(2000), a.n, a.length, seed=0)
    times, out = common.interleaved(
        {'straightforward': lambda: straightforward(model, ids),
         'fit': lambda: Order2Pruner(model, tokenizer=tok).fit(input_ids=ids, progress=False)},
        repeats=a.repeats, log=lambda s: print(f"L={L} {s}", file=sys.stderr, flush=True))
    res, ref = out['fit'], out['straightforward']
    fast = {(): res.baseline_nll, **{(i,): v for i, v in res.single_nll.items()}, **res.pair_nll}
    assert set(fast) == set(ref), 'the two methods measured different variants'
    worst = max(abs(fast[k] - ref[k]) for k in ref)
    assert worst <= 1e-5, f'prefix reuse disagrees with physical deletion by {worst:.2e}'
    assert res.block_evaluations == block_evaluations(L), (res.block_evaluations, block_evaluations(L))
    return dict(L=L, times=times, worst=worst, n=len(ref), vocab=len(tok),
                ev_fast=res.block_evaluations, ev_slow=block_evaluations(L, prefix_reuse=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--blocks', type=int, nargs='+', default=[24, 32], help='model sizes L, one pair of rows each')
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--n', type=int, default=8, help='calibration sequences')
    ap.add_argument('--length', type=int, default=64, help='tokens per sequence')
    ap.add_argument('--repeats', type=int, default=3, help='interleaved rounds at least (more while disturbed)')
    common.add_threads_arg(ap, 1)
    a = ap.parse_args()
    common.set_threads(a.threads)
    transformers.utils.logging.disable_progress_bar()
    ms = [measure(L, a) for L in a.blocks]
    rows, notes = [], []
    for m in ms:
        s, f = m['times']['straightforward'], m['times']['fit']
        rows += [(m['L'], 'one full forward pass per variant', f"{s.wall:.2f}", f"{s.cpu:.2f}", m['ev_slow'],
                  '1.00x', '1.00x', '1.00x'),
                 (m['L'], '`Order2Pruner.fit` (prefix reuse)', f"{f.wall:.2f}", f"{f.cpu:.2f}", m['ev_fast'],
                  f"{s.wall / f.wall:.2f}x", f"{s.cpu / f.cpu:.2f}x", f"{m['ev_slow'] / m['ev_fast']:.2f}x")]
        notes.append(f"L = {m['L']}: {m['n']} measurements (1 + {m['L']} + {m['L'] * (m['L'] - 1) // 2}), largest "
                     f"difference between the two methods {m['worst']:.1e} (required: <= 1e-5). "
                     + common.timing_note(m['times']))
    table = common.md_table(('blocks L', 'method', 'wall time (s)', 'CPU time (s)', 'block evaluations',
                             'speed-up (wall)', 'speed-up (CPU)', 'block-evaluation ratio'), rows, 'rlrrrrrr')
    text = '\n'.join([
        "# Order-2 measurement: prefix reuse vs one full forward pass per variant",
        "",
        f"Tiny random Llama with L blocks, hidden {a.hidden}, intermediate {2 * a.hidden}, vocabulary {ms[0]['vocab']}; "
        f"calibration {a.n} x {a.length} tokens; {common.environment(a.threads)}.",
        "",
        table,
        "",
        *[f"- {n}" for n in notes],
        "",
        "Both methods also run the embedding, final norm and LM head once per measurement, which the block count "
        "leaves out. CPU time is this process's, all threads; a run whose wall time exceeds it waited for a core.",
        "",
        f"Produced by `{' '.join(['python bench/pruning/speed.py', *sys.argv[1:]])}`.",
    ])
    print(text)
    common.write_result('pruning.md', text)
    for m in ms:
        t = m['times']
        r = t['straightforward'].cpu / t['fit'].cpu
        if r < 2.5: print(f"WARNING: L={m['L']}: speed-up {r:.2f}x (CPU) is below the 2.5x target", file=sys.stderr)


if __name__ == '__main__':
    main()
