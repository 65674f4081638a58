"""Training throughput of layerkit's ILGE encoders against the standard PyG pipeline and the projection bound.

Every encoder (Cayley GIN, GCN, GAT with the default configs, and DeepSet) is trained for `--epochs` epochs on random
features (N samples, L layers, width D; a linear head and cross-entropy on 4 random classes; Adam), in the same
process as:

* the **PyG-Data baseline**: the same model fed the standard PyG way, one `torch_geometric.data.Data` object per
  sample (the layer vectors zero-padded to the Cayley graph's V nodes, the shared edge index) in a precomputed list,
  collated by PyG's `DataLoader`, every node projected, PyG's sparse `GINConv`/`GCNConv`/`GATConv`, real nodes pooled
  with `global_mean_pool` (for DeepSet, which has no graph: `TensorDataset` + torch's `DataLoader`);
* the **research-code pipeline**: the same, but with the `Data` objects built in `Dataset.__getitem__` from numpy
  arrays, as the authors' `SingleGraphDataset` does (tensor conversion, zero padding, edge-index copy per sample);
* **PyG's dense convs**: the same model with `DenseGINConv`/`DenseGCNConv`/`DenseGATConv` on the zero-padded
  (B, V, H) tensor (what you get by using PyG's dense layers directly);
* the **projection bound**: only the input projection (Linear D -> H on every layer vector, mean over layers, the
  same head), trained the same way. No encoder can beat it, since all of them start with that projection;
* the **matrix-product floor** of each encoder: its own matrix products and nothing else (the projection, the graph
  product over the real nodes, the conv's H x H linear map, GAT's attention-weighted sum; no ReLU, LayerNorm,
  dropout, softmax or attention logits), trained the same way. It is what the encoder would cost if every
  elementwise operation were free, so `floor / bound` is the best `time vs bound` any implementation of the method
  can reach on this machine, and `baseline / floor` the largest possible speed-up over the PyG-Data baseline.

To be fair on a shared machine the runs are interleaved: every pipeline takes a few training steps in turn, and each
pipeline's throughput is its samples divided by its own accumulated wall time (`common.Clock`, which also adds up
its CPU time; a pipeline whose wall time exceeds its CPU time waited for a core, and the table says so, together with
how busy the other programs kept the machine). Before timing, the script checks that the three implementations
compute the same function (eval mode, same weights).

Usage: python bench/ilge/encoders.py [--n 4096] [--layers 25] [--dim 1024] [--epochs 2] [--threads 2,1]
Prints one markdown table per thread count and writes them to bench/ilge/results/encoders.md. The default runs 2 threads
(the benchmark's setting) and then 1 thread: on a machine shared with other jobs two threads suffer from
oversubscription (every parallel region waits for both threads to be scheduled), which penalises pipelines with many
small operations far more than the projection bound's two large matrix products; one thread shows the compute cost.
"""
import argparse, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: `common`, and the scripts as modules of ilge, pruning
import common
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader as PyGDataLoader
from torch_geometric.nn import DenseGATConv, DenseGCNConv, DenseGINConv, global_mean_pool

from layerkit.configs import CayleyConfig, DeepSetConfig
from layerkit.encoders import build_aggregator
from layerkit.graphs import cayley_graph, cayley_n_for, sl2_order

NUM_CLASSES = 4


class PyGDataEncoder(nn.Module):
    "The aggregator's own modules, run the standard PyG way on a collated `Batch` (sparse convs, all nodes)."
    def __init__(self, agg):
        super().__init__()
        self.agg = agg

    def forward(self, batch):
        a = self.agg
        h = a.dropout(F.relu(a.proj(batch.x)))                   # (B*V, H): every node projected
        h = h * batch.real.unsqueeze(1).to(h.dtype)              # virtual nodes are zero after the projection
        for conv, norm in zip(a.gnn.convs, a.gnn.norms):
            h = a.gnn._post(conv(h, batch.edge_index), norm)
        return global_mean_pool(h[batch.real], batch.batch[batch.real])


