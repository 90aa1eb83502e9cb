"""The float64 reference of each op (GPU only; imports torch).

Primary: the op computed in torch float64 on the GPU from the same
uploaded bytes (:func:`torch_reference`). Cross-check: where
`fixtures/golden/<op>.py` exists (an independent numpy float64 reference,
`compute(case_dir: Path, dims: list[int]) -> np.ndarray`), it is run on
the case directory and must agree with the torch reference to within
1e-8 + 1e-8*|golden| elementwise, or the op is not run.
"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path

import torch

from .definitions import constant

AGREE_ABS = 1e-8
AGREE_REL = 1e-8

#: The repository's golden references, relative to this file (python/mage_compare/ -> fixtures/golden).
DEFAULT_GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


def neighbor_dst(rowptr64: torch.Tensor, n: int, edges: int) -> torch.Tensor:
    """The destination row of every edge (int64), from the row pointer."""
    counts = rowptr64[1:] - rowptr64[:-1]
    return torch.repeat_interleave(torch.arange(n, device=rowptr64.device), counts, output_size=edges)


def u32_to_int64(t: torch.Tensor) -> torch.Tensor:
    """int32 tensor holding u32 bits -> int64 values (unsigned)."""
    return t.to(torch.int64) & 0xFFFFFFFF


def input_views(op: str, roles: list[str], tensors: list, dims: list[int]) -> dict:
    """Inputs by role; for neighbor also the int64 forms of its CSR, which
    the reference and the alternatives index with."""
    views = dict(zip(roles, tensors))
    if op in ("neighbor", "neighbor_backward"):
        n, _, edges = dims
        views["rowptr64"] = u32_to_int64(views["rowptr"])
        views["indices64"] = u32_to_int64(views["indices"])
        views["dst64"] = neighbor_dst(views["rowptr64"], n, edges)
    return views


#: Each gradient op: its forward op, the forward's input roles (a role not
#: among the gradient op's inputs is zeros shaped like the role after `=`),
#: the roles the gradients are taken of (the op's output order), and the
#: role of the output's gradient.
GRADIENTS = {
    "layernorm_backward": ("layernorm", ("x", "gamma", "beta=gamma"), ("x", "gamma", "beta"), "dy"),
    "gelu_backward": ("gelu", ("x", "bias"), ("x", "bias"), "dy"),
    "gelu_erf_backward": ("gelu_erf", ("x", "bias"), ("x", "bias"), "dy"),
    "triangle_backward": ("triangle", ("A", "B"), ("A", "B"), "dO"),
    "neighbor_backward": ("neighbor", ("x", "w"), ("x", "w"), "dY"),
}


def autograd_reference(op: str, dims: list[int], v: dict) -> torch.Tensor:
    """A gradient op's float64 reference: torch.autograd of the forward's
    float64 reference on float64 leaves, the gradients concatenated flat in
    the op's output order."""
    forward, roles, wrt, grad_role = GRADIENTS[op]
    leaves = dict(v)
    for r in roles:
        name, _, like = r.partition("=")
        src = v[like] if like else v[name]
        leaves[name] = (torch.zeros_like(src, dtype=torch.float64) if like else src.to(torch.float64)).requires_grad_(True)
    with torch.enable_grad():
        y = torch_reference(forward, dims, leaves)
        grads = torch.autograd.grad(y, [leaves[r] for r in wrt], v[grad_role].to(torch.float64))
    return torch.cat([g.reshape(-1) for g in grads]).detach()


def torch_reference(op: str, dims: list[int], v: dict) -> torch.Tensor:
    """float64 result shaped like the output, from the typed views `v`."""
    if op in GRADIENTS:
        return autograd_reference(op, dims, v)
    f = lambda t: t.to(torch.float64)  # noqa: E731
    if op == "matmul":
        return f(v["a"]) @ f(v["b"])
    if op == "matmul_nt":
        return f(v["a"]) @ f(v["b"]).T
    if op == "matmul_tn":
        return f(v["a"]).T @ f(v["b"])
    if op == "layernorm":
        x = f(v["x"])
        mean = x.mean(dim=1, keepdim=True)
        d = x - mean
        var = (d * d).mean(dim=1, keepdim=True)
        return d / torch.sqrt(var + constant(op, "eps")) * f(v["gamma"]) + f(v["beta"])
    if op == "gelu":
        z = f(v["x"]) + f(v["bias"])
        c, cubic = constant(op, "sqrt_2_over_pi"), constant(op, "cubic")
        return 0.5 * z * (1.0 + torch.tanh(c * (z + cubic * z * z * z)))
    if op == "gelu_erf":
        z = f(v["x"]) + f(v["bias"])
        return 0.5 * z * torch.erfc(-z * 0.5**0.5)
    if op == "triangle":
        return torch.einsum("ikc,jkc->ijc", f(v["A"]), f(v["B"]))
    if op == "neighbor":
        n, width, edges = dims
        out = torch.zeros((n, width), dtype=torch.float64, device=v["x"].device)
        if edges:
            src = v["indices64"]
            out = out.index_add(0, v["dst64"], f(v["w"]).unsqueeze(1) * f(v["x"]).index_select(0, src))
        return out
    raise ValueError(f"no reference for op `{op}`")


