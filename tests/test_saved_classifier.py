"""Folders saved by an earlier layerkit still load, predict as they did, and save again byte for byte.

`tests/fixtures/classifier_format1/` was written by layerkit at commit e3fa389 (format_version 1, before the format
moved to `layerkit.classifier_io`): `layer/` a `LayerClassifier` (Cayley GIN, `normalize='standard'`, str labels),
`ilge/` an `ILGEClassifier` (DeepSet, int labels; its base model is only a name, never loaded here), both on
3 layers of width 4, and `expected.json` the inputs and the predictions recorded when they were saved.
`tests/fixtures/classifier_format2/` was written by layerkit 0.2.0 at commit d774c20 (format_version 2): `stack/` the
two-reader `StackConfig` (weight 0.5, then the default reader) on 3 layers of width 4, 3 string classes."""
import json, shutil
from pathlib import Path

import numpy as np
import pytest

FIXTURE = Path(__file__).resolve().parent/'fixtures'/'classifier_format1'
EXPECTED = json.loads((FIXTURE/'expected.json').read_text())
X = np.array(EXPECTED['X'], dtype=np.float32)  # (6, 3, 4)


def test_layer_classifier_loads_and_predicts_as_recorded():
    from layerkit import LayerClassifier
    clf = LayerClassifier.load(FIXTURE/'layer', device='cpu')
    assert (clf.n_layers_, clf.hidden_size_, clf.classes_.tolist()) == (3, 4, ['neg', 'pos'])
    assert clf.get_params()['normalize'] == 'standard' and clf.get_params()['random_state'] == 0
    assert clf.predict(X).tolist() == EXPECTED['layer']['predict']
    np.testing.assert_allclose(clf.predict_proba(X), EXPECTED['layer']['proba'], rtol=0, atol=1e-6)


def test_ilge_classifier_loads_and_predicts_as_recorded():
    from layerkit import ILGEClassifier
    clf = ILGEClassifier.load(FIXTURE/'ilge', device='cpu')
    assert (clf.base_model, clf.token_pooling, clf.max_length, clf.num_classes, clf.tokenizer, clf.trust_remote_code) == \
        ('hf-internal-testing/tiny-random-bert', 'last', 64, 3, None, False)
    assert clf.classes_.tolist() == [0, 1, 2] and clf.classes_.dtype == np.int64
    assert clf.random_state == 1 and clf.config.hidden_dim == 4
    proba = clf.classifier_.predict_proba(X)  # the encoder and head alone: no base model is loaded
    assert clf.classes_[proba.argmax(1)].tolist() == EXPECTED['ilge']['predict']
    np.testing.assert_allclose(proba, EXPECTED['ilge']['proba'], rtol=0, atol=1e-6)


@pytest.mark.parametrize('name', ['layer', 'ilge'])
def test_a_loaded_save_saves_again_byte_for_byte(tmp_path, name):
    "The writer is unchanged: a loaded fixture saved again gives the same two files (but the layerkit version)."
    from layerkit import ILGEClassifier, LayerClassifier
    cls = LayerClassifier if name == 'layer' else ILGEClassifier
    shutil.copytree(FIXTURE/name, tmp_path/'old')  # the fixture itself is never written to
    out = cls.load(tmp_path/'old', device='cpu').save(tmp_path/'new')
    assert (out/'model.safetensors').read_bytes() == (FIXTURE/name/'model.safetensors').read_bytes()
    old, new = ((p/'config.json').read_text() for p in (FIXTURE/name, out))
    version = json.loads(new)['layerkit_version']
    assert new == old.replace('"layerkit_version": "0.1.0"', f'"layerkit_version": {json.dumps(version)}')


FIXTURE2 = Path(__file__).resolve().parent/'fixtures'/'classifier_format2'  # layerkit 0.2.0's default, the two-reader stack
EXPECTED2 = json.loads((FIXTURE2/'expected.json').read_text())


