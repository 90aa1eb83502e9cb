"""The session: phases, rotation, verdicts and the report (no torch here).

:func:`run_session` drives a *backend* (``gpu.TorchBackend`` on a GPU; a
fake in the tests) through these phases, in this order, writing the JSON
report atomically after each:

1. environment, nvidia-smi snapshot and the control kernel (``start``);
2. per workload: read and verify the case (the Rust registry through
   the module `mage`: sha256, lengths, the op's own checks), upload,
   reference, build every implementation, check each against the
   reference (output poisoned first), then for the correct ones: hot
   CUDA-event spans in rotated rounds, hot back-to-back runs, cold spans in
   rotated rounds (as the mode asks);
3. control (``after_event_timing``);
4. kernel time from the PyTorch profiler for every correct implementation
   (last of the per-implementation instruments, so that the profiler's
   CUPTI use cannot touch the event spans above);
5. control (``after_profiler``); verdicts: A-B-B-A interleaved rounds per
   pair and mode on GPU kernel time (and, where the manifest asks, on
   event spans, labelled as the launch path);
6. every implementation checked again (poisoned output) after all timing;
   one that fails loses its times and verdicts;
7. control (``end``) and nvidia-smi again.

Each implementation's measurement segment begins with a reset of the
context's persisting L2 lines and a few unrecorded warm-up calls.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, asdict
from pathlib import Path
from typing import Any, Callable, Protocol

from . import SCHEMA
from .manifest import Manifest, OpSpec
from .ops import BEST_ALTERNATIVE, RUST_CURRENT
from .report import write_report
from .stats import b2b_summary, relative_change, round_sizes, rotate, span_summary
from .verdict import abba_schedule, verdict_from_rounds


@dataclass
class Settings:
    """Sample counts (the procedure block of the JSON)."""

    first_warmup: int = 20
    segment_warmup: int = 5
    span_samples: int = 300
    span_rounds: int = 3
    b2b_calls: int = 100
    b2b_runs: int = 3
    profiler_warmup: int = 10
    profiler_calls: int = 100
    verdict_rounds: int = 8
    verdict_samples: int = 50
    control_samples: int = 50
    drift_limit: float = 0.03
    spread: str = "minmax"

    @classmethod
    def quick(cls) -> "Settings":
        """A smoke-test setting: every phase, few samples."""
        return cls(first_warmup=3, segment_warmup=1, span_samples=30, span_rounds=3, b2b_calls=10, b2b_runs=3,
                   profiler_warmup=2, profiler_calls=10, verdict_rounds=4, verdict_samples=5, control_samples=10)


class Backend(Protocol):  # pragma: no cover - documentation of the interface
    def environment(self) -> dict: ...
    def smi(self) -> dict: ...
    def control(self, samples: int) -> dict: ...
    def prepare_op(self, spec: OpSpec) -> Any: ...
    def implementations(self, state: Any) -> list: ...
    def check(self, state: Any, impl: Any) -> dict: ...
    def reset_l2(self) -> None: ...
    def warm(self, impl: Any, calls: int) -> None: ...
    def span(self, impl: Any, samples: int, cold: bool) -> list[float]: ...
    def b2b(self, impl: Any, calls: int) -> float: ...
    def kernel_time(self, impl: Any, warmup: int, calls: int) -> dict: ...
    def kernel_segments(self, impls: list, per_call: list[int], warmup: int, calls: int, cold: bool) -> list[list[float]]: ...
    def ceilings(self) -> dict: ...
    def copy_floor(self, nbytes: int) -> dict: ...
    def cold_copy_floor(self, nbytes: int, samples: int) -> dict: ...
    def compile_token(self, impl: Any) -> Any: ...
    def recompiled(self, impl: Any, token: Any) -> dict: ...
    def release(self, state: Any) -> None: ...


INSTRUMENTS = {
    "span": "CUDA events recorded on the stream immediately before and after one call, the GPU idle at the start "
            "(the host's launch latency included); microseconds per sample",
    "b2b": "CUDA events around back-to-back calls, divided by the call count; microseconds per call",
    "kernel": "PyTorch profiler (Kineto/CUPTI, ProfilerActivity.CUDA): the sum of the durations of kernel events "
              "(memcpy and memset excluded) over the calls, divided by the calls; microseconds per call",
    "kernel_verdict": "per-call GPU kernel time: every kernel event of one call (PyTorch profiler, CUPTI activity records) "
                      "summed; one profiled run holds all segments of a verdict, split by kernels per call; L2 eviction "
                      "in cold mode is a memset, which is not a kernel; microseconds per call",
    "control": "torch copy_ of a 256 MiB device buffer to another (device-to-device), CUDA-event span, median",
    "launch_probe": "torch add_ on a 1-element device tensor, CUDA-event span, median",
}

MODES_DOC = {
    "hot": "the same input and output buffers every call, nothing evicted between calls (L2 warm)",
    "cold": "before each span sample (and each call of a cold kernel-time segment) a 256 MiB buffer is memset "
            "(L2 evicted); for spans the stream is synchronised and the eviction lies outside the event pair",
}


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _err(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) < 2000 else text[:2000] + "..."


class Session:
    def __init__(self, manifest: Manifest, backend: Any, settings: Settings, out: Path,
                 progress: Callable[[str], None] | None = None, manifest_path: str | None = None):
        self.m = manifest
        self.b = backend
        self.s = settings
        self.out = out
        self.say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        self.report: dict = {
            "schema": SCHEMA,
            "complete": False,
            "namespace": manifest.namespace,
            "mode": manifest.mode,
            "manifest": manifest_path or str(manifest.dir / "manifest.json"),
            "started_utc": _utc(),
            "finished_utc": None,
            "error": None,
            "environment": {"manifest": manifest.environment},
            "procedure": self._procedure(),
            "control": {"instrument": INSTRUMENTS["control"], "launch_probe_instrument": INSTRUMENTS["launch_probe"],
                        "start_us": None, "end_us": None, "drift": None, "flagged": None, "limit": settings.drift_limit,
                        "max_abs_checkpoint_drift": None, "checkpoints": []},
            "ceilings": None,
            "ops": [],
            "results": [],
            "verdicts": [],
            "flags": [],
        }
        # Per manifest op: (spec, state or None, {name: (impl, result row)}).
        self.live: list[tuple[OpSpec, Any, dict[str, tuple[Any, dict]]]] = []

    # -- helpers -----------------------------------------------------------------

    def _procedure(self) -> dict:
        s = self.s
        return {
            "settings": asdict(s),
            "instruments": INSTRUMENTS,
            "modes": MODES_DOC,
            "phases": [
                "control start", "per op: verify, upload, reference, build, correct_before, hot spans (rotated rounds), "
                "hot b2b, cold spans (rotated rounds)", "control after_event_timing", "profiler kernel time",
                "control after_profiler", "verdicts (A-B-B-A, kernel time; span verdicts labelled launch path)",
                "correct_after", "control end",
            ],
            "rotation": "round r of an op measures its implementations in the order of the list rotated left by r",
            "l2": "before every measurement segment of an implementation the context's persisting L2 lines are reset "
                  "(cuCtxResetPersistingL2Cache); no access-policy window is ever set",
            "poison": "preallocated outputs and scratch are filled with the bit pattern 0x7FC0BEEF (a NaN) before every "
                      "correctness call; implementations that return a new tensor are checked on that tensor, after "
                      "freeing three poisoned blocks of the output's size into torch's caching allocator (best effort; "
                      "see correct_*.poison)",
        }

    def _save(self) -> None:
        write_report(self.out, self.report)

    def _flag(self, text: str) -> None:
        self.report["flags"].append(text)
        self.say(f"flag: {text}")

    def _control(self, at: str) -> None:
        try:
            c = self.b.control(self.s.control_samples)
            c = {"at": at, "utc": _utc(), **c, "error": None}
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            c = {"at": at, "utc": _utc(), "copy_us": None, "error": _err(e)}
        ctl = self.report["control"]
        ctl["checkpoints"].append(c)
        first = ctl["checkpoints"][0].get("copy_us")
        if at == "start":
            ctl["start_us"] = c.get("copy_us")
        if at == "end":
            ctl["end_us"] = c.get("copy_us")
            if ctl["start_us"] and ctl["end_us"]:
                ctl["drift"] = relative_change(ctl["start_us"], ctl["end_us"])
                ctl["flagged"] = abs(ctl["drift"]) > self.s.drift_limit
                if ctl["flagged"]:
                    self._flag(f"control kernel moved {ctl['drift'] * 100:+.1f}% between start and end (limit {self.s.drift_limit * 100:.0f}%)")
            else:
                ctl["flagged"] = True
                self._flag("control kernel could not be measured at start and end")
        drifts = [abs(relative_change(first, p["copy_us"])) for p in ctl["checkpoints"] if first and p.get("copy_us")]
        ctl["max_abs_checkpoint_drift"] = max(drifts) if drifts else None
        self.say(f"control {at}: {c.get('copy_us')} us" + (f" ({c['error']})" if c.get("error") else ""))

    def _row(self, spec: OpSpec, impl: Any) -> dict:
        return {
            "op": spec.op,
            "dims": list(spec.dims),
            "generator": spec.generator,
            "label": spec.label,
            "case_dir": spec.case_dir,
            "implementation": impl.name,
            "kind": impl.kind,
            "stage": getattr(impl, "stage", None),
            "output": getattr(impl, "output_mode", "preallocated"),
            "correct_before": None,
            "correct_after": None,
            "hot": None,
            "cold": None,
            "l2_persisting_resets": 0,
            "recompiled": None,
            "info": dict(getattr(impl, "info", {}) or {}),
            "notes": list(getattr(impl, "notes", []) or []),
            "error": getattr(impl, "error", None),
        }

    def _reset_l2(self, row: dict) -> None:
        try:
            self.b.reset_l2()
            row["l2_persisting_resets"] += 1
        except Exception as e:  # noqa: BLE001
            msg = f"L2 persisting reset failed: {_err(e)}"
            if msg not in row["notes"]:
                row["notes"].append(msg)

    def _segment(self, impl: Any, row: dict, samples: int, cold: bool, where: str) -> list[float]:
        """One measurement segment: L2 reset, warm-up, `samples` spans."""
        self._reset_l2(row)
        token = self.b.compile_token(impl)
        self.b.warm(impl, self.s.segment_warmup)
        out = self.b.span(impl, samples, cold)
        self._note_recompile(impl, row, token, where)
        return out

    def _note_recompile(self, impl: Any, row: dict, token: Any, where: str) -> None:
        if token is None:
            return
        diff = self.b.recompiled(impl, token)
        if row["recompiled"] is None:
            row["recompiled"] = False
        if diff:
            row["recompiled"] = True
            row["notes"].append(f"torch.compile counters moved during {where}: {diff}")

    def _fail_impl(self, row: dict, why: str) -> None:
        row["error"] = why
        self.say(f"  {row['implementation']}: ERROR {why.splitlines()[0][:200]}")

    @staticmethod
    def _ok(row: dict) -> bool:
        return row["error"] is None and bool(row["correct_before"] and row["correct_before"]["passed"])

    # -- phases ------------------------------------------------------------------------

    def run(self) -> dict:
        try:
            env = self.b.environment()
            self.report["environment"].update(env)
            self.report["environment"]["nvidia_smi"] = {"start": self.b.smi(), "end": None}
            self._control("start")
            try:
                self.report["ceilings"] = self.b.ceilings()
            except Exception as e:  # noqa: BLE001 - the floors are then unknown, nothing else is
                self.report["ceilings"] = {"error": _err(e)}
            self._save()
            for spec in self.m.ops:
                self._op_phase(spec)
                self._save()
            self._control("after_event_timing")
            self._profiler_phase()
            self._save()
            self._control("after_profiler")
            self._verdict_phase()
            self._save()
            self._after_phase()
            self._control("end")
            self.report["environment"]["nvidia_smi"]["end"] = self.b.smi()
            self._clock_flags()
            self.report["complete"] = True
        except Exception as e:  # noqa: BLE001 - the report says what happened
            self.report["error"] = f"session aborted: {_err(e)}"
            self.say(self.report["error"])
        finally:
            for _, state, _ in self.live:
                if state is not None:
                    try:
                        self.b.release(state)
                    except Exception:  # noqa: BLE001
                        pass
            self.report["finished_utc"] = _utc()
            self._save()
        return self.report

    def _clock_flags(self) -> None:
        smi = self.report["environment"]["nvidia_smi"]
        a, b = (smi.get("start") or {}).get("gpu"), (smi.get("end") or {}).get("gpu")
        if not a or not b:
            return
        for k in ("sm_mhz", "mem_mhz", "pstate"):
            if a.get(k) != b.get(k):
                self._flag(f"nvidia-smi {k} changed from {a.get(k)} at start to {b.get(k)} at end")

    def _op_phase(self, spec: OpSpec) -> None:
        op_entry = {"op": spec.op, "dims": list(spec.dims), "generator": spec.generator, "label": spec.label,
                    "case_dir": spec.case_dir, "inputs_sha256": None, "tolerance": None, "current_picks": None,
                    "reference": None, "implementations": [], "round_orders": {"hot": None, "cold": None},
                    "best_alternative": None, "notes": [], "error": None}
        self.report["ops"].append(op_entry)
        self.say(f"[{spec.title}]")
        try:
            state = self.b.prepare_op(spec)
        except Exception as e:  # noqa: BLE001 - an op error, the session goes on
            op_entry["error"] = _err(e)
            self.say(f"  op error: {op_entry['error']}")
            self.live.append((spec, None, {}))
            return
        op_entry["floor"] = self._floor(getattr(state, "cost", None) or {})
        op_entry["inputs_sha256"] = getattr(state, "sha256", None)
        op_entry["tolerance"] = getattr(state, "tolerance", None)
        op_entry["current_picks"] = getattr(state, "current_picks", None)
        self.report["environment"].setdefault("inputs_sha256", {})[f"{spec.title} ({spec.case_dir})"] = op_entry["inputs_sha256"]
        op_entry["reference"] = getattr(state, "reference_info", None)
        impls: dict[str, tuple[Any, dict]] = {}
        for impl in self.b.implementations(state):
            row = self._row(spec, impl)
            self.report["results"].append(row)
            impls[impl.name] = (impl, row)
            op_entry["implementations"].append(impl.name)
        self.live.append((spec, state, impls))

        # Correctness before any timing.
        for name, (impl, row) in impls.items():
            if row["error"]:
                self.say(f"  {name}: not built: {row['error'].splitlines()[0][:200]}")
                continue
            try:
                self._reset_l2(row)
                row["correct_before"] = self.b.check(state, impl)
            except Exception as e:  # noqa: BLE001
                self._fail_impl(row, f"correctness run failed: {_err(e)}")
                continue
            c = row["correct_before"]
            if not c["passed"]:
                self._fail_impl(row, f"wrong before timing: {c['failures']} of {c['checked']} elements outside the tolerance "
                                     f"(max abs err {_g(c['max_abs_err'])}, {c['nan_count']} NaN)")
            else:
                self.say(f"  {name}: correct (max abs err {_g(c['max_abs_err'])}, rel L2 {_g(c['rel_l2_err'])})")
        timed = [n for n, (_, row) in impls.items() if self._ok(row)]

        if self.m.hot:
            timed = self._spans(op_entry, impls, timed, cold=False)
            for name in list(timed):
                impl, row = impls[name]
                try:
                    self._reset_l2(row)
                    token = self.b.compile_token(impl)
                    self.b.warm(impl, self.s.segment_warmup)
                    runs = [self.b.b2b(impl, self.s.b2b_calls) for _ in range(self.s.b2b_runs)]
                    self._note_recompile(impl, row, token, "back-to-back runs")
                    row["hot"]["b2b_us"] = {**b2b_summary(runs, self.s.b2b_calls), "instrument": "b2b", "mode": "hot"}
                except Exception as e:  # noqa: BLE001
                    self._drop(row, f"back-to-back timing failed: {_err(e)}")
                    timed.remove(name)
        if self.m.cold:
            timed = self._spans(op_entry, impls, timed, cold=True)
        for name in timed:
            row = impls[name][1]
            hot = row["hot"]["span"]["median_us"] if row["hot"] and row["hot"].get("span") else None
            cold = row["cold"]["span"]["median_us"] if row["cold"] else None
            b2b = row["hot"]["b2b_us"]["median"] if row["hot"] and row["hot"].get("b2b_us") else None
            self.say(f"  {name}: hot span {_fmt(hot)} us, b2b {_fmt(b2b)} us, cold span {_fmt(cold)} us")

    def _floor(self, cost: dict) -> dict | None:
        """The least time a call can take: its bytes at the rate of a device
        copy of the same bytes, or its flops at the measured FP32 rate,
        whichever is longer."""
        if not cost:
            return None
        out = {"bytes": cost.get("bytes"), "flops": cost.get("flops"), "copy_us": None, "compute_us": None,
               "floor_us": None, "bound": None, "error": None}
        try:
            c = self.b.copy_floor(cost["bytes"])
            out["copy_us"], out["copy_instrument"] = c["copy_us"], c["instrument"]
        except Exception as e:  # noqa: BLE001
            out["error"] = f"copy floor: {_err(e)}"
        if self.m.cold:
            out["cold_copy_us"] = None
            try:
                c = self.b.cold_copy_floor(cost["bytes"], self.s.span_samples)
                out["cold_copy_us"], out["cold_copy_instrument"] = c["copy_us"], c["instrument"]
            except Exception as e:  # noqa: BLE001
                out["error"] = f"cold copy floor: {_err(e)}"
        rate = (self.report.get("ceilings") or {}).get("fp32_flops_per_us")
        if rate:
            out["compute_us"] = cost["flops"] / rate
        known = [(v, k) for k, v in (("memory", out["copy_us"]), ("compute", out["compute_us"])) if v is not None]
        if known:
            out["floor_us"], out["bound"] = max(known)
        return out

    def _drop(self, row: dict, why: str) -> None:
        """An implementation fails: its error is set and its times are not kept."""
        row["hot"] = None
        row["cold"] = None
        self._fail_impl(row, why)

    def _spans(self, op_entry: dict, impls: dict, timed: list[str], cold: bool) -> list[str]:
        mode = "cold" if cold else "hot"
        samples: dict[str, list[list[float]]] = {n: [] for n in timed}
        failed: set[str] = set()
        for name in timed:
            impl, row = impls[name]
            try:
                self._reset_l2(row)
                self.b.warm(impl, self.s.first_warmup)
            except Exception as e:  # noqa: BLE001
                self._drop(row, f"warm-up failed: {_err(e)}")
                failed.add(name)
        sizes = round_sizes(self.s.span_samples, self.s.span_rounds)
        orders = op_entry["round_orders"][mode] = []
        for r, n in enumerate(sizes):
            order = [x for x in rotate(timed, r) if x not in failed]
            orders.append(order)
            for name in order:
                impl, row = impls[name]
                try:
                    samples[name].append(self._segment(impl, row, n, cold, f"{mode} span round {r}"))
                except Exception as e:  # noqa: BLE001
                    self._drop(row, f"{mode} span timing failed: {_err(e)}")
                    failed.add(name)
        ok = [n for n in timed if n not in failed]
        for name in ok:
            row = impls[name][1]
            span = {**span_summary(samples[name]), "instrument": "span", "mode": mode}
            if cold:
                row["cold"] = {"mode": "cold", "span": span}
            else:
                row["hot"] = {"mode": "hot", "kernel_us": None, "kernels_per_call": None, "kernel_instrument": "kernel",
                              "kernels": None, "span": span, "b2b_us": None}
        return ok

    def _profiler_phase(self) -> None:
        self.say("[profiler]")
        for spec, state, impls in self.live:
            for name, (impl, row) in impls.items():
                if not self._ok(row):
                    continue
                try:
                    self._reset_l2(row)
                    token = self.b.compile_token(impl)
                    k = self.b.kernel_time(impl, self.s.profiler_warmup, self.s.profiler_calls)
                    self._note_recompile(impl, row, token, "profiler calls")
                except Exception as e:  # noqa: BLE001
                    row["notes"].append(f"no profiler kernel time: {_err(e)}")
                    continue
                if row["hot"] is None:
                    row["hot"] = {"mode": "hot", "kernel_us": None, "kernels_per_call": None, "kernel_instrument": "kernel",
                                  "kernels": None, "span": None, "b2b_us": None}
                row["hot"].update(kernel_us=k.get("kernel_us"), kernels_per_call=k.get("kernels_per_call"),
                                  kernels=k.get("kernels"), profiler_excluded=k.get("excluded"))
                if k.get("kernel_us") is None:
                    row["notes"].append("the profiler saw no kernel for this implementation")
                planned = row["info"].get("launches_per_call")
                if planned is not None and k.get("kernels_per_call") is not None and abs(k["kernels_per_call"] - planned) > 1e-9:
                    row["notes"].append(f"the profiler saw {k['kernels_per_call']} kernels per call; the plan launches {planned}")
                self.say(f"  {spec.title} {name}: kernel {_fmt(k.get('kernel_us'))} us, {k.get('kernels_per_call')} kernels/call")

    def _best_alternative(self, op_entry: dict, impls: dict) -> str | None:
        cands = [(n, row) for n, (impl, row) in impls.items()
                 if row["kind"] != "rust" and self._ok(row) and not row["info"].get("outside_contract")]
        for key, get in (
            ("hot.kernel_us", lambda r: r["hot"] and r["hot"].get("kernel_us")),
            ("hot.span.median_us", lambda r: r["hot"] and r["hot"].get("span") and r["hot"]["span"]["median_us"]),
            ("cold.span.median_us", lambda r: r["cold"] and r["cold"]["span"]["median_us"]),
        ):
            scored = [(get(row), n) for n, row in cands if get(row)]
            if scored:
                value, name = min(scored)
                op_entry["best_alternative"] = {"implementation": name, "chosen_by": key, "value_us": value,
                                                "candidates": {n: v for v, n in sorted(scored)}}
                return name
        op_entry["best_alternative"] = None
        op_entry["notes"].append("no correct non-Rust implementation with a time: no best alternative")
        return None

    def _verdict_phase(self) -> None:
        self.say("[verdicts]")
        modes = [m for m, on in (("hot", self.m.hot), ("cold", self.m.cold)) if on]
        instruments = ["kernel"] + (["span"] if self.m.span_verdicts else [])
        for (spec, state, impls), op_entry in zip(self.live, self.report["ops"]):
            if state is None:
                continue
            best = self._best_alternative(op_entry, impls)
            pairs: list[tuple[str, str, bool]] = []
            if RUST_CURRENT in impls:
                pairs.append((RUST_CURRENT, BEST_ALTERNATIVE, True))
            else:
                op_entry["notes"].append(f"no `{RUST_CURRENT}` implementation: no automatic verdict")
            for a, b in spec.pairs:
                if (a, b) not in [(x, y) for x, y, _ in pairs]:
                    pairs.append((a, b, False))
            for a, b, auto in pairs:
                for instrument in instruments:
                    for mode in modes:
                        self.report["verdicts"].append(self._verdict(spec, impls, a, b, best, auto, mode, instrument))

    def _verdict(self, spec: OpSpec, impls: dict, a: str, b: str, best: str | None, auto: bool, mode: str,
                 instrument: str) -> dict:
        v = {"op": spec.op, "dims": list(spec.dims), "label": spec.label, "a": a, "b": b, "a_implementation": None,
             "b_implementation": None, "auto": auto, "mode": mode, "instrument": instrument,
             "instrument_text": INSTRUMENTS["kernel_verdict" if instrument == "kernel" else "span"]
             + ("" if instrument == "kernel" else " (launch path, not kernel time)"),
             "order": "A-B-B-A", "rounds": self.s.verdict_rounds,
             "samples_per_segment": self.s.verdict_samples, "ratios": None, "median_ratio": None, "spread": None,
             "iqr": None, "minmax": None, "round_medians_us": None, "samples_us": None, "verdict": None,
             "note": None, "error": None}
        resolved = []
        for arm, name in (("a", a), ("b", b)):
            real = best if name == BEST_ALTERNATIVE else name
            if real is None:
                v["error"] = f"`{name}`: no correct non-Rust implementation to stand for it"
                return v
            if real not in impls:
                v["error"] = f"no implementation named `{real}` for {spec.title} (have: {', '.join(impls)})"
                return v
            if not self._ok(impls[real][1]):
                v["error"] = f"`{real}` is not correct or failed: {impls[real][1]['error']}"
                return v
            v[f"{arm}_implementation"] = real
            resolved.append(real)
        if resolved[0] == resolved[1]:
            v["error"] = f"`{a}` and `{b}` are the same implementation ({resolved[0]})"
            return v
        arms = {"A": impls[resolved[0]], "B": impls[resolved[1]]}
        schedule = abba_schedule(self.s.verdict_rounds)
        rounds: list[tuple[list[float], list[float]]] = [([], []) for _ in range(self.s.verdict_rounds)]
        raw = {"a": [[] for _ in range(self.s.verdict_rounds)], "b": [[] for _ in range(self.s.verdict_rounds)]}
        try:
            if instrument == "kernel":
                per_call = {}
                for arm, (impl, row) in arms.items():
                    k = (row["hot"] or {}).get("kernels_per_call")
                    if k is None or k <= 0 or abs(k - round(k)) > 1e-9:
                        raise ValueError(f"`{row['implementation']}` has no whole number of kernels per call ({k}); "
                                         "its calls cannot be told apart in the profile")
                    per_call[arm] = int(round(k))
                for impl, row in arms.values():
                    self._reset_l2(row)
                segments = self.b.kernel_segments([arms[arm][0] for _, _, arm in schedule], [per_call[arm] for _, _, arm in schedule],
                                                  self.s.segment_warmup, self.s.verdict_samples, mode == "cold")
            else:
                segments = [self._segment(arms[arm][0], arms[arm][1], self.s.verdict_samples, mode == "cold",
                                          f"verdict {a} vs {b}") for _, _, arm in schedule]
        except Exception as e:  # noqa: BLE001
            v["error"] = f"verdict timing failed: {_err(e)}"
            return v
        for (r, _, arm), xs in zip(schedule, segments):
            rounds[r][0 if arm == "A" else 1].extend(xs)
            raw["a" if arm == "A" else "b"][r].extend(xs)
        v.update(verdict_from_rounds(rounds, spread=self.s.spread))
        v["samples_us"] = raw
        self.say(f"  {spec.title} {mode} {instrument}: {a} ({resolved[0]}) / {b} ({resolved[1]}) = {_fmt(v['median_ratio'], 4)} "
                 f"[{_fmt(v['spread']['low'], 4)}, {_fmt(v['spread']['high'], 4)}] {v['verdict']}")
        return v

    def _after_phase(self) -> None:
        self.say("[correctness after timing]")
        for spec, state, impls in self.live:
            for name, (impl, row) in impls.items():
                if not self._ok(row):
                    continue
                try:
                    self._reset_l2(row)
                    row["correct_after"] = self.b.check(state, impl)
                except Exception as e:  # noqa: BLE001
                    self._drop(row, f"correctness run after timing failed: {_err(e)}")
                    self._void_verdicts(spec, name)
                    continue
                c = row["correct_after"]
                if not c["passed"]:
                    self._drop(row, f"wrong after timing: {c['failures']} of {c['checked']} elements outside the tolerance "
                                    f"(max abs err {_g(c['max_abs_err'])}, {c['nan_count']} NaN); its times are not kept")
                    self._void_verdicts(spec, name)
                else:
                    self.say(f"  {spec.title} {name}: still correct")

    def _void_verdicts(self, spec: OpSpec, name: str) -> None:
        for v in self.report["verdicts"]:
            if v["op"] == spec.op and v["label"] == spec.label and name in (v["a_implementation"], v["b_implementation"]):
                for k in ("ratios", "median_ratio", "spread", "iqr", "minmax", "round_medians_us", "samples_us", "verdict"):
                    v[k] = None
                v["error"] = f"`{name}` failed its correctness check after timing; the verdict is not kept"


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def _g(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def run_session(manifest: Manifest, backend: Any, settings: Settings, out: Path,
                progress: Callable[[str], None] | None = None) -> dict:
    return Session(manifest, backend, settings, out, progress).run()
