"""Order2Pruner.fit(sequential=True) under torch.distributed: two gloo ranks started by `torchrun --nproc_per_node 2`
(tests/_dist_seq_worker.py), compared with one process measuring in memory on the same calibration.

Two launches: ranks SIGKILLed at the start of their second measuring pass (one row per pass), then a run that resumes
them and one from scratch. What a rank's shard file holds is whole passes (every measurement of its rows); the
resumed ranks measure only the rest; both results equal the single process's."""
import json
import subprocess
from pathlib import Path

import pytest

from _launch import torchrun

WORKER = Path(__file__).with_name('_dist_seq_worker.py')
FIT = dict(n_sequences=3, sequence_length=16, seed=0, progress=False)
L = 6


def _torchrun(out: Path, mode: str) -> subprocess.CompletedProcess:
    return torchrun(WORKER, out, mode)


def _row(key: str) -> int | None:
    return int(key.split(',')[0]) if key else None


def test_sequential_fit_on_two_ranks(tmp_path):
    torch = pytest.importorskip('torch')
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.skip('this torch build has no torch.distributed with gloo')
    import transformers
    transformers.utils.logging.disable_progress_bar()
    from layerkit.order2 import block_evaluations, measurement_plan
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_texts

    killed = _torchrun(tmp_path, 'kill')
    assert killed.returncode != 0
    plan = [','.join(map(str, k)) for k in measurement_plan(L)]
    kept = {}
    for f in sorted((tmp_path/'killed').glob('o2.rank*-of-2.json')):
        kept[f.name] = set(json.loads(f.read_text())['values'])
    held = set().union(*kept.values()) if kept else set()
    rows = {_row(k) for k in held} - {None}
    assert rows, kept  # a rank's first pass reached its shard file before the kill
    for values in kept.values():  # whole passes: every measurement of a row, or none of it
        for i in {_row(k) for k in values} - {None}:
            assert {k for k in plan if _row(k) == i} <= values, (i, values)

    model, tok = load_tiny('llama', num_hidden_layers=L)
    ref = Order2Pruner(model, tokenizer=tok).fit(texts=tiny_texts(60), **FIT)  # one process, in memory

    run = _torchrun(tmp_path, 'main')
    assert run.returncode == 0, run.stderr[-3000:]
    reps = [json.loads((tmp_path/f'rank{r}-main.json').read_text()) for r in (0, 1)]
    assert [r['world'] for r in reps] == [2, 2]
    for rep in reps:
        for name in ('killed', 'fresh', 'disk'):  # disk: weights_on_disk=True, the same values
            got = rep[name]
            assert got.get('error') is None, got
            assert got['baseline'] == pytest.approx(ref.baseline_nll, abs=1e-5)
            assert {int(k): v for k, v in got['single'].items()} == pytest.approx(ref.single_nll, abs=1e-5)
            assert {tuple(map(int, k.split(','))): v for k, v in got['pair'].items()} == pytest.approx(ref.pair_nll, abs=1e-5)
            assert got['order'] == ref.delete_order
            assert got['files'] == ['o2.json']  # the shards merged into the checkpoint, and gone
    asked = [set(rep['killed']['asked']) for rep in reps]
    assert not asked[0] & asked[1] and not (asked[0] | asked[1]) & held  # each key once, none the shards held
    assert asked[0] | asked[1] | held == set(plan)
    for rep in reps:  # one pass per row of its own (rows_per_pass=1), after the capture pass
        k = rep['killed']
        assert k['rows_per_pass'] == 1 and k['passes'] == 1 + len({_row(x) for x in k['asked']} - {None}), k
    fresh = [rep['fresh'] for rep in reps]
    total = block_evaluations(L) - L  # beyond one capture pass
    for r, f in enumerate(fresh):  # each rank: its capture, one pass over its rows (6 blocks: one pass), half the work
        assert f['rows_per_pass'] == L and f['passes'] == 2, f
        share = f['engine_evaluations'] - L
        assert abs(share - total / 2) <= 0.1 * total / 2, (r, share, total)
        assert f['ranks'][r]['block_evaluations'] == f['engine_evaluations']
    assert fresh[0]['block_evaluations'] == sum(f['engine_evaluations'] for f in fresh)
