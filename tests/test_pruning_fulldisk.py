"""Order-2 pruning on real full and read-only disks (small tmpfs mounts, root only): a checkpoint write on a full disk
raises an error naming the file and keeps the previous checkpoint, an unwritable checkpoint fails before the first
measurement, and a save_pruned that runs out of space leaves no folder and the model in memory unpruned."""
import errno
import json
import os
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault('HF_HUB_OFFLINE', '1')


@contextmanager
def _tmpfs(size: str, *opts: str):
    "A fresh tmpfs of `size` mounted on a temporary folder (skips the test where mounting is not allowed)."
    d = tempfile.mkdtemp()
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', ','.join((f'size={size}',) + opts), 'tmpfs', d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        pytest.skip(f'cannot mount a tmpfs here: {r.stderr.strip()}')
    try: yield Path(d)
    finally:
        subprocess.run(['umount', d], check=False)
        os.rmdir(d)


def _fill(folder: Path) -> None:
    "Write a filler file until the disk is full."
    with open(folder/'filler', 'wb', buffering=0) as f:  # unbuffered: close has nothing left to write
        for chunk in (4096, 1):
            try:
                while True: f.write(b'x' * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e


def _hidden(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith('.'))


def test_full_disk_keeps_the_previous_checkpoint():
    from layerkit.order2_result import Checkpoint
    with _tmpfs('256k') as mnt:
        fp = dict(model='tiny', n_layers=3, seed=0)
        ck = Checkpoint(mnt/'ck.json', fp)
        ck.record((), 1.0); ck.record((0, 1), 2.0)
        before = (mnt/'ck.json').read_text()
        _fill(mnt)
        with pytest.raises(OSError, match=r"could not write checkpoint_path='.*ck\.json'.*the previous checkpoint, if any, is intact"):
            ck.record((0,), 3.0)
        assert (mnt/'ck.json').read_text() == before
        assert _hidden(mnt) == []  # the temporary file is gone
        assert Checkpoint(mnt/'ck.json', fp).values == {(): 1.0, (0, 1): 2.0}


def test_read_only_checkpoint_fails_before_measuring():
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_texts
    model, tok = load_tiny('llama', num_hidden_layers=3)
    pruner = Order2Pruner(model, tokenizer=tok)
    with _tmpfs('64k', 'ro') as mnt:
        with pytest.raises(OSError, match=r"could not write checkpoint_path='.*ck\.json'"):
            pruner.fit(texts=tiny_texts(40), n_sequences=2, sequence_length=12, seed=0, checkpoint_path=mnt/'ck.json',
                       progress=False)
        assert pruner.engine is None  # no measurement was made


def test_full_disk_save_pruned_leaves_nothing_and_the_model_unpruned():
    from layerkit.pruning import Order2Pruner
    from layerkit.testing import load_tiny, tiny_texts
    model, tok = load_tiny('llama', num_hidden_layers=4)
    pruner = Order2Pruner(model, tokenizer=tok)
    pruner.fit(texts=tiny_texts(40), n_sequences=2, sequence_length=12, seed=0, progress=False)
    with _tmpfs('64k') as mnt:
        with pytest.raises(Exception) as info:
            pruner.save_pruned(mnt/'out', target_layers=2)
        assert 'No space left' in str(info.value) or getattr(info.value, 'errno', None) == errno.ENOSPC, repr(info.value)
        assert sorted(p.name for p in mnt.iterdir()) == []  # no folder, no temporary
    assert (pruner.selection, pruner.n_layers, model.config.num_hidden_layers) == (None, 4, 4)
    with tempfile.TemporaryDirectory() as d:  # and it still saves fine where there is room
        out = pruner.save_pruned(Path(d)/'out', target_layers=2)
        assert json.loads((out/'layer_interaction_selection.json').read_text())['target_layers'] == 2
