"""A rank of tests/test_distributed_sequential.py, started by `torchrun --nproc_per_node 2` (gloo): `Order2Pruner.fit`
with sequential=True (block by block, one row per pass) on a 6-block Llama fixture. Each rank writes OUT/rank{R}-{MODE}.json.

Usage: python -m torch.distributed.run --nproc_per_node 2 tests/_dist_seq_worker.py OUT MODE
MODE 'kill': every rank SIGKILLs itself at the start of its second measuring pass (a node dying mid-pass).
MODE 'main': resume the killed run (recording the keys each rank's engine is asked for), then fit from scratch with
the default rows per pass, and once more with the weights on disk (weights_on_disk=True)."""
import json
import os
import signal
import sys
from pathlib import Path

import torch
import transformers

from layerkit.distributed import rank_world
from layerkit.pruning import Order2Pruner
from layerkit.sequential import SequentialEngine
from layerkit.testing import load_tiny, tiny_model_path, tiny_texts

transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(1)
FIT = dict(n_sequences=3, sequence_length=16, seed=0, progress=False)
L = 6


def summary(res, pruner) -> dict:
    eng = pruner.engine
    return dict(baseline=res.baseline_nll, single={str(k): v for k, v in res.single_nll.items()},
                pair={f'{i},{j}': v for (i, j), v in res.pair_nll.items()}, order=res.delete_order,
                ranks=res.metadata.get('ranks'), block_evaluations=res.block_evaluations,
                passes=eng.passes, rows_per_pass=eng.rows_per_pass, engine_evaluations=eng.block_evaluations)


def main(out: Path, mode: str) -> None:
    rank, world = rank_world()  # initialised from torchrun's environment
    model, tok = load_tiny('llama', num_hidden_layers=L)
    texts = tiny_texts(60)
    if mode == 'kill':
        run = SequentialEngine._run_block
        def die_in_second_pass(self, k, groups):
            if self.passes > 2:  # pass 1 is the capture; every rank has recorded its first measuring pass:
                torch.distributed.barrier()  # wait for the others, or torchrun tears a rank down mid-record when one dies
                os.kill(os.getpid(), signal.SIGKILL)
            return run(self, k, groups)
        SequentialEngine._run_block = die_in_second_pass
        Order2Pruner(model, tokenizer=tok, sequential=True, rows_per_pass=1).fit(texts=texts, checkpoint_path=out/'killed'/'o2.json', **FIT)
        return
    report, asked = dict(world=world), []
    measure = SequentialEngine.measure
    def spy(self, keys):
        keys = list(keys); asked.extend(','.join(map(str, k)) for k in keys)
        return measure(self, keys)
    SequentialEngine.measure = spy
    for name, per in (('killed', 1), ('fresh', None), ('disk', None)):
        asked.clear()
        pruner = (Order2Pruner(tiny_model_path('llama', num_hidden_layers=L), sequential=True, weights_on_disk=True) if name == 'disk'
                  else Order2Pruner(model, tokenizer=tok, sequential=True, rows_per_pass=per))  # disk: the blocks read from the files
        try: report[name] = summary(pruner.fit(texts=texts, checkpoint_path=out/name/'o2.json', **FIT), pruner)
        except Exception as e: report[name] = dict(error=f'{type(e).__name__}: {e}')
        report[name].update(asked=list(asked), files=sorted(p.name for p in (out/name).glob('*')))
    (out/f'rank{rank}-{mode}.json').write_text(json.dumps(report))


if __name__ == '__main__':
    from _dist_exit import exit_quietly  # beside this file
    main(Path(sys.argv[1]), sys.argv[2])
    exit_quietly(Path(sys.argv[1])/f'.exit-{sys.argv[2]}')
