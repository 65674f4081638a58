"""Benchmark: pruning criteria on a causal LM that has learned something (a small Llama trained here on WikiText-2).

No pretrained causal LM can be downloaded here, so this script trains one: a 12-block Llama (hidden 256) with a BPE
tokenizer of 4,096 tokens, both fitted on the first 80% of the shipped WikiText-2 raw test split's paragraphs, for
--steps steps on the CPU, and cached in bench/.cache/ so that it is trained once. The next 10% calibrates order-2
(and every other criterion); the last 10% is the held-out text on which each criterion's choice is measured
(perplexity over every non-overlapping 128-token window). Writes bench/pruning/results/criteria_lm.md.
Usage: python bench/pruning/criteria_llama12.py [--steps 1500] [--threads 2]
"""
import argparse, math, os, platform, sys, time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT/'bench'))  # bench/: `common`
from common import choices_table, write_result  # noqa: E402
CACHE_ROOT = ROOT/'bench'/'.cache'


def _tokenizer(texts):
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    tok = Tokenizer(models.BPE(unk_token='<unk>'))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=4096, special_tokens=['<unk>', '<eos>'],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='<unk>', eos_token='<eos>')


def train(texts, steps, seed=0):
    "A 12-block Llama trained on `texts` for `steps` steps, cached in bench/.cache (model folder with its tokenizer)."
    import transformers
    CACHE = CACHE_ROOT/f'wikitext-llama-12-{steps}'
    if (CACHE/'config.json').exists(): return CACHE
    torch.manual_seed(seed)
    tok = _tokenizer(texts)
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=704, num_hidden_layers=12,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                                   tie_word_embeddings=True, bos_token_id=None, eos_token_id=tok.eos_token_id)
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.tensor([i for row in tok(texts)['input_ids'] for i in row + [tok.eos_token_id]])
    T, B = 128, 8
    n = (len(ids) - 1) // T
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=steps, pct_start=0.05)
    model.train(); t0 = time.time()
    for step in range(steps):
        rows = torch.randint(0, n, (B,))
        x = torch.stack([ids[r * T:(r + 1) * T] for r in rows])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step()
        if step % 50 == 0: print(f'step {step}: loss {loss.item():.3f} ({time.time() - t0:.0f} s)', flush=True)
    model.eval()
    tmp = CACHE.with_name(CACHE.name + '.tmp'); model.save_pretrained(tmp); tok.save_pretrained(tmp)
    os.replace(tmp, CACHE)
    return CACHE


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--steps', type=int, default=1500)
    ap.add_argument('--threads', type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import transformers; transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import CRITERIA, compare, heldout_windows
    from layerkit.data import wikitext2_paragraphs
    from layerkit.pruning import Order2Pruner
    paras = wikitext2_paragraphs()
    n = len(paras)
    tr, cal, held = paras[:int(.8 * n)], paras[int(.8 * n):int(.9 * n)], paras[int(.9 * n):]
    t0 = time.time()
    path = train(tr, a.steps)
    t_train = time.time() - t0
    with Order2Pruner(str(path), dtype='float32', device_map=None) as pruner:
        res = pruner.fit(texts=cal, n_sequences=32, sequence_length=128, seed=0, progress=False)
        held_ids = heldout_windows(pruner.tokenizer, held, 128)
        cmp = compare(pruner, [10, 8, 6, 4, 2], input_ids=held_ids)
    lines = ["# Pruning criteria on a trained causal LM (12-block Llama, WikiText-2)\n",
             f"A 12-block Llama (hidden 256, BPE vocabulary 4,096) trained here for {a.steps} steps of 8 x 128 tokens on the "
             f"first 80% of WikiText-2 raw test paragraphs ({t_train:.0f} s, or cached); order-2 calibrated on 32 windows of "
             f"128 tokens from the next 10%; every choice measured on all {len(held_ids)} non-overlapping 128-token windows of "
             f"the last 10%. Calibration NLL of the full model {res.baseline_nll:.3f}. {platform.machine()}, "
             f"{os.cpu_count()} cores, torch {torch.__version__}; {time.time() - t0:.0f} s in all.\n",
             "## Held-out perplexity (best in bold)\n", cmp.table(),
             "## Choices, the surrogate's prediction (calibration NLL) and cost\n", choices_table(cmp.rows, 'held-out NLL', 3)]
    write_result('criteria_lm.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
