"""bench/README.md, the index of the benchmarks (issue 57): a row for every script, and every results file it names exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT/'bench'
INDEX = BENCH/'README.md'
# a concrete file name in backticks, e.g. `recipes_smollm2_16x128.md`; patterns (`recipes_<model>_<n>x128.md`,
# `recipes_*.md`, `[_TAG]`) have other characters and are skipped
RESULT_NAME = re.compile(r'`([A-Za-z0-9][A-Za-z0-9_.\-]*\.(?:md|json))`')
NOT_RESULTS = {'README.md'}  # the top-level README, named in the explanations


def scripts() -> list[str]:
    "The scripts, relative to bench/: bench/*.py and bench/gpu/*.py."
    return sorted(str(p.relative_to(BENCH)) for p in [*BENCH.glob('*.py'), *(BENCH/'gpu').glob('*.py')])


def rows(text: str) -> set[str]:
    "The scripts that have a row in the index's tables: lines that start with | `script` |."
    return {m.group(1) for m in re.finditer(r'^\| `(?:bench/)?([\w/.-]+\.py)` \|', text, re.M)}


def test_every_script_has_a_row():
    have = rows(INDEX.read_text())
    assert len(scripts()) > 40
    missing = [s for s in scripts() if s not in have]
    assert not missing, f"bench/README.md has no row for {missing}: add one to its topic's table"
    gone = sorted(have - set(scripts()))
    assert not gone, f"bench/README.md has rows for scripts that bench/ lacks: {gone}"


def test_every_results_file_named_exists():
    names = sorted(set(RESULT_NAME.findall(INDEX.read_text())) - NOT_RESULTS)
    assert len(names) > 50
    absent = [n for n in names if not (BENCH/'results'/n).is_file()]
    assert not absent, f"bench/README.md names results files that bench/results/ lacks: {absent}"


def test_rows_are_exact():
    text = "| `bench_pruning_recipes_smollm2.py` | q |\n| `gpu/data.py` | q |\n| `bench/common.py` | q |\nsee `llama_cpp.py`\n"
    assert rows(text) == {'bench_pruning_recipes_smollm2.py', 'gpu/data.py', 'common.py'}
