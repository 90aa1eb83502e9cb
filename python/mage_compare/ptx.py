"""Rust launches, the pure part: PTX entry signatures, argument
resolution and kernel-parameter packing.

* :func:`entry_params` reads the `.entry` signatures of a PTX module, so
  that a plan's arguments are checked against the kernel's real parameter
  list (count and kind) before anything is launched.
* :func:`resolve_args` turns a launch's manifest arguments into typed
  values, given the device addresses of the inputs, the output and the
  scratch buffers.
* :func:`pack_params` builds what `cuLaunchKernel`'s `kernelParams`
  expects: an array of pointers, one per parameter, each pointing at the
  parameter's value (u64 for device pointers, u32, f32). It returns the
  array's address and the ctypes objects that must stay alive while it
  is used.

Nothing here touches a GPU.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Sequence

from .manifest import Arg

#: PTX parameter types and the argument kinds they accept.
PTX_KINDS = {
    "u64": ("ptr",),
    "s64": ("ptr",),
    "b64": ("ptr",),
    "u32": ("u32",),
    "s32": ("u32",),
    "b32": ("u32", "f32"),
    "f32": ("f32",),
}

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)")


class LaunchError(ValueError):
    """A plan's arguments do not fit the kernel."""


@dataclass(frozen=True)
class Value:
    kind: str  # ptr | u32 | f32
    value: int | float


def entry_params(ptx: str) -> dict[str, list[str]]:
    """Kernel name -> PTX parameter types (`u64`, `u32`, `f32`, ...), in order."""
    out = {}
    for m in _ENTRY.finditer(ptx):
        body = re.sub(r"//[^\n]*", "", m.group(2))
        out[m.group(1)] = [p.group(1) for p in _PARAM.finditer(body)]
    return out


def resolve_args(kernel: str, args: Sequence[Arg], inputs: Sequence[int], output: int, scratch: Sequence[int],
                 params: Sequence[str] | None = None) -> list[Value]:
    """Typed values for one launch. With `params` (from :func:`entry_params`)
    the count and each kind are checked against the kernel's signature."""
    values = []
    for j, a in enumerate(args):
        if a.kind == "input":
            if a.value >= len(inputs):
                raise LaunchError(f"`{kernel}` argument {j}: input {a.value}, but there are {len(inputs)} inputs")
            values.append(Value("ptr", int(inputs[a.value])))
        elif a.kind == "scratch":
            if a.value >= len(scratch):
                raise LaunchError(f"`{kernel}` argument {j}: scratch {a.value}, but there are {len(scratch)} scratch buffers")
            values.append(Value("ptr", int(scratch[a.value])))
        elif a.kind == "output":
            values.append(Value("ptr", int(output)))
        elif a.kind == "u32":
            v = int(a.value)
            if not 0 <= v < 2**32:
                raise LaunchError(f"`{kernel}` argument {j}: {v} does not fit in a u32")
            values.append(Value("u32", v))
        elif a.kind == "f32":
            values.append(Value("f32", float(a.value)))
        else:
            raise LaunchError(f"`{kernel}` argument {j}: unknown kind `{a.kind}`")
    if params is not None:
        if len(params) != len(values):
            raise LaunchError(f"`{kernel}` takes {len(params)} parameters ({', '.join(params)}); the plan passes {len(values)}")
        for j, (p, v) in enumerate(zip(params, values)):
            allowed = PTX_KINDS.get(p)
            if allowed is None:
                raise LaunchError(f"`{kernel}` parameter {j} has PTX type .{p}, which the harness cannot pass")
            if v.kind not in allowed:
                raise LaunchError(f"`{kernel}` parameter {j} is .{p} but the plan passes a {v.kind} ({args[j].as_json()})")
    return values


_CTYPES = {"ptr": ctypes.c_uint64, "u32": ctypes.c_uint32, "f32": ctypes.c_float}


def pack_params(values: Sequence[Value]) -> tuple[int, list]:
    """(address of a void*[n] array, objects to keep alive). Each slot
    points at a ctypes value of the parameter's size: u64, u32 or f32."""
    holders = [_CTYPES[v.kind](v.value) for v in values]
    array_t = ctypes.c_void_p * max(len(holders), 1)
    arr = array_t(*[ctypes.addressof(h) for h in holders])
    return ctypes.addressof(arr), [arr, *holders]


def param_bytes(values: Sequence[Value]) -> list[bytes]:
    """Each parameter's bytes, as the kernel will receive them (for tests and logs)."""
    return [bytes(_CTYPES[v.kind](v.value)) for v in values]
