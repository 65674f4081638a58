"""Bad input named before any work. A device map this machine cannot serve, by the pruner and the CLI: a CUDA device
where there is none lists the devices there are; a string that is no device map lists the forms. A local path that
names nothing, by every API that takes a model: 'no such folder: PATH', not the Hub client's 'Repo id must be...'."""
import pytest
import torch

from layerkit.cli import main
from layerkit.pruning import Order2Pruner
from layerkit.testing import tiny_model_path


@pytest.mark.parametrize('device_map, said', [
    ('nonsense', "device_map='nonsense' is not a device map; use None, one of 'auto'"),
    (3.5, "device_map=3.5 is a float"),
])
def test_pruner_names_a_bad_device_map(device_map, said):
    with pytest.raises((ValueError, TypeError), match=None) as e: Order2Pruner(str(tiny_model_path('llama')), device_map=device_map)
    assert said in str(e.value), str(e.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks a machine without CUDA')
@pytest.mark.parametrize('device_map', ['cuda:0', 'cuda', 0, {'': 'cuda:0'}])
def test_cuda_device_map_without_cuda_lists_the_devices(device_map):
    with pytest.raises(ValueError) as e: Order2Pruner(str(tiny_model_path('llama')), device_map=device_map)
    assert 'is not available' in str(e.value) and 'available devices: cpu' in str(e.value), str(e.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks a machine without CUDA')
def test_cli_device_map_cuda_without_cuda_exits_2_with_one_line(tmp_path, capsys):
    rc = main(['prune', str(tiny_model_path('llama')), '--target-layers', '2', '--out', str(tmp_path/'o'), '--device-map', 'cuda:0'])
    err = capsys.readouterr().err
    assert rc == 2 and err.count('\n') == 1 and '--device-map cuda:0 is not available' in err, (rc, err)
    assert not (tmp_path/'o').exists()


@pytest.mark.parametrize('api', ['LayerEmbedder', 'ILGEClassifier', 'layer_report', 'Order2Pruner', 'load_config'])
def test_a_missing_local_model_is_no_such_folder(api, tmp_path):
    import numpy as np
    from layerkit import ILGEClassifier, LayerEmbedder
    from layerkit.hub import load_config
    from layerkit.report import layer_report
    missing = str(tmp_path/'no'/'model')
    call = {'LayerEmbedder': lambda: LayerEmbedder(missing).transform(['a text']),
            'ILGEClassifier': lambda: ILGEClassifier(missing, num_classes=2).fit(['a', 'b'] * 2, [0, 1] * 2),  # two of a class: the stack's split
            'layer_report': lambda: layer_report(['a', 'b'] * 10, np.arange(20) % 2, embedder=missing),
            'Order2Pruner': lambda: Order2Pruner(missing, device_map=None),
            'load_config': lambda: load_config(missing)}[api]
    with pytest.raises(ValueError) as e: call()
    assert f'no such folder: {missing}' in str(e.value) and 'Repo id' not in str(e.value), str(e.value)


def test_cli_info_refuses_a_gguf_that_declares_more_than_it_holds(tmp_path, capsys, monkeypatch):
    "A 114-byte file declaring an array of 2**40 numbers: one line naming the file and the key, at once (it grew to 2 GB)."
    import struct, time
    monkeypatch.setenv('LAYERKIT_CACHE', str(tmp_path/'cache'))
    s = lambda x: struct.pack('<Q', len(x)) + x.encode()
    bad = tmp_path/'huge.gguf'
    bad.write_bytes(b'GGUF' + struct.pack('<IQQ', 3, 0, 2) + s('general.architecture') + struct.pack('<I', 8) + s('llama')
                    + s('tokenizer.ggml.scores') + struct.pack('<II', 9, 6) + struct.pack('<Q', 2**40))
    t0 = time.perf_counter()
    assert main(['info', str(bad)]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 10, time.perf_counter() - t0
    assert err.count('\n') == 1 and f"{str(bad)!r} is not a readable GGUF file" in err, err
    assert "key 'tokenizer.ggml.scores' declares 1,099,511,627,776" in err, err
    renamed = tmp_path/'model.bin'; renamed.write_bytes(bad.read_bytes())  # a GGUF by its magic, whatever its name
    assert main(['info', str(renamed)]) == 2 and "model.bin' is not a readable GGUF file" in capsys.readouterr().err
