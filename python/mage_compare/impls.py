"""Implementations of each op (GPU only; imports torch, triton lazily).

Every implementation is an object with `name`, `kind`, `stage`,
`output_mode`, `info`, `notes`, `error` and

* `call()`: one call, enqueued on torch's current stream (asynchronous);
* `checked_call()`: poison, one call, synchronise; returns the poison info;
* `result()`: the output of the last call, shaped like the op's output.

Kinds: `rust` (a stage launched through the Python module `mage`, the
same Rust launch path as `cargo xtask run`), `triton` (this package's kernels), `torch` (eager PyTorch),
`torch_compile` (the eager function through torch.compile) and `cusparse`
(torch.sparse CSR @ dense, neighbor only). Rust and Triton write into a
preallocated output of their own; the torch kinds return a new tensor per
call, made row-major with `.contiguous()` (a no-op where it already is).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .definitions import constant, poison
from .profparse import fresh_function

#: Poisoned blocks freed into the caching allocator before a returned-output check.
POISON_BLOCKS = 3
COMPILE_WARM_CALLS = 3


def poison_(t: torch.Tensor) -> None:
    t.view(torch.int32).fill_(poison())


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
        n = math.prod(shape)
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
        return {"output": "preallocated", "pattern": f"0x{poison():08X}"}

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


def matmul_nt_eager(a, b):
    """`a @ b.T` on the stored tensors: `b.T` is a view (no copy), which
    cuBLAS takes as a transposed operand."""
    return torch.matmul(a, b.T)


def matmul_tn_eager(a, b):
    """`a.T @ b` on the stored tensors: `a.T` is a view (no copy)."""
    return torch.matmul(a.T, b)


def matmul_tf32(a, b):
    """cuBLAS on the TF32 tensor cores: torch.matmul with
    `torch.backends.cuda.matmul.allow_tf32` set for this call only (the
    session's FP32 setting is restored, so no other implementation sees it)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def layernorm_eager(x, gamma, beta, eps):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def gelu_eager(x, bias):
    return F.gelu(x + bias, approximate="tanh")


def gelu_erf_eager(x, bias):
    return F.gelu(x + bias)


def triangle_eager(a, b):
    return torch.einsum("ikc,jkc->ijc", a, b).contiguous()


def neighbor_eager(x, w, dst, src):
    """Gather the source rows, scale by the edge weights, scatter-add into the destinations."""
    return torch.zeros_like(x).index_add_(0, dst, w.unsqueeze(1) * x.index_select(0, src))


def neighbor_cusparse(csr, x):
    return (csr @ x).contiguous()


class GradReturned(Returned):
    """A gradient op's alternative: `fn(*args)` returns the gradients (a
    tuple, in the op's output order); the result is their concatenation,
    flattened, as the op's outputs are checked. The concatenation is made
    only for a check, never in a timed call."""

    def result(self) -> torch.Tensor:
        if not isinstance(self.last, tuple) or not all(torch.is_tensor(g) for g in self.last):
            raise TypeError(f"{self.name} returned {type(self.last).__name__}, not a tuple of gradients")
        return torch.cat([g.reshape(-1) for g in self.last])

    def checked_call(self) -> dict:
        self.last = None
        self.call()
        torch.cuda.synchronize()
        return {"output": "returned", "blocks_poisoned": 0, "result_in_poisoned_block": False,
                "note": "gradients returned by torch.autograd.grad: new tensors, checked as returned"}


def _layernorm_forward(x, gamma, beta, eps):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


#: Each gradient op: its forward function (eager), the roles of the forward's
#: inputs (`zeros:ROLE:LEN_FROM` for a forward input the gradient op does not
#: take, made as zeros shaped like that input), the roles the gradients are
#: taken of, in the op's output order, and the role of the output's gradient.
GRADS = {
    "layernorm_backward": (_layernorm_forward, ("x", "gamma", "zeros:beta:gamma"), ("x", "gamma", "beta"), "dy", ("eps",)),
    "gelu_backward": (lambda x, bias: F.gelu(x + bias, approximate="tanh"), ("x", "bias"), ("x", "bias"), "dy", ()),
    "gelu_erf_backward": (lambda x, bias: F.gelu(x + bias, approximate="none"), ("x", "bias"), ("x", "bias"), "dy", ()),
    "triangle_backward": (lambda a, b: torch.einsum("ikc,jkc->ijc", a, b), ("A", "B"), ("A", "B"), "dO", ()),
    "neighbor_backward": (lambda x, w, dst, src: torch.zeros_like(x).index_add(0, dst, w.unsqueeze(1) * x.index_select(0, src)),
                          ("x", "w", "dst64", "indices64"), ("x", "w"), "dY", ()),
}


def grad_setup(op: str, views: dict, forward=None):
    """The forward of gradient op `op` run once, outside any timing, on leaf
    copies of its inputs that require grad: (output, leaves to take the
    gradients of, the output's gradient)."""
    fn, roles, wrt, grad_role, constants = GRADS[op]
    base = op.removesuffix("_backward")
    leaves, args = {}, []
    for r in roles:
        if r.startswith("zeros:"):
            _, name, like = r.split(":")
            t = torch.zeros_like(views[like]).requires_grad_(True)
            leaves[name] = t
        elif views[r].is_floating_point():
            t = views[r].detach().clone().requires_grad_(r in wrt)
            leaves[r] = t
        else:
            t = views[r]
        args.append(t)
    args += [constant(base, c) for c in constants]
    y = (forward or fn)(*args)
    return y, tuple(leaves[r] for r in wrt), views[grad_role]


def build_grad(op: str, views: dict, numel: int, device, name: str, tag: str = "") -> Impl:
    """`torch`: eager autograd; `torch_compile`: the forward through
    torch.compile, whose compiled backward graph `torch.autograd.grad` runs.
    Either way each call runs only the backward's kernels."""
    fn = GRADS[op][0]
    forward = None
    if name == "torch_compile":
        forward = torch.compile(fresh_function(fn, tag or op), dynamic=False, fullgraph=True)
    y, wrt, dy = grad_setup(op, views, forward)
    grad = lambda: torch.autograd.grad(y, wrt, dy, retain_graph=True)  # noqa: E731
    impl = GradReturned(name, "torch" if name == "torch" else "torch_compile", lambda: grad(), (), numel, device)
    impl.info["function"] = f"torch.autograd.grad of mage_compare.impls.GRADS[{op!r}] (forward run once, outside timing)"
    if forward is not None:
        t0 = time.perf_counter()
        for _ in range(COMPILE_WARM_CALLS):
            impl.call()
        torch.cuda.synchronize()
        impl.info["compile"] = {"mode": "default", "dynamic": False, "fullgraph": True, "warm_calls": COMPILE_WARM_CALLS,
                                "compile_and_warm_seconds": time.perf_counter() - t0}
    impl.notes.append("the gradients of the forward, by torch.autograd.grad with the graph retained: only backward kernels run per call")
    return impl


#: The eager function of each op and the inputs it takes, by the registry's role names.
EAGER = {"matmul": (matmul_eager, ("a", "b")), "matmul_nt": (matmul_nt_eager, ("a", "b")),
         "matmul_tn": (matmul_tn_eager, ("a", "b")), "layernorm": (layernorm_eager, ("x", "gamma", "beta")),
         "gelu": (gelu_eager, ("x", "bias")), "gelu_erf": (gelu_erf_eager, ("x", "bias")), "triangle": (triangle_eager, ("A", "B")),
         "neighbor": (neighbor_eager, ("x", "w", "dst64", "indices64"))}

#: Constants of the op's definition the eager function takes after its inputs.
EAGER_CONSTANTS = {"layernorm": ("eps",)}


def eager_args(op: str, views: dict) -> tuple:
    _, keys = EAGER[op]
    return tuple(views[k] for k in keys) + tuple(constant(op, c) for c in EAGER_CONSTANTS.get(op, ()))


def build_torch(op: str, views: dict, numel: int, device, name: str = "torch") -> Impl:
    if op in GRADS:
        return build_grad(op, views, numel, device, name)
    fn, _ = EAGER[op]
    if (op, name) == ("matmul", "torch_tf32"):
        fn = matmul_tf32
    elif name != "torch":
        raise ValueError(f"no torch implementation `{name}` for {op}")
    impl = Returned(name, "torch", fn, eager_args(op, views), numel, device)
    impl.info["function"] = f"mage_compare.impls.{fn.__name__}"
    if op == "neighbor":
        impl.notes.append("rowptr/indices as int64 (converted once, outside timing); destinations expanded once from rowptr")
    return impl


def build_torch_compile(op: str, views: dict, numel: int, tag: str, device) -> Impl:
    if op in GRADS:
        return build_grad(op, views, numel, device, "torch_compile", tag)
    fn, _ = EAGER[op]
    compiled = torch.compile(fresh_function(fn, tag), dynamic=False, fullgraph=True)
    impl = Returned("torch_compile", "torch_compile", compiled, eager_args(op, views), numel, device)
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
    elif op == "matmul" and name == "triton_tf32x3":
        launch, cfg = (lambda o: tk.matmul_tf32x3(v["a"], v["b"], o)), None
    elif op == "layernorm":
        eps = constant("layernorm", "eps")
        launch, cfg = (lambda o: tk.layernorm(v["x"], v["gamma"], v["beta"], o, eps)), tk.layernorm_config(shape[1])
    elif op == "gelu":
        c, cubic = constant("gelu", "sqrt_2_over_pi"), constant("gelu", "cubic")
        launch, cfg = (lambda o: tk.gelu(v["x"], v["bias"], o, c, cubic)), {"BLOCK": 1024, "num_warps": 4}
    elif op == "triangle":
        launch, cfg = (lambda o: tk.triangle(v["A"], v["B"], o)), tk.triangle_config(shape[2])
    elif op == "neighbor":
        launch, cfg = (lambda o: tk.neighbor(v["x"], v["w"], v["rowptr"], v["indices"], o)), tk.neighbor_config(shape[1])
    else:
        raise ValueError(f"no Triton kernel `{name}` for {op}")
    impl = TritonImpl(name, launch, shape, device)
    t0 = time.perf_counter()
    impl.call()  # compiles (and, for triton_tuned, autotunes at this exact shape)
    torch.cuda.synchronize()
    impl.info["compile_seconds"] = time.perf_counter() - t0
    impl.info["precision"] = ("fp32" if op != "matmul" else "3xTF32; tl.dot input_precision='tf32x3'"
                              if name == "triton_tf32x3" else "fp32; tl.dot input_precision='ieee'")
    if name == "triton_tuned":
        impl.info["best_config"] = tk.matmul_tuned_best_config()
        impl.info["configs"] = len(tk.TUNE_CONFIGS)
        impl.notes.append("autotuned at this exact shape before any timing (key M, N, K)")
    elif name == "triton_tf32x3":
        impl.info["best_config"] = tk.matmul_tf32x3_best_config()
        impl.info["configs"] = len(tk.TF32X3_CONFIGS)
        impl.notes.append("autotuned at this exact shape before any timing (key M, N, K)")
    else:
        impl.info["config"] = cfg
    return impl


# -- Rust ------------------------------------------------------------------------------------


def aligned_starts(shapes: list[list[int]], floats: int = 4) -> tuple[list[int], int]:
    """Where each of `shapes` starts in one flat f32 buffer, in order, each
    on a multiple of `floats` elements (16 bytes), and the buffer's length."""
    starts, at = [], 0
    for part in shapes:
        starts.append(at)
        at += -(-math.prod(part) // floats) * floats
    return starts, at


class RustImpl(Preallocated):
    """A Mage stage bound once to the op's input tensors and its own
    output through `mage.prepare` (the Rust launch path of `cargo xtask
    run`); each call launches its plan on torch's current stream."""

    kind = "rust"

    def __init__(self, name: str, op: str, stage: str, tensors: list[torch.Tensor], shape: list[int], device):
        import mage

        super().__init__(name, stage, shape, device)
        dims = mage.dims_from_shapes(op, [list(t.shape) for t in tensors])
        shapes = mage.output_shapes(op, dims)
        self.parts = None
        if len(shapes) == 1:
            output = self.out_view
        else:  # several outputs: each a view of its part of one flat buffer, in order, each
            # starting on a 16-byte boundary as the stages' 16-byte copies need (launch refuses
            # a view that does not); `result` joins the parts back into the output's order.
            starts, at = aligned_starts(shapes)
            self.out = torch.empty(max(at, 1), dtype=torch.float32, device=device)
            output = [self.out[a:a + math.prod(part)].view(part) for a, part in zip(starts, shapes)]
            self.parts = output
        self.bound = mage.prepare(op, stage, tensors, output)
        self.scratch = list(self.bound.scratch)
        d = self.bound.describe()
        self.info.update(stage_run=self.bound.stage, by_current=self.bound.by_current,
                         launches_per_call=self.bound.launches_per_call, launches=d["launches"], scratch=d["scratch"])

    def call(self) -> None:
        self.bound()

    def result(self) -> torch.Tensor:
        if self.parts is None:
            return self.out_view
        return torch.cat([p.reshape(-1) for p in self.parts]).view(self.shape)
