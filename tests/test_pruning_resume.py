"""Order2Pruner.fit survives being killed: the checkpoint is always readable, keeps every finished measurement, and a
resumed fit skips them and ends with the same values as an uninterrupted one."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import sys, time
import transformers; transformers.utils.logging.disable_progress_bar()
from layerkit.order2_result import Checkpoint
from layerkit.pruning import Order2Pruner
from layerkit.testing import load_tiny, tiny_texts
record = Checkpoint.record
def slow_record(self, *a, **k):  # give the parent time to kill us between (and during) writes
    record(self, *a, **k)
    time.sleep(float(sys.argv[2]))
Checkpoint.record = slow_record
model, tok = load_tiny('llama', num_hidden_layers=6)
sys.stdin.readline()  # wait for the go (children start together, so their imports overlap)
Order2Pruner(model, tokenizer=tok).fit(texts=tiny_texts(60), n_sequences=3, sequence_length=16, seed=0,
                                       checkpoint_path=sys.argv[1], progress=False)
'''

FIT = dict(n_sequences=3, sequence_length=16, seed=0, progress=False)


def _values(path: Path) -> dict:
    return json.loads(path.read_text())['values'] if path.exists() else {}


def _start(path: Path, pause: float) -> subprocess.Popen:
    "A child process that loads the model, then fits with `checkpoint_path=path` once it reads a line."
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.Popen([sys.executable, '-c', CHILD, str(path), str(pause)], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


def _go_and_kill(p: subprocess.Popen, path: Path, at_least: int, timeout: float = 60) -> int:
    "Let child `p` fit and SIGKILL it once the checkpoint holds `at_least` values; return how many it holds."
    try:
        p.stdin.write('go\n'); p.stdin.flush()
        t0 = time.time()
        while time.time() - t0 < timeout:
            if p.poll() is not None: pytest.fail(f'the child fit ended before it was killed (rc={p.returncode})')
            try: n = len(_values(path))
            except json.JSONDecodeError: pytest.fail('the checkpoint was caught half-written')
            if n >= at_least:
                p.send_signal(signal.SIGKILL)
                p.wait()
                return len(_values(path))
            time.sleep(0.005)
        pytest.fail('the child fit made no progress')
    finally:
        if p.poll() is None: p.kill(); p.wait()


def test_killed_fit_resumes_to_the_same_result(tmp_path):
    import transformers
    transformers.utils.logging.disable_progress_bar()
    from layerkit.order2_result import Checkpoint
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_texts

    ck = tmp_path/'order2.json'
    a, b = _start(ck, pause=0.05), _start(ck, pause=0.0)
    first = _go_and_kill(a, ck, at_least=4)
    assert first >= 4
    second = _go_and_kill(b, ck, at_least=first + 6)  # no pause: the kill may land inside a write
    assert second >= first + 6  # nothing finished was lost
    Checkpoint(ck, json.loads(ck.read_text())['fingerprint'])  # loads: neither damaged nor half-written

    model, tok = load_tiny('llama', num_hidden_layers=6)
    pruner = Order2Pruner(model, tokenizer=tok)
    texts = tiny_texts(60)
    resumed = pruner.fit(texts=texts, checkpoint_path=ck, **FIT)
    assert len(_values(ck)) == 22  # 1 + 6 + 15 measurements in all
    pruner.engine = None
    full = pruner.fit(texts=texts, **FIT)
    assert resumed.block_evaluations < full.block_evaluations  # finished work was skipped
    assert resumed.baseline_nll == pytest.approx(full.baseline_nll, abs=1e-6)
    for i in range(6): assert resumed.single_nll[i] == pytest.approx(full.single_nll[i], abs=1e-6)
    for k, v in full.pair_nll.items(): assert resumed.pair_nll[k] == pytest.approx(v, abs=1e-6)
    assert resumed.delete_order == full.delete_order
    again = pruner.fit(texts=texts, checkpoint_path=ck, **FIT)
    assert again.block_evaluations == 0  # all done: nothing to measure
