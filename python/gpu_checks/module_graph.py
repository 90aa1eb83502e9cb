"""The graph check of the module `mage` on a GPU (torch and a CUDA device
needed; no network).

    PYTHONPATH=dist/mage/python:python python3 python/gpu_checks/module_graph.py --out DIR
    PYTHONPATH=dist/mage/python:python compute-sanitizer --tool memcheck \\
        python3 python/gpu_checks/module_graph.py --quick

(a) Valid random graphs (uniform and power-law destinations; 4096x64x65536,
    64x16x1000 with --quick) as CUDA tensors: `current` and every neighbor
    stage through `mage.launch`, each output poisoned first and compared
    with a float64 torch reference under the op's tolerance (scaled by
    each output's Σ|w||x|).
(b) Bad graphs (an index equal to n, a rowptr that decreases, rowptr[n] !=
    edges, rowptr[0] != 0) for every stage: `mage.launch` must raise
    `mage.MageError` with the CLI's message and leave the output holding
    the poison. Also: a bad index written in place after `prepare` is
    caught by the next call of the `Call`, and a `device=` past the count is
    refused.
(c) Not with --quick: the host wall time of `mage.prepare` (median of 50,
    `time.perf_counter` between `torch.cuda.synchronize()` calls) for
    neighbor at 4096x64x65536 and 65536x64x1048576, by stage name and as
    `current`, against `prepare` of a named gelu stage of the same x (an op
    whose check reads no contents), and the parts of the check on their
    own: the device-to-host copy of rowptr and indices, and the scan
    (`mage.check_inputs` on host bytes).
(d) A JSON summary in DIR/module_graph.json (with --out) and a table on
    stdout. Exit status 1 where any check failed.

The bad graphs and their messages come from `bad_graphs`, which needs
neither torch nor a GPU (tests/test_module.py runs it through
`mage.check_inputs`).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

U = 2.0**-24  # the unit roundoff of float32


def bad_graphs(n: int, edges: int, rowptr) -> list[dict]:
    """Each bad graph as one changed value of a valid graph (rowptr given as
    anything indexable by int; n >= 2, edges >= 1): `input` (`rowptr` or
    `indices`), `at`, `value`, and the `message` the module (and the CLI,
    after its `case DIR: ` prefix) gives."""
    i = n // 2
    above = int(rowptr[i + 1]) + 1
    at = edges // 2
    return [
        {"name": "an index equal to n", "input": "indices", "at": at, "value": n,
         "message": f"indices.bin: indices[{at}] is {n}; every index must be below n = {n}"},
        {"name": "a rowptr that decreases", "input": "rowptr", "at": i, "value": above,
         "message": f"rowptr.bin: rowptr decreases at row {i}: rowptr[{i}] = {above} > rowptr[{i + 1}] = {above - 1}"},
        {"name": "rowptr[n] != edges", "input": "rowptr", "at": n, "value": edges + 1,
         "message": f"rowptr.bin: rowptr[{n}] is {edges + 1}; it must equal the edge count {edges}"},
        {"name": "rowptr[0] != 0", "input": "rowptr", "at": 0, "value": 1,
         "message": "rowptr.bin: rowptr[0] is 1; a CSR row pointer must start at 0"},
    ]


def past_the_count(count: int) -> str:
    """The module's message for `device=count` on a machine of `count` devices."""
    names = "1 CUDA device (cuda:0)" if count == 1 else f"{count} CUDA devices (cuda:0 to cuda:{count - 1})"
    return f"device {count} is past the device count: this machine has {names}"


def dims_label(dims) -> str:
    return "x".join(str(d) for d in dims)


