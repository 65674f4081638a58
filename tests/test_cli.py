"""`layerkit prune` under a real Ctrl-C: a SIGINT to the process prints one line, exits 130 with no traceback and keeps
every finished measurement; the same command, run again, says that it resumed and finishes."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CLI = 'import sys; from layerkit.cli import main; sys.exit(main(sys.argv[1:]))'
SLOW_CLI = r'''
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell that started us in the background ignores SIGINT
from layerkit.order2_result import Checkpoint
record = Checkpoint.record
def slow_record(self, *a, **k):  # time for the parent to interrupt us between measurements
    record(self, *a, **k)
    time.sleep(0.2)
Checkpoint.record = slow_record
from layerkit.cli import main
sys.exit(main(sys.argv[1:]))
'''


def _env() -> dict:
    return dict(os.environ, HF_HUB_OFFLINE='1', OMP_NUM_THREADS='1',
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''))


def _measured(path: Path) -> int:
    try: return len(json.loads(path.read_text())['values'])
    except (OSError, ValueError): return 0


def test_ctrl_c_keeps_the_measurements_and_the_rerun_resumes(tmp_path):
    from layerkit.testing import tiny_model_path, tiny_texts
    model = tiny_model_path('llama', num_hidden_layers=4)  # 1 + 4 + 6 = 11 measurements
    (tmp_path/'texts.txt').write_text('\n'.join(tiny_texts(40)))
    out, ck = tmp_path/'pruned', tmp_path/'pruned.checkpoint.json'
    argv = ['prune', str(model), '--target-layers', '2', '--out', str(out), '--texts', str(tmp_path/'texts.txt'),
            '--n-sequences', '2', '--sequence-length', '16', '--recipe', 'order2']  # the seed's cut: its measurements
    p = subprocess.Popen([sys.executable, '-c', SLOW_CLI, *argv], cwd=tmp_path, env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.time()
        while _measured(ck) < 3:
            if p.poll() is not None: pytest.fail(f'the command ended before it was interrupted: {p.communicate()}')
            if time.time() - t0 > 120: pytest.fail('the command made no progress')
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill(); p.wait()
    n = _measured(ck)
    assert p.returncode == 130, stderr
    assert 3 <= n < 11
    assert stderr.strip().splitlines()[-1] == \
        f'layerkit prune: interrupted after {n} of 11 measurements; run the same command again to resume'
    assert 'Traceback' not in stderr and stdout == ''
    assert not out.exists()

    again = subprocess.run([sys.executable, '-c', CLI, *argv, '--no-progress'], cwd=tmp_path, env=_env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stderr == f'resuming: {n} of 11 measurements already in {ck}\n'
    assert len(json.loads(again.stdout)['deleted_layers']) == 2
    assert _measured(ck) == 11 and (out/'config.json').exists()
