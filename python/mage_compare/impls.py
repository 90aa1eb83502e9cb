"""Implementations of each op (GPU only; imports torch, triton lazily).

Every implementation is an object with `name`, `kind`, `stage`,
`output_mode`, `info`, `notes`, `error` and

* `call()`: one call, enqueued on torch's current stream (asynchronous);
* `checked_call()`: poison, one call, synchronise; returns the poison info;
* `result()`: the output of the last call, shaped like the op's output.

Kinds: `rust` (a manifest plan launched from its PTX through the CUDA
driver), `triton` (this package's kernels), `torch` (eager PyTorch),
`torch_compile` (the eager function through torch.compile) and `cusparse`
(torch.sparse CSR @ dense, neighbor only). Rust and Triton write into a
preallocated output of their own; the torch kinds return a new tensor per
call, made row-major with `.contiguous()` (a no-op where it already is).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .manifest import RustEntry
from .profparse import fresh_function
from .ptx import entry_params, pack_params, resolve_args

#: The poison bit pattern (a quiet NaN), as in the Rust runner.
POISON = 0x7FC0BEEF
#: Poisoned blocks freed into the caching allocator before a returned-output check.
POISON_BLOCKS = 3
COMPILE_WARM_CALLS = 3
LAYERNORM_EPS = 1e-5


def poison_(t: torch.Tensor) -> None:
    t.view(torch.int32).fill_(POISON)


class Impl:
    kind = "?"
    output_mode = "preallocated"

    def __init__(self, name: str, stage: str | None = None):
        self.name = name
        self.stage = stage
        self.info: dict = {}
        self.notes: list[str] = []
        self.error: str | None = None

    def call(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def result(self) -> torch.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError

    def checked_call(self) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError


class Broken(Impl):
    """An implementation that could not be built; never called."""

    def __init__(self, name: str, kind: str, stage: str | None, error: str):
        super().__init__(name, stage)
        self.kind = kind
        self.error = error


class Preallocated(Impl):
    """Writes into `self.out` (and scratch) of its own."""

    def __init__(self, name: str, stage: str | None, shape: list[int], device, scratch: list[int] = ()):
        super().__init__(name, stage)
        n = 1
        for d in shape:
            n *= d
        self.shape = list(shape)
        self.numel = n
        self.out = torch.empty(max(n, 1), dtype=torch.float32, device=device)
        self.scratch = [torch.empty(max(s, 1), dtype=torch.float32, device=device) for s in scratch]
        self.out_view = self.out[:n].view(self.shape)

    def checked_call(self) -> dict:
        poison_(self.out)
        for s in self.scratch:
            poison_(s)
        self.call()
        torch.cuda.synchronize()
        return {"output": "preallocated", "pattern": f"0x{POISON:08X}"}

    def result(self) -> torch.Tensor:
        return self.out_view


class Returned(Impl):
    """Calls `fn(*args)`, which returns a new tensor."""

    output_mode = "returned"

    def __init__(self, name: str, kind: str, fn: Callable, args: tuple, numel: int, device):
        super().__init__(name)
        self.kind = kind
        self.fn = fn
        self.args = args
        self.numel = numel
        self.device = device
        self.last: Any = None

    def call(self) -> None:
        self.last = self.fn(*self.args)

    def checked_call(self) -> dict:
        """Frees poisoned blocks of the output's size into the caching
        allocator (after emptying its cache) so that the call's allocations
        most likely land on poison, then calls; says whether they did."""
        self.last = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        blocks = [torch.empty(max(self.numel, 1), dtype=torch.float32, device=self.device) for _ in range(POISON_BLOCKS)]
        for b in blocks:
            poison_(b)
        ptrs = {b.data_ptr() for b in blocks}
        del blocks, b
        self.call()
        torch.cuda.synchronize()
        return {"output": "returned", "blocks_poisoned": POISON_BLOCKS,
                "result_in_poisoned_block": bool(torch.is_tensor(self.last) and self.last.data_ptr() in ptrs)}

    def result(self) -> torch.Tensor:
        if not torch.is_tensor(self.last):
            raise TypeError(f"{self.name} returned {type(self.last).__name__}, not a tensor")
        return self.last


# -- eager PyTorch --------------------------------------------------------------------------


def matmul_eager(a, b):
    return torch.matmul(a, b)


def layernorm_eager(x, gamma, beta):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, LAYERNORM_EPS)


def gelu_eager(x, bias):
    return F.gelu(x + bias, approximate="tanh")


def triangle_eager(a, b):
    return torch.einsum("ikc,jkc->ijc", a, b).contiguous()


def neighbor_eager(x, w, dst, src):
    """Gather the source rows, scale by the edge weights, scatter-add into the destinations."""
    return torch.zeros_like(x).index_add_(0, dst, w.unsqueeze(1) * x.index_select(0, src))


def neighbor_cusparse(csr, x):
    return (csr @ x).contiguous()


EAGER = {"matmul": (matmul_eager, ("a", "b")), "layernorm": (layernorm_eager, ("x", "gamma", "beta")),
         "gelu": (gelu_eager, ("x", "bias")), "triangle": (triangle_eager, ("a", "b")),
         "neighbor": (neighbor_eager, ("x", "w", "dst64", "indices64"))}


def build_torch(op: str, views: dict, numel: int, device) -> Impl:
    fn, keys = EAGER[op]
    impl = Returned("torch", "torch", fn, tuple(views[k] for k in keys), numel, device)
    impl.info["function"] = f"mage_compare.impls.{fn.__name__}"
    if op == "neighbor":
        impl.notes.append("rowptr/indices as int64 (converted once, outside timing); destinations expanded once from rowptr")
    return impl


def build_torch_compile(op: str, views: dict, numel: int, tag: str, device) -> Impl:
    fn, keys = EAGER[op]
    compiled = torch.compile(fresh_function(fn, tag), dynamic=False, fullgraph=True)
    impl = Returned("torch_compile", "torch_compile", compiled, tuple(views[k] for k in keys), numel, device)
    t0 = time.perf_counter()
    for _ in range(COMPILE_WARM_CALLS):
        impl.call()
    torch.cuda.synchronize()
    impl.info["compile"] = {"function": f"mage_compare.impls.{fn.__name__}", "mode": "default", "dynamic": False,
                            "fullgraph": True, "warm_calls": COMPILE_WARM_CALLS,
                            "compile_and_warm_seconds": time.perf_counter() - t0}
    return impl


def build_cusparse(views: dict, dims: list[int], numel: int, device) -> Impl:
    n = dims[0]
    csr = torch.sparse_csr_tensor(views["rowptr64"], views["indices64"], views["w"], size=(n, n))
    impl = Returned("cusparse", "cusparse", neighbor_cusparse, (csr, views["x"]), numel, device)
    impl.info["function"] = "torch.sparse_csr_tensor(rowptr, indices, w, (n, n)) @ x"
    impl.notes.append("CSR tensor (int64 indices) built once outside timing")
    return impl


# -- Triton --------------------------------------------------------------------------------------


class TritonImpl(Preallocated):
    kind = "triton"

    def __init__(self, name: str, launch: Callable, shape: list[int], device):
        super().__init__(name, None, shape, device)
        self.launch = launch

    def call(self) -> None:
        self.launch(self.out_view)


def build_triton(op: str, name: str, views: dict, shape: list[int], device) -> Impl:
    from . import triton_kernels as tk

    v = views
    if op == "matmul" and name == "triton":
        launch, cfg = (lambda o: tk.matmul(v["a"], v["b"], o)), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8,
                                                                 "num_warps": 4, "num_stages": 3}
    elif op == "matmul" and name == "triton_tuned":
        launch, cfg = (lambda o: tk.matmul_tuned(v["a"], v["b"], o)), None
    elif op == "layernorm":
        launch, cfg = (lambda o: tk.layernorm(v["x"], v["gamma"], v["beta"], o)), tk.layernorm_config(shape[1])
    elif op == "gelu":
        launch, cfg = (lambda o: tk.gelu(v["x"], v["bias"], o)), {"BLOCK": 1024, "num_warps": 4}
    elif op == "triangle":
        launch, cfg = (lambda o: tk.triangle(v["a"], v["b"], o)), tk.triangle_config(shape[2])
    elif op == "neighbor":
        launch, cfg = (lambda o: tk.neighbor(v["x"], v["w"], v["rowptr"], v["indices"], o)), tk.neighbor_config(shape[1])
    else:
        raise ValueError(f"no Triton kernel `{name}` for {op}")
    impl = TritonImpl(name, launch, shape, device)
    t0 = time.perf_counter()
    impl.call()  # compiles (and, for triton_tuned, autotunes at this exact shape)
    torch.cuda.synchronize()
    impl.info["compile_seconds"] = time.perf_counter() - t0
    impl.info["precision"] = "fp32; tl.dot input_precision='ieee'" if op == "matmul" else "fp32"
    if name == "triton_tuned":
        impl.info["best_config"] = tk.matmul_tuned_best_config()
        impl.info["configs"] = len(tk.TUNE_CONFIGS)
        impl.notes.append("autotuned at this exact shape before any timing (key M, N, K)")
    else:
        impl.info["config"] = cfg
    return impl


# -- Rust ------------------------------------------------------------------------------------


class RustImpl(Preallocated):
    kind = "rust"

    def __init__(self, entry: RustEntry, cuda, stream, bases: list[torch.Tensor], shape: list[int], device):
        super().__init__(entry.name, entry.stage, shape, device, entry.plan.scratch)
        self.cuda = cuda
        self.stream = stream
        image = entry.ptx_path.read_bytes()
        text = image.decode("utf-8", errors="replace")
        module = cuda.load_module(str(entry.ptx_path), image)
        signatures = entry_params(text)
        inputs = [b.data_ptr() for b in bases]
        scratch = [s.data_ptr() for s in self.scratch]
        self.launches = []
        self._keep: list = []
        described = []
        for i, l in enumerate(entry.plan.launches):
            params = signatures.get(l.kernel)
            if params is None:
                raise ValueError(f"launch {i}: {entry.ptx} has no kernel entry `{l.kernel}` "
                                 f"(entries: {', '.join(sorted(signatures)) or 'none'})")
            values = resolve_args(l.kernel, l.args, inputs, self.out.data_ptr(), scratch, params)
            addr, keep = pack_params(values)
            func = cuda.function(module, l.kernel)
            cuda.allow_shared(func, l.shared_bytes)
            self._keep.append(keep)
            self.launches.append((func, l.grid, l.block, l.shared_bytes, addr, l.kernel))
            described.append({"kernel": l.kernel, "grid": list(l.grid), "block": list(l.block),
                              "shared_bytes": l.shared_bytes, "params": params})
        self.info.update(ptx=entry.ptx, ptx_sha256=hashlib.sha256(image).hexdigest(),
                         launches_per_call=len(self.launches), launches=described, scratch=list(entry.plan.scratch))

    def call(self) -> None:
        for func, grid, block, shared, addr, kernel in self.launches:
            self.cuda.launch(func, grid, block, shared, self.stream, addr, kernel)
