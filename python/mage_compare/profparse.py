"""Pure helpers for the torch-side instruments: reading a PyTorch profiler
(Kineto) Chrome trace, torch.compile counter diffs, and a fresh copy of a
function for torch.compile.
"""

from __future__ import annotations

import types
from collections import Counter
from typing import Any, Callable

#: Trace categories that are device activity but not kernels; excluded from kernel time.
NON_KERNEL_GPU = ("gpu_memcpy", "gpu_memset")


def kernel_summary(trace: dict, calls: int) -> dict:
    """Kernel time per call from a Chrome trace (`prof.export_chrome_trace`):
    complete events (`ph` "X") whose category is `kernel`, durations
    (`dur`, microseconds) summed and divided by `calls`. Memcpy and memset
    events are counted separately and excluded.

    Returns {kernel_us, kernels_per_call, kernels: [{name, per_call,
    us_per_call}] (largest first), excluded: {category: count}}.
    kernel_us is None when the trace holds no kernel."""
    if calls <= 0:
        raise ValueError("calls must be positive")
    kernel = kernel_events(trace)
    total = sum(dur for _, dur, _ in kernel)
    count = len(kernel)
    by_name: dict[str, list[float]] = {}
    for _, dur, name in kernel:
        by_name.setdefault(name, []).append(dur)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    excluded = Counter(cat for e in events if isinstance(e, dict) and e.get("ph") == "X"
                       and (cat := str(e.get("cat", "")).lower()) in NON_KERNEL_GPU)
    kernels = sorted(
        ({"name": n, "per_call": len(d) / calls, "us_per_call": sum(d) / calls} for n, d in by_name.items()),
        key=lambda k: -k["us_per_call"],
    )
    return {
        "kernel_us": total / calls if count else None,
        "kernels_per_call": count / calls,
        "kernels": kernels,
        "excluded": dict(excluded),
    }


def kernel_events(trace: dict) -> list[tuple[float, float, str]]:
    """Every kernel event of a Chrome trace as (start µs, duration µs, name),
    in start order (memcpy and memset events are not kernels)."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    out = [(float(e.get("ts", 0.0)), float(e.get("dur", 0.0)), str(e.get("name", "?")))
           for e in events if isinstance(e, dict) and e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]
    out.sort(key=lambda k: k[0])
    return out


def split_calls(events: list[tuple[float, float, str]], segments: list[tuple[int, int, int]]) -> list[list[float]]:
    """Per-call kernel time of consecutive segments of one profiled run.

    `events` are the run's kernel events in start order (one stream, so a
    call's kernels follow the previous call's); each segment is (warm-up
    calls, measured calls, kernels per call), in the order they ran. Warm-up
    calls are skipped; each measured call's kernel durations are summed.
    Returns one list of per-call µs per segment. The counts must add up to
    exactly the events seen, or the split would be wrong: ValueError."""
    want = sum((warm + calls) * k for warm, calls, k in segments)
    if any(k <= 0 for _, _, k in segments):
        raise ValueError("every segment needs a positive number of kernels per call")
    if want != len(events):
        raise ValueError(f"the profiler saw {len(events)} kernels; the segments launch {want}")
    out, at = [], 0
    for warm, calls, k in segments:
        at += warm * k
        out.append([sum(d for _, d, _ in events[at + c * k: at + (c + 1) * k]) for c in range(calls)])
        at += calls * k
    return out


def counter_snapshot(counters: Any, sections: tuple[str, ...] = ("stats", "recompiles")) -> dict:
    """A plain copy of torch._dynamo.utils.counters' sections (without
    creating missing ones in the defaultdict)."""
    out = {}
    for s in sections:
        if s in counters:
            out[s] = {str(k): v for k, v in dict(counters[s]).items()}
    return out


def counter_diff(before: dict, after: dict) -> dict:
    """{section.key: increase} for every counter that changed."""
    diff = {}
    for sec in set(before) | set(after):
        b, a = before.get(sec, {}), after.get(sec, {})
        for k in set(b) | set(a):
            if a.get(k, 0) != b.get(k, 0):
                diff[f"{sec}.{k}"] = a.get(k, 0) - b.get(k, 0)
    return diff


def fresh_function(fn: Callable, tag: str) -> Callable:
    """A copy of `fn` with its own code object. torch.compile (Dynamo)
    keeps its cache of compiled frames on the code object, so each op
    shape gets its own cache and recompile budget instead of sharing (and
    turning dynamic in) the cache of one eager function."""
    name = f"{fn.__name__}__{tag}"
    changes = {"co_name": name}
    if hasattr(fn.__code__, "co_qualname"):
        changes["co_qualname"] = name
    code = fn.__code__.replace(**changes)
    new = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__doc__ = fn.__doc__
    new.__qualname__ = name
    return new
