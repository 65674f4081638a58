"""Look at all the layers of a frozen transformer: inter-layer geometry encoders and order-2 depth pruning

A transformer computes a hidden state for every input at every layer, and most tools keep only the last one.
layerkit is a small library for the two things you can do with *all* of them:

- **Inter-layer geometry encoders (ILGE).** Run texts through a frozen model, take one pooled vector per layer
  (the embedding output and every block: L = `num_hidden_layers` + 1 nodes), put them on the nodes of a
  Cayley graph over SL(2, ℤ/nℤ), a 4-regular expander, and train a small GNN (GIN, GCN or GAT; or a DeepSet)
  with a head on top: a few hundred thousand trainable parameters, no fine-tuning of the model. This is the method of
  *Improving LLM Final Representations with Inter-Layer Geometry* (Blyachman, Ulanovski, Bechler-Speicher,
  NeurIPS 2026, [arXiv:2603.22665](https://arxiv.org/abs/2603.22665)); layerkit keeps the API of its `ilge` package
  and runs it on dense batched graphs instead of one PyG `Data` object per sample.
- **Order-2 depth pruning.** Measure a model's calibration loss with each single block and each pair of blocks
  deleted, fit the interaction-aware surrogate a_i + Σ_(j∈S) a_ij, greedily delete the cheapest block,
  and save a pruned checkpoint that is a correct Hugging Face model. The loss is the next-token NLL for a causal LM,
  how far the sentence embeddings move for an encoder such as BERT or MiniLM (`objective="embedding"`), or your own
  function. layerkit keeps the API of the `layer_interactions` package and reuses every hidden state it has already
  computed, so the measurements cost about a third of the block evaluations.

Switching from either original package is a change of import: `from layerkit import ILGEClassifier` instead of
`from ilge import ILGEClassifier`, `from layerkit import Order2Pruner` instead of
`from layer_interactions import Order2Pruner`.

Modules:

- `layerkit.blockwise`: Every hidden state of a model larger than the device's memory: its blocks go there one at a time, every batch of a chunk through each.
- `layerkit.classifier`: `LayerClassifier`: a scikit-learn classifier on the `(N, L, D)` layer embeddings of a frozen model: ILGE's encoder and head, or layerkit's default reader.
- `layerkit.classifier_io`: A fitted classifier on disk: a folder of `config.json` and `model.safetensors`, never a pickle.
- `layerkit.cli`: `layerkit demo`, `layerkit info`, `layerkit prune` and `layerkit eval`: the library from a shell.
- `layerkit.compensation`: `compensate`: Prune&Comp's training-free rescaling after a block deletion, folded into the weights.
- `layerkit.configs`: Small, validated dataclasses that say which encoder to build and how to train it.
- `layerkit.core`: Atomic writes with one guarantee, argument validators, a model's input device, and hashing.
- `layerkit.criteria`: Pruning criteria of the literature next to order-2, and `compare`: which wins on held-out text.
- `layerkit.data`: Banking77 and WikiText-2 ship with layerkit, as 🤗 `datasets` from the package's copy or the Hub.
- `layerkit.deletion`: Remove blocks from a Hugging Face model, temporarily or in place, and keep it a correct model.
- `layerkit.demo`: `layerkit demo`: both methods on real weights, in minutes, with a report of plots, tables and JSON.
- `layerkit.demo_report`: What `layerkit demo` concludes and shows: verdicts, plots, a JSON summary and an offline HTML page.
- `layerkit.disk_weights`: A model's blocks read from its safetensors files one at a time, memory-mapped: for models larger than CPU memory.
- `layerkit.distributed`: Rank and world size, collectives that fail instead of hanging, agreement across ranks, balanced shards.
- `layerkit.embedding_cache`: Fingerprints of a model's weights and of token ids, and the checked file that keeps an `(N, L, D)` array under its key.
- `layerkit.embeddings`: `LayerEmbedder`: every hidden state of a frozen transformer, pooled per text, as `(N, L, D)`.
- `layerkit.encoders`: `build_aggregator` maps the `(N, L, D)` hidden states of a frozen LLM to `(N, out_dim)` with a small GNN.
- `layerkit.evaluate`: Perplexity, tokens per second and peak memory of several models on the same windows: what `layerkit eval` prints.
- `layerkit.gguf_deletion`: A pruned GGUF that llama.cpp runs: kept tensors copied byte for byte, per-layer fields filtered.
- `layerkit.gguf_models`: A `.gguf` file wherever layerkit takes a model: dequantized once into a cached Hugging Face folder.
- `layerkit.graphs`: Cayley graphs of SL(2, Z_n) and the complete graph: the wirings of layers that the encoders run on.
- `layerkit.healed_cuts`: `save_healed`: a fitted `Order2Pruner`'s cut healed on its calibration and saved, as a Hugging Face folder or a GGUF file; `choose_healed`: the cut that heals best.
- `layerkit.healing`: `heal`: a least-squares map per run of deleted blocks, folded into the block before it (ReplaceMe).
- `layerkit.hub`: Loading a model, reading its depth and width, finding its blocks: the Hugging Face helpers of both methods.
- `layerkit.ilge_classifier`: `ILGEClassifier`: texts in, labels out: every layer of a frozen Hugging Face model, pooled per text and read by a `LayerClassifier`, with the original `ilge` package's API.
- `layerkit.model_card`: A README.md with the Hub's front matter in every saved folder: what was deleted, how, on what, and how to redo it.
- `layerkit.mteb_encoder`: `MTEBEncoder`: a fitted ILGE model as an encoder that the `mteb` package evaluates.
- `layerkit.objectives`: What a deletion costs (`Objective`), and the tokens it is measured on.
- `layerkit.order2`: The work list of deletions, and the engine that measures them by reusing hidden states.
- `layerkit.order2_result`: Resumable checkpoints of the order-2 measurements, shares across ranks, and `Order2Result`.
- `layerkit.probes`: `LinearProbe`: a logistic regression on one layer (or all of them), its C chosen on a validation split; the fast probes of every layer, and the paired test of two methods.
- `layerkit.prune_and_save`: `PruneAndSaveMixin`: what `Order2Pruner` inherits to delete a cut in place, put it back, and save the pruned model as a Hugging Face folder or a GGUF file.
- `layerkit.prune_job`: `prune_job`: what `layerkit prune` does, from Python: every check before a weight loads, every measurement kept for a rerun, the model saved, and the record of what was done.
- `layerkit.pruner_loading`: The memory budget, the model class an objective needs, and the errors that say which argument to change.
- `layerkit.pruning`: `Order2Pruner`: measure every single and pair block deletion, prune greedily, save the model.
- `layerkit.recipe_saving`: `save_with_recipe`: a recipe's pruned model saved as a Hugging Face folder or a GGUF file, with the record of what it chose and changed.
- `layerkit.recipe_steps`: `sleb_steps` runs SLEB's loop (with Prune&Comp's compensation, checked or judged on validation text) and records each step; `replay_steps` folds and deletes them again without measuring.
- `layerkit.recipes`: `prune_with_recipe`: one argument chooses how blocks are picked and how the cut is repaired; `RECOMMENDED` is the one that measured best.
- `layerkit.refit`: `refit_order2`: order-2 pruning that measures the single and pair deletions again on the pruned model every few deletions.
- `layerkit.report`: `layer_report`: do the middle layers help a task, and by how much over the cheap baselines?
- `layerkit.self_calibration`: The model writes its own calibration windows from short prefixes, and the least likely of them are dropped: calibration close to what the model learned, in any language, with nothing to download.
- `layerkit.sequential`: Order-2 measurements block by block: each block's weights go to the device once per pass and every variant's hidden state advances through it, for models larger than the device's memory.
- `layerkit.stack`: Logistic regressions on all layers and on the best layer, solved by torch's L-BFGS, mixed with a layer encoder: layerkit's default reader.
- `layerkit.testing`: Tiny seeded models of real architectures with real tokenizers: tests go through `from_pretrained(path)`.
- `layerkit.training`: `LayerNet` and `train_net`: the network `LayerClassifier` trains, and its training loop.
- `layerkit.tuning`: Encoder configs without a search (`recommended_config`) or from an Optuna search (`suggest_config`).
- `layerkit.validation`: Windows of several kinds of text that neither the calibration nor the evaluation suite holds, and the healing maps' strength chosen on them: a repair judged off the calibration's domain."""

