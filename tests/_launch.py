"""The torchrun launcher of the distributed tests: a worker script started on 2 CPU ranks (gloo) on a free local port."""
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    "A TCP port free on 127.0.0.1 now."
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def torchrun(worker: Path, *args, nproc: int = 2, timeout: int = 180, env: dict | None = None) -> subprocess.CompletedProcess:
    "Run `worker` with `args` on `nproc` ranks (`torch.distributed.run`, one thread each, offline), its output captured."
    env = dict(os.environ, OMP_NUM_THREADS='1', HF_HUB_OFFLINE='1',
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''), **(env or {}))
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', str(nproc), '--master_addr', '127.0.0.1',
           '--master_port', str(free_port()), str(worker), *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
