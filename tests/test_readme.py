"""The README is a promise: every Python snippet in it runs as written, and it renders as a PyPI long description.

PyPI renders neither LaTeX math nor links relative to the repository, so README.md (generated from nbs/index.ipynb by
`make readme`) must hold neither. Each ```python block runs in a fresh interpreter in an empty folder, offline. Lines
marked `# placeholder` name something the reader replaces (a model id); the test gives them a tiny offline model of the
right kind instead, and runs on a few hundred texts rather than all of Banking77. Nothing else is changed.
"""
import os, re, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT/'README.md').read_text(encoding='utf-8')
BLOCKS = re.findall(r'```python\n(.*?)```', README, flags=re.S)

# placeholder name -> what the test puts there (an offline model of the kind the snippet needs)
PLACEHOLDERS = {
    'MODEL': "__import__('layerkit.testing').testing.tiny_model_path('llama')",
    'CAUSAL_LM': "__import__('layerkit.testing').testing.tiny_model_path('llama', num_hidden_layers=16)",
    'GGUF_FILE': "__import__('layerkit.testing').testing.tiny_gguf_path('llama', qtype='Q8_0', num_hidden_layers=10)",
}
SHRINK = [(r'load_banking77\("(train|test)"\)', r'load_banking77("\1").select(range(300))')]  # minutes -> seconds


def _runnable(code: str) -> str:
    out = []
    for line in code.splitlines():
        m = re.match(r'(\s*)([A-Z_]+) = .*# placeholder', line)
        if m:
            if m[2] not in PLACEHOLDERS: raise AssertionError(f'README placeholder {m[2]} has no test substitute')
            line = f'{m[1]}{m[2]} = {PLACEHOLDERS[m[2]]}'
        for pat, rep in SHRINK: line = re.sub(pat, rep, line)
        out.append(line)
    return '\n'.join(out) + '\n'


def test_readme_has_no_notebook_directives():
    leaks = [l for l in README.splitlines() if l.lstrip().startswith('#|')]
    assert not leaks, f'nbdev/Quarto directives leaked into README.md: {leaks}'


def test_readme_has_python_snippets():
    assert len(BLOCKS) >= 4, f'expected the README to show at least 4 Python snippets, found {len(BLOCKS)}'


@pytest.mark.parametrize('i', range(len(BLOCKS)))
def test_readme_snippet_runs_as_written(i, tmp_path):
    code = _runnable(BLOCKS[i])
    env = dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', OMP_NUM_THREADS='1', TQDM_DISABLE='1')
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, f'README snippet {i + 1} failed:\n{BLOCKS[i]}\n--- stderr ---\n{r.stderr[-3000:]}'


def test_readme_renders_on_pypi():
    math = re.findall(r'(?<![\\$])\$[^$\n]+\$', re.sub(r'```.*?```', '', README, flags=re.S))
    assert math == [], f'LaTeX math does not render on PyPI: {math[:3]}'
    links = re.findall(r'\]\(([^)\s]+)\)', README)
    relative = [l for l in links if not l.startswith(('https://', 'http://', '#', 'mailto:'))]
    assert relative == [], f'relative links break on PyPI: {relative[:5]}'