# AUTOGENERATED! DO NOT EDIT! File to edit: ../nbs/90_api.ipynb.

# %% auto #0
__all__ = ['cayley_graph', 'cayley_n_for', 'CayleyConfig', 'FCConfig', 'DeepSetConfig', 'ScalarMixConfig', 'build_aggregator',
           'build_per_token_aggregator', 'num_layers_for', 'hidden_size_for', 'LayerEmbedder', 'LayerClassifier',
           'ILGEClassifier', 'layer_report', 'LinearProbe', 'Order2Pruner', 'Order2Result', 'load_banking77',
           'load_wikitext2', 'wikitext2_paragraphs', 'compare']

# %% ../nbs/90_api.ipynb #33ca5eb9
from importlib import import_module

__version__ = '0.3.0'

_PUBLIC = {  # public name -> the submodule (chapter) that defines it
    'cayley_graph': 'graphs', 'cayley_n_for': 'graphs',
    'CayleyConfig': 'configs', 'FCConfig': 'configs', 'DeepSetConfig': 'configs', 'ScalarMixConfig': 'configs',
    'build_aggregator': 'encoders', 'build_per_token_aggregator': 'encoders',
    'num_layers_for': 'hub', 'hidden_size_for': 'hub',
    'LayerEmbedder': 'embeddings',
    'LayerClassifier': 'classifier', 'ILGEClassifier': 'ilge_classifier',
    'layer_report': 'report', 'LinearProbe': 'probes',
    'Order2Pruner': 'pruning', 'Order2Result': 'order2_result',
    'load_banking77': 'data', 'load_wikitext2': 'data', 'wikitext2_paragraphs': 'data',
    'compare': 'criteria',
}
_all_ = ['cayley_graph', 'cayley_n_for', 'CayleyConfig', 'FCConfig', 'DeepSetConfig', 'ScalarMixConfig', 'build_aggregator',
         'build_per_token_aggregator', 'num_layers_for', 'hidden_size_for', 'LayerEmbedder', 'LayerClassifier',
         'ILGEClassifier', 'layer_report', 'LinearProbe', 'Order2Pruner', 'Order2Result', 'load_banking77',
         'load_wikitext2', 'wikitext2_paragraphs', 'compare']

# %% ../nbs/90_api.ipynb #ec8bbc74
def __getattr__(name: str):
    "Import a public name's submodule on first use."
    mod = _PUBLIC.get(name)
    if mod is None: raise AttributeError(f"module 'layerkit' has no attribute {name!r}")
    value = getattr(import_module(f'layerkit.{mod}'), name)
    globals()[name] = value
    return value

# %% ../nbs/90_api.ipynb #3f7a5acf
def __dir__(): return sorted(set(globals()) | set(_PUBLIC))