class Checks:
    """Every check's outcome, for the table and the JSON."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, part: str, what: str, passed: bool, detail: str, **extra) -> None:
        self.rows.append({"part": part, "what": what, "passed": bool(passed), "detail": detail, **extra})
        print(f"{'ok  ' if passed else 'FAIL'} {part} {what}: {detail}", flush=True)

    @property
    def passed(self) -> bool:
        return all(r["passed"] for r in self.rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="directory for module_graph.json")
    ap.add_argument("--quick", action="store_true", help="only (a) and (b), at 64x16x1000 (for compute-sanitizer)")
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args(argv)

    import torch

    import mage

    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda", 0)
    torch.zeros(1, device=dev).add_(1)  # the primary context exists and is current
    torch.cuda.synchronize()
    stages = [mage.CURRENT] + [s["name"] for s in mage.op_info("neighbor")["stages"]]
    checks = Checks()
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    def graph(n: int, width: int, edges: int, skew: float):
        """x, w, rowptr, indices (int32) on the device; destinations uniform
        (skew 0) or of rank r with probability proportional to r^-skew."""
        if skew == 0:
            dst = torch.randint(0, n, (edges,), device=dev, generator=gen)
        else:
            p = torch.arange(1, n + 1, device=dev, dtype=torch.float64).pow(-skew)
            ranks = torch.multinomial(p, edges, replacement=True, generator=gen)
            dst = torch.randperm(n, device=dev, generator=gen)[ranks]
        degrees = torch.bincount(dst, minlength=n)
        rowptr = torch.zeros(n + 1, dtype=torch.int64, device=dev)
        rowptr[1:] = torch.cumsum(degrees, 0)
        indices = torch.randint(0, n, (edges,), device=dev, generator=gen, dtype=torch.int64)
        x = torch.randn(n, width, device=dev, generator=gen) * 0.25
        w = torch.randn(edges, device=dev, generator=gen) * 0.25
        return [x, w, rowptr.to(torch.int32), indices.to(torch.int32)]

    def reference(inputs):
        """The float64 reference, each output's magnitude Σ|w||x| and the
        op's tolerance per unit of it (ops/neighbor's crate doc):
        |out - ref| <= D·2^-126 + γ_(D+2)·m, D the largest row's edges."""
        x, w, rowptr, indices = (t.to(torch.float64) if t.is_floating_point() else t.to(torch.int64) for t in inputs)
        n = x.shape[0]
        degrees = rowptr[1:] - rowptr[:-1]
        row = torch.repeat_interleave(torch.arange(n, device=dev), degrees)
        terms = w[:, None] * x[indices]
        ref = torch.zeros_like(x).index_add_(0, row, terms)
        mag = torch.zeros_like(x).index_add_(0, row, terms.abs())
        d = int(degrees.max()) if n else 0
        ne = min((d + 2) * U, 0.5)
        return ref, mag, d * 2.0**-126, ne / (1 - ne)

    def poisoned(shape):
        return torch.full(shape, mage.POISON, dtype=torch.int32, device=dev).view(torch.float32)

    def still_poison(out) -> bool:
        torch.cuda.synchronize()
        return bool((out.view(torch.int32) == mage.POISON).all())

    n, width, edges = (64, 16, 1000) if args.quick else (4096, 64, 65536)
    label = dims_label([n, width, edges])

    # (a) valid graphs, every stage, against the float64 reference.
    for kind, skew in [("uniform", 0.0), ("power-law", 1.2)]:
        inputs = graph(n, width, edges, skew)
        ref, mag, tol_abs, of_magnitude = reference(inputs)
        for stage in stages:
            out = poisoned((n, width))
            try:
                ran = mage.launch("neighbor", stage, inputs, out)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a refused valid graph fails the check
                checks.add("a", f"{label} {kind} {stage}", False, f"{type(e).__name__}: {e}", stage=stage, graph=kind)
                continue
            got = out.to(torch.float64)
            err = (got - ref).abs()
            allowed = tol_abs + of_magnitude * mag
            bad = int((~(err <= allowed)).sum())  # a NaN (an unwritten element) counts
            worst = float(torch.nan_to_num(err / allowed, nan=float("inf")).max())
            worst_json = worst if worst != float("inf") else None  # JSON has no infinity
            name = f"{stage} → {ran}" if stage == mage.CURRENT else stage
            checks.add("a", f"{label} {kind} {name}", bad == 0,
                       f"{bad} of {n * width} outside {tol_abs:.3g} + {of_magnitude:.3g}·m; worst error/allowed {worst:.3g}",
                       stage=stage, ran=ran, graph=kind, outside=bad, worst_ratio=worst_json, tol_abs=tol_abs, of_magnitude=of_magnitude)

    # (b) bad graphs: refused with the message, nothing written.
    inputs = graph(n, width, edges, 0.0)
    host_rowptr = inputs[2].cpu().tolist()
    for bad in bad_graphs(n, edges, host_rowptr):
        broken = [t.clone() for t in inputs]
        broken[2 if bad["input"] == "rowptr" else 3][bad["at"]] = bad["value"]
        for stage in stages:
            out = poisoned((n, width))
            try:
                ran = mage.launch("neighbor", stage, broken, out)
                outcome, passed = f"accepted (ran {ran})", False
            except mage.MageError as e:
                passed = str(e) == bad["message"]
                outcome = "refused with the message" if passed else f"refused with {str(e)!r}, not {bad['message']!r}"
            except Exception as e:  # noqa: BLE001 - any other exception fails the check
                outcome, passed = f"{type(e).__name__}: {e}", False
            untouched = still_poison(out)
            checks.add("b", f"{bad['name']} {stage}", passed and untouched,
                       f"{outcome}; output {'still the poison' if untouched else 'WRITTEN'}",
                       stage=stage, graph=bad["name"], expected=bad["message"], untouched=untouched)

    # A bad index written in place after prepare: the next call checks again.
    bad = bad_graphs(n, edges, host_rowptr)[0]
    for stage in [mage.CURRENT, "mage-001"]:
        what = f"an index written in place after prepare {stage}"
        try:
            graph_now = [t.clone() for t in inputs]
            out = poisoned((n, width))
            call = mage.prepare("neighbor", stage, graph_now, out)
            keep = int(graph_now[3][bad["at"]])
            graph_now[3][bad["at"]] = bad["value"]  # bumps the tensor's version counter
            try:
                call()
                outcome, passed = "accepted", False
            except mage.MageError as e:
                passed = str(e) == bad["message"]
                outcome = "refused with the message" if passed else f"refused with {str(e)!r}"
            untouched = still_poison(out)
            graph_now[3][bad["at"]] = keep
            call()  # valid again: the check passes and the call runs
            written = not still_poison(out)
            checks.add("b", what, passed and untouched and written,
                       f"{outcome}; output {'still the poison' if untouched else 'WRITTEN'}; "
                       f"{'runs' if written else 'does NOT run'} once the index is restored",
                       stage=stage, untouched=untouched, runs_after_restore=written)
        except Exception as e:  # noqa: BLE001 - any other failure fails the check
            checks.add("b", what, False, f"{type(e).__name__}: {e}", stage=stage)

    count = torch.cuda.device_count()
    for f in (mage.evict_l2, mage.reset_persisting_l2):
        try:
            f(device=count)
            outcome, passed = "accepted", False
        except mage.MageError as e:
            passed = str(e) == past_the_count(count)
            outcome = "refused with the message" if passed else f"refused with {str(e)!r}, not {past_the_count(count)!r}"
        except Exception as e:  # noqa: BLE001
            outcome, passed = f"{type(e).__name__}: {e}", False
        checks.add("b", f"{f.__name__}(device={count})", passed, outcome)

    # (c) the check's host cost.
    instrument = ("host wall time of one mage.prepare (time.perf_counter, torch.cuda.synchronize() before and after), "
                  "median of 50 after 3 warm-ups")
    timing = []
    if not args.quick:
        def median_us(f, calls=50, warm=3):
            for _ in range(warm):
                f()
            spans = []
            for _ in range(calls):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f()
                torch.cuda.synchronize()
                spans.append(time.perf_counter() - t0)
            return statistics.median(spans) * 1e6

        def host_bytes(t):
            c = t.cpu()
            return ctypes.string_at(c.data_ptr(), c.numel() * 4)

        for dims in ([4096, 64, 65536], [65536, 64, 1048576]):
            tn, tw, te = dims
            g = graph(tn, tw, te, 0.0)
            out = torch.empty(tn, tw, device=dev)
            gelu_out = torch.empty(tn, tw, device=dev)
            bias = torch.zeros(tw, device=dev)
            copy_bytes = 4 * (tn + 1 + te)
            rows = {
                "neighbor mage-001 (check)": lambda: mage.prepare("neighbor", "mage-001", g, out),
                "neighbor current (check + dispatch)": lambda: mage.prepare("neighbor", mage.CURRENT, g, out),
                "gelu mage-001 (no contents read)": lambda: mage.prepare("gelu", "mage-001", [g[0], bias], gelu_out),
                "copy of rowptr and indices alone": lambda: (g[2].cpu(), g[3].cpu()),
            }
            rowptr_bytes, indices_bytes = host_bytes(g[2]), host_bytes(g[3])
            rows["scan alone (check_inputs on host bytes)"] = lambda: mage.check_inputs(
                "neighbor", dims, [None, None, rowptr_bytes, indices_bytes])
            for what, f in rows.items():
                try:
                    timing.append({"dims": dims, "what": what, "median_us": median_us(f), "copied_bytes": copy_bytes})
                except Exception as e:  # noqa: BLE001 - recorded; (a) and (b) are kept
                    timing.append({"dims": dims, "what": what, "median_us": None, "error": f"{type(e).__name__}: {e}"})
                    checks.add("c", f"{dims_label(dims)} {what}", False, f"{type(e).__name__}: {e}")
            del g, out, gelu_out
            torch.cuda.empty_cache()

    # (d) the summary.
    summary = {
        "instrument": instrument,
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "mage_commit": mage.COMMIT,
        "quick": args.quick,
        "seed": args.seed,
        "dims": [n, width, edges],
        "checks": checks.rows,
        "timing": timing,
        "passed": checks.passed,
    }
    print()
    print(f"{'part':<5}{'checks':>8}{'failed':>8}")
    for part in "abc":
        rows = [r for r in checks.rows if r["part"] == part]
        print(f"{part:<5}{len(rows):>8}{sum(not r['passed'] for r in rows):>8}")
    if timing:
        print(f"\n(c) {instrument}")
        print(f"{'dims':<20}{'what':<45}{'median µs':>12}")
        for t in timing:
            us = f"{t['median_us']:>12.1f}" if t["median_us"] is not None else f"{'error':>12}"
            print(f"{dims_label(t['dims']):<20}{t['what']:<45}{us}")
    print(f"\n{'PASSED' if checks.passed else 'FAILED'}: {sum(r['passed'] for r in checks.rows)} of {len(checks.rows)} checks")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "module_graph.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.out / 'module_graph.json'}")
    return 0 if checks.passed else 1


if __name__ == "__main__":
    sys.exit(main())
