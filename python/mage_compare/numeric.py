"""The correctness check, which is Rust's: `mage.compare`, the same
function (`mage_common::numeric::compare`) that `run`, `sweep`,
`gpu-check` and `expected.bin` use. Python keeps no copy of the rule; this
module only turns lists, numpy arrays and torch tensors into the bytes the
module reads.

The rule: |out - ref| <= abs + rel*|ref| + of_magnitude*m elementwise, `m`
each element's magnitude (for a sum of products, the sum of its terms'
absolute values), so that the allowance follows the data. A NaN output
fails, as does an infinity where the reference is finite.

The extension is imported lazily, so that this module stays importable
without it.

The check block (JSON):

    {"passed": bool (false for an empty output), "checked": int (elements),
     "failures": int, "nan_count": int,
     "max_abs_err": float | null (over the outputs that are not NaN; null
     when it is infinite or every output is NaN),
     "rel_l2_err": float | null (||out - ref||_2 / ||ref||_2 over the same
     elements, the Frobenius-relative error; 0 where both norms are 0, null
     where only the reference's is, or where it is not finite),
     "max_rel_err": float | null (max |out - ref| / max |ref| over the same
     elements, which a reference element near zero cannot blow up; the same
     nulls),
     "worst_ratio": float | null (the largest error over its allowance),
     "first_failures": [{"index": flat index, "out": float|null, "ref": float|null}] (at most 5),
     "tolerance": {"abs": float, "rel": float, "of_magnitude": float}}
"""

from __future__ import annotations

import struct
from typing import Any, Sequence

FIRST_FAILURES = 5


def _module():
    """The extension, imported when a check runs (this module stays
    importable without it, like the harness's other pure modules)."""
    import mage

    return mage


def _f32_bytes(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *(float(v) for v in values))


def _f64_bytes(values) -> bytes:
    return struct.pack(f"<{len(values)}d", *(float(v) for v in values))


def compare_lists(out: Sequence[float], ref: Sequence[float], abs_tol: float, rel_tol: float,
                  mag: Sequence[float] | None = None, of_magnitude: float = 0.0) -> dict:
    """The check on plain lists of equal length (`mag`: each element's
    magnitude, needed where `of_magnitude` is not 0). `out` is rounded to
    float32, as an output is."""
    if len(out) != len(ref):
        raise ValueError(f"output has {len(out)} values; the reference {len(ref)}")
    if of_magnitude and (mag is None or len(mag) != len(ref)):
        raise ValueError("a tolerance scaled by magnitudes needs one magnitude per element")
    return _module().compare(_f32_bytes(out), _f64_bytes(ref), float(abs_tol), float(rel_tol),
                        None if mag is None else _f64_bytes(mag), float(of_magnitude))


def _host_bytes(a: Any, dtype: str) -> bytes:
    """Little-endian bytes of a torch tensor or numpy array as `dtype`
    (`float32` or `float64`), flattened in logical order (any layout)."""
    if hasattr(a, "detach"):  # torch
        import torch

        t = a.detach().reshape(-1).to(device="cpu", dtype=getattr(torch, dtype)).contiguous()
        return t.numpy().tobytes()
    import numpy as np

    return np.ascontiguousarray(np.asarray(a).reshape(-1), dtype="<f4" if dtype == "float32" else "<f8").tobytes()


def compare_arrays(out: Any, ref: Any, abs_tol: float, rel_tol: float, mag: Any = None, of_magnitude: float = 0.0) -> dict:
    """The check on two arrays (torch tensors, on any device, or numpy
    arrays) of the same element count: `out` as float32, `ref` and `mag` as
    float64, each flattened."""
    o, r = _host_bytes(out, "float32"), _host_bytes(ref, "float64")
    if len(o) // 4 != len(r) // 8:
        raise ValueError(f"output has {len(o) // 4} values; the reference {len(r) // 8}")
    if of_magnitude and mag is None:
        raise ValueError("a tolerance scaled by magnitudes needs one magnitude per element")
    m = None if mag is None else _host_bytes(mag, "float64")
    return _module().compare(o, r, float(abs_tol), float(rel_tol), m, float(of_magnitude))