def torch_magnitude(op: str, dims: list[int], v: dict) -> torch.Tensor | None:
    """Each output element's magnitude in float64, shaped like the output:
    what the Rust registry's reference computes beside its values and the
    tolerance's `of_magnitude` scales. For the contractions it is the sum of
    the terms' absolute values, the op itself on |inputs|; None for an op
    whose tolerance uses none, and for a gradient op, whose magnitudes the
    caller takes from the Rust registry's case."""
    f = lambda t: t.to(torch.float64)  # noqa: E731
    if op in ("matmul", "matmul_nt", "matmul_tn", "triangle", "neighbor"):
        roles = {"matmul": ("a", "b"), "matmul_nt": ("a", "b"), "matmul_tn": ("a", "b"), "triangle": ("A", "B"),
                 "neighbor": ("x", "w")}[op]
        return torch_reference(op, dims, {**v, **{r: f(v[r]).abs() for r in roles}})
    if op == "layernorm":
        x = f(v["x"])
        mean = x.mean(dim=1, keepdim=True)
        d = x - mean
        var = (d * d).mean(dim=1, keepdim=True)
        xhat = d / torch.sqrt(var + constant(op, "eps"))
        return f(v["gamma"]).abs() * (1.0 + xhat.abs()) + f(v["beta"]).abs()
    if op == "gelu":
        return (f(v["x"]) + f(v["bias"])).abs()
    if op == "gelu_erf":
        z = f(v["x"]) + f(v["bias"])
        y = 0.5 * z * torch.erfc(-z * 0.5**0.5)
        return y.abs() + z * z * torch.exp(-0.5 * z * z) / (2.0 * math.pi) ** 0.5
    return None


def load_golden(golden_dir: Path, op: str):
    path = golden_dir / f"{op}.py"
    if not path.is_file():
        return None, path
    spec = importlib.util.spec_from_file_location(f"mage_golden_{op}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute, path


def build_reference(spec, views: dict, output_shape: list[int], golden_dir: Path | None, use_golden: bool) -> tuple[torch.Tensor, dict]:
    """(reference float64 tensor on the GPU, info for the JSON). Raises if
    the golden reference disagrees."""
    t0 = time.perf_counter()
    ref = torch_reference(spec.op, list(spec.dims), views)
    torch.cuda.synchronize()
    info = {"primary": "torch float64 on the GPU (mage_compare.reference.torch_reference)",
            "seconds": time.perf_counter() - t0, "golden": None}
    output_len = math.prod(output_shape)
    if ref.numel() != output_len:
        raise ValueError(f"the reference has {ref.numel()} values; the output has {output_len}")
    if not use_golden:
        info["golden"] = {"path": None, "error": "skipped (--no-golden)"}
        return ref, info
    gdir = golden_dir or DEFAULT_GOLDEN
    g: dict = {"path": None, "seconds": None, "max_abs_diff": None, "agree": None, "error": None}
    info["golden"] = g
    try:
        compute, path = load_golden(gdir, spec.op)
        g["path"] = str(path)
        if compute is None:
            g["error"] = "no golden reference for this op"
            return ref, info
        import numpy as np

        t1 = time.perf_counter()
        arr = np.asarray(compute(Path(spec.case_path), list(spec.dims)), dtype=np.float64).reshape(-1)
        g["seconds"] = time.perf_counter() - t1
    except Exception as e:  # noqa: BLE001 - a broken golden file is reported, the torch reference stands
        g["error"] = f"{type(e).__name__}: {e}"
        return ref, info
    if arr.size != output_len:
        raise ValueError(f"{g['path']} returned {arr.size} values; the output has {output_len}")
    gt = torch.from_numpy(arr).to(ref.device)
    diff = (gt - ref.reshape(-1)).abs()
    g["max_abs_diff"] = float(diff.max()) if diff.numel() else 0.0
    g["agree"] = bool((diff <= AGREE_ABS + AGREE_REL * gt.abs()).all())
    if not g["agree"]:
        raise ValueError(f"the torch float64 reference and {g['path']} disagree (max abs diff {g['max_abs_diff']:.3g}); "
                         "nothing is run for this op")
    return ref, info
