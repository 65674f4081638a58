"""bench/gpu/check.py, the script that checks and times layerkit on a GPU, rehearsed on the CPU (`--dry-run`).

Its comparisons (bench/gpu/checks.py) and the report writer (bench/gpu/report.py) are tested directly, in this process.

The default run takes a subset of the parts (`--only`, one run with one check perturbed, about 12 s on two cores): the whole dry run takes
about three minutes, and runs when LAYERKIT_GPU_CHECK_FULL=1. A forced mismatch (`--perturb CHECK`) must fail loudly: a
non-zero exit and a line naming the check with both values."""
import json, os, subprocess, sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT/'bench'/'gpu'/'check.py'
sys.path.insert(0, str(ROOT/'bench'))  # bench/gpu, the script and its parts
import common  # noqa: E402
from gpu import checks as C  # noqa: E402
from gpu.report import command, report  # noqa: E402


def test_close_per_layer_names_the_worst_layer():
    want = np.ones((4, 3, 5))
    got = want.copy(); got[:, 2] *= 1.01
    r = C.close(got, want, 2e-2, per_layer=True)
    assert r and r.value == 'relative error 1.00e-02 (worst layer 2)' and r.limit == '2e-02' and not r.detail
    r = C.close(got, want, 1e-3, per_layer=True)
    assert not r and 'worst layer 2' in r.detail and 'got 1.01, want 1' in r.detail
    assert not C.close(torch.ones(3), torch.ones(4), 1.0) and C.close(torch.ones(3), torch.ones(4), 1.0).value == 'shape (3,)'
    assert not C.close([float('nan')], [1.0], 1.0)  # a NaN fails, whatever the tolerance


def test_values_equal_and_bounds():
    assert C.values({(): 1.0, (0,): 2.0}, {(): 1.0, (0,): 2.00001}, 1e-4)
    r = C.values({(): 1.0, (0,): 2.1}, {(): 1.0, (0,): 2.0}, 1e-4)
    assert not r and r.detail == 'at (0,): got 2.1, want 2.0'
    assert not C.values({(): 1.0}, {(): 1.0, (0,): 2.0}, 1.0)  # a missing key
    assert C.equal([1, 2], [1, 2]) and C.equal('cuda', 'cuda') and not C.equal('cpu', 'cuda')
    r = C.equal(np.array([1, 2, 3]), np.array([1, 5, 3]))
    assert not r and r.value == '1 of 3 differ' and 'flat index 1' in r.detail
    assert C.at_least(0.99, 0.98, 'agreement') and not C.at_least(0.9, 0.98, 'agreement')
    assert C.at_most(0.01, 0.03, 'gap').value == 'gap 0.0100' and not C.at_most(0.1, 0.03, 'gap')


@pytest.mark.parametrize('compare,got,want,args', [
    (C.close, torch.ones(2, 3), torch.ones(2, 3), (1e-4,)), (C.values, {(): 1.0}, {(): 1.0}, (1e-4,)),
    (C.equal, [1, 2], [1, 2], ()), (C.at_least, 1.0, 1.0, ('agreement',)), (C.at_most, 0.0, 0.0, ('gap',))])
def test_log_perturbs_only_the_named_check(compare, got, want, args, capsys):
    log = C.Log(perturb='b')
    assert log.check('a', compare, got, want, *args)  # passes as it is
    assert not log.check('b', compare, got, want, *args)  # the same values, perturbed: fails
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('ok   a: ') and out[1].startswith('FAIL b: ') and ', limit ' in out[1]
    assert [c['check'] for c in log.failed] == ['b'] and set(log.checks[0]) == {'check', 'ok', 'value', 'limit', 'detail'}


def test_report_and_command_line():
    assert command(['--out', '/tmp/x', '--minilm=/home/me/m', '--only', 'encoders']) == \
        'python bench/gpu/check.py --out DIR --minilm=DIR --only encoders'
    log = C.Log()
    log.check('encoders/a', C.close, [1.0], [1.0], 1e-4)
    log.fail('order2/ran', 'RuntimeError: boom', 'no exception')
    md = report(log.checks, {'A table': '| x |\n|---|\n| 1 |'}, dry=True, env='dry run on the CPU', parts=['encoders'],
                wall=3.2, cmd='python bench/gpu/check.py --dry-run', errors=['order2: RuntimeError: boom'], skips=['x: why'])
    assert md.startswith('# layerkit on a GPU: correctness and timings (DRY RUN on the CPU, tiny sizes)\n\n'
                         'dry run on the CPU. Parts: encoders; 3 s in all. Produced by `python bench/gpu/check.py --dry-run`.\n\n'
                         '**1 of 2 checks passed**; failed: order2/ran.\n\nErrors: order2: RuntimeError: boom\n\nSkipped: x: why\n\n'
                         '## A table\n\n| x |')
    assert '## Every check' in md and '| order2/ran | **FAIL** | RuntimeError: boom | no exception |' in md


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
    tables = json.loads((out/'gpu.tables.json').read_text())  # gpu.md's tables as data, as every results file has
    assert tables['script'] == 'bench/gpu/check.py' and tables['tables']
    assert {k: v for k, v in tables.items() if k not in ('script', 'date')} == common.tables_of(md)
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


