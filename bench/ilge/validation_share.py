"""Benchmark: does a larger validation share steady the default stack on small training sets? (issue 33), judged on development texts.

The default stack (`LayerClassifier()`, `StackConfig()`) chooses C, its best layer and the weights of its three readers
on a 10% validation split of the training texts; below `AUTO_EARLY_STOPPING` texts that split serves nothing else.
On small sets it is small (127 paragraphs for 51 classes on the WikiText-2 articles) and the choice is noisy: the
SmolLM2 WikiText-2 row of the default-reader table measured -1.02, -0.43 and +0.24 points on three machines. This
script fits `LayerClassifier(validation_fraction=v)` for each v on the training sample of
`ilge.mix_rule.development_sample` (SIZE texts drawn with the seed; the rest of the training split is the
development set, the test split is reported beside it and never used to choose) and reports each stack's gap to the
stronger of the default's (v = 0.1) own regression on all layers and on its best layer, in points.
Usage: python bench/ilge/validation_share.py [--settings smollm2:banking77:1000 ...] [--shares 0.1 0.3] [--seeds 0 1 2]
Writes bench/ilge/results/validation_share.md (or --out).
"""
from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import numpy as np

SETTINGS = ('smollm2:banking77:1000', 'smollm2:wikitext-articles:800', 'smollm2:rotten-tomatoes:1000',
            'smollm2:rotten-tomatoes:3000')


def run(model: str, task: str, size: str, seed: int, shares) -> dict:
    "One sample: each share's stack accuracy on development and test texts, and the default's two regressions'."
    import torch
    from ilge.mix_rule import development_sample
    from layerkit.classifier import LayerClassifier
    X, y, Xd, yd, Xt, yt = development_sample(model, task, size, seed)
    out = {}
    for v in shares:
        t0 = time.perf_counter()
        clf = LayerClassifier(validation_fraction=v, random_state=seed).fit(X, y)
        out[v] = dict(dev=float(clf.score(Xd, yd)), test=float(clf.score(Xt, yt)), seconds=time.perf_counter() - t0,
                      weights=clf.stack_weights_, layer=clf.best_layer_['layer'])
        if v == shares[0]:  # the reference: the first share's (the default's) regressions on all layers and on its best layer
            with torch.no_grad():
                for name, A, b in (('dev', Xd, yd), ('test', Xt, yt)):
                    p = clf.net_.readers(torch.from_numpy(A))
                    out[f'ref_{name}'] = max(float((clf.classes_[q.argmax(1).numpy()] == b).mean()) for q in p[1:])
        print(model, task, size, seed, v, out[v], flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--settings', nargs='+', default=list(SETTINGS), help='MODEL:TASK:SIZE')
    ap.add_argument('--shares', type=float, nargs='+', default=[0.1, 0.3], help='validation fractions; the first is the reference')
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--out', default='validation_share.md')
    common.add_threads_arg(ap, default=2)
    a = ap.parse_args(argv)
    common.set_threads(a.threads)
    res = {s: [run(*s.split(':'), seed, a.shares) for seed in a.seeds] for s in a.settings}
    gap = lambda rs, v, k: [100 * (r[v][k] - r[f'ref_{k}']) for r in rs]
    fmt = lambda g: f"{np.mean(g):+.2f} ({', '.join(f'{x:+.1f}' for x in g)})"
    lines = ["# A larger validation share for the default stack (issue 33)\n",
             f"{time.strftime('%Y-%m-%d')}. `bench/ilge/validation_share.py`: `LayerClassifier(validation_fraction=v)` "
             f"(the default stack) fitted on SIZE training texts drawn with each seed ({a.seeds}); gap: its accuracy minus "
             f"the stronger of the default's (v = {a.shares[0]}) own regression on all layers and on its best layer, in "
             f"points, mean over seeds (each seed in brackets). Development: the training texts outside the sample "
             f"(which chooses); test: the test split, beside it. {common.environment(a.threads)}.\n"]
    for k in ('dev', 'test'):
        lines += [f"\n## {'development' if k == 'dev' else 'test'}\n",
                  common.md_table(['setting'] + [f'v = {v}' for v in a.shares],
                                  ([s] + [fmt(gap(rs, v, k)) for v in a.shares] for s, rs in res.items()), 'l' + 'r' * len(a.shares))]
    lines.append("\nfit seconds (mean): " + '; '.join(
        f"{s}: " + ', '.join(f"{np.mean([r[v]['seconds'] for r in rs]):.0f}" for v in a.shares) for s, rs in res.items()) + '.\n')
    out = common.write_result(a.out, '\n'.join(lines))
    print('\n'.join(lines)); print(f'written: {out}')


if __name__ == '__main__':
    main()
