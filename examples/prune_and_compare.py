"""Order-2 prune a causal LM, compare it with the literature's criteria on held-out WikiText-2, save each depth.

The seed package's examples (DeepSeek-LLM-7B, OLMoE-1B-7B) call `run`; any causal LM works:

    python examples/prune_and_compare.py --model ID_OR_PATH --depths 8 4 --out pruned

Calibration: `--n-sequences` windows of WikiText-2's *train* split (from the Hub through 🤗 datasets); held-out
evaluation: every window of its *test* split (shipped with layerkit), so the perplexities compare with papers'.
`--offline` uses the shipped test split only: its first half calibrates, its second half evaluates.
The measurements go to OUT/order2.json (resumable); each depth is saved as OUT/blocks-N, a normal Hugging Face
checkpoint: `lm_eval --model hf --model_args pretrained=OUT/blocks-N --tasks hellaswag` runs zero-shot tasks on it.
"""
import argparse
from pathlib import Path


def texts(offline: bool) -> tuple[list[str], list[str]]:
    "(calibration paragraphs, held-out paragraphs) of WikiText-2."
    from layerkit.data import wikitext2_paragraphs
    test = wikitext2_paragraphs('test')
    if offline: return test[:len(test) // 2], test[len(test) // 2:]
    return wikitext2_paragraphs('train', source='hub'), test


def run(model: str, depths, name: str | None = None, argv=None) -> dict:
    "Parse the command line (defaults: `model`, `depths`), fit, compare, save; returns the comparison's rows."
    ap = argparse.ArgumentParser(description=f"Order-2 pruning of {name or model} with a comparison of criteria")
    ap.add_argument('--model', default=model, help=f'Hub id or local folder (default: {model})')
    ap.add_argument('--depths', type=int, nargs='+', default=list(depths), help=f'blocks to keep (default: {list(depths)})')
    ap.add_argument('--out', default=f"{Path(model).name}-order2", help='folder for the checkpoint and the pruned models')
    ap.add_argument('--dtype', default='bfloat16', help='weights dtype (default: bfloat16)')
    ap.add_argument('--n-sequences', type=int, default=32, help='calibration windows (default: 32)')
    ap.add_argument('--sequence-length', type=int, default=128, help='tokens per window (default: 128)')
    ap.add_argument('--offline', action='store_true', help='calibrate and evaluate on the shipped WikiText-2 test split')
    ap.add_argument('--max-eval-windows', type=int, default=None, help='held-out windows used (default: all of them)')
    a = ap.parse_args(argv)
    from layerkit import Order2Pruner
    from layerkit.criteria import compare, heldout_windows
    calib, held = texts(a.offline)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    ck = out/'order2.json'
    with Order2Pruner(a.model, dtype=a.dtype) as pruner:
        pruner.fit(texts=calib, n_sequences=a.n_sequences, sequence_length=a.sequence_length, checkpoint_path=ck,
                   max_delete=pruner.n_layers - min(a.depths))
        held_ids = heldout_windows(pruner.tokenizer, held, a.sequence_length)[:a.max_eval_windows]
        cmp = compare(pruner, a.depths, input_ids=held_ids, checkpoint_path=out/'iterative.json')
    print(f"held-out WikiText-2 perplexity of {name or a.model} by criterion (best in bold):\n")
    print(cmp.table())
    cmp.plot().savefig(out/'criteria.png', dpi=120, bbox_inches='tight')
    for d in a.depths:  # the checkpoint serves every fit after the first: each depth costs one load and one save
        with Order2Pruner(a.model, dtype=a.dtype) as pruner:
            pruner.fit(texts=calib, n_sequences=a.n_sequences, sequence_length=a.sequence_length, checkpoint_path=ck,
                       max_delete=pruner.n_layers - min(a.depths), progress=False)
            saved = pruner.save_pruned(out/f'blocks-{d}', target_layers=d, overwrite=True)
            print(f"saved {saved} ({d} blocks: deleted {pruner.selection['deleted_layers']})")
    return dict(rows=cmp.rows, best=cmp.best())


if __name__ == '__main__': run(model='meta-llama/Llama-3.2-1B', depths=(8, 4))
