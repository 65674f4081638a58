"""Offline docs helpers: nbdev's notebook processing (the docs build before Quarto) and README.md from nbs/index.ipynb.

  python tools/docs.py proc           process every notebook as `nbdev-docs` would, without Quarto; fail on any error
  python tools/docs.py readme         write README.md from nbs/index.ipynb
  python tools/docs.py readme --check fail if README.md is stale
"""
import os, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cfg():
    os.chdir(ROOT)
    from nbdev.config import get_config
    return get_config(ROOT)


def proc():
    "Run nbdev's pre-Quarto pipeline on all notebooks and check each came out with its API docs."
    cfg = _cfg()
    from nbdev.quarto import refresh_quarto_yml, nbdev_sidebar
    from nbdev.serve import proc_nbs
    from nbdev.doclinks import _build_modidx
    from fastcore.nbio import read_nb
    refresh_quarto_yml()
    _build_modidx()
    nbdev_sidebar.__wrapped__(path=cfg.nbs_path)
    cache = proc_nbs(cfg.nbs_path, force=True, n_workers=2)
    srcs = sorted(p for p in cfg.nbs_path.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts)
    bad = []
    for s in srcs:
        d = cache/s.relative_to(cfg.nbs_path)
        if not d.exists(): bad.append(f'{s.name}: not processed'); continue
        nb = read_nb(d)
        n_export = sum('#| export' in c.source for c in read_nb(s).cells if c.cell_type == 'code')
        n_docs = sum('show_doc' in c.source for c in nb.cells if c.cell_type == 'code')
        if n_export and not n_docs: bad.append(f'{s.name}: {n_export} exported cells but no show_doc')
    for b in bad: print('docs:', b, file=sys.stderr)
    print(f'docs: processed {len(srcs)} notebooks into {cache.relative_to(ROOT)}, {len(bad)} problems')
    return 1 if bad else 0


def _readme_text():
    cfg = _cfg()
    from nbdev.serve import proc_nbs
    from nbconvert import MarkdownExporter
    import nbformat
    cache = proc_nbs(cfg.nbs_path, file_glob=cfg.readme_nb, n_workers=1)
    nb = nbformat.read(cache/cfg.readme_nb, as_version=4)
    front = {}
    cells = []
    for c in nb.cells:
        if c.cell_type == 'raw' and c.source.startswith('---'):
            for line in c.source.splitlines():
                m = re.match(r'^(\w+):\s*(.*)$', line)
                if m: front[m.group(1)] = m.group(2).strip().strip('"\'')
            continue
        cells.append(c)
    nb.cells = cells
    body, _ = MarkdownExporter(exclude_input_prompt=True, exclude_output_prompt=True).from_notebook_node(nb)
    head = f"# {front.get('title', cfg.title)}\n\n"
    if front.get('description'): head += f"> {front['description']}\n\n"
    note = "<!-- Generated from nbs/index.ipynb by `make readme`: edit the notebook, not this file. -->\n\n"
    text = note + head + body.strip() + '\n'
    return re.sub(r'\n{3,}', '\n\n', text)


def readme(check=False):
    text = _readme_text()
    out = ROOT/'README.md'
    if check:
        if not out.exists() or out.read_text() != text:
            print('README.md is stale: run `make readme` and commit it', file=sys.stderr)
            return 1
        print('README.md is up to date')
        return 0
    out.write_text(text)
    print(f'wrote {out.relative_to(ROOT)} ({len(text)} chars)')
    return 0


if __name__ == '__main__':
    cmd = sys.argv[1] if len(sys.argv) > 1 else ''
    if cmd == 'proc': sys.exit(proc())
    if cmd == 'readme': sys.exit(readme(check='--check' in sys.argv))
    print(__doc__); sys.exit(2)
