"""Run every notebook under nbs/ and every pytest file in tests/, side by side, then print one summary line.

Notebooks and pytest files share one pool of workers (2 on 2 cores), the longest first: the times of the last run
on this machine (kept in `.test-times.json`, git-ignored), or on a fresh clone the known heavy ones (tutorials, then
the pytest files, largest first). The summary counts notebooks and pytest tests together: `N passed, N failed`, and
the line before it names the five cells or tests that cost most.
Usage: python tools/run_tests.py [--flags "slow"] [--workers 2] [--no-pytest] [notebook_or_test_file ...]
"""
import argparse, contextlib, io, json, os, re, sys, tempfile, time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT/'.test-times.json'
PRELOAD = ['torch', 'transformers', 'transformers.modeling_utils', 'sklearn.base', 'sklearn.linear_model', 'scipy.stats',
           'matplotlib.pyplot', 'IPython', 'nbdev.test', 'pytest']  # third-party only: layerkit is imported fresh per job  # seconds per job of the last run here, to start the longest first


def _notebooks(paths):
    if paths: return [Path(p).resolve() for p in paths if str(p).endswith('.ipynb')]
    return sorted(p for p in (ROOT/'nbs').rglob('*.ipynb')
                  if '.ipynb_checkpoints' not in p.parts and not p.name.startswith(('_', '.')))


def _test_files(paths, no_pytest):
    if no_pytest: return []
    if paths: return [Path(p).resolve() for p in paths if str(p).endswith('.py')]
    return sorted((ROOT/'tests').glob('test_*.py'))


def _guess(path: Path) -> float:
    "A fresh clone's estimate of a job's seconds: tutorials and pytest files are the long ones."
    size = path.stat().st_size / 1e3
    return size * (3 if 'tutorials' in path.parts else 2 if path.suffix == '.py' else 1)


def _order(jobs):
    "Longest first (the last run's times where known), so that no long job starts last."
    try: known = json.loads(TIMES.read_text())
    except (OSError, ValueError): known = {}
    return sorted(jobs, key=lambda p: -known.get(_rel(p), _guess(p)))


def _rel(p: Path) -> str: return os.path.relpath(p, ROOT)


def _run_notebook(f, skip, force, save):
    "One notebook in this (fresh) worker: (ok, seconds, [(seconds, 'notebook cell N'), ...])."
    from nbdev.test import test_nb
    os.chdir(ROOT/'nbs')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # test_nb prints `name:cell_id: seconds` per cell with cell_timing_min=0
        ok, secs = test_nb(f, skip_flags=skip, force_flags=force, basepath=str(ROOT), cell_timeout=600, save=save,
                           cell_timing_min=0)
    index = {c.get('id'): i for i, c in enumerate(json.loads(Path(f).read_text(encoding='utf-8'))['cells'])}
    cells = [(float(s), f'{_rel(Path(f))} cell {index.get(cid, cid)}')
             for cid, s in re.findall(rf'^{re.escape(Path(f).name)}:(\S+): ([\d.]+)s$', out.getvalue(), re.M)]
    return bool(ok), secs, cells


def _run_pytest_file(f):
    "One pytest file in this worker: (passed, failed, skipped, seconds, [(seconds, test id), ...])."
    import pytest
    t0 = time.time()
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as d:
        xml, out = Path(d)/'junit.xml', io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = int(pytest.main([str(f), '-q', '-p', 'no:cacheprovider', f'--junitxml={xml}']))
        if rc == 5: return 0, 0, 0, time.time() - t0, []  # no tests collected
        if rc != 0: sys.stderr.write(out.getvalue()[-8000:])  # the failures, as pytest says them
        if not xml.exists(): return 0, 1, 0, time.time() - t0, []
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == 'testsuite' else suite.find('testsuite')
        total, fail = int(suite.get('tests', 0)), int(suite.get('failures', 0)) + int(suite.get('errors', 0))
        skipped = int(suite.get('skipped', 0))
        if rc != 0 and fail == 0: fail = 1  # pytest itself failed (collection, internal error)
        tests = [(float(c.get('time', 0)), f"{c.get('classname', '').replace('.', '/')}.py::{c.get('name')}")
                 for c in suite.iter('testcase')]
        return total - fail - skipped, fail, skipped, time.time() - t0, tests


