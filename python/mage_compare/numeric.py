"""The correctness check: |out - ref| <= abs + rel*|ref| + of_magnitude*m
elementwise, `m` each element's magnitude (for a sum of products, the sum
of its terms' absolute values; the Rust registry's `Reference`), so that
the allowance follows the data: the same rule as `mage_common::numeric`.

:func:`compare_arrays` works on torch tensors and numpy arrays alike (it
only uses operators both share) and is what the GPU path calls with the
float64 reference; :func:`compare_lists` is the same rule on Python
lists, the specification the tests hold the other to. NaN in the output
fails (every comparison with NaN is false), as does an infinity.

The check block (JSON):

    {"passed": bool, "checked": int (elements), "failures": int,
     "nan_count": int, "max_abs_err": float | null (over non-NaN elements;
     null when every element is NaN or the largest error is infinite),
     "rel_l2_err": float | null (||out - ref||_2 / ||ref||_2 over non-NaN
     elements, the Frobenius-relative error; null if ||ref||_2 is 0 or the
     norm is not finite),
     "max_rel_err": float | null (max |out - ref| / max |ref| over non-NaN
     elements: the largest error relative to the largest reference value,
     which a reference element near zero cannot blow up; null if max |ref|
     is 0),
     "first_failures": [{"index": flat index, "out": float|null, "ref": float}] (at most 5),
     "tolerance": {"abs": float, "rel": float, "of_magnitude": float}}
"""

from __future__ import annotations

import math
from typing import Any, Sequence

FIRST_FAILURES = 5


def _f(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _check_block(n, failures, nan_count, max_abs, diff2, ref2, first, abs_tol, rel_tol, ref_max=0.0, of_magnitude=0.0) -> dict:
    if ref2 > 0 and math.isfinite(diff2):
        rel_l2 = _f(math.sqrt(diff2 / ref2))
    elif diff2 == 0:
        rel_l2 = 0.0
    else:
        rel_l2 = None
    return {
        "passed": failures == 0,
        "checked": int(n),
        "failures": int(failures),
        "nan_count": int(nan_count),
        "max_abs_err": _f(max_abs) if max_abs is not None else None,
        "rel_l2_err": rel_l2,
        "max_rel_err": _f(max_abs / ref_max) if max_abs is not None and ref_max > 0 else None,
        "first_failures": first,
        "tolerance": {"abs": abs_tol, "rel": rel_tol, "of_magnitude": of_magnitude},
    }


def compare_lists(out: Sequence[float], ref: Sequence[float], abs_tol: float, rel_tol: float,
                  mag: Sequence[float] | None = None, of_magnitude: float = 0.0) -> dict:
    """The check on plain lists of equal length (`mag`: each element's
    magnitude, needed where `of_magnitude` is not 0)."""
    if len(out) != len(ref):
        raise ValueError(f"output has {len(out)} values; the reference {len(ref)}")
    if of_magnitude and (mag is None or len(mag) != len(ref)):
        raise ValueError("a tolerance scaled by magnitudes needs one magnitude per element")
    failures = nan_count = 0
    max_abs = None
    diff2 = ref2 = ref_max = 0.0
    first = []
    for i, (o, r) in enumerate(zip(out, ref)):
        o, r = float(o), float(r)
        d = abs(o - r)
        m = float(mag[i]) if of_magnitude else 0.0
        ok = d <= abs_tol + rel_tol * abs(r) + of_magnitude * m
        if math.isnan(o):
            nan_count += 1
        else:
            max_abs = d if max_abs is None else max(max_abs, d)
            diff2 += d * d
            ref2 += r * r
            ref_max = max(ref_max, abs(r))
        if not ok:
            failures += 1
            if len(first) < FIRST_FAILURES:
                first.append({"index": i, "out": _f(o), "ref": _f(r)})
    return _check_block(len(out), failures, nan_count, max_abs, diff2, ref2, first, abs_tol, rel_tol, ref_max, of_magnitude)


def compare_arrays(out: Any, ref: Any, abs_tol: float, rel_tol: float, mag: Any = None, of_magnitude: float = 0.0) -> dict:
    """The check on two arrays (torch tensors or numpy arrays) of the same
    element count; `out` is promoted to `ref`'s dtype (float64) by the
    subtraction. Both are flattened; any layout works."""
    o = out.reshape(-1)
    r = ref.reshape(-1)
    if len(o) != len(r):
        raise ValueError(f"output has {len(o)} values; the reference {len(r)}")
    if hasattr(o, "double"):  # torch: compute in float64
        o = o.double()
    else:  # numpy
        o = o.astype("float64")
    d = abs(o - r)
    allowance = abs_tol + rel_tol * abs(r)
    if of_magnitude:
        if mag is None or len(mag.reshape(-1)) != len(r):
            raise ValueError("a tolerance scaled by magnitudes needs one magnitude per element")
        allowance = allowance + of_magnitude * mag.reshape(-1)
    bad = ~(d <= allowance)
    nan = o != o
    ok_vals = ~nan
    failures = int(bad.sum())
    nan_count = int(nan.sum())
    dv = d[ok_vals]
    rv = r[ok_vals]
    max_abs = float(dv.max()) if len(dv) else None
    diff2 = float((dv * dv).sum()) if len(dv) else 0.0
    ref2 = float((rv * rv).sum()) if len(rv) else 0.0
    ref_max = float(abs(rv).max()) if len(rv) else 0.0
    first = []
    if failures:
        nz = bad.nonzero()
        idx = nz[0] if isinstance(nz, tuple) else nz.reshape(-1)
        for i in idx[:FIRST_FAILURES].tolist():
            first.append({"index": int(i), "out": _f(o[i]), "ref": _f(r[i])})
    return _check_block(len(o), failures, nan_count, max_abs, diff2, ref2, first, abs_tol, rel_tol, ref_max, of_magnitude)
