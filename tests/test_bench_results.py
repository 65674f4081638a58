"""The benchmarks' results as data (issue 57): every results markdown under bench/<topic>/results/ has its JSON beside it,
equal to `common.tables_of` of the markdown, so the results pages (generated from the JSON) never hold a number typed
twice; `tables_of` itself on a small sample; `write_result` writing both."""
import json, re, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT/'bench'
sys.path.insert(0, str(BENCH))
import common  # noqa: E402

RESULTS_MD = sorted(BENCH.glob('*/results/*.md'))


def tables_json(md: Path) -> Path:
    "The JSON of a results markdown: NAME.tables.json where the script writes its own NAME.json, else NAME.json."
    t = md.with_suffix('.tables.json')
    return t if t.exists() else md.with_suffix('.json')


def test_there_are_results_in_every_topic():
    assert {p.parent.parent.name for p in RESULTS_MD} == set(common.TOPICS) and len(RESULTS_MD) > 70


@pytest.mark.parametrize('md', RESULTS_MD, ids=[f'{p.parent.parent.name}/{p.name}' for p in RESULTS_MD])
def test_results_json_is_the_markdown(md):
    "The committed JSON is tables_of(md) plus the script that wrote it and the date: regenerate it, never edit it by hand."
    js = tables_json(md)
    assert js.exists(), f'{md.relative_to(ROOT)} has no JSON beside it: write it with common.write_result (or result_json)'
    data = json.loads(js.read_text())
    assert list(data) == ['title', 'script', 'date', 'about', 'tables'], list(data)
    got = {k: v for k, v in data.items() if k not in ('script', 'date')}
    assert got == common.tables_of(md.read_text()), (
        f'{js.relative_to(ROOT)} differs from tables_of({md.name}): the markdown changed, or the JSON was edited; '
        f'rewrite it with common.result_json(md_text, script, date)')
    assert data['tables'], f'{md.name}: no table found (a header row needs a delimiter row with as many cells; escape a | in a cell)'
    script = ROOT/data['script']
    assert script.is_file() and script.parent == md.parent.parent, f"{js.name}: script {data['script']!r} is not in bench/{md.parent.parent.name}/"
    assert re.fullmatch(r'20\d\d-\d\d-\d\d', data['date']), data['date']
    if js.name.endswith('.tables.json'):  # beside a script's own data, which is not a tables file
        own = json.loads(md.with_suffix('.json').read_text())
        assert 'tables' not in own or 'about' not in own, f'{md.with_suffix(".json").name} is a tables file: drop {js.name}'
    assert common.tables_json_name(md) == js


def test_every_results_json_belongs_to_a_markdown_or_is_a_scripts_data():
    for js in BENCH.glob('*/results/*.json'):
        stem = js.name[:-len('.tables.json')] if js.name.endswith('.tables.json') else js.stem
        md = js.with_name(stem + '.md')
        own = json.loads(js.read_text())
        is_tables = isinstance(own, dict) and list(own)[:2] == ['title', 'script']
        assert md.exists() or not is_tables, f'{js.relative_to(ROOT)}: the tables of a markdown file that is gone'


SAMPLE = r"""# A **sample** result

2026-12-05. `python bench/pruning/x.py --n 8`; x86_64, 2 cores.

More about it.

## First | table

| method | 27 kept | note | centred |
|---|---:|:---|:---:|
| order2 | **82.5** | a \| b | `x` |
| sleb |  | c\|d | y |

Notes on the first table,
over two lines.

| second | table |
|---|---:|
| under | the same heading |

## A section with no table

Its text.

```
# not a heading
| not | a table |
|---|---|
```

### Third

Intro to the third.

| a |
|---|

- closing note
"""


