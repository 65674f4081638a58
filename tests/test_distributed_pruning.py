"""Order2Pruner.fit and the iterative criterion under torch.distributed: two gloo ranks started by
`torchrun --nproc_per_node 2` (tests/_dist_prune_worker.py), compared with one process on the same calibration.

Two launches (torchrun's start-up is a few seconds each): a run whose ranks are killed mid-fit, then one that resumes
it and runs the other scenarios. Each rank's block forward passes are counted by hooks in the worker, so a rank that
did all the work (or a run where every rank did everything) fails."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from _launch import torchrun

WORKER = Path(__file__).with_name('_dist_prune_worker.py')
FIT = dict(n_sequences=3, sequence_length=16, seed=0, progress=False)
L = 6


def _torchrun(out: Path, mode: str) -> subprocess.CompletedProcess:
    return torchrun(WORKER, out, mode)


def _same(got: dict, ref, tol: float = 1e-5) -> None:
    "A worker's summary equals the single-process result `ref` (to tol)."
    assert got.get('error') is None, got
    assert got['baseline'] == pytest.approx(ref.baseline_nll, abs=tol)
    assert {int(k): v for k, v in got['single'].items()} == pytest.approx(ref.single_nll, abs=tol)
    assert {tuple(map(int, k.split(','))): v for k, v in got['pair'].items()} == pytest.approx(ref.pair_nll, abs=tol)
    assert got['order'] == ref.delete_order


def test_fit_on_two_ranks(tmp_path):
    torch = pytest.importorskip('torch')
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.skip('this torch build has no torch.distributed with gloo')
    import transformers
    transformers.utils.logging.disable_progress_bar()
    from layerkit.criteria import PruningCriteria
    from layerkit.order2 import block_evaluations
    from layerkit.order2_result import Checkpoint
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_texts

    killed = _torchrun(tmp_path, 'kill')  # every rank dies once its shard holds 3 measurements
    assert killed.returncode != 0
    shards = sorted(p.name for p in (tmp_path/'killed').glob('*')
                    if not (p.name.startswith('.') and '.tmp-' in p.name))  # a rank the launcher killed mid-write leaves its temp file, never a half shard (merged shards take it with them: pruning._remove)
    assert shards and all(n.startswith('o2.rank') and n.endswith('-of-2.json') for n in shards), shards
    shutil.copytree(tmp_path/'killed', tmp_path/'killed_single')

    model, tok = load_tiny('llama', num_hidden_layers=L)
    texts = tiny_texts(60)
    pruner = Order2Pruner(model, tokenizer=tok)
    ref = pruner.fit(texts=texts, **FIT)  # the single-process result
    # a single process's partial checkpoint (stopped after 7 measurements) and one with a single measurement left
    (tmp_path/'partial').mkdir(); (tmp_path/'one_left').mkdir()
    ck = tmp_path/'one_left'/'o2.json'
    pruner.engine = None
    pruner.fit(texts=texts, checkpoint_path=ck, **FIT)
    data = json.loads(ck.read_text())
    data['values'] = dict(list(data['values'].items())[:7])
    (tmp_path/'partial'/'o2.json').write_text(json.dumps(data))
    data = json.loads(ck.read_text())
    del data['values']['1,4']
    ck.write_text(json.dumps(data))

    run = _torchrun(tmp_path, 'main')
    assert run.returncode == 0, run.stderr[-3000:]
    reps = [json.loads((tmp_path/f'rank{r}-main.json').read_text()) for r in (0, 1)]
    assert [r['world'] for r in reps] == [2, 2]

    total = block_evaluations(L) - L  # the measurement's block evaluations beyond one capture pass
    for rep in reps:  # every rank returns the same result, equal to one process's
        for name in ('killed', 'fresh', 'partial', 'one_left'): _same(rep[name], ref)
    fresh = [rep['fresh'] for rep in reps]
    assert fresh[0]['ranks'] == fresh[1]['ranks']
    for r, f in enumerate(fresh):  # each rank captured once and did its share, within 10% of half the work
        share = f['hooked'] - L
        assert abs(share - total / 2) <= 0.1 * total / 2, (r, share, total)
        assert f['ranks'][r]['block_evaluations'] == f['hooked']  # layerkit's count is the hooks' count
    assert fresh[0]['block_evaluations'] == sum(f['hooked'] for f in fresh)
    assert fresh[0]['files'] == ['o2.json']  # the shards are merged into the checkpoint, and gone
    assert reps[0]['killed']['files'] == ['o2.json']
    assert sum(rep['killed']['hooked'] for rep in reps) < sum(f['hooked'] for f in fresh)  # the shards' work is reused
    assert sum(rep['partial']['hooked'] for rep in reps) < sum(f['hooked'] for f in fresh)
    left = sorted(rep['one_left']['hooked'] for rep in reps)  # one measurement left: one rank has nothing but the capture
    assert left[0] == L and left[1] > L, left

    # the merged checkpoint resumes in one process (nothing left to do); the killed run's shards resume in one process
    pruner.engine = None
    again = pruner.fit(texts=texts, checkpoint_path=tmp_path/'fresh'/'o2.json', **FIT)
    assert again.block_evaluations == 0 and again.delete_order == ref.delete_order
    pruner.engine = None
    single = pruner.fit(texts=texts, checkpoint_path=tmp_path/'killed_single'/'o2.json', **FIT)
    _same(dict(baseline=single.baseline_nll, single={str(k): v for k, v in single.single_nll.items()},
               pair={f'{i},{j}': v for (i, j), v in single.pair_nll.items()}, order=single.delete_order), ref)
    assert single.block_evaluations < ref.block_evaluations
    assert sorted(p.name for p in (tmp_path/'killed_single').glob('*')) == ['o2.json']

    # the iterative criterion: the same order as one process, each step's re-measurements shared by both ranks
    pruner.engine = None
    pruner.fit(texts=texts, **FIT)
    crit = PruningCriteria(pruner)
    order = crit.iterative_order(3)
    for rep in reps:
        it = rep['iterative']
        assert it.get('error') is None, it
        assert it['order'] == order
        assert it['total'] == sum(it['rank_evals']) and min(it['rank_evals']) > 0
    assert [rep['iterative']['rank_evals'] for rep in reps][0] == reps[1]['iterative']['rank_evals']
    assert [rep['iterative']['steps_hooked'] for rep in reps] == reps[0]['iterative']['rank_evals']
    assert max(reps[0]['iterative']['rank_evals']) < crit.iterative_block_evaluations  # no rank did it all

    # ranks that disagree on the calibration: an error on every rank that names the rank, not a hang
    for rep in reps:
        err = rep['disagree'].get('error', '')
        assert err.startswith('ValueError: the ranks disagree on the fingerprint of the model, the calibration'), err
        assert 'rank 1:' in err and "'seed': 1" in err and "unlike rank 0's" in err, err

    # save_pruned: every rank prunes its copy, rank 0 alone writes the folder
    assert [rep['saved'].get('error') for rep in reps] == [None, None], [rep['saved'] for rep in reps]
    assert [(rep['saved']['path'], rep['saved']['n_layers']) for rep in reps] == [('saved', 4)] * 2
    assert 'layer_interaction_selection.json' in reps[1]['saved']['files']
