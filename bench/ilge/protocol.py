"""Benchmark: the ILGE paper's protocol (MTEB classification) beside the equal-footing comparison, on two decoders.

The ILGE authors score the single-layer baselines with MTEB's classification protocol: 10 repeats, each a logistic
regression (scikit-learn, max_iter=100, raw features) on 8 training texts per label undersampled from the train split,
scored on the test split; their encoders train on the whole train split. This script scores the baselines that way
and puts them beside the equal-footing comparison, where every reader trains on the SAME texts (8, 16 and 64 per
label, 1,000, 3,000 and all 10,003 texts; 3 seeds): those rows are read from the summary tables that
bench/ilge/default_reader.py wrote (bench/ilge/results/default_reader_<model>_banking77*.md: the same test texts, the same
embeddings), so each is measured once.

Data: Banking77 (shipped with layerkit): the whole train split (10,003 texts) is MTEB's pool; all 3,080 test texts.
Layer embeddings: those of bench/ilge/default_reader.py (`--model smollm2`: SmolLM2-135M-Instruct, 31 x 576;
`--model gemma3`: Gemma 3 270M Q4_K_M, 19 x 640; mean-pooled, float32, cached under bench/.cache/embeddings).

MTEB protocol (mteb's AbsTaskClassification defaults): n_experiments=10, samples_per_label=8, numpy seed 42, the
index list reshuffled each repeat and undersampled to 8 per label, LogisticRegression(max_iter=100, random_state=42)
on the raw features, accuracy on the test texts. For every layer; reported: the last layer, the best layer chosen on
validation (the training texts the repeat did not sample), and the best layer chosen on the test split (an oracle:
what a paper's "best layer" row may be, labelled as such).
Usage: python bench/ilge/protocol.py --model smollm2 [--threads 2]
Writes bench/ilge/results/protocol_<model>.md.
"""
from __future__ import annotations

import argparse
import os
import re
import time
from collections import defaultdict
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import numpy as np
from ilge.default_reader import MODELS, task_embeddings

SHORT = ('last layer', 'best layer (validation)', 'concatenation', 'Cayley GIN (seed)', 'stack 0.2 (two readers)', 'stack (default)')
SIZES = ('8pl', '16pl', '64pl', '1000', '3000', 'all')  # the order of the equal-footing rows


def equal_footing(model: str) -> dict:
    "size -> (texts, the six readers' mean test accuracies): the summary rows of bench/ilge/default_reader.py's results."
    out = {}
    for f in sorted((common.ROOT/'bench'/'results').glob(f"default_reader_{model}_banking77*.md")):
        for line in f.read_text().splitlines():
            m = re.match(r"\| (\w+) \| ([\d,]+) \|((?: [\d.]+ \|){6})(?: [-+][\d.]+ \|)+$", line)
            if m: out[m[1]] = (int(m[2].replace(',', '')), tuple(float(v) for v in m[3].strip(' |').split(' | ')), f.name)
    return out


def mteb_protocol(X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, n_experiments: int = 10,
                  samples_per_label: int = 8, seed: int = 42) -> dict:
    "MTEB's AbsTaskClassification on every layer: per repeat, the per-layer test and validation accuracies and the time."
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits
    rng, idxs = np.random.RandomState(seed), np.arange(len(y))
    test, val, secs = [], [], []
    for _ in range(n_experiments):
        rng.shuffle(idxs)  # mteb's _undersample_data: shuffle the index list, take the first n of each label
        count, pick = defaultdict(int), []
        for i in idxs:
            if count[y[i]] < samples_per_label: pick.append(i); count[y[i]] += 1
        pick = np.array(pick)
        rest = np.setdiff1d(np.arange(len(y)), pick)  # the training texts this repeat did not sample: its validation split
        t0, te, va = time.perf_counter(), [], []
        for l in range(X.shape[1]):
            # one BLAS thread: on a shared 2-core machine, a multi-threaded BLAS made one fit take 37 s instead of 0.5 s
            with warnings.catch_warnings(), threadpool_limits(1):
                warnings.simplefilter('ignore', ConvergenceWarning)  # max_iter=100 stops early: that is the protocol
                lr = LogisticRegression(max_iter=100, random_state=seed).fit(X[pick, l], y[pick])
            te.append(float((lr.predict(Xt[:, l]) == yt).mean())); va.append(float((lr.predict(X[rest, l]) == y[rest]).mean()))
        test.append(te); val.append(va); secs.append(time.perf_counter() - t0)
        print(f"mteb repeat {len(test)}: last {te[-1]:.3f}, best-val layer {int(np.argmax(va))} {te[int(np.argmax(va))]:.3f}, "
              f"best-test {max(te):.3f}, {secs[-1]:.0f}s", flush=True)
    test, val = np.array(test), np.array(val)  # (repeats, L)
    b = val.argmax(1)
    return dict(last=test[:, -1], best_val=test[np.arange(len(b)), b], best_val_layers=b,
                best_test=test.max(1), best_test_layers=test.argmax(1), secs=float(np.sum(secs)))