class PyGDenseEncoder(nn.Module):
    "The aggregator with PyG's DenseGINConv / DenseGCNConv / DenseGATConv on the zero-padded (B, V, H) tensor."
    def __init__(self, agg):
        super().__init__()
        self.agg, ct = agg, agg.config.conv_type
        dense = []
        for conv in agg.gnn.convs:
            if ct == 'gin':
                saved = {k: v.clone() for k, v in conv.nn.state_dict().items()}
                d = DenseGINConv(conv.nn, train_eps=True)          # (its constructor re-initialises the MLP)
                conv.nn.load_state_dict(saved); d.eps.data.copy_(conv.eps.data)
            elif ct == 'gcn':
                d = DenseGCNConv(conv.in_channels, conv.out_channels)
                d.lin.weight.data.copy_(conv.lin.weight.data); d.bias.data.copy_(conv.bias.data)
            else:
                d = DenseGATConv(conv.in_channels, conv.out_channels, heads=conv.heads)
                for name in ('lin.weight', 'att_src', 'att_dst', 'bias'):
                    d.get_parameter(name).data.copy_(conv.get_parameter(name).data)
            dense.append(d)
        self.dense = nn.ModuleList(dense)
        if ct == 'gin': del agg.gnn.convs                          # the MLPs now live in the dense convs

    def forward(self, x):
        a = self.agg
        h = a.dropout(F.relu(a.proj(x)))                          # (B, L, H)
        B, L, H = h.shape
        h = torch.cat([h, h.new_zeros(B, a.num_nodes - L, H)], 1)  # (B, V, H)
        for conv, norm in zip(self.dense, a.gnn.norms):
            h = a.gnn._post(conv(h, a.adj), norm)
        return h[:, :L].mean(1)


