"""Statistics helpers: medians, quantiles, rounds and rotation orders.

Pure Python (standard library only), so the unit tests run anywhere. Every
function takes plain sequences of floats and returns plain floats, lists
or dicts ready for JSON.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def median(xs: Sequence[float]) -> float:
    """The median (mean of the middle two for an even count); NaN if empty."""
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return math.nan
    if n % 2 == 1:
        return float(v[n // 2])
    return (v[n // 2 - 1] + v[n // 2]) / 2.0


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics
    (Hyndman-Fan type 7, numpy's default); NaN if empty."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return math.nan
    h = (n - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    return float(v[lo] + (h - lo) * (v[hi] - v[lo]))


def iqr_bounds(xs: Sequence[float]) -> tuple[float, float]:
    """(25th, 75th) percentile, type 7."""
    return quantile(xs, 0.25), quantile(xs, 0.75)


def value_range(xs: Sequence[float]) -> float:
    """Largest minus smallest; NaN if empty."""
    if len(xs) == 0:
        return math.nan
    return float(max(xs) - min(xs))


def round_sizes(samples: int, rounds: int) -> list[int]:
    """`samples` split into `rounds` near-equal rounds; earlier rounds take
    the remainder. Needs at least one sample per round."""
    if rounds <= 0 or samples < rounds:
        raise ValueError(f"need at least one sample per round; got {samples} samples in {rounds} rounds")
    return [samples // rounds + (1 if r < samples % rounds else 0) for r in range(rounds)]


def rotate(items: Sequence, r: int) -> list:
    """`items` rotated left by `r` (modulo its length): round r starts with
    item r, so every item is first once over len(items) rounds."""
    items = list(items)
    if not items:
        return []
    k = r % len(items)
    return items[k:] + items[:k]


def rotated_orders(items: Sequence, rounds: int) -> list[list]:
    """The order of each round: round r is `rotate(items, r)`."""
    return [rotate(items, r) for r in range(rounds)]


def span_summary(rounds: Sequence[Sequence[float]]) -> dict:
    """A span block from per-round samples (microseconds): the median over
    every sample, each round's median, the range of the round medians
    (largest minus smallest) and every sample, round after round."""
    samples = [float(x) for r in rounds for x in r]
    round_medians = [median(r) for r in rounds]
    return {
        "median_us": median(samples),
        "round_medians_us": round_medians,
        "range_us": value_range(round_medians),
        "samples_us": samples,
    }


def b2b_summary(runs_us: Sequence[float], calls: int) -> dict:
    """A back-to-back block: each run's per-call time and their median."""
    runs = [float(x) for x in runs_us]
    return {"median": median(runs), "runs": runs, "calls_per_run": calls}


def relative_change(start: float, end: float) -> float:
    """(end - start) / start; NaN where start is zero or either is NaN."""
    if start == 0 or math.isnan(start) or math.isnan(end):
        return math.nan
    return (end - start) / start


def finite(xs: Iterable[float]) -> bool:
    """Whether every value is a finite number."""
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)
