"""llama.cpp's own tools for the benchmarks: `llama-perplexity`, `llama-quantize`, `llama-completion` and `llama-bench`, built once from the
llama.cpp source that PyPI's llama-cpp-python sdist vendors, into bench/.cache/llama.cpp (ignored by git).

Usage: python bench/pruning/llama_cpp.py [--jobs 2]   (prints the folder of the binaries; builds them if they are missing)
Needs cmake and a C++ compiler; the sdist comes through pip (`pip download --no-binary :all: llama-cpp-python`).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT/'bench'/'.cache'/'llama.cpp'
TOOLS = ('llama-perplexity', 'llama-quantize', 'llama-completion', 'llama-bench')


def binaries() -> Path:
    "The folder of the built tools; SystemExit with what to run when they are not built."
    bin_dir = CACHE/'build'/'bin'
    if not all((bin_dir/t).is_file() for t in TOOLS[:2]):
        raise SystemExit(f"llama.cpp is not built in {CACHE}: run python bench/pruning/llama_cpp.py")
    return bin_dir


def _source() -> Path:
    "The llama.cpp source tree from the llama-cpp-python sdist, downloaded and extracted once."
    src = CACHE/'src'
    if (src/'CMakeLists.txt').is_file(): return src
    dl = CACHE/'sdist'
    dl.mkdir(parents=True, exist_ok=True)
    if not list(dl.glob('llama_cpp_python-*.tar.gz')):
        subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '--no-binary', ':all:', 'llama-cpp-python',
                        '-d', str(dl)], check=True)
    sdist = sorted(dl.glob('llama_cpp_python-*.tar.gz'))[-1]
    tmp = CACHE/'extract'
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(sdist) as t: t.extractall(tmp, filter='data')
    vendored = next(tmp.glob('*/vendor/llama.cpp'))
    shutil.rmtree(src, ignore_errors=True)
    vendored.rename(src)
    shutil.rmtree(tmp, ignore_errors=True)
    return src


def build(jobs: int = 2) -> Path:
    "Build the tools (CPU only, Release) if they are missing; returns the folder of the binaries."
    try: return binaries()
    except SystemExit: pass
    src, out = _source(), CACHE/'build'
    # Native, but without AMX: a virtual machine can list amx_int8 in /proc/cpuinfo and still not grant the tiles, and
    # ggml's AMX path for Q4_1/Q8_0 then dies with SIGILL at the first product (seen 2026-12-02 on a 2-core Xeon VM).
    no_amx = ' '.join(f'-mno-{f}' for f in ('amx-tile', 'amx-int8', 'amx-bf16'))
    subprocess.run(['cmake', '-S', str(src), '-B', str(out), '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release',
                    '-DGGML_NATIVE=ON', f'-DCMAKE_C_FLAGS={no_amx}', f'-DCMAKE_CXX_FLAGS={no_amx}', '-DLLAMA_CURL=OFF',
                    '-DLLAMA_BUILD_TESTS=OFF', '-DLLAMA_BUILD_SERVER=OFF'], check=True)
    subprocess.run(['cmake', '--build', str(out), '-j', str(jobs), '--target', *TOOLS], check=True)
    return binaries()


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--jobs', type=int, default=2)
    print(build(ap.parse_args().jobs))
