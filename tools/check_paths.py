"""Fail if a file of the project refers to a folder outside the repository: a user's clone has nothing beside it.

  python tools/check_paths.py             scan the project's files; one line per finding, exit 1 if any
  python tools/check_paths.py --isolated  check that this checkout has no data folder above it and imports its own
                                          layerkit (CI runs the tests in such a copy; see .ci/run)

What is scanned: the notebooks' cell sources (not their stored outputs), layerkit/ (not the shipped data), tests/,
bench/ (not its recorded results), tools/, the Makefile, pyproject.toml and .ci/run (comment lines excepted). What
is flagged, line by line:
  - the data folder our machines keep beside the checkout, however it is spelled: a relative path to it, a path to
    its data subfolder, or a path join onto it;
  - climbing above the repository: a relative path whose `..` steps lead outside the repository (taken from the
    file's folder, where notebooks run), `Path(__file__)` with more parents than the file is deep, the parent of
    the repository root (of a ROOT variable or of nbdev's config path), and searches up the working folder's parents;
  - absolute paths into the machines' work tree (the folder the checkouts live in).
This file's own patterns are written so that none of them matches its own text, so it checks itself too.
"""
import argparse, json, os, re, subprocess, sys
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
DATA_FOLDER = 'sha' + 'red'  # spelled in two halves so that this file's own text never looks like a reference to it

# (name, regex): what each finds
RULES = [
    ('path into the data folder beside the checkout', re.compile(r'\.\./' + DATA_FOLDER + r'\b')),
    ('path into the data folder beside the checkout', re.compile(r'\b' + DATA_FOLDER + r'[/\\]+data\b')),
    ('path join onto the data folder beside the checkout',
     re.compile(r"""['"]""" + DATA_FOLDER + r"""['"]\s*[/,]|\.parents?\b[^\n]*/\s*['"]""" + DATA_FOLDER + r"""['"]""")),
    ("the repository root's parent", re.compile(r'\b(?:ROOT|REPO|REPO_ROOT|root|repo_root)\.parents?\b')),
    ("the repository root's parent", re.compile(r'\bconfig_path\.parent\.parent\b')),
    ("a search up the working folder's parents", re.compile(r'\bcwd\(\)\.parents\b')),
    ('absolute path into the work tree', re.compile(r'(?<![\w.~-])/work(?=/)')),
]
RELATIVE = re.compile(r'(?<![\w.])((?:\.\./)+)')  # a relative climb: one or more parent steps
FILE_PARENTS = re.compile(r'__file__\)?(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent)+)(?:\.parents\[(\d+)\])?'
                          r'|__file__\)?(?:\.resolve\(\)|\.absolute\(\))?\.parents\[(\d+)\]')

ROOTS = ('nbs', 'layerkit', 'tests', 'bench', 'tools', '.ci')
FILES = ('Makefile', 'pyproject.toml')
SKIP = ('layerkit/assets/data/', 'nbs/_proc/', '_proc/', '_docs/', '_preview/')
RECORDED = re.compile(r'bench/(?:[^/]+/)?results/')  # the benchmarks' recorded results, bench/<topic>/results/


def project_files(top: Path) -> list[str]:
    "The files to scan, relative to `top`: git's tracked and untracked-but-not-ignored ones, else a walk."
    try:
        out = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard'], cwd=top, capture_output=True, text=True, check=True).stdout
        names = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(top)) for p in top.rglob('*') if p.is_file()
                 and not {'.git', '.venv', '__pycache__', '.ipynb_checkpoints'} & set(p.relative_to(top).parts)]
    keep = [n for n in names if (n in FILES or n.split('/')[0] in ROOTS) and not n.startswith(SKIP) and not RECORDED.match(n)
            and '.ipynb_checkpoints' not in n and (top/n).is_file()]
    return sorted(keep)


def text_lines(top: Path, rel: str) -> list[tuple[str, str]]:
    "(where, line) pairs to check: a notebook's cell sources, a text file's lines; binary files give none."
    try: raw = (top/rel).read_text(encoding='utf-8')
    except (UnicodeDecodeError, OSError): return []
    if rel.endswith('.ipynb'):
        try: cells = json.loads(raw)['cells']
        except (ValueError, KeyError): return [(f'{rel}: not a notebook (bad JSON)', '')]
        return [(f"{rel} cell {i} ({c.get('id', '?')}) line {j}", line)
                for i, c in enumerate(cells) for j, line in enumerate(''.join(c.get('source', '')).splitlines(), 1)]
    lines = [(f'{rel}:{j}', line) for j, line in enumerate(raw.splitlines(), 1)]
    if rel == '.ci/run': lines = [(w, l) for w, l in lines if not l.lstrip().startswith('#')]  # comments may explain
    return lines


def findings(top: Path, rel: str) -> list[str]:
    "One message per reference outside the repository in the file `rel`."
    out, folder = [], (top/rel).parent.resolve()
    depth = len(PurePosixPath(rel).parts) - 1  # folders between the root and the file
    for where, line in text_lines(top, rel):
        if not line and where.endswith('(bad JSON)'): out.append(where); continue
        for name, rx in RULES:
            for m in rx.finditer(line): out.append(f'{where}: {name}: {m.group(0)!r} in {line.strip()[:120]!r}')
        for m in RELATIVE.finditer(line):
            target = (folder/m.group(1)).resolve()
            if target != top and top not in target.parents:
                out.append(f'{where}: relative path climbs above the repository: {m.group(1)!r} (from {rel}) in {line.strip()[:120]!r}')
        for m in FILE_PARENTS.finditer(line):
            n = len(m.group(1) or '') // len('.parent') + (int(m.group(2)) + 1 if m.group(2) else 0) \
                + (int(m.group(3)) + 1 if m.group(3) else 0)
            if n - 1 > depth:  # `.parent` once is the file's folder, each further one a folder up
                out.append(f'{where}: Path(__file__) climbs {n - 1} folders from a file {depth} deep: {line.strip()[:120]!r}')
    return out


def scan(top: Path) -> int:
    files = project_files(top)
    found = [f for rel in files for f in findings(top, rel)]
    for f in found: print(f)
    if found:
        print(f"{len(found)} reference(s) to folders outside the repository in {len(files)} files: a user's clone has "
              "nothing beside it. Read data through layerkit.data (the copy shipped in layerkit/assets/data) and paths "
              "from the repository root or a temporary folder.", file=sys.stderr)
        return 1
    print(f'{len(files)} files checked: none refers to a folder outside the repository')
    return 0


def isolated(top: Path) -> int:
    "0 if nothing beside or above `top` holds the data folder and `import layerkit` finds top's own package."
    bad = [f'{d/DATA_FOLDER} exists above the copy: tests could still find data outside the repository there'
           for d in top.parents if (d/DATA_FOLDER).exists()]
    try:
        import layerkit
        where = Path(layerkit.__file__).resolve().parent
    except ImportError as e: where = f'nothing ({e})'
    if where != top/'layerkit': bad.append(f'import layerkit finds {where}, not the copy in {top} (set PYTHONPATH={top})')
    for b in bad: print('isolation:', b, file=sys.stderr)
    if not bad: print(f'isolated copy: {top} (nothing above it holds data; layerkit is imported from it)')
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--root', type=Path, default=ROOT, help='the repository to check (default: the one holding this script)')
    ap.add_argument('--isolated', action='store_true', help='check the isolation of a copy instead of scanning files')
    a = ap.parse_args(argv)
    top = a.root.resolve()
    return isolated(top) if a.isolated else scan(top)


if __name__ == '__main__':
    sys.exit(main())
