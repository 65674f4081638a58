"""OLMoE-1B-7B (16 mixture-of-experts blocks) pruned to 8 and 4 blocks, with the criteria compared on held-out WikiText-2.

Needs about 14 GB of GPU memory in bfloat16 (accelerate offloads what does not fit) and the network for the weights and
WikiText-2's train split: `pip install "layerkit[examples]"`, then `python examples/olmoe_7b.py --out olmoe-order2`.
All options: `--help` (see prune_and_compare.py).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prune_and_compare import run

MODEL, DEPTHS = 'allenai/OLMoE-1B-7B-0924', (8, 4)

if __name__ == '__main__': run(MODEL, DEPTHS, name='OLMoE-1B-7B')