class MatmulFloor(nn.Module):
    "The encoder's matrix products alone, with its own weights: every elementwise operation left out."
    def __init__(self, agg):
        super().__init__()
        self.proj, ct, L = agg.proj, agg.config.conv_type, agg.num_layers
        self.lins = nn.ModuleList(conv.nn[0] if ct == 'gin' else conv.lin for conv in agg.gnn.convs)
        M = {'gin': agg.adj[:L, :L] + torch.eye(L), 'gcn': agg.adj_gcn[:L, :L]}.get(ct)
        if ct == 'gat':                       # a fixed attention pattern over the neighbours (softmax of zeros)
            heads = agg.gnn.convs[0].heads
            M = torch.softmax(agg.gat_mask[:L, :L], -1).expand(heads, L, L)
        self.register_buffer('M', M)

    def forward(self, x):
        h = self.proj(x)                                         # (B, L, H)
        B, L, H = h.shape
        for i, lin in enumerate(self.lins):
            h = lin(h)
            if self.M.dim() == 2: h = torch.matmul(self.M, h)    # (L, L) @ (B, L, H)
            else:                                                # (heads, L, L) @ (B, heads, L, C)
                k = self.M.shape[0]
                h = torch.matmul(self.M, h.view(B, L, k, H // k).transpose(1, 2))
                if i == len(self.lins) - 1: return h.mean(2).reshape(B, H)
                h = h.transpose(1, 2).reshape(B, L, H)
        return h.mean(1)


class DeepSetFloor(nn.Module):
    "DeepSet's matrix products alone: the Linear layers of phi and rho, no ReLU or dropout."
    def __init__(self, agg):
        super().__init__()
        self.phi = nn.Sequential(*[m for m in agg.phi if isinstance(m, nn.Linear)])
        self.rho = nn.Sequential(*[m for m in agg.rho if isinstance(m, nn.Linear)])

    def forward(self, x): return self.rho(self.phi(x).mean(1))


class ResearchStyleDataset(torch.utils.data.Dataset):
    "Builds one PyG `Data` per sample on access, like the research code's SingleGraphDataset."
    def __init__(self, items, labels, edge_index, num_nodes):
        self.items, self.labels, self.edge_index, self.num_nodes = items, labels, edge_index, num_nodes

    def __len__(self): return len(self.items)

    def __getitem__(self, i):
        x = torch.tensor(self.items[i], dtype=torch.float32)            # (L, D) from numpy
        L = x.shape[0]
        x = torch.cat([x, torch.zeros(self.num_nodes - L, x.shape[1])])  # virtual nodes
        d = Data(x=x, edge_index=self.edge_index.clone())
        d.y = torch.tensor([int(self.labels[i])])
        d.real = torch.arange(self.num_nodes) < L
        return d


class Runner:
    "One training pipeline: model + head + Adam, stepping through epochs of its own loader."
    def __init__(self, name, model, out_dim, batches):
        self.name, self.model, self.batches = name, model, batches
        self.head = nn.Linear(out_dim, NUM_CLASSES)
        self.opt = torch.optim.Adam([*model.parameters(), *self.head.parameters()], lr=CayleyConfig().lr,
                                    weight_decay=CayleyConfig().weight_decay)   # the configs' defaults
        self.clock, self.samples, self._it = common.Clock(), 0, None
        model.train()

    def _next(self):
        if self._it is None: self._it = iter(self.batches())
        try: return next(self._it)
        except StopIteration:
            self._it = None
            return None

    def step(self):
        "One training step; returns the batch size, or None at the end of an epoch."
        b = self._next()
        if b is None: return None
        inp, y = b
        loss = F.cross_entropy(self.head(self.model(inp)), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return len(y)


def tensor_batches(X, y, B):
    "Random-permutation slices of in-memory tensors (what layerkit's users do)."
    def gen():
        perm = torch.randperm(len(X))
        for i in range(0, len(X), B):
            idx = perm[i:i + B]
            yield X[idx], y[idx]
    return gen


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--n', type=int, default=4096)
    p.add_argument('--layers', type=int, default=25)
    p.add_argument('--dim', type=int, default=1024)
    p.add_argument('--epochs', type=int, default=2)
    p.add_argument('--batch-size', type=int, default=64)
    p.add_argument('--threads', default='2,1', help='comma-separated torch thread counts, one table each')
    p.add_argument('--chunk', type=int, default=4, help='training steps per turn when interleaving')
    p.add_argument('--no-dense-pyg', action='store_true', help="skip PyG's Dense*Conv rows")
    p.add_argument('--no-research', action='store_true', help="skip the research-code pipeline rows")
    p.add_argument('--out', default='encoders.md', help='file name under bench/ilge/results/')
    args = p.parse_args()
    tables = [run(args, int(t)) for t in args.threads.split(',')]
    common.write_result(Path(args.out).name, '\n'.join(tables))


def run(args, threads: int) -> str:
    "Benchmark every pipeline with `threads` torch threads; return the markdown table."
    common.set_threads(threads)
    torch.manual_seed(0)
    N, L, D, B = args.n, args.layers, args.dim, args.batch_size

    X = torch.randn(N, L, D)
    y = torch.randint(0, NUM_CLASSES, (N,))
    convs = ('gin', 'gcn', 'gat')

    # --- the same function three ways (eval mode, same weights)
    torch.manual_seed(1)
    xb = X[:5]
    for ct in convs:
        agg = build_aggregator(CayleyConfig(conv_type=ct), L, D).eval()
        ref = agg(xb)
        V = agg.num_nodes
        data = [Data(x=torch.cat([xb[i], xb.new_zeros(V - L, D)]), edge_index=agg.edge_index,
                     real=torch.arange(V) < L) for i in range(len(xb))]
        batch = next(iter(PyGDataLoader(data, batch_size=len(data))))
        base = PyGDataEncoder(agg).eval()(batch)
        agg_copy = build_aggregator(CayleyConfig(conv_type=ct), L, D)
        agg_copy.load_state_dict(agg.state_dict())
        dense = PyGDenseEncoder(agg_copy).eval()(xb)
        err = max((ref - base).abs().max().item(), (ref - dense).abs().max().item())
        assert err < 1e-4, f"{ct}: implementations disagree by {err}"
        print(f"check {ct}: layerkit == PyG-Data == PyG Dense*Conv (max |diff| {err:.1e})", flush=True)

    # --- the pipelines
    runners, n = [], cayley_n_for(L)
    V, edge_index = sl2_order(n), cayley_graph(n)
    real = torch.arange(V) < L
    zeros = torch.zeros(V - L, D)
    data = [Data(x=torch.cat([X[i], zeros]), edge_index=edge_index, y=y[i:i + 1], real=real) for i in range(N)]
    pyg_batches = lambda: ((b, b.y) for b in PyGDataLoader(data, batch_size=B, shuffle=True))
    research = ResearchStyleDataset(list(X.numpy()), y.tolist(), edge_index, V)
    research_batches = lambda: ((b, b.y) for b in PyGDataLoader(research, batch_size=B, shuffle=True))
    ours = tensor_batches(X, y, B)
    torch.manual_seed(2)
    runners.append(Runner('bound', nn.Sequential(nn.Linear(D, 256), _Mean()), 256, ours))
    for ct in convs:
        cfg = CayleyConfig(conv_type=ct)
        agg = build_aggregator(cfg, L, D)
        runners.append(Runner(f'{ct}', agg, agg.out_dim, ours))
        runners.append(Runner(f'{ct}/pyg-data', PyGDataEncoder(build_aggregator(cfg, L, D)), 256, pyg_batches))
        if not args.no_research:
            runners.append(Runner(f'{ct}/research', PyGDataEncoder(build_aggregator(cfg, L, D)), 256, research_batches))
        if not args.no_dense_pyg:
            runners.append(Runner(f'{ct}/pyg-dense', PyGDenseEncoder(build_aggregator(cfg, L, D)), 256, ours))
        runners.append(Runner(f'{ct}/floor', MatmulFloor(build_aggregator(cfg, L, D)), 256, ours))
    ds = build_aggregator(DeepSetConfig(), L, D)
    runners.append(Runner('deepset', ds, ds.out_dim, ours))
    runners.append(Runner('deepset/floor', DeepSetFloor(build_aggregator(DeepSetConfig(), L, D)), ds.out_dim, ours))
    loader = DataLoader(TensorDataset(X, y), batch_size=B, shuffle=True)
    runners.append(Runner('deepset/torch-loader', build_aggregator(DeepSetConfig(), L, D), ds.out_dim, lambda: loader))

    for r in runners:  # warm-up (not timed), then restart the epoch
        for _ in range(2): r.step()
        r._it = None

    epochs_left = {r.name: args.epochs for r in runners}
    total, t_start = common.Clock().start(), time.perf_counter()
    while any(epochs_left.values()):
        for r in runners:
            if not epochs_left[r.name]: continue
            n = 0
            with r.clock:
                for _ in range(args.chunk):
                    got = r.step()
                    if got is None:
                        epochs_left[r.name] -= 1
                        break
                    n += got
            r.samples += n
        done = sum(r.samples for r in runners) / (len(runners) * args.epochs * N)
        print(f"\r{100 * done:5.1f}% ({time.perf_counter() - t_start:.0f} s)", end='', file=sys.stderr, flush=True)
    all_runs = total.stop()

    thr = {r.name: r.samples / r.clock.wall for r in runners}
    bound = thr['bound']
    rows = []
    fmt = lambda v: '-' if v is None else f'{v:,.0f}'
    for name in (*convs, 'deepset'):
        base = thr[f'{name}/pyg-data' if name != 'deepset' else 'deepset/torch-loader']
        res, dense, floor = thr.get(f'{name}/research'), thr.get(f'{name}/pyg-dense'), thr[f'{name}/floor']
        rows.append((name.upper() if name != 'deepset' else 'DeepSet', f'{thr[name]:,.0f}', f'{base:,.0f}',
                     f'**{thr[name] / base:.1f}x**', fmt(res), '-' if res is None else f'{thr[name] / res:.1f}x',
                     fmt(dense), f'{bound:,.0f}', f'**{bound / thr[name]:.2f}x**', f'{bound / floor:.2f}x',
                     f'{floor / base:.1f}x'))
    header = (f"Training throughput, samples/s (N={N}, L={L}, D={D}, batch {B}, {args.epochs} epochs, default configs, "
              f"{threads} CPU thread{'s' if threads > 1 else ''}, torch {torch.__version__}; "
              f"interleaved in one process, {all_runs.wall:.0f} s in all)\n\n" + common.md_table(
                  ('encoder', 'layerkit', 'PyG-Data baseline', 'speed-up (target >= 3x)', 'research-code pipeline',
                   'speed-up', 'PyG Dense*Conv', 'projection bound', 'time vs bound (target <= 1.5x)', 'floor vs bound',
                   'largest possible speed-up (baseline / floor)'), rows))
    waited = [r.name for r in runners if r.clock.run.disturbed()]
    load = all_runs.load
    clocks = (f"\nClocks: {all_runs.wall:.0f} s wall, {all_runs.cpu:.0f} s CPU in all"
              + ('' if load is None else f"; other programs kept {load:.2f} cores busy on average") + '. '
              + (f"**Disturbed**: {', '.join(waited)} spent more wall than CPU time (they waited for a core)."
                 if waited else f"No pipeline's wall time exceeds its CPU time by more than {common.TOLERANCE:.0%}.")
              + ('' if load is None or load <= common.BUSY else " The machine was shared: the ratios are the "
                 "comparable figures, the absolute throughputs are low.") + '\n')
    note = ("\nPyG-Data baseline: a precomputed list of one PyG `Data` per sample + PyG `DataLoader` + sparse convs "
            "(DeepSet: `TensorDataset` + torch `DataLoader`). Research-code pipeline: the same with each `Data` built "
            "in `Dataset.__getitem__`, as the authors' code does. PyG Dense*Conv: `DenseGINConv`/`DenseGCNConv`/"
            "`DenseGATConv` on all V nodes. Bound: the input projection alone (Linear D->256 on every layer vector, "
            "mean, same head), trained the same way. Floor: the encoder's matrix products alone (projection, graph "
            "product, HxH linear map, GAT's attention-weighted sum; no elementwise operation), i.e. the best "
            "`time vs bound` and the largest speed-up over the baseline that any implementation can reach here.\n")
    table = header + '\n' + clocks + note
    print('\n' + table, flush=True)
    return table


class _Mean(nn.Module):
    def forward(self, x): return x.mean(1)


if __name__ == '__main__':
    main()
