"""The end-to-end workloads: one parameter set per block, a forward per
backend.

Each block holds torch.nn modules as its parameters (so that one
``state_dict`` moves between backends) and computes its forward either
with PyTorch (``backend="torch"``, the model ``torch.compile`` also
compiles) or with Mage's ops (``backend="mage"``, ``torch.ops.mage.*``
through ``mage.layer_norm``, ``mage.linear``, ``mage.bias_gelu``,
``mage.triangle`` and ``mage.neighbor``). The two compute the same
function: GELU is the tanh form in both, the GNN layer's aggregation is
the same sum over the same edges.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

BACKENDS = ("torch", "mage")


def _mage():
    import mage

    return mage


class MLPBlock(torch.nn.Module):
    """``x + fc2(gelu_tanh(fc1(layer_norm(x))))``: a transformer's MLP
    block, hidden width 4·d. Mage's forward fuses fc1's bias into the GELU
    (``mage.bias_gelu``), as a fused kernel library would."""

    def __init__(self, d: int, hidden: int | None = None, backend: str = "torch"):
        super().__init__()
        hidden = hidden or 4 * d
        self.norm = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, d)
        self.backend = backend
        # LayerNorm's default weight 1 and bias 0 would hide errors in their gradients' use.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        if self.backend == "mage":
            m = _mage()
            xn = m.layer_norm(x, list(self.norm.normalized_shape), self.norm.weight, self.norm.bias, self.norm.eps)
            h = m.bias_gelu(m.linear(xn, self.fc1.weight), self.fc1.bias)
            return x + m.linear(h, self.fc2.weight, self.fc2.bias)
        xn = F.layer_norm(x, self.norm.normalized_shape, self.norm.weight, self.norm.bias, self.norm.eps)
        h = F.gelu(F.linear(xn, self.fc1.weight, self.fc1.bias), approximate="tanh")
        return x + F.linear(h, self.fc2.weight, self.fc2.bias)


class TriangleBlock(torch.nn.Module):
    """``layer_norm(triangle(a, b))`` with ``a``, ``b`` projections of
    ``layer_norm(z)``: the outgoing triangle update of structure models,
    ``O[i, j, c] = Σ_k a[i, k, c]·b[j, k, c]``, without its gates."""

    def __init__(self, c_z: int, c: int, backend: str = "torch"):
        super().__init__()
        self.norm_in = torch.nn.LayerNorm(c_z)
        self.proj_a = torch.nn.Linear(c_z, c, bias=False)
        self.proj_b = torch.nn.Linear(c_z, c, bias=False)
        self.norm_out = torch.nn.LayerNorm(c)
        self.backend = backend
        with torch.no_grad():
            for n in (self.norm_in, self.norm_out):
                n.weight.uniform_(0.5, 1.5)
                n.bias.uniform_(-0.5, 0.5)

    def forward(self, z):
        if self.backend == "mage":
            m = _mage()
            zn = m.layer_norm(z, list(self.norm_in.normalized_shape), self.norm_in.weight, self.norm_in.bias)
            o = m.triangle(m.linear(zn, self.proj_a.weight), m.linear(zn, self.proj_b.weight))
            return m.layer_norm(o, list(self.norm_out.normalized_shape), self.norm_out.weight, self.norm_out.bias)
        zn = F.layer_norm(z, self.norm_in.normalized_shape, self.norm_in.weight, self.norm_in.bias)
        o = torch.einsum("ikc,jkc->ijc", F.linear(zn, self.proj_a.weight), F.linear(zn, self.proj_b.weight))
        return F.layer_norm(o, self.norm_out.normalized_shape, self.norm_out.weight, self.norm_out.bias)


class GNNLayer(torch.nn.Module):
    """``lin(Σ_{e in row i} w[e]·x[indices[e]])``: neighbour aggregation
    over a CSR graph with a weight per edge (both x and w take gradients),
    then a Linear. PyTorch's form is the scatter of message-passing
    libraries: the edges' messages added into their rows (``index_add``)."""

    def __init__(self, features: int, out_features: int, backend: str = "torch"):
        super().__init__()
        self.lin = torch.nn.Linear(features, out_features)
        self.backend = backend
        self.graph = None  # mage.Graph, built once per graph (Mage's backend)
        self.rows = None  # each edge's row (PyTorch's backend)
        self.indices = None

    def set_graph(self, rowptr, indices, num_nodes):
        self.indices = indices.long()
        self.rows = torch.repeat_interleave(torch.arange(num_nodes, device=rowptr.device), torch.diff(rowptr.long()))
        if self.backend == "mage":
            self.graph = _mage().Graph(rowptr, indices, num_nodes)

    def forward(self, x, w):
        if self.backend == "mage":
            m = _mage()
            return m.linear(m.neighbor(self.graph, x, w), self.lin.weight, self.lin.bias)
        agg = torch.zeros_like(x).index_add(0, self.rows, w[:, None] * x[self.indices])
        return F.linear(agg, self.lin.weight, self.lin.bias)


class Net(torch.nn.Module):
    """The trained model: ``blocks`` MLP blocks, then a Linear head."""

    def __init__(self, d: int, blocks: int, out: int, backend: str = "torch"):
        super().__init__()
        self.blocks = torch.nn.ModuleList(MLPBlock(d, backend=backend) for _ in range(blocks))
        self.head = torch.nn.Linear(d, out)
        self.backend = backend

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        if self.backend == "mage":
            return _mage().linear(x, self.head.weight, self.head.bias)
        return F.linear(x, self.head.weight, self.head.bias)


def twin(model: torch.nn.Module, make, backend: str, dtype=torch.float32) -> torch.nn.Module:
    """A model of the other backend (``make(backend)``) with ``model``'s
    parameters, in ``dtype``."""
    other = make(backend).to(device=next(model.parameters()).device)
    other.load_state_dict(model.state_dict())
    return other.to(dtype)


def power_law_graph(num_nodes: int, mean_degree: float, alpha: float, seed: int, device):
    """A CSR graph whose row degrees follow a power law (Pareto with tail
    exponent ``alpha``, scaled to ``mean_degree``, at least 1, at most
    ``num_nodes``), neighbours uniform: ``(rowptr, indices)`` int32 and the
    degree statistics."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    u = torch.rand(num_nodes, generator=g, dtype=torch.float64).clamp_min(1e-12)
    raw = u.pow(-1.0 / (alpha - 1.0))
    deg = (raw * (mean_degree / raw.mean())).round().clamp(1, num_nodes).long()
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(deg, 0)
    edges = int(rowptr[-1])
    indices = torch.randint(0, num_nodes, (edges,), generator=g)
    stats = {"nodes": num_nodes, "edges": edges, "mean_degree": edges / num_nodes, "max_degree": int(deg.max()),
             "alpha": alpha, "seed": seed}
    return rowptr.to(torch.int32).to(device), indices.to(torch.int32).to(device), stats


def teacher(x64, out: int, seed: int):
    """A fixed random target in float64: ``tanh(x·W1)·W2``, W1 scaled to
    keep tanh off saturation."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    d = x64.shape[-1]
    w1 = (torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)).to(x64.device)
    w2 = (torch.randn(d, out, generator=g, dtype=torch.float64) / math.sqrt(d)).to(x64.device)
    return torch.tanh(x64 @ w1) @ w2
