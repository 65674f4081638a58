"""gpu.md and gpu.json: the environment line, the command line (no machine paths), the tables and every check."""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import common
import torch


def environment(cuda: bool) -> str:
    "The device (or the CPU of a dry run) and the versions behind the numbers."
    import transformers
    parts = [f"torch {torch.__version__}", f"transformers {transformers.__version__}"]
    for mod in ('accelerate', 'torch_geometric', 'sentence_transformers'):
        try: parts.append(f"{mod.replace('_', '-')} {__import__(mod).__version__}")
        except ImportError: parts.append(f"{mod.replace('_', '-')} not installed")
    dev = (f"{torch.cuda.get_device_name()} ({torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB, CUDA "
           f"{torch.version.cuda})" if cuda else f"dry run on the CPU ({platform.machine()}, {os.cpu_count()} cores)")
    return f"{dev}; {', '.join(parts)}; Python {platform.python_version()}"


def command(argv: list[str] | None = None) -> str:
    "The command line (default: this run's), folders given to --out, --minilm and --prepare-minilm shown as DIR."
    args, out = sys.argv[1:] if argv is None else argv, []
    for i, a in enumerate(args):
        out.append('DIR' if i and args[i - 1] in ('--out', '--minilm', '--prepare-minilm') else
                   a.split('=')[0] + '=DIR' if a.startswith(('--out=', '--minilm=')) else a)
    return ' '.join(['python bench/gpu/check.py', *out])


def report(checks: list[dict], tables: dict[str, str], *, dry: bool, env: str, parts: list[str], wall: float,
           cmd: str, errors: list[str] = (), skips: list[str] = ()) -> str:
    "gpu.md: the run in one line, how many checks passed, errors and skips, the tables, then every check."
    failed = [c for c in checks if not c['ok']]
    lines = ['# layerkit on a GPU: correctness and timings' + (' (DRY RUN on the CPU, tiny sizes)' if dry else ''), '',
             f"{env}. Parts: {', '.join(parts)}; {wall:.0f} s in all. Produced by {cmd if cmd.startswith('`') else f'`{cmd}`'}.", '',
             f"**{len(checks) - len(failed)} of {len(checks)} checks passed**"
             + (f"; failed: {', '.join(c['check'] for c in failed)}" if failed else '') + '.', '']
    if errors: lines += ['Errors: ' + '; '.join(errors), '']
    if skips: lines += ['Skipped: ' + '; '.join(skips), '']
    for title, text in tables.items(): lines += [f'## {title}', '', text, '']
    lines += ['## Every check', '', common.md_table(('check', 'result', 'value', 'limit'),
              [(c['check'], 'ok' if c['ok'] else '**FAIL**', c['value'] + (f" ({c['detail']})" if c['detail'] else ''),
                c['limit']) for c in checks], 'llll')]
    return '\n'.join(lines) + '\n'


def write(path: Path, text: str) -> None:
    "Write `text` to `path` atomically."
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(text)
    os.replace(tmp, path)
