"""What each op is: its dims, input files and output shape (pure Python).

These mirror the Rust op crates; the harness checks every manifest op
against them so that a Python implementation can never read a buffer of
the wrong size or role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class OpDef:
    name: str
    dim_names: tuple[str, ...]
    #: (file, elem) of every input, in kernel-argument order.
    files: tuple[tuple[str, str], ...]
    input_lens: Callable[[Sequence[int]], list[int]]
    output_shape: Callable[[Sequence[int]], list[int]]

    def output_len(self, dims: Sequence[int]) -> int:
        n = 1
        for d in self.output_shape(dims):
            n *= d
        return n


OPS: dict[str, OpDef] = {
    "matmul": OpDef(
        "matmul",
        ("m", "n", "k"),
        (("a.bin", "f32"), ("b.bin", "f32")),
        lambda d: [d[0] * d[2], d[2] * d[1]],
        lambda d: [d[0], d[1]],
    ),
    "layernorm": OpDef(
        "layernorm",
        ("rows", "width"),
        (("a.bin", "f32"), ("b.bin", "f32"), ("c.bin", "f32")),
        lambda d: [d[0] * d[1], d[1], d[1]],
        lambda d: [d[0], d[1]],
    ),
    "gelu": OpDef(
        "gelu",
        ("rows", "width"),
        (("a.bin", "f32"), ("b.bin", "f32")),
        lambda d: [d[0] * d[1], d[1]],
        lambda d: [d[0], d[1]],
    ),
    "triangle": OpDef(
        "triangle",
        ("n", "c"),
        (("a.bin", "f32"), ("b.bin", "f32")),
        lambda d: [d[0] * d[0] * d[1], d[0] * d[0] * d[1]],
        lambda d: [d[0], d[0], d[1]],
    ),
    "neighbor": OpDef(
        "neighbor",
        ("n", "width", "edges", "skew"),
        (("a.bin", "f32"), ("b.bin", "f32"), ("rowptr.bin", "u32"), ("indices.bin", "u32")),
        lambda d: [d[0] * d[1], d[2], d[0] + 1, d[2]],
        lambda d: [d[0], d[1]],
    ),
}

#: The kinds of implementation, as the JSON names them.
KINDS = ("rust", "torch", "torch_compile", "triton", "cusparse")

#: Names of the non-Rust implementations the harness builds, per op.
BUILTIN_IMPLS: dict[str, tuple[tuple[str, str], ...]] = {
    "matmul": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton"), ("triton_tuned", "triton")),
    "layernorm": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton")),
    "gelu": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton")),
    "triangle": (("torch", "torch"), ("torch_compile", "torch_compile"), ("triton", "triton")),
    "neighbor": (("torch", "torch"), ("torch_compile", "torch_compile"), ("cusparse", "cusparse"), ("triton", "triton")),
}

#: Every builtin name, for the manifest's name checks.
BUILTIN_NAMES = frozenset(name for impls in BUILTIN_IMPLS.values() for name, _ in impls)

#: The verdict-pair name that stands for the fastest correct non-Rust implementation.
BEST_ALTERNATIVE = "best alternative"
#: The Rust entry the automatic verdict compares with the best alternative.
RUST_CURRENT = "rust current"


def dims_label(dims: Sequence[int]) -> str:
    """`4096x768` style."""
    return "x".join(str(d) for d in dims)


def check_against_def(op: str, dims: Sequence[int], inputs: Sequence[dict], output_len: int, output_shape: Sequence[int]) -> str | None:
    """Why a manifest op does not match the op's definition, or None."""
    d = OPS.get(op)
    if d is None:
        return f"unknown op `{op}`; known ops: {', '.join(sorted(OPS))}"
    if len(dims) != len(d.dim_names):
        return f"{op} takes {len(d.dim_names)} dims ({', '.join(d.dim_names)}); the manifest gives {len(dims)}"
    if len(inputs) != len(d.files):
        return f"{op} takes {len(d.files)} inputs ({', '.join(f for f, _ in d.files)}); the manifest lists {len(inputs)}"
    for i, ((file, elem), want_len, got) in enumerate(zip(d.files, d.input_lens(dims), inputs)):
        if got["file"] != file or got["elem"] != elem:
            return f"input {i} must be {file} ({elem}); the manifest has {got['file']} ({got['elem']})"
        if got["len"] != want_len:
            return f"input {i} ({file}) of {op} {dims_label(dims)} holds {want_len} values; the manifest says {got['len']}"
    want_shape = d.output_shape(dims)
    if list(output_shape) != want_shape:
        return f"the output of {op} {dims_label(dims)} is {want_shape}; the manifest says {list(output_shape)}"
    if output_len != d.output_len(dims):
        return f"the output of {op} {dims_label(dims)} holds {d.output_len(dims)} values; the manifest says {output_len}"
    return None
