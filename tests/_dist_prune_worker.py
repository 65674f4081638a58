"""A rank of tests/test_distributed_pruning.py, started by `torchrun --nproc_per_node 2` (gloo): `Order2Pruner.fit` and
the iterative criterion on a 6-block Llama fixture, in several scenarios. Each rank writes OUT/rank{R}-{MODE}.json.

Usage: python -m torch.distributed.run --nproc_per_node 2 tests/_dist_prune_worker.py OUT MODE
MODE 'kill': every rank SIGKILLs itself once its shard file holds 3 measurements (a node dying mid-fit).
MODE 'main': resume the killed run, fit from scratch, resume a single process's partial checkpoint, finish a fit with
one measurement left (a rank with an empty share), the iterative criterion, ranks that disagree on the calibration,
and save_pruned (rank 0 writes)."""
import json
import os
import signal
import sys
from pathlib import Path

import torch
import transformers

from layerkit.criteria import PruningCriteria
from layerkit.distributed import rank_world
from layerkit.order2_result import Checkpoint
from layerkit.pruning import Order2Pruner
from layerkit.testing import load_tiny, tiny_texts

transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(1)
FIT = dict(n_sequences=3, sequence_length=16, seed=0, progress=False)
L = 6


def summary(res) -> dict:
    return dict(baseline=res.baseline_nll, single={str(k): v for k, v in res.single_nll.items()},
                pair={f'{i},{j}': v for (i, j), v in res.pair_nll.items()}, order=res.delete_order,
                ranks=res.metadata.get('ranks'), block_evaluations=res.block_evaluations)


def main(out: Path, mode: str) -> None:
    rank, world = rank_world()  # initialised from torchrun's environment
    model, tok = load_tiny('llama', num_hidden_layers=L)
    hooked = [0]  # every block forward pass, counted by hooks: independent of layerkit's own bookkeeping
    for b in model.model.layers: b.register_forward_pre_hook(lambda *a: hooked.__setitem__(0, hooked[0] + 1))
    texts = tiny_texts(60)
    pruner = Order2Pruner(model, tokenizer=tok)
    fit = lambda folder, **kw: pruner.fit(texts=texts, checkpoint_path=out/folder/'o2.json', **{**FIT, **kw})
    if mode == 'kill':
        record = Checkpoint.record
        def record_then_die(self, *a, **k):
            record(self, *a, **k)
            if len(self.values) >= 3: os.kill(os.getpid(), signal.SIGKILL)
        Checkpoint.record = record_then_die
        fit('killed')
        return
    report = dict(world=world)
    def step(name, fn):
        pruner.engine, n0 = None, hooked[0]  # each scenario from scratch, as in a new process
        try: report[name] = dict(fn(), hooked=hooked[0] - n0)
        except Exception as e: report[name] = dict(error=f'{type(e).__name__}: {e}', hooked=hooked[0] - n0)
        report[name]['files'] = sorted(p.name for p in (out/name).glob('*')) if (out/name).is_dir() else []
    step('killed', lambda: summary(fit('killed')))
    step('fresh', lambda: summary(fit('fresh')))
    step('partial', lambda: summary(fit('partial')))
    step('one_left', lambda: summary(fit('one_left')))
    def iterative():
        pruner.fit(texts=texts, **FIT)  # no checkpoint: every rank keeps an engine for the criterion
        n0, crit = hooked[0], PruningCriteria(pruner, checkpoint_path=out/'iterative.json')
        order = crit.iterative_order(3)
        return dict(order=order, rank_evals=crit.iterative_rank_block_evaluations, total=crit.iterative_block_evaluations,
                    steps_hooked=hooked[0] - n0)
    step('iterative', iterative)
    step('disagree', lambda: summary(fit('disagree', seed=rank)))  # rank 1 draws other calibration windows
    def save():
        pruner.fit(texts=texts, **FIT)
        return dict(path=pruner.save_pruned(out/'saved', target_layers=4).name, n_layers=pruner.n_layers)
    step('saved', save)  # last: the model is pruned now
    (out/f'rank{rank}-{mode}.json').write_text(json.dumps(report))


if __name__ == '__main__':
    from _dist_exit import exit_quietly  # beside this file
    main(Path(sys.argv[1]), sys.argv[2])
    exit_quietly(Path(sys.argv[1])/f'.exit-{sys.argv[2]}')
