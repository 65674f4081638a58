"""DeepSeek-LLM-7B (30 blocks) pruned to 15 and 7 blocks, with the criteria compared on held-out WikiText-2.

Needs about 16 GB of GPU memory in bfloat16 (accelerate offloads what does not fit) and the network for the weights and
WikiText-2's train split: `pip install "layerkit[examples]"`, then `python examples/deepseek_7b.py --out deepseek-order2`.
All options: `--help` (see prune_and_compare.py).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prune_and_compare import run

MODEL, DEPTHS = 'deepseek-ai/deepseek-llm-7b-base', (15, 7)

if __name__ == '__main__': run(MODEL, DEPTHS, name='DeepSeek-LLM-7B')
