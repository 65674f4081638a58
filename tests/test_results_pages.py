"""The results pages are their data: each table on a results page (nbs/7*_*.ipynb) is made by a cell from the JSON a
benchmark wrote, and the committed page holds exactly what that cell makes now (issue 57). Edit a number in a results
file's JSON, or a page's code, without re-running the page (`python tools/run_tests.py --save nbs/7X_....ipynb`), and
this fails."""
import copy, os
from pathlib import Path

import pytest
from fastcore.nbio import read_nb
from execnb.shell import CaptureShell

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT/'nbs').glob('7[0-9]_*.ipynb'))


def _tables(nb) -> list[str]:
    "The markdown each code cell displayed, in order."
    return [o['data']['text/markdown'] if isinstance(o['data']['text/markdown'], str) else ''.join(o['data']['text/markdown'])
            for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', [])
            if o.get('output_type') in ('display_data', 'execute_result') and 'text/markdown' in o.get('data', {})]


def test_there_are_results_pages():
    names = [p.stem.split('_', 1)[1] for p in PAGES]
    assert {'results_reading', 'results_pruning', 'results_domains', 'performance'} <= set(names), names


@pytest.mark.parametrize('page', PAGES, ids=[p.stem for p in PAGES])
def test_results_page_tables_are_regenerated_from_the_data(page, monkeypatch):
    nb = read_nb(page)
    stored = _tables(nb)
    assert stored, f'{page.name} stores no table: run it with tools/run_tests.py --save'
    fresh = copy.deepcopy(nb)
    for c in fresh.cells: c['outputs'] = []
    monkeypatch.chdir(ROOT/'nbs')
    CaptureShell().run_all(fresh, exc_stop=True)
    made = _tables(fresh)
    assert len(made) == len(stored), f'{page.name}: {len(made)} tables made from the data, {len(stored)} stored'
    for i, (a, b) in enumerate(zip(made, stored)):
        assert a == b, f'{page.name}: table {i} differs from what its data makes now:\n--- stored\n{b[:800]}\n--- made\n{a[:800]}'
