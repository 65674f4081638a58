"""`layerkit prune --out` on a read-only file system fails at once, before any weights load or any measurement
(issue 11: it used to fail only after all the measuring). Needs root to mount a read-only tmpfs; skipped otherwise."""
import os, subprocess, sys, tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# `layerkit prune` with the loading of any weights turned into exit code 1 and a line on stderr: "before any weights load"
# is checked as a fact of the run, not as a time (how long the work takes depends on the machine)
NO_WEIGHTS = r'''
import sys
from transformers.modeling_utils import PreTrainedModel
def refuse(*a, **k): sys.exit('layerkit loaded weights')
PreTrainedModel.from_pretrained = classmethod(refuse)
from layerkit.cli import main
sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def readonly_dir():
    d = tempfile.mkdtemp()
    if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', d], capture_output=True).returncode != 0:
        os.rmdir(d)
        pytest.skip('cannot mount a read-only tmpfs here (needs root)')
    try: yield Path(d)
    finally:
        subprocess.run(['umount', d], check=False)
        os.rmdir(d)


def _prune(model, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', NO_WEIGHTS, 'prune', str(model), '--target-layers', '2', '--out', str(out)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HF_HUB_OFFLINE='1', PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', '')))


def test_prune_into_a_read_only_folder_fails_before_the_work(readonly_dir, tmp_path):
    from layerkit.testing import tiny_model_path
    model = tiny_model_path('llama', num_hidden_layers=4)
    r = _prune(model, readonly_dir/'pruned')
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"--out {readonly_dir}/pruned cannot be written" in r.stderr and 'Read-only file system' in r.stderr, r.stderr
    assert 'Traceback' not in r.stderr and list(readonly_dir.iterdir()) == []
    assert 'layerkit loaded weights' not in r.stderr, r.stderr
    ok = _prune(model, tmp_path/'pruned')  # the control: into a folder that can be written, the same run reaches the weights
    assert ok.returncode == 1 and ok.stderr.strip().splitlines()[-1] == 'layerkit loaded weights', (ok.returncode, ok.stderr)
