"""A GGUF file wherever layerkit takes a model: the embedder, the classifier, the pruner (fit, save_pruned writing a
plain safetensors checkpoint), the criteria and the CLI, each on the tiny Llama fixture written as a GGUF file."""
import json
from pathlib import Path

import pytest
import torch
import transformers

from layerkit.testing import load_tiny, tiny_gguf_path, tiny_model_path, tiny_texts



@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv('LAYERKIT_CACHE', str(tmp_path/'cache'))


@pytest.fixture(scope='module')
def gguf_file(tmp_path_factory):
    return tiny_gguf_path('llama')


def test_embedder_reads_a_gguf_file_as_the_folder_it_came_from(gguf_file):
    from layerkit.embeddings import LayerEmbedder
    from layerkit.testing import tiny_model_path
    texts = tiny_texts(6)
    a = LayerEmbedder(str(gguf_file), device='cpu').transform(texts)
    b = LayerEmbedder(str(tiny_model_path('llama')), device='cpu').transform(texts)
    assert a.shape == b.shape == (6, 5, 32), (a.shape, b.shape)
    assert torch.allclose(torch.as_tensor(a), torch.as_tensor(b), atol=1e-6), float((torch.as_tensor(a) - torch.as_tensor(b)).abs().max())


def test_classifier_fits_on_a_gguf_file(gguf_file):
    from layerkit import CayleyConfig, ILGEClassifier
    texts = tiny_texts(12)
    y = [i % 2 for i in range(12)]
    clf = ILGEClassifier(str(gguf_file), config=CayleyConfig(hidden_dim=8, epochs=2), num_classes=2, device='cpu')
    clf.fit(texts, y)
    assert len(clf.predict(texts)) == 12


def test_pruner_saves_a_plain_checkpoint_from_a_gguf_file(gguf_file, tmp_path):
    from layerkit.pruning import Order2Pruner
    texts = tiny_texts(16)
    with Order2Pruner(str(gguf_file), device_map=None, dtype='float32') as p:
        res = p.fit(texts=texts, n_sequences=4, sequence_length=16, progress=False)
        out = p.save_pruned(tmp_path/'pruned', target_layers=2, result=res)
    names = {f.name for f in out.iterdir()}
    assert {'config.json', 'model.safetensors', 'tokenizer.json', 'layer_interaction_selection.json'} <= names, names
    cfg = json.loads((out/'config.json').read_text())
    assert cfg['num_hidden_layers'] == 2 and 'quantization_config' not in cfg, cfg
    m = transformers.AutoModelForCausalLM.from_pretrained(out)
    ref, tok = load_tiny('llama')
    from layerkit.deletion import delete_blocks
    kept = json.loads((out/'layer_interaction_selection.json').read_text())['retained_layers']
    gone = [i for i in range(4) if i not in kept]
    delete_blocks(ref, gone)
    ids = tok(['the cat sat on the mat'], return_tensors='pt')
    with torch.no_grad(): a, b = m(**ids).logits, ref(**ids).logits
    assert torch.allclose(a, b, atol=1e-5), float((a - b).abs().max())


def test_cli_info_and_prune_take_a_gguf_file(gguf_file, tmp_path, capsys):
    from layerkit.cli import main
    assert main(['info', str(gguf_file)]) == 0
    assert json.loads(capsys.readouterr().out)['blocks'] == 4
    texts = tmp_path/'t.txt'; texts.write_text('\n'.join(tiny_texts(16)))
    args = ['--target-layers', '3', '--texts', str(texts), '--n-sequences', '4', '--sequence-length', '16', '--device-map', 'cpu', '--no-progress']
    assert main(['prune', str(gguf_file), '--out', str(tmp_path/'out'), *args]) == 0, capsys.readouterr().err
    assert json.loads((tmp_path/'out'/'config.json').read_text())['num_hidden_layers'] == 3
    capsys.readouterr()
    assert main(['info', str(tmp_path/'nothing.gguf')]) == 2
    assert 'no such file' in capsys.readouterr().err


def test_save_pruned_as_gguf_copies_the_kept_blocks(tmp_path):
    import gguf
    from layerkit.pruning import Order2Pruner
    src = tiny_gguf_path('llama', qtype='Q8_0')
    with Order2Pruner(str(src), device_map=None, dtype='float32') as p:
        res = p.fit(texts=tiny_texts(16), n_sequences=4, sequence_length=16, progress=False)
        out = p.save_pruned(tmp_path/'pruned.gguf', target_layers=2, result=res, format='gguf')
        gone = p.selection['deleted_layers']
    r = gguf.GGUFReader(str(out))
    assert r.fields['llama.block_count'].contents() == 2 and r.fields['layerkit.deleted_blocks'].contents() == gone
    assert {t.tensor_type.name for t in r.tensors} == {'F32', 'Q8_0'}
    with Order2Pruner(str(tiny_model_path('llama')), device_map=None) as p:
        p.fit(texts=tiny_texts(16), n_sequences=4, sequence_length=16, progress=False)
        with pytest.raises(ValueError, match="convert_hf_to_gguf.py"): p.save_pruned(tmp_path/'x.gguf', 2, format='gguf')
        with pytest.raises(ValueError, match="format='onnx' is not supported"): p.save_pruned(tmp_path/'x', 2, format='onnx')
    assert not (tmp_path/'x.gguf').exists()


def test_cli_prunes_a_gguf_to_a_gguf(tmp_path, capsys):
    from layerkit.cli import main
    texts = tmp_path/'t.txt'; texts.write_text('\n'.join(tiny_texts(16)))
    args = ['--target-layers', '3', '--texts', str(texts), '--n-sequences', '4', '--sequence-length', '16', '--device-map', 'cpu', '--no-progress']
    assert main(['prune', str(tiny_gguf_path('llama')), '--out', str(tmp_path/'p.gguf'), *args]) == 0, capsys.readouterr().err
    rec = json.loads(capsys.readouterr().out)
    assert rec['llama_quantize_prune_layers'] == ','.join(map(str, rec['deleted_layers'])), rec
    assert (tmp_path/'p.gguf').is_file()
    assert main(['prune', str(tiny_model_path('llama')), '--out', str(tmp_path/'q.gguf'), *args]) == 2
    err = capsys.readouterr().err
    assert "convert_hf_to_gguf.py" in err and err.count('\n') == 1, err
