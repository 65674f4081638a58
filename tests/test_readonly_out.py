"""`layerkit prune --out` on a read-only file system fails at once, before any weights load or any measurement
(issue 11: it used to fail only after all the measuring). Needs root to mount a read-only tmpfs; skipped otherwise."""
import os, subprocess, sys, tempfile, time
from pathlib import Path

import pytest


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


def test_prune_into_a_read_only_folder_fails_before_the_work(readonly_dir):
    from layerkit.testing import tiny_model_path
    model = tiny_model_path('llama', num_hidden_layers=4)
    t0 = time.time()
    r = subprocess.run([str(Path(sys.executable).parent/'layerkit'), 'prune', str(model), '--target-layers', '2',
                        '--out', str(readonly_dir/'pruned')], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HF_HUB_OFFLINE='1'))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"--out {readonly_dir}/pruned cannot be written" in r.stderr and 'Read-only file system' in r.stderr, r.stderr
    assert 'Traceback' not in r.stderr and list(readonly_dir.iterdir()) == []
    assert time.time() - t0 < 60, time.time() - t0
