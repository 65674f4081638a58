"""`layerkit prune --out` on a read-only file system fails at once, before any weights load or any measurement
(issue 11: it used to fail only after all the measuring). Needs root to mount a read-only tmpfs; skipped otherwise."""
import json, os, subprocess, sys, tempfile, types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# `layerkit prune` with the loading of any weights turned into exit code 1 and a line on stderr: "before any weights load"
# is checked as a fact of the run, not as a time (how long the work takes depends on the machine)
NO_WEIGHTS = r'''
import contextlib, io, json, sys
from transformers.modeling_utils import PreTrainedModel
def refuse(*a, **k): sys.exit('layerkit loaded weights')
PreTrainedModel.from_pretrained = classmethod(refuse)
from layerkit.cli import main
runs = []
for argv in json.loads(sys.argv[1]):  # each command in this one process: one interpreter start-up, not one per run
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try: code = main(argv)
        except SystemExit as e:  # the refusal above: a message, exit status 1, as sys.exit gives a process
            code = 1 if isinstance(e.code, str) else e.code
            if isinstance(e.code, str): print(e.code, file=sys.stderr)
    runs.append(dict(returncode=code, stderr=err.getvalue()))
print(json.dumps(runs))
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


def _prune(model, *outs: Path) -> list[dict]:
    "`layerkit prune MODEL --target-layers 2 --out OUT` for each of `outs`, in one process: returncode and stderr of each."
    cmds = [['prune', str(model), '--target-layers', '2', '--out', str(out)] for out in outs]
    r = subprocess.run([sys.executable, '-c', NO_WEIGHTS, json.dumps(cmds)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HF_HUB_OFFLINE='1', PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', '')))
    assert r.returncode == 0, (r.returncode, r.stderr)
    return [types.SimpleNamespace(**d) for d in json.loads(r.stdout.strip().splitlines()[-1])]


def test_prune_into_a_read_only_folder_fails_before_the_work(readonly_dir, tmp_path):
    from layerkit.testing import tiny_model_path
    model = tiny_model_path('llama', num_hidden_layers=4)
    r, ok = _prune(model, readonly_dir/'pruned', tmp_path/'pruned')  # the second: the control, into a writable folder
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"--out {readonly_dir}/pruned cannot be written" in r.stderr and 'Read-only file system' in r.stderr, r.stderr
    assert 'Traceback' not in r.stderr and list(readonly_dir.iterdir()) == []
    assert 'layerkit loaded weights' not in r.stderr, r.stderr
    # the control: into a folder that can be written, the same run reaches the weights
    assert ok.returncode == 1 and ok.stderr.strip().splitlines()[-1] == 'layerkit loaded weights', (ok.returncode, ok.stderr)