def _ms(v) -> str:
    v = np.asarray(v, float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def _size(k: str, n: int) -> str:
    return f"{k[:-2]} per label ({n:,} texts)" if k.endswith('pl') else f"{n:,} texts" + (' (all)' if k == 'all' else '')


def report(model: str, mteb: dict, eq: dict, shape, n_test: int, load: str, threads: int, t_start: float) -> str:
    "The markdown: MTEB's scores, the equal-footing rows, and where a paper-style gain comes from."
    L = [f"# The ILGE paper's protocol (MTEB) beside equal footing: {MODELS[model]}, Banking77\n",
         f"Run {time.strftime('%Y-%m-%d')}; {common.environment(threads)}; load average at the start {load}; total "
         f"{time.perf_counter() - t_start:.0f} s. MTEB's pool: all 10,003 Banking77 training texts; test: all "
         f"{n_test:,} test texts. {MODELS[model]} from its GGUF, mean-pooled hidden states (N, {shape[0]}, {shape[1]}), "
         f"float32. Produced by bench/ilge/protocol.py --model {model}.\n",
         "## 1. The paper's protocol (MTEB classification defaults) on single layers\n",
         "10 repeats (numpy seed 42), each 8 training texts per label undersampled from the train split, scikit-learn "
         "LogisticRegression(max_iter=100) on the raw layer features, accuracy on the test texts. Mean ± std over "
         f"the repeats; {mteb['secs']:.0f} s for 10 × {shape[0]} fits.\n",
         common.md_table(['reader (MTEB protocol, 8 per label)', 'test accuracy', 'layers chosen'], [
             ['LogReg, last layer', _ms(mteb['last']), str(shape[0] - 1)],
             ['LogReg, best layer (chosen on validation: the training texts not sampled)', _ms(mteb['best_val']),
              ', '.join(map(str, mteb['best_val_layers']))],
             ['LogReg, best layer chosen on the test split (oracle, not a fair baseline)', _ms(mteb['best_test']),
              ', '.join(map(str, mteb['best_test_layers']))]]),
         "\n## 2. Equal footing: every reader on the same texts\n",
         "Mean test accuracy over 3 seeds, every reader trained on the same texts (drawn per seed) and scored on all the "
         "test texts: LogReg with C in (0.01, 0.1, 1) chosen on a 10% validation split (the best layer on it too), "
         "the seed's Cayley GIN, layerkit 0.2's two-reader stack and the default `LayerClassifier()` (the stack). Read from "
         + ', '.join(sorted({f"`{v[2]}`" for v in eq.values()})) + " (std, paired tests and fit times there).\n"]
    rows = [[_size(k, eq[k][0]), *[f"{v:.3f}" for v in eq[k][1]]] for k in SIZES if k in eq]
    L.append(common.md_table(['training data', *SHORT], rows, 'lrrrrrr'))
    L.append("\n## 3. Where a paper-style gain comes from\n")
    L.append("Paper-style gain: a reader of all layers trained on the given texts minus a single-layer baseline scored "
             "by MTEB's protocol (8 per label). It splits into the protocol's part (the same single layer, fitted by "
             "layerkit's LogReg on the same texts as the reader, minus its MTEB score) and the method's part (the reader "
             "minus that single layer, equal data). All on the same test texts.\n")
    dec = []
    for k in ('8pl', 'all'):
        if k not in eq: continue
        g = eq[k][1]
        for ri in (3, 5):
            for name, key, bi in (('last layer', 'last', 0), ('best layer (validation)', 'best_val', 1)):
                mt = mteb[key].mean()
                dec.append([_size(k, eq[k][0]), SHORT[ri], name, f"{mt:.3f}", f"{g[ri]:.3f}", f"{100 * (g[ri] - mt):+.1f}",
                            f"{100 * (g[bi] - mt):+.1f}", f"{100 * (g[ri] - g[bi]):+.1f}"])
    L.append(common.md_table(['reader trained on', 'reader', 'baseline', 'MTEB score', 'reader score', 'paper-style gain (pt)',
                              'from the protocol (pt)', 'from the method (pt)'], dec, 'lllrrrrr'))
    return '\n'.join(L)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', choices=['smollm2', 'gemma3'], default='smollm2')
    ap.add_argument('--out', default=None, help='result file under bench/ilge/results (default: protocol_<model>.md)')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    t_start, load = time.perf_counter(), ', '.join(f"{x:.1f}" for x in os.getloadavg())
    X, y, Xt, yt = task_embeddings(a.model, 'banking77')
    mteb = mteb_protocol(X, y, Xt, yt)
    text = report(a.model, mteb, equal_footing(a.model), X.shape[1:], len(yt), load, a.threads, t_start)
    common.write_result(a.out or f"protocol_{a.model}.md", text)
    print(text)


if __name__ == '__main__':
    main()
