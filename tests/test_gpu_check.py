"""bench/gpu_check.py, the script that checks and times layerkit on a GPU, rehearsed on the CPU (`--dry-run`).

The default run takes a subset of the parts (`--only`, one run with one check perturbed, about 12 s on two cores): the whole dry run takes
about three minutes, and runs when LAYERKIT_GPU_CHECK_FULL=1. A forced mismatch (`--perturb CHECK`) must fail loudly: a
non-zero exit and a line naming the check with both values."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT/'bench'/'gpu_check.py'


def run(tmp_path, *args, timeout=600):
    env = dict(os.environ, HF_HUB_OFFLINE='1', OMP_NUM_THREADS='1', TQDM_DISABLE='1')
    out = tmp_path/'out'
    r = subprocess.run([sys.executable, str(SCRIPT), '--dry-run', '--threads', '1', '--out', str(out), *args],
                       capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    return r, out


def test_dry_run_writes_its_tables_and_a_mismatch_fails_naming_the_check(tmp_path):
    "One dry run of two parts (one subprocess: the suite's time is short) with one check perturbed."
    r, out = run(tmp_path, '--only', 'encoders,order2', '--perturb', 'encoders/cayley-gcn')
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    md, js = (out/'gpu.md').read_text(), json.loads((out/'gpu.json').read_text())
    assert md.startswith('# layerkit on a GPU') and 'DRY RUN' in md
    assert "## Encoders on CUDA: dense against PyG's sparse convolutions" in md and '| cayley-gat |' in md
    assert '## Order2Pruner: float32 on CUDA against the CPU' in md and '| qwen3 |' in md
    assert '| encoder | output vs PyG |' in r.stdout  # the tables are printed too
    assert str(tmp_path) not in md and '--out DIR' in md  # the command line, without a machine path
    fail = [l for l in r.stdout.splitlines() if l.startswith('FAIL ')]
    assert len(fail) == 1 and fail[0].startswith('FAIL encoders/cayley-gcn: relative error'), fail
    assert 'got ' in fail[0] and 'want ' in fail[0] and 'limit 1e-04' in fail[0], fail[0]  # both values and the limit
    assert 'FAILED 1 of' in r.stderr and 'encoders/cayley-gcn' in r.stderr
    checks = js['checks']
    assert js['dry_run'] and len(checks) > 10
    assert [c['check'] for c in checks if not c['ok']] == ['encoders/cayley-gcn']  # the others still ran and passed


def test_bad_part_and_no_device():
    r = subprocess.run([sys.executable, str(SCRIPT), '--dry-run', '--only', 'nope'], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "unknown part(s) ['nope']" in r.stderr, r.stderr
    if not __import__('torch').cuda.is_available():  # a real run needs CUDA and says so
        r = subprocess.run([sys.executable, str(SCRIPT), '--only', 'encoders'], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and 'no CUDA device' in r.stderr, r.stderr


@pytest.mark.skipif(os.environ.get('LAYERKIT_GPU_CHECK_FULL') != '1', reason='the whole dry run (~3 min): LAYERKIT_GPU_CHECK_FULL=1')
def test_whole_dry_run(tmp_path):
    r, out = run(tmp_path)
    # offload/budget-error is a known finding (the library does not yet refuse a budget nothing fits in)
    failed = [c['check'] for c in json.loads((out/'gpu.json').read_text())['checks'] if not c['ok']]
    assert set(failed) <= {'offload/budget-error'}, (failed, r.stdout[-3000:])
