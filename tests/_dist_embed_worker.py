"""Worker of tests/test_distributed_embedder.py, started by `torch.distributed.run --nproc_per_node 2` (gloo, CPU).

Each rank embeds the same tiny-fixture texts with `LayerEmbedder` under the process group that `layerkit.distributed`
starts from torchrun's environment, counts the tokens of its own forward passes (a forward pre-hook) and the cache
writes it made, and saves what it saw as OUT/rank{R}.npz + OUT/rank{R}.json for the test to compare.

Usage (by the test): python -m torch.distributed.run --nproc_per_node 2 ... tests/_dist_embed_worker.py OUT
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import transformers

import layerkit.embeddings as E
from layerkit.distributed import rank_world
from layerkit.testing import load_tiny, tiny_texts

N_TEXTS, BATCH = 40, 4


def main(out: Path):
    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    rank, world = rank_world()  # starts the gloo group from torchrun's environment
    texts = tiny_texts(N_TEXTS, seed=3)
    model, tok = load_tiny('bert')
    counts = dict(real=0, padded=0, forwards=0)

    def count(mod, args, kwargs):
        m = kwargs['attention_mask']
        counts['real'] += int(m.sum()); counts['padded'] += m.numel(); counts['forwards'] += 1
    model.register_forward_pre_hook(count, with_kwargs=True)
    writes = mock.Mock(wraps=E.write_cache)
    arrays, rep = {}, dict(rank=rank, world=world)
    with mock.patch.object(E, 'write_cache', writes):
        for how in ('mean', 'mean_including_padding'):
            arrays[how] = E.LayerEmbedder(model, tok, token_pooling=how, batch_size=BATCH).transform(texts)
        rep['first'] = dict(counts)  # the two uncached calls
        emb = E.LayerEmbedder(model, tok, batch_size=BATCH, cache_dir=out/'cache')
        arrays['cached_first'] = emb.transform(texts)
        before = dict(counts)
        arrays['cached_again'] = emb.transform(texts)
        rep['hit_forwards'] = counts['forwards'] - before['forwards']
        rep['cache_writes'] = writes.call_count
    try:  # ranks given different texts: an error on every rank, naming the one that differs
        E.LayerEmbedder(model, tok, batch_size=BATCH).transform(texts if rank == 0 else texts[::-1])
        rep['mismatch'] = None
    except ValueError as e: rep['mismatch'] = str(e)
    np.savez(out/f'rank{rank}.npz', **arrays)
    (out/f'rank{rank}.json').write_text(json.dumps(rep))


if __name__ == '__main__':
    from _dist_exit import exit_quietly  # beside this file
    main(Path(sys.argv[1]))
    exit_quietly(Path(sys.argv[1])/'.exit')