def test_tables_of_sample():
    d = common.tables_of(SAMPLE)
    assert d['title'] == 'A **sample** result'
    assert d['about'] == '2026-12-05. `python bench/pruning/x.py --n 8`; x86_64, 2 cores.\n\nMore about it.'
    t1, t2, t3 = d['tables']
    assert t1['title'] == 'First | table' and t1['intro'] == ''
    assert t1['columns'] == ['method', '27 kept', 'note', 'centred'] and t1['align'] == 'lrlc'
    assert t1['rows'] == [['order2', '**82.5**', r'a \| b', '`x`'], ['sleb', '', r'c\|d', 'y']]  # cells as written
    assert t1['notes'] == 'Notes on the first table,\nover two lines.'
    assert t2['title'] == 'First | table' and t2['columns'] == ['second', 'table'] and t2['align'] == 'lr'
    assert t2['rows'] == [['under', 'the same heading']]
    # a section without a table stays in the notes before the next table's heading, fenced code included
    assert t2['notes'].startswith('## A section with no table\n\nIts text.\n\n```\n# not a heading\n| not | a table |')
    assert t2['notes'].endswith('|---|---|\n```')
    assert t3 == dict(title='Third', intro='Intro to the third.', columns=['a'], align='l', rows=[], notes='- closing note')
    assert common.tables_of('no heading\n\n| x |\n|---|\n| 1 |\n') == dict(
        title='', about='no heading', tables=[dict(title='', intro='', columns=['x'], align='l', rows=[['1']], notes='')])
    assert common.tables_of('# T\n\n| a | b |\n|---|\n| 1 | 2 |\n')['tables'] == []  # not a table: 2 header cells, 1 delimiter


def test_md_table_escapes_pipes_and_tables_of_reads_it_back():
    md = common.md_table(['name', 'max |diff|'], [['**a**', 1.5], ['b|c', r'd\|e']], 'lr')
    assert md.splitlines()[0] == r'| name | max \|diff\| |'
    t, = common.tables_of(md)['tables']
    assert t['columns'] == ['name', r'max \|diff\|'] and t['align'] == 'lr'
    assert t['rows'] == [['**a**', '1.5'], [r'b\|c', r'd\|e']]  # an escaped pipe is not escaped twice


def test_write_result_writes_the_markdown_and_its_json(tmp_path, monkeypatch):
    monkeypatch.setattr(common, 'BENCH', tmp_path)
    with pytest.raises(ValueError, match='pass topic='): common.write_result('x.md', SAMPLE)  # not called from bench/<topic>/
    out = common.write_result('x.md', SAMPLE, topic='pruning')
    assert out == tmp_path/'pruning'/'results'/'x.md' and out.read_text() == SAMPLE
    data = json.loads((tmp_path/'pruning'/'results'/'x.json').read_text())
    assert data == common.result_data(SAMPLE, 'tests/test_bench_results.py', data['date'])
    assert [p.name for p in out.parent.iterdir() if p.name.endswith('.tmp')] == []
    # a script's own x.json (not a tables file) is left alone: the tables go to x.tables.json
    own = tmp_path/'pruning'/'results'/'y.json'
    common.write_result('y.json', json.dumps({'rows': [1, 2]}), topic='pruning')
    common.write_result('y.md', SAMPLE, topic='pruning')
    assert json.loads(own.read_text()) == {'rows': [1, 2]}
    assert json.loads((own.parent/'y.tables.json').read_text())['tables'] == common.tables_of(SAMPLE)['tables']
    common.write_result('z.md', SAMPLE, topic='gpu', tables='z.data.json')
    assert (tmp_path/'gpu'/'results'/'z.data.json').exists() and not (tmp_path/'gpu'/'results'/'z.json').exists()
    with pytest.raises(ValueError, match='use one of'): common.write_result('x.md', SAMPLE, topic='nope')


def test_json_keeps_rows_on_one_line():
    text = common.result_json(SAMPLE, 'bench/pruning/x.py', '2026-12-05')
    assert json.loads(text) == common.result_data(SAMPLE, 'bench/pruning/x.py', '2026-12-05')
    assert '\n    ["order2", "**82.5**", "a \\\\| b", "`x`"],\n' in text, text
