"""Tests of the project's own tooling that a notebook cannot host: the test runner, the console script, the docs tools."""
import json, os, subprocess, sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _nb(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


@pytest.fixture
def scratch_nbs():
    "Notebooks written inside nbs/ (so nbdev finds its config), removed afterwards."
    made = []
    def make(name, *sources):
        p = _nb(ROOT/'nbs'/name, *sources)
        made.append(p)
        return p
    yield make
    for p in made: p.unlink(missing_ok=True)


def test_failing_notebook_fails_the_runner_with_its_name(scratch_nbs):
    bad = scratch_nbs('zz_scratch_failing.ipynb', 'x = 1', 'assert x == 2, "deliberate failure"')
    good = scratch_nbs('zz_scratch_passing.ipynb', 'assert 1 + 1 == 2')
    r = subprocess.run([sys.executable, 'tools/run_tests.py', str(bad), str(good)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert 'FAIL  nbs/zz_scratch_failing.ipynb' in r.stdout
    assert 'zz_scratch_failing.ipynb' in r.stderr and 'deliberate failure' in r.stderr
    assert r.stdout.strip().splitlines()[-1] == '1 passed, 1 failed'


def test_runner_counts_pytest_files_beside_notebooks_and_names_the_costliest(scratch_nbs, tmp_path):
    nb = scratch_nbs('zz_scratch_sleepy.ipynb', 'import time', 'time.sleep(1.5)', 'x = 1')
    t = tmp_path/'test_scratch.py'
    t.write_text('def test_ok(): pass\n\ndef test_bad(): assert 1 == 2, "deliberate"\n')
    r = subprocess.run([sys.executable, 'tools/run_tests.py', str(nb), str(t)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 1 and lines[-1] == '2 passed, 1 failed', r.stdout + r.stderr
    assert lines[-2] == '(1 notebooks, 2 pytest tests, ' + lines[-2].split(', ')[-1], lines[-2]
    costliest = next(l for l in lines if l.startswith('costliest: '))
    assert costliest.startswith('costliest: nbs/zz_scratch_sleepy.ipynb cell 1 '), costliest  # the 1.5 s cell, first
    assert 'deliberate' in r.stderr, r.stderr


def test_failing_notebook_fails_nbdev_test_with_its_name(scratch_nbs):
    bad = scratch_nbs('zz_scratch_failing2.ipynb', 'raise ValueError("boom")')
    r = subprocess.run([str(BIN/'nbdev-test'), str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert 'zz_scratch_failing2.ipynb' in r.stderr


def test_slow_cells_are_skipped_unless_asked(scratch_nbs):
    nb = scratch_nbs('zz_scratch_slow.ipynb', '#| slow\nraise RuntimeError("slow cell ran")')
    fast = subprocess.run([sys.executable, 'tools/run_tests.py', str(nb)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert fast.returncode == 0, fast.stderr
    slow = subprocess.run([sys.executable, 'tools/run_tests.py', '--flags', 'slow', str(nb)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert slow.returncode == 1 and 'slow cell ran' in slow.stderr


def test_console_script_info():
    from layerkit.testing import tiny_model_path
    r = subprocess.run([str(BIN/'layerkit'), 'info', str(tiny_model_path('llama'))], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['hidden_states'] == 5


def test_console_script_user_error_is_one_line():
    r = subprocess.run([str(BIN/'layerkit'), 'info', '/no/such/model'], capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert r.returncode == 2
    assert r.stderr == 'layerkit info: error: no such folder: /no/such/model\n'


def test_readme_link_rewriting():
    sys.path.insert(0, str(ROOT/'tools'))
    import docs
    text = docs._link_notebooks('[a](hub.html) [b](https://x.org/hub.html) [c](nope.html) [d](bench/pruning/results/x.md)', ROOT/'nbs')
    repo = 'https://github.com/layerkit/layerkit/blob/main'
    assert text == f'[a]({repo}/nbs/11_hub.ipynb) [b](https://x.org/hub.html) [c](nope.html) [d]({repo}/bench/pruning/results/x.md)'
