"""Every package the library or a tested notebook cell imports is declared: the library's in `dependencies`, the
notebooks' in `dependencies` or the `dev` extra (so `make test` passes with only `dev`); cells flagged `slow` may use
the other extras. Imports are read from the source, so a package that is merely installed here does not pass.
And the chapters come in import order: no numbered notebook's module imports a module that a later chapter makes."""
import ast, functools, json, re, sys, tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT/'pyproject.toml').read_text())['project']


def _names(reqs): return {re.split(r'[\s<>=!~\[;]', r, maxsplit=1)[0].lower().replace('_', '-') for r in reqs}


def _imports(src, top_level_only=False):
    "Module names imported by `src` (or only at its top level); IPython magics and unparsable cells skipped."
    src = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('%', '!')))
    try: tree = ast.parse(src)
    except SyntaxError: return set()
    mods = set()
    for n in (tree.body if top_level_only else ast.walk(tree)):
        if isinstance(n, ast.Import): mods |= {a.name.split('.')[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module: mods.add(n.module.split('.')[0])
    return mods


_dists = functools.cache(packages_distributions)


def _undeclared(mods, allowed):
    dists = _dists()
    out = set()
    for m in mods - set(sys.stdlib_module_names) - {'layerkit', '__future__'}:
        names = {d.lower().replace('_', '-') for d in dists.get(m, [m])}
        if not names & allowed: out.add(f'{m} ({", ".join(sorted(names))})')
    return out


def test_library_imports_are_core_dependencies():
    "A module-level import needs a core dependency; one at the point of use (in a function) may need an extra."
    core = _names(PROJECT['dependencies'])
    extras = core.union(*map(_names, PROJECT['optional-dependencies'].values()))
    bad = set()
    for p in (ROOT/'layerkit').rglob('*.py'):
        src = p.read_text()
        bad |= {f'{p.name}: {m}' for m in _undeclared(_imports(src, top_level_only=True), core)}
        bad |= {f'{p.name}: {m} (in a function)' for m in _undeclared(_imports(src), extras)}
    assert not bad, f'imported by the library but not declared in pyproject.toml: {sorted(bad)}'


def test_tested_notebook_cells_need_only_the_dev_extra():
    allowed = _names(PROJECT['dependencies']) | _names(PROJECT['optional-dependencies']['dev'])
    bad = set()
    for p in sorted((ROOT/'nbs').rglob('*.ipynb')):
        if '.ipynb_checkpoints' in p.parts: continue
        for c in json.loads(p.read_text())['cells']:
            src = ''.join(c['source'])
            if c['cell_type'] != 'code' or re.search(r'^#\|\s*(slow|notest)\b', src, re.M): continue
            bad |= {f'{p.relative_to(ROOT)}: {m}' for m in _undeclared(_imports(src), allowed)}
    assert not bad, f'tested cells import packages outside dependencies + dev (flag the cell `slow`): {sorted(bad)}'


def _chapters(root=ROOT):
    "Module name -> the numbered notebook that exports it (`#| default_exp X`), e.g. {'core': '00_core.ipynb'}."
    out = {}
    for p in sorted((root/'nbs').glob('[0-9]*.ipynb')):
        for c in json.loads(p.read_text())['cells']:
            m = re.search(r'^#\|\s*default_exp\s+(\S+)', ''.join(c['source']), re.M)
            if c['cell_type'] == 'code' and m: out[m.group(1)] = p.name; break
    return out


def _layerkit_imports(src, modules):
    "The layerkit modules (of `modules`) that `src` imports, at its top level or in a function."
    found = set()
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Import): found |= {a.name.split('.')[1] for a in n.names if a.name.startswith('layerkit.')}
        elif isinstance(n, ast.ImportFrom):
            parts = (n.module or '').split('.') if n.level else (n.module or '').split('.')[1:]
            if not n.level and (n.module or '').split('.')[0] != 'layerkit': continue
            # `from layerkit import x` / `from . import x`: x is a module when a chapter makes it; otherwise it is an
            # attribute of the package itself (`__version__`), which every `import layerkit.x` loads first anyway
            found |= {parts[0]} if parts and parts[0] else {a.name for a in n.names if a.name in modules}
    return found & set(modules)


def _order_violations(root=ROOT):
    "'A.ipynb (layerkit.a) imports layerkit.b, made by the later B.ipynb' for every import against the chapter order."
    chapters = _chapters(root)
    bad = []
    for mod, nb in sorted(chapters.items(), key=lambda kv: kv[1]):
        src = (root/'layerkit'/f"{mod.replace('.', '/')}.py").read_text()
        for dep in sorted(_layerkit_imports(src, chapters) - {mod}):
            if chapters[dep] > nb: bad.append(f'{nb} (layerkit.{mod}) imports layerkit.{dep}, made by the later {chapters[dep]}')
    return bad


def test_chapters_import_only_earlier_chapters():
    "Read in order, the book never uses a module before its chapter: rename a notebook (`git mv`) to fix a failure."
    chapters = _chapters()
    assert {'core', 'configs', 'encoders', 'cli', 'demo'} <= set(chapters), sorted(chapters)  # the parse found them
    assert _layerkit_imports('from .core import a\nfrom layerkit import __version__, hub\ndef f():\n    import layerkit.demo.x',
                             chapters) == {'core', 'hub', 'demo'}
    bad = _order_violations()
    assert not bad, 'a chapter imports a module from a later chapter:\n' + '\n'.join(bad)
