"""The implementations the harness builds beside Mage's stages, and their
names (pure Python).

What an op is (its dims, inputs, shapes, constants, stages, tolerance)
comes from the Rust registry through the Python module `mage`; nothing of
it is written down here.
"""

from __future__ import annotations

from typing import Sequence

#: The kinds of implementation, as the JSON names them.
KINDS = ("rust", "torch", "torch_compile", "triton", "cusparse")

#: Names of the non-Rust implementations the harness builds, per op.
BUILTIN_IMPLS: dict[str, tuple[tuple[str, str], ...]] = {
    "matmul": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton"), ("triton_tuned", "triton"),
               ("triton_tf32x3", "triton"), ("torch_tf32", "torch")),
    # The transposed products, on the stored tensors (`b.T`, `a.T` are views): cuBLAS eager and compiled.
    "matmul_nt": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "matmul_tn": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "layernorm": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton")),
    "gelu": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton")),
    "gelu_erf": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "triangle": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton")),
    "neighbor": (("torch", "torch"), ("torch_compile", "torch_compile"), ("cusparse", "cusparse"), ("triton", "triton")),
    # The gradient ops: PyTorch's backward kernels through torch.autograd.grad, eager and compiled.
    "layernorm_backward": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "gelu_backward": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "gelu_erf_backward": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "triangle_backward": (("torch", "torch"), ("torch_compile", "torch_compile")),
    "neighbor_backward": (("torch", "torch"), ("torch_compile", "torch_compile")),
}

#: Builtin implementations outside the op's FP32 contract, each checked under
#: the tolerance of the Mage stage that computes the same way (and never a
#: best alternative): cuBLAS's TF32 tensor-core kernels, one TF32 product
#: per term like matmul's mage-008.
OUTSIDE_CONTRACT: dict[tuple[str, str], tuple[str, str]] = {
    ("matmul", "torch_tf32"): ("mage-008", "one TF32 product per term: torch.matmul under "
                               "torch.backends.cuda.matmul.allow_tf32 (cuBLAS TF32)"),
}

#: Every builtin name, for the manifest's name checks.
BUILTIN_NAMES = frozenset(name for impls in BUILTIN_IMPLS.values() for name, _ in impls)

#: The verdict-pair name that stands for the fastest correct non-Rust implementation.
BEST_ALTERNATIVE = "best alternative"
#: The Rust entry the automatic verdict compares with the best alternative.
RUST_CURRENT = "rust current"


def rust_name(stage: str) -> str:
    """`rust mage-006` for stage `mage-006`."""
    return f"rust {stage}"


def dims_label(dims: Sequence[int]) -> str:
    """`4096x768` style."""
    return "x".join(str(d) for d in dims)
