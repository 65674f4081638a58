"""tools/check_paths.py: what it flags, what it leaves alone, and that it passes its own source."""
import re, subprocess, sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT/'tools'))
import check_paths  # noqa: E402

D = check_paths.DATA_FOLDER  # the data folder's name
# The examples below are written with placeholders, filled in at run time, so that this file itself never spells a
# path outside the repository (the real check scans tests/ too): <UP> a parent step, <D> the data folder, <W> the
# machines' work tree, <P> the `.parent` attribute.
FILL = {'<UP>': '..', '<D>': D, '<W>': '/' + 'work', '<P>': '.' + 'parent'}


def _x(text: str) -> str:
    for k, v in FILL.items(): text = text.replace(k, v)
    return text


def _tree(base: Path, files: dict, fill=_x) -> Path:
    "A repository-like folder (not a git checkout) holding `files` ({relative path: text or notebook cell sources})."
    top = base/'repo'
    for rel, content in files.items():
        p = top/rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith('.ipynb'):
            nb = nbformat.v4.new_notebook()
            nb.cells = [nbformat.v4.new_code_cell(fill(c)) for c in content]
            nb.cells[0].outputs = [nbformat.v4.new_output('stream', text=_x('<W>/main/.venv/x.py: a warning\n'))]
            nbformat.write(nb, p)  # (stored outputs are not scanned)
        else: p.write_text(fill(content))
    return top


def _scan(top: Path) -> list[str]:
    return [f for rel in check_paths.project_files(top) for f in check_paths.findings(top, rel)]


BAD = {  # one line each, the ways the project used to reach the data folder, and the other escapes
    'nbs/tutorials/a.ipynb': ["DATA = Path('<UP>/<UP>/<UP>/<D>/data/banking77')"],
    'nbs/b.ipynb': ["data = get_config().config_path<P>/'<D>'/'data'", "for base in [Path.cwd(), *Path.cwd()<P>s]: pass"],
    'bench/c.py': "ROOT = Path(__file__).resolve()<P><P>\nDATA = ROOT<P>/'<D>'/'data'/'banking77'\n",
    'layerkit/d.py': "cands = [p/'<D>'/'data' for p in here<P>s]\nX = os.path.join(top, '<D>', 'x')\n",
    'tests/e.py': "UP = Path(__file__)<P><P><P>\nW = '<W>/main/layerkit'\n",
    'tools/f.sh': "cat <D>/data/README.md\n",
    'Makefile': "data:\n\tls <UP>/<UP>/elsewhere\n",
    '.ci/run': "# a comment may say <UP>/<D>\nls <UP>/<D>\n",
}


def test_each_escape_is_flagged(tmp_path):
    found = _scan(_tree(tmp_path, BAD))
    places = sorted({re.sub(r' \([0-9a-f-]+\) line \d+', '', f.split(': ')[0]) for f in found})  # cell ids are random
    assert places == ['.ci/run:2', 'Makefile:2', 'bench/c.py:2', 'layerkit/d.py:1', 'layerkit/d.py:2',
                      'nbs/b.ipynb cell 0', 'nbs/b.ipynb cell 1', 'nbs/tutorials/a.ipynb cell 0',
                      'tests/e.py:1', 'tests/e.py:2', 'tools/f.sh:1'], found
    assert any('relative path climbs above the repository' in f and _x("'<UP>/<UP>/<UP>/'") in f for f in found)
    assert any('Path(__file__) climbs 2 folders from a file 1 deep' in f for f in found)
    assert any(_x("the repository root's parent: 'ROOT<P>'") in f for f in found)
    assert any("a search up the working folder's parents" in f for f in found)
    assert any("absolute path into the work tree" in f for f in found)


LEGIT = {  # strings that look alike and are fine
    'nbs/12_x.ipynb': ["p = clf.save(Path(d)/'shared')", "test_eq(modes, {'shared': '0o755'})",
                       "shared = {k: 1 for k in lib}", "x = 'a loaded model is shared, not deep-copied'"],
    'nbs/tutorials/t.ipynb': ["results = Path('<UP>/<UP>/bench/results')", "see [the chapter](<UP>/order2.html)"],
    'layerkit/m.py': "# %% <UP>/nbs/01_data.ipynb #d7de9b19\nmissing = [p for p in dest<P>s if not p.exists()]\n"
                     "URL = 'https://example.org<W>/x'\n",
    'bench/b.py': "ROOT = Path(__file__).resolve()<P><P>\nRESULTS = ROOT/'bench'/'results'\n",
    'tests/t.py': "p = Path(__file__)<P>s[1]\nr = subprocess.run(['layerkit', 'info', '/no/such/model'])\n",
    '.ci/run': "# Our machines keep <UP>/<D> beside the checkout\nstep 'tests'\n",
    'bench/pruning/results/r.md': "read from <UP>/<D>/data once\n",  # recorded results are not scanned
    'layerkit/assets/data/README.md': "copied from <UP>/<D>/data\n",  # nor the shipped data
}


def test_lookalikes_and_unscanned_places_pass(tmp_path):
    assert _scan(_tree(tmp_path, LEGIT)) == []


def test_the_checker_passes_its_own_source_and_this_test(tmp_path):
    top = _tree(tmp_path, {'tools/check_paths.py': (ROOT/'tools'/'check_paths.py').read_text(),
                           'tests/test_check_paths.py': Path(__file__).read_text()}, fill=str)
    assert _scan(top) == []


def test_command_line_output_and_exit_status(tmp_path):
    bad = subprocess.run([sys.executable, str(ROOT/'tools'/'check_paths.py'), '--root', str(_tree(tmp_path/'b', BAD))],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and 'reference(s) to folders outside the repository' in bad.stderr
    assert "nbs/tutorials/a.ipynb cell 0" in bad.stdout and 'layerkit.data' in bad.stderr
    good = subprocess.run([sys.executable, str(ROOT/'tools'/'check_paths.py'), '--root', str(_tree(tmp_path/'g', LEGIT))],
                          capture_output=True, text=True)
    assert (good.returncode, good.stdout.strip()) == (0, '6 files checked: none refers to a folder outside the repository')


def test_isolated_flags_a_data_folder_above_and_a_foreign_layerkit(tmp_path):
    (tmp_path/D).mkdir()
    top = tmp_path/'copy'
    (top/'layerkit').mkdir(parents=True)
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'check_paths.py'), '--isolated', '--root', str(top)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert f'{tmp_path/D} exists above the copy' in r.stderr
    assert f'not the copy in {top} (set PYTHONPATH={top})' in r.stderr
