"""`notebook`: the GPU tutorial's cells (nbs/tutorials/gpu.ipynb) run in order, on a machine without nbdev.

Its `cuda` cells are the chapter's correctness checks; `tools/run_tests.py --flags cuda` runs them where nbdev and
IPython are installed. The lent GPU machines have neither, so this part executes the notebook's code cells itself, in
one namespace and in order, as nbdev's test runner does: a cell marked `#| eval: false` is skipped, a `#| cuda` cell
runs only where CUDA is (recorded as skipped in a dry run). One check per cell: it ran, or the exception it raised.
"""
from __future__ import annotations

import json
import time
import traceback

import common

from gpu.checks import equal
from gpu.context import Ctx

NOTEBOOK = common.ROOT/'nbs'/'tutorials'/'gpu.ipynb'


def directives(src: str) -> set[str]:
    "The `#|` directives of a cell, e.g. {'cuda', 'eval: false'}."
    return {line[2:].strip() for line in src.splitlines() if line.startswith('#|')}


def part_notebook(ctx: Ctx, path=NOTEBOOK):
    cells = [c for c in json.loads(path.read_text())['cells'] if c['cell_type'] == 'code']
    ns, rows = {'__name__': '__main__'}, []
    for i, cell in enumerate(cells):
        src = ''.join(cell['source'])
        flags = directives(src)
        name = f"notebook/{path.name}/cell-{i}" + (' (cuda)' if 'cuda' in flags else '')
        if 'eval: false' in flags or 'eval:false' in flags: continue
        if 'cuda' in flags and not ctx.cuda:
            ctx.skip(name, 'a cuda cell, and no CUDA here')
            rows.append((name, 'skipped (no CUDA)', ''))
            continue
        t = time.perf_counter()
        try:
            exec(compile(src, f'{path.name}[code cell {i}]', 'exec'), ns)  # noqa: S102 (the project's own notebook)
            outcome = 'ran'
        except Exception as e:  # noqa: BLE001 (a failing cell is a failed check; the next cells still run)
            traceback.print_exc()
            outcome = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        ctx.check(name, equal, outcome, 'ran')
        rows.append((name, outcome, f'{time.perf_counter() - t:.1f}'))
    shown = path.relative_to(common.ROOT) if path.is_relative_to(common.ROOT) else path.name
    ctx.table(f'The GPU tutorial ({shown}), cell by cell', ('cell', 'outcome', 'seconds'), rows,
              'llr', note='Every code cell in order, in one namespace (as nbdev runs a notebook); `cuda` cells only '
                          'where CUDA is.')