def run_all(notebooks, test_files, flags, workers, save=False):
    "Every job in one pool, longest first; prints a line per job as it ends. Returns the counts and the timings."
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from nbdev.config import get_config
    cfg = get_config(ROOT)
    skip = cfg.tst_flags.split() if isinstance(cfg.tst_flags, str) else list(cfg.tst_flags)
    os.environ.setdefault('HF_HUB_OFFLINE', '1')  # never wait on a network that tests must not use
    os.environ.setdefault('OMP_NUM_THREADS', '1')  # workers run side by side: one thread each beats oversubscription
    # A notebook's kernel replaces `__main__`, so every job gets a fresh worker; forked from a server that has
    # imported the heavy libraries once (about 3 s a process on 2 cores), not spawned to import them again.
    jobs = _order(list(notebooks) + list(test_files))
    ctx = multiprocessing.get_context('forkserver')
    if len(jobs) > 2 * workers: ctx.set_forkserver_preload(PRELOAD)  # a few jobs: not worth the server's imports
    counts = dict(passed=0, failed=0, skipped=0, tests=0, names=[])
    times, items = {}, []
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, max_tasks_per_child=1) as ex:
        futs = {}
        for f in jobs:
            futs[ex.submit(_run_notebook, f, skip, flags.split(), save) if f.suffix == '.ipynb' else
                 ex.submit(_run_pytest_file, f)] = f
        for fut in as_completed(futs):
            f, rel = futs[fut], _rel(futs[fut])
            try: res = fut.result()
            except Exception as e:
                res = (False, 0.0, []) if f.suffix == '.ipynb' else (0, 1, 0, 0.0, [])
                print(f'{rel}: the test process died: {e!r}', file=sys.stderr)
            if f.suffix == '.ipynb':
                ok, secs, cells = res
                counts['passed' if ok else 'failed'] += 1
                if not ok: counts['names'].append(rel)
                print(f"{'PASS' if ok else 'FAIL'}  {rel}  ({secs:.0f}s)", flush=True)
            else:
                p, n_fail, s, secs, cells = res
                counts['passed'] += p; counts['failed'] += n_fail; counts['skipped'] += s; counts['tests'] += p + n_fail
                if n_fail: counts['names'].append(f'{rel} ({n_fail} failed)')
                print(f"{'FAIL' if n_fail else 'PASS'}  {rel}  ({p} passed{f', {n_fail} failed' if n_fail else ''}"
                      f"{f', {s} skipped' if s else ''}; {secs:.0f}s)", flush=True)
            times[rel] = round(secs, 1)
            items += cells
    return counts, times, items


def _save_times(times):
    try: known = json.loads(TIMES.read_text())
    except (OSError, ValueError): known = {}
    try: TIMES.write_text(json.dumps({**known, **times}, indent=0, sort_keys=True))
    except OSError: pass  # a read-only checkout: the next run guesses again


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('paths', nargs='*', help='notebooks and test files to run (default: all of nbs/ and tests/)')
    ap.add_argument('--flags', default='', help='space-separated tst_flags to run too, e.g. "slow"')
    ap.add_argument('--workers', type=int, default=min(os.cpu_count() or 1, 2))
    ap.add_argument('--no-pytest', action='store_true')
    ap.add_argument('--top', type=int, default=5, help='how many of the costliest cells and tests to name')
    ap.add_argument('--save', action='store_true', help='store the outputs in the notebooks that pass (skipped cells keep theirs); run nbdev-clean after')
    ap.add_argument('--checks-failed', type=int, default=0, help='CI checks that failed before the tests (counted as failures)')
    ap.add_argument('--summary-file', help='also write the summary line `N passed, N failed` to this file (for CI)')
    a = ap.parse_args()
    t0 = time.time()
    nbs = _notebooks(a.paths)
    tests = _test_files(a.paths, a.no_pytest)
    counts, times, items = run_all(nbs, tests, a.flags, a.workers, a.save)
    if not a.paths: _save_times(times)  # a full run's times order the next one
    failed, n_fail = counts['names'], counts['failed'] + a.checks_failed
    if failed: print('Failed:\n  ' + '\n  '.join(failed), file=sys.stderr)
    if a.checks_failed: print(f'{a.checks_failed} CI check(s) failed before the tests (see above)', file=sys.stderr)
    top = sorted(items, reverse=True)[:a.top]
    if top: print('costliest: ' + '; '.join(f'{name} {s:.0f}s' for s, name in top))
    print(f"({len(nbs)} notebooks, {counts['tests']} pytest tests, {time.time() - t0:.0f}s)")
    summary = f"{counts['passed']} passed, {n_fail} failed" + (f", {counts['skipped']} skipped" if counts['skipped'] else '')
    print(summary)
    if a.summary_file: Path(a.summary_file).write_text(summary + '\n')
    sys.exit(1 if n_fail else 0)


if __name__ == '__main__':
    main()