def test_a_two_reader_stack_loads_and_predicts_as_recorded():
    "layerkit 0.2's default reader (StackConfig() was weight=0.5) loads as that stack, not as today's default."
    from layerkit import LayerClassifier
    from layerkit.configs import StackConfig
    clf = LayerClassifier.load(FIXTURE2/'stack', device='cpu')
    assert isinstance(clf.config_, StackConfig) and clf.config_.weight == 0.5
    X2 = np.array(EXPECTED2['X'], dtype=np.float32)
    assert clf.predict(X2).tolist() == EXPECTED2['stack']['predict']
    np.testing.assert_allclose(clf.predict_proba(X2), EXPECTED2['stack']['proba'], rtol=0, atol=1e-6)
    assert (clf.linear_C_, clf.linear_val_score_) == (EXPECTED2['stack']['C'], EXPECTED2['stack']['val_score'])


def test_a_two_reader_stack_saves_again_byte_for_byte(tmp_path):
    from layerkit import LayerClassifier
    shutil.copytree(FIXTURE2/'stack', tmp_path/'old')
    out = LayerClassifier.load(tmp_path/'old', device='cpu').save(tmp_path/'new')
    assert (out/'model.safetensors').read_bytes() == (FIXTURE2/'stack'/'model.safetensors').read_bytes()
    old, new = ((p/'config.json').read_text() for p in (FIXTURE2/'stack', out))
    version = json.loads(new)['layerkit_version']
    assert new == old.replace('"layerkit_version": "0.2.0"', f'"layerkit_version": {json.dumps(version)}')


READERS = {'cayley': 1, 'fc': 1, 'deepset': 1, 'stack': 3}  # a kind's name -> the format_version its save needs


@pytest.fixture(scope='module')
def ilge_saves(tmp_path_factory):
    "An ILGEClassifier of each reader kind (its defaults: the seed's CayleyConfig, FCConfig, DeepSetConfig, the default stack), fitted on a tiny BERT and saved."
    import torch
    from layerkit import ILGEClassifier
    from layerkit.testing import tiny_model_path, tiny_texts
    torch.set_num_threads(1)
    texts = tiny_texts(40, seed=3)
    labels = [i % 2 for i in range(len(texts))]  # what the readers learn does not matter here
    root, out = tmp_path_factory.mktemp('ilge_saves'), {}
    for name in READERS:
        clf = ILGEClassifier(str(tiny_model_path('bert')), name, random_state=0, device='cpu').fit(texts, labels)
        out[name] = (clf, clf.save(root/name), texts)
    return out


@pytest.mark.parametrize('name', list(READERS))
def test_an_ilge_save_of_each_reader_reloads_with_its_format_version(ilge_saves, name, tmp_path):
    "ILGEClassifier.save writes the format_version LayerClassifier.save writes for the same network, and loads back."
    from layerkit import ILGEClassifier
    clf, path, texts = ilge_saves[name]
    assert json.loads((path/'config.json').read_text())['format_version'] == READERS[name]
    layer = clf.classifier_.save(tmp_path/'layer')  # the same network saved by LayerClassifier
    assert json.loads((layer/'config.json').read_text())['format_version'] == READERS[name]
    back = ILGEClassifier.load(path, device='cpu')
    assert back.classifier_.config_ == clf.classifier_.config_
    X = clf.embed(texts[:8])
    np.testing.assert_array_equal(back.classifier_.predict_proba(X), clf.classifier_.predict_proba(X))


@pytest.mark.parametrize('reads', [1, 2])  # layerkit 0.1 read format 1, layerkit 0.2 formats 1 and 2
@pytest.mark.parametrize('name', list(READERS))
def test_an_older_layerkit_says_upgrade_for_an_ilge_save_it_cannot_read(ilge_saves, name, reads):
    "A reader of older formats loads an encoder's ILGE save, and refuses the default stack's saying 'upgrade', not 'damaged'."
    from unittest import mock
    from layerkit import ILGEClassifier
    _, path, _ = ilge_saves[name]
    with mock.patch('layerkit.classifier_io._FORMAT_VERSION', reads):
        if READERS[name] <= reads: ILGEClassifier.load(path, device='cpu')
        else:
            with pytest.raises(ValueError, match=f"format_version={READERS[name]} written by layerkit .*; this layerkit reads "
                                                 f"format_version 1 to {reads}; upgrade layerkit to load it"):
                ILGEClassifier.load(path, device='cpu')
