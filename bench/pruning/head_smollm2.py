"""Benchmark: where order-2's time goes on SmolLM2-135M-Instruct: one block evaluation against one NLL head pass.

A measurement of `Order2Pruner.fit` is some block evaluations (each of the 30 blocks on the calibration states) and
one pass through the final norm and the LM head (576 x 49,152) with the NLL. This times both on the calibration set of
`bench/pruning/criteria_smollm2.py` (32 x 128 tokens, float32), through the measurement engine itself, and gives the head's share
of a whole fit (4,525 block evaluations and 466 head passes at 30 blocks), next to the share the FLOPs predict.
Usage: python bench/pruning/head_smollm2.py [--threads 2] [--repeats 3]
Writes bench/pruning/results/order2_head.md.
"""
from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=int, default=3)
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.hub import load_causal_lm, load_tokenizer
    from layerkit.objectives import calibration_windows
    from layerkit.order2 import PrefixEngine, block_evaluations
    src = common.smollm2_path()
    calibration, _ = common.wikitext_split()
    model, tok = load_causal_lm(src, dtype='float32'), load_tokenizer(src)
    ids = calibration_windows(tok, calibration, 32, 128, seed=0)
    eng = PrefixEngine(model, ids)
    states = [c[15] for c in eng._h]  # the input of block 15 (any block costs the same)
    def block(): eng._block(15, states)
    def head(): eng._score([c[eng.n_blocks] for c in eng._h], ())
    t = {}
    for name, fn in (('block', block), ('head', head)):
        runs = []
        for _ in range(a.repeats):
            t0 = time.perf_counter(); fn(); runs.append(time.perf_counter() - t0)
        t[name] = min(runs)
    L, V, H = 30, model.config.vocab_size, model.config.hidden_size
    n_blocks, n_heads = block_evaluations(L), 1 + L + L * (L - 1) // 2
    share = n_heads * t['head'] / (n_heads * t['head'] + n_blocks * t['block'])
    p = sum(x.numel() for x in model.model.layers[0].parameters())
    flops_share = n_heads * V * H / (n_heads * V * H + n_blocks * p)
    lines = ["# Order-2 on SmolLM2-135M-Instruct: block evaluations against the NLL head\n",
             f"32 x 128 calibration tokens, float32, {common.environment(a.threads)}; fastest of {a.repeats}.\n",
             common.md_table(['piece', 'one pass', 'passes in a 30-block fit', 'time in a fit'], [
                 ['one block (all calibration states)', f"{t['block'] * 1e3:.0f} ms", f"{n_blocks:,}", f"{n_blocks * t['block']:.0f} s"],
                 ['final norm + LM head + NLL', f"{t['head'] * 1e3:.0f} ms", f"{n_heads:,}", f"{n_heads * t['head']:.0f} s"]], 'lrrr'),
             f"\nThe head is {100 * share:.0f}% of a fit's compute here ({t['head'] / t['block']:.1f} block evaluations a pass); its "
             f"weights alone predict {100 * flops_share:.0f}% ({V * H / p:.1f} blocks' worth of multiply-adds per token)."]
    common.write_result('order2_head.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
