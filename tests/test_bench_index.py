"""bench/README.md, the index of the benchmarks (issue 57): a row for every script under bench/<topic>/, in its topic's
table; every results file it names exists in that topic's results/ folder; and every results file on disk is named
(an orphan fails: delete it, or say in the index what wrote it and who cites it; a markdown's JSON goes with it)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT/'bench'
INDEX = BENCH/'README.md'
TOPICS = ('ilge', 'pruning', 'gpu')
# a concrete file name in backticks, e.g. `recipes_smollm2_16x128.md`; patterns (`recipes_<model>_<n>x128.md`,
# `recipes_*.md`, `[_TAG]`) have other characters and are skipped
RESULT_NAME = re.compile(r'`([A-Za-z0-9][A-Za-z0-9_.\-]*\.(?:md|json))`')
NOT_RESULTS = {'README.md'}  # the top-level README, named in the explanations


def scripts() -> list[str]:
    "Every Python file under bench/, relative to it (package markers aside): common.py and bench/<topic>/*.py."
    return sorted(str(p.relative_to(BENCH)) for p in [*BENCH.glob('*.py'), *(f for t in TOPICS for f in (BENCH/t).glob('*.py'))]
                  if p.name != '__init__.py')


def results_files() -> list[str]:
    "Every results file on disk, as '<topic>/<name>' (bench/<topic>/results/<name>)."
    return sorted(f'{t}/{p.name}' for t in TOPICS for p in (BENCH/t/'results').glob('*') if p.is_file())


def rows(text: str) -> set[str]:
    "The scripts that have a row in the index's tables: lines that start with | `script` |."
    return {m.group(1) for m in re.finditer(r'^\| `(?:bench/)?([\w/.-]+\.py)` \|', text, re.M)}


def sections(text: str) -> dict[str, str]:
    "The index's topic sections: the text under each '## ... `bench/<topic>/`' heading, to the next '## ' heading."
    out = {}
    for m in re.finditer(r'^## [^\n]*`bench/(\w+)/`[^\n]*\n(.*?)(?=^## |\Z)', text, re.M | re.S):
        out.setdefault(m.group(1), '')
        out[m.group(1)] += m.group(2)
    return out


def test_every_script_has_a_row_in_its_topic():
    text = INDEX.read_text()
    have, secs = rows(text), sections(text)
    assert set(secs) == set(TOPICS), f"bench/README.md needs one section per topic, headed with `bench/<topic>/`: {sorted(secs)}"
    assert len(scripts()) > 40
    missing = [s for s in scripts() if s not in have]
    assert not missing, f"bench/README.md has no row for {missing}: add one to its topic's table"
    gone = sorted(have - set(scripts()))
    assert not gone, f"bench/README.md has rows for scripts that bench/ lacks: {gone}"
    for t, body in secs.items():
        misplaced = [s for s in rows(body) if s.split('/')[0] != t]
        assert not misplaced, f"the {t} section of bench/README.md has rows of other topics: {misplaced}"


def test_every_results_file_named_exists_in_its_topic():
    secs = sections(INDEX.read_text())
    named = 0
    for t, body in secs.items():
        names = sorted(set(RESULT_NAME.findall(body)) - NOT_RESULTS)
        named += len(names)
        absent = [n for n in names if not (BENCH/t/'results'/n).is_file()]
        assert not absent, f"bench/README.md's {t} section names results files that bench/{t}/results/ lacks: {absent}"
    assert named > 60


def test_every_results_file_is_named():
    secs = sections(INDEX.read_text())
    named = {f'{t}/{n}' for t, body in secs.items() for n in RESULT_NAME.findall(body)}
    # a markdown's data beside it (tests/test_bench_results.py checks it) goes with the markdown's name
    named |= {f'{n[:-3]}{ext}' for n in list(named) if n.endswith('.md') for ext in ('.json', '.tables.json')}
    orphans = [f for f in results_files() if f not in named]
    assert not orphans, (f"results files that bench/README.md does not name: {orphans}; name each in its topic's section "
                         "(which script wrote it, which pages cite it), or delete it")
    stray = [p.name for p in BENCH.glob('*/results') if p.parent.name not in TOPICS]
    assert not stray and not (BENCH/'results').exists(), 'results live in bench/<topic>/results/ (topics: ilge, pruning, gpu)'


def test_rows_and_sections_are_exact():
    text = ("## A: `bench/ilge/`\n| `ilge/accuracy_minilm.py` | q | `accuracy.md` |\n"
            "## B: `bench/gpu/`\n| `gpu/data.py` | q |\n| `bench/common.py` | q |\nsee `pruning/llama_cpp.py`\n## Other\nx\n")
    assert rows(text) == {'ilge/accuracy_minilm.py', 'gpu/data.py', 'common.py'}
    secs = sections(text)
    assert set(secs) == {'ilge', 'gpu'} and 'accuracy.md' in secs['ilge'] and 'Other' not in secs['gpu']


def _results_by_script(text: str) -> dict[str, set[str]]:
    "'<topic>/<script>.py' -> the results files the index lists under it ('- `script.py`: `a.md`, ...' in its topic)."
    out = {}
    for t, body in sections(text).items():
        for m in re.finditer(r'^- `([\w.-]+\.py)`(.*?)(?=^- `|^#|\Z)', body, re.M | re.S):
            out[f'{t}/{m.group(1)}'] = set(RESULT_NAME.findall(m.group(2))) - NOT_RESULTS
    return out


def citing_pages(text: str | None = None) -> dict[str, list[str]]:
    "'<topic>/<script>.py' -> the notebooks (without .ipynb, under nbs/) that name the script, one of its results files, or a pattern matching one."
    import fnmatch
    text = INDEX.read_text() if text is None else text
    results = _results_by_script(text)
    pages = {p.relative_to(ROOT/'nbs').with_suffix('').as_posix(): p.read_text() for p in sorted((ROOT/'nbs').rglob('*.ipynb'))
             if '.ipynb_checkpoints' not in p.parts}
    globs = {k: set(re.findall(r'[\w-]*\*[\w.-]*\.md', src)) for k, src in pages.items()}  # `recipes_*.md`, once a page
    out = {}
    for s in sorted(r for r in rows(text) if '/' in r):  # common.py's row: shared code, cited by no page
        topic, name = s.split('/', 1)
        files = results.get(s, set())
        def cites(k: str, src: str) -> bool:
            if f'{topic}/{name}' in src: return True
            if any(f'{topic}/results/{f.rsplit(".", 1)[0]}.' in src for f in files): return True
            return any(fnmatch.fnmatch(f, p) for p in globs[k] for f in files)
        out[s] = [k for k, src in pages.items() if cites(k, src)]
    return out


def test_cited_in_names_the_pages_that_cite_each_script():
    "The 'cited in' column of every script's row is exactly the notebooks that cite it or its results ('-': none)."
    text = INDEX.read_text()
    want = citing_pages(text)
    bad = []
    for m in re.finditer(r'^\| `([\w-]+/[\w/.-]+\.py)` \|.*\| ([^|]*) \|$', text, re.M):
        cell = re.sub(r'\s*\([^)]*\)', '', m.group(2)).strip()  # '57_recipes (as `recipes_*.md`)': a note on how
        have = [] if cell == '-' or cell.startswith('through ') else [x.strip() for x in cell.split(',')]  # a part of check.py
        if sorted(have) != want[m.group(1)]: bad.append(f"{m.group(1)}: says {have}, the book: {want[m.group(1)] or ['-']}")
    assert not bad, 'bench/README.md, cited in:\n' + '\n'.join(bad)
