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
