"""Test helpers: tiny case directories and manifests, and a fake backend
that stands in for the GPU (deterministic times, list-based outputs)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

from mage_compare.numeric import compare_lists
from mage_compare.ops import BUILTIN_IMPLS
from mage_compare.profparse import counter_diff


def write_case(root: Path, op: str, dims: list[int], files: dict[str, bytes], name: str | None = None) -> str:
    """Writes a case directory under root/cases; returns its path relative to root."""
    rel = f"cases/{name or op + '-' + 'x'.join(map(str, dims))}"
    case = root / rel
    case.mkdir(parents=True, exist_ok=True)
    (case / "input.json").write_text(json.dumps({"op": op, "dims": dims, "seed": 1}))
    sums = {}
    for f, data in files.items():
        (case / f).write_bytes(data)
        sums[f] = hashlib.sha256(data).hexdigest()
    (case / "inputs.sha256.json").write_text(json.dumps(sums))
    return rel


def f32(*xs: float) -> bytes:
    return struct.pack(f"<{len(xs)}f", *xs)


def u32(*xs: int) -> bytes:
    return struct.pack(f"<{len(xs)}I", *xs)


def layernorm_op(root: Path, rows: int = 2, width: int = 3, stages=("current", "mage-001"), pairs=None) -> dict:
    """A manifest entry for a small LayerNorm case (written under root)."""
    n = rows * width
    rel = write_case(root, "layernorm", [rows, width], {
        "a.bin": f32(*[0.1 * i for i in range(n)]), "b.bin": f32(*[1.0] * width), "c.bin": f32(*[0.0] * width)})
    if pairs is None:
        pairs = [{"a": "rust current", "b": "rust mage-001"}]
    return {"op": "layernorm", "dims": [rows, width], "generator": "normal", "label": f"{rows}x{width}", "case_dir": rel,
            "stages": list(stages), "current_picks": "mage-001", "pairs": pairs}


def neighbor_op(root: Path, rowptr=(0, 1, 3), indices=(1, 0, 1)) -> dict:
    n, width, edges = len(rowptr) - 1, 2, len(indices)
    rel = write_case(root, "neighbor", [n, width, edges], {
        "a.bin": f32(*[1.0] * (n * width)), "b.bin": f32(*[0.5] * edges),
        "rowptr.bin": u32(*rowptr), "indices.bin": u32(*indices)})
    return {"op": "neighbor", "dims": [n, width, edges], "generator": "uniform", "label": f"{n}x{width}x{edges}",
            "case_dir": rel, "stages": ["current", "mage-001"], "pairs": []}


def write_manifest(root: Path, ops: list[dict], mode: str = "both", **extra) -> Path:
    m = {"namespace": "mage-test", "mode": mode, "environment": {"toolchain": "nightly-test"}, "ops": ops}
    m.update(extra)
    (root / "manifest.json").write_text(json.dumps(m))
    return root / "manifest.json"


class FakeImpl:
    def __init__(self, name, kind, stage=None, base_us=10.0, wrong=False, wrong_after=False, error=None,
                 output_mode="preallocated", recompiles=False, kernel_us=None, kernels_per_call=1):
        self.name, self.kind, self.stage = name, kind, stage
        self.base_us = base_us
        self.kernel_us = base_us * 0.5 if kernel_us is None else kernel_us
        self.kernels_per_call = kernels_per_call
        self.wrong = wrong
        self.wrong_after = wrong_after
        self.error = error
        self.output_mode = output_mode
        self.recompiles = recompiles
        self.info = {"launches_per_call": 1} if kind == "rust" else {}
        self.notes = []
        self.checks = 0


class FakeState:
    def __init__(self, spec):
        self.spec = spec
        n = 1
        for d in spec.dims[:2]:
            n *= d
        self.ref = [float(i) for i in range(n)]
        self.mag = [abs(x) + 1.0 for x in self.ref]
        self.tolerance = {"abs": 0.0, "rel": 0.0, "of_magnitude": 1e-4, "source": "fake"}
        self.sha256 = {p.name: "0" * 64 for p in sorted(spec.case_path.glob("*.bin"))}
        self.current_picks = "mage-001"
        self.cost = {"bytes": 8 * n, "flops": 8 * n}
        self.reference_info = {"primary": "fake"}


class FakeBackend:
    """Deterministic stand-in for gpu.TorchBackend. `times` maps names to
    base microseconds; `wrong`/`wrong_after`/`broken`/`recompiles` name
    implementations that misbehave; `control_us` is the control time at
    each checkpoint in order."""

    def __init__(self, manifest, settings, skip=frozenset(), times=None, wrong=(), wrong_after=(), broken=(),
                 recompiles=(), control_us=(100.0, 100.0, 100.0, 100.0), kernel_times=None, kernels_per_call=None,
                 outside=()):
        self.manifest, self.settings, self.skip = manifest, settings, set(skip)
        self.outside = set(outside)
        self.times = times or {}
        self.kernel_times = kernel_times or {}
        self.kernels_per_call = kernels_per_call or {}
        self.wrong, self.wrong_after, self.broken, self.recompiles_set = set(wrong), set(wrong_after), set(broken), set(recompiles)
        self.control_us = list(control_us)
        self.log: list[tuple] = []
        self.l2_resets = 0
        self.released = 0
        self._compile_counter = 0

    def environment(self):
        return {"python": "3.x", "torch": "fake", "gpu": {"name": "Fake GPU"}}

    def smi(self):
        return {"gpu": {"name": "Fake GPU", "sm_mhz": 1980, "mem_mhz": 3201, "pstate": "P0"}, "error": None}

    def ceilings(self):
        return {"fp32_flops_per_us": 50e6, "sgemm_8192_us": 22000.0, "instrument": "fake"}

    def copy_floor(self, nbytes):
        return {"copy_us": nbytes / 4e6, "bytes": nbytes, "instrument": "fake copy"}

    def cold_copy_floor(self, nbytes, samples):
        return {"copy_us": nbytes / 3e6, "bytes": nbytes, "instrument": "fake cold copy"}

    def control(self, samples):
        us = self.control_us.pop(0) if self.control_us else 100.0
        return {"copy_us": us, "copy_samples_us": [us] * samples, "launch_probe_us": 5.0, "launch_probe_samples_us": [5.0]}

    def prepare_op(self, spec):
        if not (spec.case_path / "input.json").is_file():
            raise ValueError(f"case {spec.case_path}: input.json: No such file or directory")
        self.log.append(("prepare", spec.op))
        return FakeState(spec)

    def implementations(self, state):
        spec = state.spec
        out = []
        names = [(f"rust {s}", "rust", s) for s in spec.stages] + [(n, k, None) for n, k in BUILTIN_IMPLS[spec.op]]
        for name, kind, stage in names:
            if name in self.skip or kind in self.skip:
                continue
            out.append(FakeImpl(name, kind, stage, self.times.get(name, 10.0), name in self.wrong, name in self.wrong_after,
                                "could not build" if name in self.broken else None,
                                "returned" if kind in ("torch", "torch_compile", "cusparse") else "preallocated",
                                name in self.recompiles_set, self.kernel_times.get(name),
                                self.kernels_per_call.get(name, 1)))
            if name in self.outside:
                out[-1].info["outside_contract"] = "fake: another precision"
        return out

    def check(self, state, impl):
        impl.checks += 1
        self.log.append(("check", impl.name))
        bad = impl.wrong or (impl.wrong_after and impl.checks > 1)
        out = [x + (1.0 if bad else 0.0) for x in state.ref]
        tol = state.tolerance
        block = compare_lists(out, state.ref, tol["abs"], tol["rel"], state.mag, tol["of_magnitude"])
        block["poison"] = {"output": impl.output_mode}
        return block

    def reset_l2(self):
        self.l2_resets += 1

    def warm(self, impl, calls):
        self.log.append(("warm", impl.name, calls))

    def span(self, impl, samples, cold):
        self.log.append(("span", impl.name, samples, cold))
        base = impl.base_us * (2.0 if cold else 1.0)
        return [base + 0.001 * (i % 3) for i in range(samples)]

    def b2b(self, impl, calls):
        self.log.append(("b2b", impl.name, calls))
        return impl.base_us * 0.8

    def kernel_time(self, impl, warmup, calls):
        self.log.append(("profile", impl.name))
        k = impl.kernels_per_call
        return {"kernel_us": impl.kernel_us, "kernels_per_call": float(k),
                "kernels": [{"name": "k", "per_call": float(k), "us_per_call": impl.kernel_us}], "excluded": {}}

    def kernel_segments(self, impls, per_call, warmup, calls, cold):
        out = []
        for impl, k in zip(impls, per_call):
            self.log.append(("kseg", impl.name, k, warmup, calls, cold))
            base = impl.kernel_us * (1.5 if cold else 1.0)
            out.append([base + 0.001 * (i % 3) for i in range(calls)])
        return out

    def compile_token(self, impl):
        if impl.kind != "torch_compile":
            return None
        return {"stats": {"calls_captured": self._compile_counter}}

    def recompiled(self, impl, token):
        if impl.recompiles:
            self._compile_counter += 1
        return counter_diff(token, {"stats": {"calls_captured": self._compile_counter}})

    def release(self, state):
        self.released += 1
