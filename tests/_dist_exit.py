"""How the two-rank test workers (tests/_dist_*_worker.py) leave: without tearing gloo down.

Destroying the process group (or leaving it to the interpreter's exit) while the peer still finished its last
collective aborted a rank now and then ("terminate called without an active exception", 3 runs in about 15 on 2 busy
cores, even after a barrier). Each rank says it is done in a file and waits for the other's, so no message is in
flight, then exits at once. A rank that raised never gets here: its error stands.
"""
import os, sys, time
from pathlib import Path


def exit_quietly(flags: Path) -> None:
    "Barrier, a `done{rank}` file in `flags`, wait for every rank's, then `os._exit(0)`."
    import torch.distributed as dist
    if dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        dist.barrier()
        flags.mkdir(parents=True, exist_ok=True)
        (flags/f'done{rank}').touch()
        t0 = time.time()
        while not all((flags/f'done{r}').exists() for r in range(world)) and time.time() - t0 < 60: time.sleep(0.05)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)
