"""`LayerEmbedder.transform` under torch.distributed: 2 CPU processes (gloo) started by `torch.distributed.run`.

The worker (tests/_dist_embed_worker.py) embeds tiny-fixture texts on each rank; here they are compared with one
process: the same embeddings, in input order, on both ranks; each rank ran about half the tokens; the cache is
written once (rank 0) and hit by both ranks; ranks with different texts fail with an error naming the rank.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _launch import torchrun

WORKER = Path(__file__).with_name('_dist_embed_worker.py')


@pytest.fixture(scope='module')
def ranks(tmp_path_factory):
    "Run the worker on 2 ranks; each rank's report and arrays."
    out = tmp_path_factory.mktemp('dist_embed')
    res = torchrun(WORKER, out, timeout=240, env=dict(TOKENIZERS_PARALLELISM='false'))
    assert res.returncode == 0, f"torchrun failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return out, [(json.loads((out/f'rank{r}.json').read_text()), dict(np.load(out/f'rank{r}.npz'))) for r in range(2)]


def test_same_embeddings_as_one_process(ranks):
    import torch
    from layerkit.embeddings import LayerEmbedder
    from layerkit.testing import load_tiny, tiny_texts
    import _dist_embed_worker as W
    torch.set_num_threads(1)
    model, tok = load_tiny('bert')
    texts = tiny_texts(W.N_TEXTS, seed=3)
    for how in ('mean', 'mean_including_padding'):
        alone = LayerEmbedder(model, tok, token_pooling=how, batch_size=W.BATCH).transform(texts)
        for rep, arr in ranks[1]:
            assert rep['world'] == 2
            np.testing.assert_allclose(arr[how], alone, atol=1e-6, err_msg=f"rank {rep['rank']}, {how}")
    for rep, arr in ranks[1]:
        np.testing.assert_array_equal(arr['cached_first'], arr['mean'])
        np.testing.assert_array_equal(arr['cached_again'], arr['mean'])


def test_each_rank_does_half_the_work(ranks):
    "The ranks' forward passes ran on the tokens of one process's batches between them, each on about half."
    from layerkit.embeddings import MAX_BATCH_TOKENS, length_batches
    from layerkit.testing import load_tiny, tiny_texts
    import _dist_embed_worker as W
    tok = load_tiny('bert')[1]
    lens = np.array([len(x) for x in tok(tiny_texts(W.N_TEXTS, seed=3))['input_ids']])
    plan = length_batches(lens, W.BATCH, MAX_BATCH_TOKENS)
    alone = dict(real=2 * int(lens.sum()), padded=2 * sum(len(b) * int(lens[b[0]]) for b in plan))  # two uncached calls
    first = [rep['first'] for rep, _ in ranks[1]]
    for key, total in alone.items():
        got = [c[key] for c in first]
        assert sum(got) == total, f"{key} tokens per rank {got}: {sum(got)} in all, one process runs {total}"
        assert all(0.4 * total < g < 0.6 * total for g in got), f"{key} tokens per rank {got}, of {total}"


def test_cache_written_once_and_hit_everywhere(ranks):
    out, reps = ranks
    assert [rep['cache_writes'] for rep, _ in reps] == [1, 0], reps  # rank 0 writes, rank 1 does not
    assert [rep['hit_forwards'] for rep, _ in reps] == [0, 0], reps  # the second call runs no forward pass anywhere
    assert len(list((out/'cache').glob('*.safetensors'))) == 1


def test_ranks_that_disagree_fail_everywhere(ranks):
    for rep, _ in ranks[1]:
        assert rep['mismatch'] is not None and 'the ranks disagree on the texts, tokenizer, model weights' in rep['mismatch'], rep
        assert 'rank 1' in rep['mismatch'] or 'rank 0' in rep['mismatch'], rep
