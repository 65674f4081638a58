"""Run every notebook under nbs/ (in parallel) and the pytest tests in tests/, then print one summary line.

The summary counts notebooks and pytest tests together: `N passed, N failed`.
Usage: python tools/run_tests.py [--flags "slow"] [--workers 2] [notebook ...]
"""
import argparse, os, subprocess, sys, tempfile, time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _notebooks(paths):
    if paths: return [Path(p).resolve() for p in paths]
    nbs = ROOT/'nbs'
    return sorted(p for p in nbs.rglob('*.ipynb')
                  if '.ipynb_checkpoints' not in p.parts and not p.name.startswith(('_', '.')))


def run_notebooks(files, flags, workers, save=False):
    "Each notebook runs in a fresh interpreter (a notebook's kernel replaces `__main__`, so workers are not reused)."
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from nbdev.config import get_config
    from nbdev.test import test_nb
    cfg = get_config(ROOT)
    skip = cfg.tst_flags.split() if isinstance(cfg.tst_flags, str) else list(cfg.tst_flags)
    force = flags.split()
    os.environ.setdefault('HF_HUB_OFFLINE', '1')  # never wait on a network that tests must not use
    os.environ.setdefault('OMP_NUM_THREADS', '1')  # workers run side by side: one thread each beats oversubscription
    os.chdir(ROOT/'nbs')
    results = []
    ctx = multiprocessing.get_context('spawn')
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, max_tasks_per_child=1) as ex:
        futs = [ex.submit(test_nb, f, skip_flags=skip, force_flags=force, basepath=str(ROOT), cell_timeout=600, save=save)
                for f in files]
        for f, fut in zip(files, futs):
            try: ok, secs = fut.result()
            except Exception as e: ok, secs = False, 0.0; print(f'{f.name}: the test process died: {e!r}', file=sys.stderr)
            rel = os.path.relpath(f, ROOT)
            print(f"{'PASS' if ok else 'FAIL'}  {rel}  ({secs:.0f}s)", flush=True)
            results.append((rel, bool(ok)))
    os.chdir(ROOT)
    return results


def run_pytest():
    if not any((ROOT/'tests').glob('test_*.py')): return 0, 0, 0
    with tempfile.TemporaryDirectory() as d:
        xml = Path(d)/'junit.xml'
        rc = subprocess.call([sys.executable, '-m', 'pytest', 'tests', '-q', '-p', 'no:cacheprovider',
                              f'--junitxml={xml}'], cwd=ROOT)
        if rc == 5: return 0, 0, 0  # no tests collected
        if not xml.exists(): return 0, 1, 0
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == 'testsuite' else suite.find('testsuite')
        total, fail = int(suite.get('tests', 0)), int(suite.get('failures', 0)) + int(suite.get('errors', 0))
        skipped = int(suite.get('skipped', 0))
        if rc != 0 and fail == 0: fail = 1  # pytest itself failed (collection, internal error)
        return total - fail - skipped, fail, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('notebooks', nargs='*', help='notebooks to run (default: all of nbs/)')
    ap.add_argument('--flags', default='', help='space-separated tst_flags to run too, e.g. "slow"')
    ap.add_argument('--workers', type=int, default=min(os.cpu_count() or 1, 2))
    ap.add_argument('--no-pytest', action='store_true')
    ap.add_argument('--save', action='store_true', help='store the outputs in the notebooks that pass (skipped cells keep theirs); run nbdev-clean after')
    ap.add_argument('--checks-failed', type=int, default=0, help='CI checks that failed before the tests (counted as failures)')
    a = ap.parse_args()
    t0 = time.time()
    nb_results = run_notebooks(_notebooks(a.notebooks), a.flags, a.workers, a.save)
    failed = [n for n, ok in nb_results if not ok]
    p_pass, p_fail, p_skip = (0, 0, 0) if (a.no_pytest or a.notebooks) else run_pytest()
    n_pass = sum(ok for _, ok in nb_results) + p_pass
    n_fail = len(failed) + p_fail + a.checks_failed
    if failed: print('Failed notebooks:\n  ' + '\n  '.join(failed), file=sys.stderr)
    if a.checks_failed: print(f'{a.checks_failed} CI check(s) failed before the tests (see above)', file=sys.stderr)
    print(f"({len(nb_results)} notebooks, {p_pass + p_fail} pytest tests, {time.time() - t0:.0f}s)")
    print(f"{n_pass} passed, {n_fail} failed" + (f", {p_skip} skipped" if p_skip else ''))
    sys.exit(1 if n_fail else 0)


if __name__ == '__main__':
    main()
