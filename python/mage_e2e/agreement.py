"""Pure arithmetic of the end-to-end evidence (no torch, no GPU).

The loss curves' agreement. Mage's training run and PyTorch's FP32 run
compute the same model on the same batches from the same weights; both
round in FP32, in different orders (3xTF32 products and Mage's reductions
against cuBLAS SGEMM and PyTorch's), so their curves differ by the
rounding each accumulates, and neither is the exact curve. The exact
curve is approximated by the same training in float64 (its own rounding
is 2^-53, about 10^9 times smaller). The tolerance is stated against that
curve and scaled by PyTorch's own FP32 deviation from it:

    max_t |L_mage(t) − L_64(t)| / L_64(t)  ≤  FACTOR · max_t |L_torch(t) − L_64(t)| / L_64(t) + FLOOR

Why this bound: an implementation whose per-op error is of the order of
PyTorch's (Mage's tolerances allow about 1e-4 relative per op, its
measured errors are within a small factor of PyTorch's) drifts from the
exact curve by the same order; FACTOR = 4 allows for its different
summation orders over a few hundred steps of feedback through the
optimiser. A systematic error (a wrong or missing gradient term, a stale
buffer) moves the loss by far more: it changes the descent direction at
every step, so the curves part by percent, not by parts per million.
FLOOR = 1e-6 keeps the bound from reaching zero where PyTorch's FP32 run
happens to follow the float64 curve to the last digit.
"""

from __future__ import annotations

import math
from typing import Sequence

FACTOR = 4.0
FLOOR = 1e-6


def max_relative_deviation(curve: Sequence[float], reference: Sequence[float]) -> float:
    """``max_t |curve[t] − reference[t]| / |reference[t]|``; the curves must
    be of one length, finite, and the reference nowhere zero."""
    if len(curve) != len(reference) or not curve:
        raise ValueError(f"curves of {len(curve)} and {len(reference)} points; they must be of one length, at least 1")
    worst = 0.0
    for t, (c, r) in enumerate(zip(curve, reference)):
        if not (math.isfinite(c) and math.isfinite(r)):
            raise ValueError(f"step {t}: loss {c} against {r}; both must be finite")
        if r == 0.0:
            raise ValueError(f"step {t}: the reference loss is 0")
        worst = max(worst, abs(c - r) / abs(r))
    return worst


def loss_agreement(mage: Sequence[float], torch32: Sequence[float], float64: Sequence[float],
                   factor: float = FACTOR, floor: float = FLOOR) -> dict:
    """The agreement of the module's docstring, with every number it uses."""
    mage_dev = max_relative_deviation(mage, float64)
    torch_dev = max_relative_deviation(torch32, float64)
    bound = factor * torch_dev + floor
    return {
        "mage_vs_float64": mage_dev,
        "torch_vs_float64": torch_dev,
        "mage_vs_torch": max_relative_deviation(mage, torch32),
        "factor": factor,
        "floor": floor,
        "bound": bound,
        "agree": mage_dev <= bound,
        "rule": "max_t |L_mage - L_64| / L_64 <= factor * max_t |L_torch - L_64| / L_64 + floor",
    }


def worst_error(errors: dict) -> float:
    """The largest of a step's relative errors (output and each gradient)."""
    if not errors:
        raise ValueError("no errors to take the largest of")
    return max(errors.values())


def no_worse(mage_errors: dict, torch_errors: dict, slack: float = 1.0) -> dict:
    """Per tensor, whether Mage's relative error against float64 is within
    ``slack`` times PyTorch FP32's; the tensors must be the same."""
    if set(mage_errors) != set(torch_errors):
        raise ValueError(f"errors of {sorted(mage_errors)} against {sorted(torch_errors)}; they must name the same tensors")
    worse = sorted(k for k in mage_errors if mage_errors[k] > slack * torch_errors[k])
    return {"no_worse": not worse, "worse": worse, "slack": slack}


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    if not s:
        raise ValueError("median of nothing")
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
