"""Which float kernels an environment setting changes: hashes of a few ops' outputs under each setting.

CI's second pass (.ci/run) runs the suite on kernels whose last bits differ from the default path, so that a
threshold tuned to one machine fails in CI and not on a user's CPU. This script is how those settings were chosen:
each line runs the same ops in a fresh process under one setting and prints a short hash of each output; a hash that
differs from the first line's is a kernel path that rounds otherwise.
Usage: python tools/kernel_paths.py
"""
import hashlib, os, subprocess, sys

OPS = '''
import hashlib, torch
torch.manual_seed(0)
a, b, x = torch.randn(256, 512), torch.randn(512, 384), torch.randn(64, 128, 512)
h = lambda t: hashlib.sha256(t.detach().float().numpy().tobytes()).hexdigest()[:8]
out = dict(matmul=a @ b, layer_norm=torch.nn.LayerNorm(512)(x), softmax=torch.softmax(x, -1), gelu=torch.nn.functional.gelu(x),
           exp=torch.exp(x), sum=x.sum(-1), bf16_matmul=a.bfloat16() @ b.bfloat16(), randn=torch.randn(1000),
           bf16_attention=torch.nn.functional.scaled_dot_product_attention(*[x[:2, None].bfloat16()] * 3, is_causal=True))
print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads(), *(f"{k}={h(v)}" for k, v in out.items()))
'''
SETTINGS = ['', 'OMP_NUM_THREADS=1', 'ATEN_CPU_CAPABILITY=avx2', 'ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2',
            'MKL_CBWR=COMPATIBLE', 'ATEN_CPU_CAPABILITY=default', 'ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=2']

if __name__ == '__main__':
    for s in SETTINGS:
        env = dict(os.environ, **dict(kv.split('=') for kv in s.split()))
        r = subprocess.run([sys.executable, '-c', OPS], env=env, capture_output=True, text=True)
        said = r.stdout.strip() or 'fails: ' + (r.stderr.strip().splitlines() or ['?'])[-1]
        print(f"{s or '(as the machine is)':<90} {said}")
