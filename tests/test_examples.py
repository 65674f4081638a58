"""The examples/ scripts for real models (DeepSeek-LLM-7B, OLMoE-1B-7B) run on tiny offline models of the same
architectures (Llama, OLMoE): every code path of the scripts, with `--model` and `--offline` as the only changes."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize('script,arch,blocks,depths', [('deepseek_7b.py', 'llama', 6, ['3', '2']),
                                                       ('olmoe_7b.py', 'olmoe', 4, ['2'])])
def test_example_runs_on_a_tiny_model_of_its_architecture(script, arch, blocks, depths, tmp_path):
    from layerkit.testing import tiny_model_path
    model = tiny_model_path(arch, num_hidden_layers=blocks)
    env = dict(os.environ, HF_HUB_OFFLINE='1', OMP_NUM_THREADS='1', TQDM_DISABLE='1')
    r = subprocess.run([sys.executable, str(ROOT/'examples'/script), '--model', str(model), '--depths', *depths,
                        '--out', str(tmp_path/'out'), '--offline', '--dtype', 'float32', '--n-sequences', '4',
                        '--sequence-length', '16', '--max-eval-windows', '16'], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'held-out WikiText-2 perplexity' in r.stdout and '| blocks kept | order2 |' in r.stdout, r.stdout[-2000:]
    for d in depths:
        cfg = json.loads((tmp_path/'out'/f'blocks-{d}'/'config.json').read_text())
        assert cfg['num_hidden_layers'] == int(d), (cfg['num_hidden_layers'], d)
    assert (tmp_path/'out'/'criteria.png').stat().st_size > 1000


def test_example_models_and_depths_are_the_seeds():
    sys.path.insert(0, str(ROOT/'examples'))
    import deepseek_7b, olmoe_7b
    assert (deepseek_7b.MODEL, deepseek_7b.DEPTHS) == ('deepseek-ai/deepseek-llm-7b-base', (15, 7))
    assert (olmoe_7b.MODEL, olmoe_7b.DEPTHS) == ('allenai/OLMoE-1B-7B-0924', (8, 4))