def test_merge_runs_later_parts_replace_earlier_ones():
    "Three runs' gpu.json into one: a later run's tables and checks replace those of the same name; the rest is kept."
    from gpu import check as gpu_check
    def run_(parts, checks, tables, wall, cmd=None):
        r = dict(dry_run=False, parts=parts, wall_s=wall, environment='H200', skips=[], errors=[], data={p: wall for p in parts},
                 checks=[dict(check=c, ok=ok, value='v', limit='l', detail='') for c, ok in checks], tables=tables)
        return r if cmd is None else dict(r, command=cmd)
    a = run_(['embedder', 'order2'], [('embedder/x', False), ('order2/y', True)], {'E': 'old', 'O': 'o'}, 100, 'python bench/gpu/check.py')
    b = run_(['time-budget'], [('time-budget/z', True)], {'B': 'b'}, 50)
    c = run_(['embedder'], [('embedder/x', True)], {'E': 'new'}, 30)
    m = gpu_check.merge_runs([a, b, c])
    assert m['parts'] == ['embedder', 'order2', 'time-budget'] and m['wall_s'] == 180
    assert m['tables'] == {'E': 'new', 'O': 'o', 'B': 'b'}  # the embedder table of the last run
    assert {x['check']: x['ok'] for x in m['checks']} == {'embedder/x': True, 'order2/y': True, 'time-budget/z': True}
    assert m['command'].startswith('`python bench/gpu/check.py`, `python bench/gpu/check.py --only time-budget`')
    md = report(m['checks'], m['tables'], dry=False, env=m['environment'], parts=m['parts'], wall=m['wall_s'], cmd=m['command'])
    assert 'Produced by `python bench/gpu/check.py`, `python' in md and '``' not in md and '**3 of 3 checks passed**' in md
    again = gpu_check.merge_runs([m, run_(['notebook'], [('notebook/c', True)], {'N': 'n'}, 20)])  # a merged run merged again
    assert again['commands'] == m['commands'] + ['python bench/gpu/check.py --only notebook'], again['commands']
    md = report(again['checks'], again['tables'], dry=False, env='H200', parts=again['parts'], wall=again['wall_s'], cmd=again['command'])
    assert '``' not in md and md.count('merged with `--merge`') == 1, md[:600]
    with pytest.raises(SystemExit, match='a dry run cannot be merged'): gpu_check.merge_runs([a, dict(b, dry_run=True)])


def test_notebook_part_runs_cells_in_order_and_fails_a_raising_cell(tmp_path):
    "The `notebook` part (the GPU tutorial without nbdev): one namespace, `eval: false` skipped, `cuda` skipped without CUDA, a raising cell fails."
    import argparse
    from gpu.context import Ctx
    from gpu.notebook import part_notebook
    cell = lambda src: dict(cell_type='code', source=src.splitlines(keepends=True), metadata={}, outputs=[])
    nb = dict(cells=[cell('x = 2'), dict(cell_type='markdown', source=['# t']), cell('#| eval: false\nraise SystemExit'),
                     cell('assert x == 2\ny = x + 1'), cell('#| cuda\nimport torch; torch.zeros(1, device="cuda")'),
                     cell('assert y == 4, f"y={y}"'), cell('z = y')])
    path = tmp_path/'gpu.ipynb'
    path.write_text(json.dumps(nb))
    ctx = Ctx(argparse.Namespace(dry_run=True, perturb=None))
    try: part_notebook(ctx, path)
    finally: __import__('shutil').rmtree(ctx.tmp, ignore_errors=True)
    got = {c['check']: (c['ok'], c['value']) for c in ctx.checks}
    assert got == {'notebook/gpu.ipynb/cell-0': (True, 'equal'), 'notebook/gpu.ipynb/cell-2': (True, 'equal'),
                   'notebook/gpu.ipynb/cell-4': (False, "got 'AssertionError: y=3'"),
                   'notebook/gpu.ipynb/cell-5': (True, 'equal')}, got  # the cell after a failure still runs
    assert ctx.skips == ['notebook/gpu.ipynb/cell-3 (cuda): a cuda cell, and no CUDA here']
