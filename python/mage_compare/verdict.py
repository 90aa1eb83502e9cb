"""Paired A/B verdicts from interleaved rounds (pure Python).

A verdict compares two implementations of one op, A and B, measured in
the same session and interleaved so that slow drift (clocks, temperature,
a neighbour on the machine) hits both alike:

* R rounds (8 by default); each round measures S event-span samples of A,
  then S of B, then S of B, then S of A (the A-B-B-A order of
  :func:`abba_schedule`), so that within a round a linear drift adds the
  same to both arms;
* per round, the median of A's 2*S samples over the median of B's gives
  one paired ratio A/B (below 1: A is faster);
* the verdict reads the median and the spread of the R ratios, never a
  single best round:

  - ``FASTER``: the whole spread lies below ``faster_below`` (0.98);
  - ``SLOWER``: the whole spread lies above ``slower_above`` (1.02);
  - ``SAME``: the median lies within [0.98, 1.02] and the whole spread
    within [0.95, 1.05];
  - ``UNCERTAIN``: anything else, or fewer than two finite ratios.

The spread is the min-max range of the round ratios by default (the
"whole spread"); the interquartile range is reported beside it and can be
chosen with ``spread="iqr"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .stats import iqr_bounds, median

FASTER = "FASTER"
SLOWER = "SLOWER"
SAME = "SAME"
UNCERTAIN = "UNCERTAIN"
VERDICTS = (FASTER, SLOWER, SAME, UNCERTAIN)

#: The arms of one round, in order.
ABBA = ("A", "B", "B", "A")


@dataclass(frozen=True)
class Thresholds:
    faster_below: float = 0.98
    slower_above: float = 1.02
    same_median: tuple[float, float] = (0.98, 1.02)
    same_spread: tuple[float, float] = (0.95, 1.05)


DEFAULT = Thresholds()


def abba_schedule(rounds: int) -> list[tuple[int, int, str]]:
    """Every measurement segment in order: (round, position 0..3, arm)."""
    if rounds <= 0:
        raise ValueError(f"a verdict needs at least one round; got {rounds}")
    return [(r, p, arm) for r in range(rounds) for p, arm in enumerate(ABBA)]


def round_ratio(a_samples: Sequence[float], b_samples: Sequence[float]) -> float:
    """median(A) / median(B) for one round; NaN if either arm is empty,
    non-finite or B's median is not positive."""
    ma, mb = median(a_samples), median(b_samples)
    if not (math.isfinite(ma) and math.isfinite(mb)) or mb <= 0:
        return math.nan
    return ma / mb


def spread_of(ratios: Sequence[float], kind: str = "minmax") -> tuple[float, float]:
    """(low, high) of the ratios: min-max or the interquartile range."""
    if not ratios:
        return math.nan, math.nan
    if kind == "minmax":
        return float(min(ratios)), float(max(ratios))
    if kind == "iqr":
        return iqr_bounds(ratios)
    raise ValueError(f"unknown spread kind `{kind}` (minmax or iqr)")


def decide(median_ratio: float, low: float, high: float, t: Thresholds = DEFAULT) -> str:
    """The verdict for a median ratio and a spread [low, high]."""
    if not all(math.isfinite(x) for x in (median_ratio, low, high)) or low > high:
        return UNCERTAIN
    if high < t.faster_below:
        return FASTER
    if low > t.slower_above:
        return SLOWER
    m_lo, m_hi = t.same_median
    s_lo, s_hi = t.same_spread
    if m_lo <= median_ratio <= m_hi and s_lo <= low and high <= s_hi:
        return SAME
    return UNCERTAIN


def verdict_from_rounds(
    rounds: Sequence[tuple[Sequence[float], Sequence[float]]],
    spread: str = "minmax",
    t: Thresholds = DEFAULT,
) -> dict:
    """The verdict block from per-round (A samples, B samples).

    Returns ``{ratios, median_ratio, spread: {kind, low, high}, iqr: {low,
    high}, minmax: {low, high}, round_medians_us: {a, b}, verdict, note}``.
    """
    ratios = [round_ratio(a, b) for a, b in rounds]
    good = [r for r in ratios if math.isfinite(r)]
    note = None
    if len(good) < len(ratios):
        note = f"{len(ratios) - len(good)} of {len(ratios)} rounds gave no finite ratio"
    med = median(good)
    lo, hi = spread_of(good, spread)
    verdict = decide(med, lo, hi, t)
    if len(good) < 2:
        verdict = UNCERTAIN
        note = (note + "; " if note else "") + "fewer than two finite round ratios"
    iqr_lo, iqr_hi = spread_of(good, "iqr")
    mm_lo, mm_hi = spread_of(good, "minmax")
    return {
        "ratios": ratios,
        "median_ratio": med,
        "spread": {"kind": "min-max" if spread == "minmax" else "iqr", "low": lo, "high": hi},
        "iqr": {"low": iqr_lo, "high": iqr_hi},
        "minmax": {"low": mm_lo, "high": mm_hi},
        "round_medians_us": {"a": [median(a) for a, _ in rounds], "b": [median(b) for _, b in rounds]},
        "verdict": verdict,
        "note": note,
    }
