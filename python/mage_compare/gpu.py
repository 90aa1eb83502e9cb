"""The GPU backend (GPU only): torch for memory, events and the profiler,
the Python module `mage` for Mage's stages and the op registry.

Everything runs on torch's current stream of device 0, in the device's
primary context: torch is initialised first, and `mage` launches its
stages on torch's current stream in that same context, so Rust kernels,
Triton kernels and torch kernels share one context and one stream.
Nothing here changes a clock or a device setting; the only function
attribute set is the opt-in to more than 48 KiB of dynamic shared memory
a Rust launch asks for (inside `mage`).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

import mage

from . import smi
from .definitions import op_info
from .impls import Broken, RustImpl, build_cusparse, build_torch, build_torch_compile, build_triton
from .manifest import Manifest, OpSpec
from .numeric import compare_arrays
from .ops import BUILTIN_IMPLS, OUTSIDE_CONTRACT, dims_label, rust_name
from .profparse import counter_diff, counter_snapshot, kernel_events, kernel_summary, split_calls
from .reference import build_reference, input_views, torch_magnitude
from .stats import median

CONTROL_BYTES = 256 << 20


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@dataclass
class OpState:
    spec: OpSpec
    tensors: list  # device tensors, one per input, in the op's order, shaped
    views: dict  # the same by role name (+ derived int64 tensors for neighbor)
    ref: Any  # float64 reference on the device
    mag: Any  # float64 magnitude of each element on the device (None where the tolerance uses none)
    output_shape: list[int]
    sha256: dict
    tolerance: dict
    current_picks: str | None  # from the manifest: the stage `current` picks for these inputs
    reference_info: dict = field(default_factory=dict)
    cost: dict = field(default_factory=dict)
    case: Any = None  # the `mage` case, for per-stage tolerances


class TorchBackend:
    def __init__(self, manifest: Manifest, settings, skip: set[str] = frozenset(), golden_dir: Path | None = None,
                 use_golden: bool = True):
        if sys.byteorder != "little":
            raise RuntimeError("the case files are little-endian; this host is not")
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        torch.cuda.init()
        self.device = torch.device("cuda", torch.cuda.current_device())
        torch.zeros(1, device=self.device).add_(1)  # the primary context exists and is current
        torch.cuda.synchronize()
        self.manifest = manifest
        self.settings = settings
        self.skip = set(skip)
        self.golden_dir = golden_dir
        self.use_golden = use_golden
        self.torch_settings = self._fp32_settings()
        self.index = self.device.index or 0
        self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        self.ctl_src = torch.ones(CONTROL_BYTES // 4, dtype=torch.float32, device=self.device)
        self.ctl_dst = torch.empty_like(self.ctl_src)
        self.probe = torch.zeros(1, dtype=torch.float32, device=self.device)
        self._profiler_warmed = False
        torch.cuda.synchronize()

    # -- session-level --------------------------------------------------------------------

    @staticmethod
    def _fp32_settings() -> dict:
        """FP32 matmuls must be true FP32 (no TF32) in torch and inductor."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            before = torch.get_float32_matmul_precision()
            if before != "highest":
                torch.set_float32_matmul_precision("highest")
            out = {"float32_matmul_precision_before": before,
                   "float32_matmul_precision": torch.get_float32_matmul_precision()}
            for key, get in (("matmul_allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                             ("cudnn_allow_tf32", lambda: torch.backends.cudnn.allow_tf32)):
                try:
                    out[key] = bool(get())
                except Exception as e:  # noqa: BLE001
                    out[key] = f"unreadable: {e}"
        out["compile"] = {"mode": "default", "fullgraph": True, "dynamic": False}
        return out

    def environment(self) -> dict:
        p = torch.cuda.get_device_properties(self.device)
        try:
            import triton

            triton_version = triton.__version__
        except Exception as e:  # noqa: BLE001
            triton_version = f"unavailable: {e}"
        return {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "triton": triton_version,
            "numpy": _version("numpy"),
            "mage_module": {"commit": mage.COMMIT, "path": getattr(mage, "__file__", None)},
            "l2_evict_bytes": mage.EVICT_BYTES,
            "cupy": _version("cupy-cuda13x"),
            "platform": platform.platform(),
            "gpu": {
                "name": p.name,
                "uuid": str(getattr(p, "uuid", "")) or None,
                "capability": f"{p.major}.{p.minor}",
                "sm_count": p.multi_processor_count,
                "l2_bytes": getattr(p, "L2_cache_size", None),
                "total_memory_bytes": p.total_memory,
            },
            "torch_settings": self.torch_settings,
            "ptx_sha256": self.manifest.environment.get("ptx_sha256"),
        }

    def smi(self) -> dict:
        uuid = str(getattr(torch.cuda.get_device_properties(self.device), "uuid", "") or "")
        if uuid and not uuid.startswith("GPU-"):
            uuid = "GPU-" + uuid
        return smi.query(uuid or None)

    def _spans(self, work, n: int, before=None) -> list[float]:
        start, end = self.events
        out = []
        for _ in range(n):
            if before is not None:
                before()
                torch.cuda.synchronize()
            start.record()
            work()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e3)
        return out

    def ceilings(self) -> dict:
        """The FP32 rate this GPU reaches: torch's SGEMM (TF32 off) at
        8192³, median event span of 5 after 2 warm-ups."""
        n = 8192
        a = torch.randn(n, n, device=self.device)
        b = torch.randn(n, n, device=self.device)
        c = torch.empty(n, n, device=self.device)
        for _ in range(2):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        us = median(self._spans(lambda: torch.matmul(a, b, out=c), 5))
        del a, b, c
        torch.cuda.empty_cache()
        return {"fp32_flops_per_us": 2.0 * n ** 3 / us, "sgemm_8192_us": us,
                "instrument": "torch.matmul 8192x8192x8192 FP32 (TF32 off), median CUDA-event span of 5 after 2 warm-ups"}

    def copy_floor(self, nbytes: int) -> dict:
        """A device-to-device copy moving `nbytes` in all (half read, half
        written), hot: 100 back-to-back copies between events, median of 3."""
        half = max(nbytes // 8, 1)  # f32 elements read (= written)
        src = torch.ones(half, dtype=torch.float32, device=self.device)
        dst = torch.empty_like(src)
        for _ in range(5):
            dst.copy_(src)
        torch.cuda.synchronize()
        start, end = self.events
        runs = []
        for _ in range(3):
            start.record()
            for _ in range(100):
                dst.copy_(src)
            end.record()
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1e3 / 100)
        return {"copy_us": median(runs), "bytes": 8 * half,
                "instrument": "torch copy_ of the same bytes (half read, half written), hot L2, 100 back-to-back copies "
                              "between CUDA events, median of 3"}

    def cold_copy_floor(self, nbytes: int, samples: int) -> dict:
        """The same copy with L2 evicted before each sample, timed like a
        cold span: one copy between CUDA events, median of `samples`."""
        half = max(nbytes // 8, 1)
        src = torch.ones(half, dtype=torch.float32, device=self.device)
        dst = torch.empty_like(src)
        copy = lambda: dst.copy_(src)  # noqa: E731
        for _ in range(5):
            copy()
        spans = self._spans(copy, samples, before=self.evict_l2)
        return {"copy_us": median(spans), "bytes": 8 * half,
                "instrument": f"torch copy_ of the same bytes, L2 evicted before each sample (as a cold span), "
                              f"CUDA-event span around one copy, median of {samples}"}

    def control(self, samples: int) -> dict:
        copy = lambda: self.ctl_dst.copy_(self.ctl_src)  # noqa: E731
        probe = lambda: self.probe.add_(1.0)  # noqa: E731
        for _ in range(3):
            copy()
            probe()
        torch.cuda.synchronize()
        c = self._spans(copy, samples)
        p = self._spans(probe, samples)
        return {"copy_us": median(c), "copy_samples_us": c, "launch_probe_us": median(p), "launch_probe_samples_us": p}

    # -- per op ----------------------------------------------------------------------------------

    def prepare_op(self, spec: OpSpec) -> OpState:
        """Reads and verifies the case through the Rust registry (sha256,
        lengths, the op's own checks), uploads it, and builds the float64
        reference."""
        case = mage.read_case(spec.op, str(spec.case_path))
        if list(case.dims) != list(spec.dims):
            raise ValueError(f"{spec.case_path}: dims are {case.dims}; the manifest says {spec.dims}")
        info = op_info(spec.op)
        shapes = mage.input_shapes(spec.op, list(spec.dims))
        tensors = []
        for inp, shape, data in zip(info["inputs"], shapes, case.input_bytes()):
            dtype = torch.float32 if inp["elem"] == "f32" else torch.int32
            host = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
            tensors.append(host.to(self.device).reshape(shape))
        torch.cuda.synchronize()
        views = input_views(spec.op, [i["role"] for i in info["inputs"]], tensors, list(spec.dims))
        output_shape = mage.output_shape(spec.op, list(spec.dims))
        ref, ref_info = build_reference(spec, views, output_shape, self.golden_dir, self.use_golden)
        mag = torch_magnitude(spec.op, list(spec.dims), views)
        tol = dict(case.tolerance())
        if mag is None and tol.get("of_magnitude", 0.0) != 0.0:
            # No float64 magnitude here: the Rust registry's, for these inputs.
            raw = case.magnitudes()
            mag = torch.frombuffer(bytearray(raw), dtype=torch.float64).to(self.device)
        nbytes, flops = mage.cost(spec.op, list(spec.dims))
        return OpState(spec, tensors, views, ref.reshape(output_shape), None if mag is None else mag.reshape(output_shape),
                       output_shape, case.sha256,
                       {**tol, "source": "the op's tolerance for these inputs (Rust registry)"},
                       spec.current_picks, ref_info, {"bytes": nbytes, "flops": flops}, case)

    def implementations(self, state: OpState) -> list:
        spec = state.spec
        out = []
        outside = op_info(spec.op).get("outside_contract", {})
        for stage in spec.stages:
            name = rust_name(stage)
            if name in self.skip or "rust" in self.skip:
                continue
            try:
                impl = RustImpl(name, spec.op, stage, state.tensors, state.output_shape, self.device)
                if stage in outside:
                    impl.tolerance = state.case.tolerance(stage)
                    impl.info["outside_contract"] = outside[stage]
                    impl.notes.append(f"outside the op's contract ({outside[stage]}): checked under its own tolerance")
                out.append(impl)
            except Exception as e:  # noqa: BLE001
                out.append(Broken(name, "rust", stage, f"{type(e).__name__}: {e}"))
        tag = f"{spec.index}_{dims_label(spec.dims)}"
        numel = math.prod(state.output_shape)
        for name, kind in BUILTIN_IMPLS[spec.op]:
            if name in self.skip or kind in self.skip:
                continue
            try:
                if kind == "torch":
                    impl = build_torch(spec.op, state.views, numel, self.device, name)
                elif kind == "torch_compile":
                    impl = build_torch_compile(spec.op, state.views, numel, tag, self.device)
                elif kind == "cusparse":
                    impl = build_cusparse(state.views, spec.dims, numel, self.device)
                else:
                    impl = build_triton(spec.op, name, state.views, state.output_shape, self.device)
            except Exception as e:  # noqa: BLE001
                impl = Broken(name, kind, None, f"{type(e).__name__}: {e}")
            if (spec.op, name) in OUTSIDE_CONTRACT:
                like, why = OUTSIDE_CONTRACT[(spec.op, name)]
                impl.tolerance = state.case.tolerance(like)
                impl.info["outside_contract"] = why
                impl.notes.append(f"outside the op's contract ({why}): checked under {like}'s tolerance; never a best alternative")
            out.append(impl)
        torch.cuda.synchronize()
        return out

    def check(self, state: OpState, impl) -> dict:
        poison = impl.checked_call()
        out = impl.result()
        if out.dtype != torch.float32 or list(out.shape) != list(state.output_shape):
            raise ValueError(f"the output is {out.dtype} {list(out.shape)}; expected float32 {state.output_shape}")
        tol = getattr(impl, "tolerance", None) or state.tolerance
        block = compare_arrays(out, state.ref, tol["abs"], tol["rel"], state.mag, tol.get("of_magnitude", 0.0))
        block["poison"] = poison
        return block

    def reset_l2(self) -> None:
        mage.reset_persisting_l2(self.index)

    def evict_l2(self) -> None:
        """A memset of 256 MiB on the current stream (not a kernel)."""
        mage.evict_l2(self.index)

    def warm(self, impl, calls: int) -> None:
        for _ in range(calls):
            impl.call()
        torch.cuda.synchronize()

    def span(self, impl, samples: int, cold: bool) -> list[float]:
        return self._spans(impl.call, samples, before=self.evict_l2 if cold else None)

    def b2b(self, impl, calls: int) -> float:
        start, end = self.events
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            impl.call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls

    def _profiled(self, work) -> dict:
        """The Chrome trace of `work()` under the PyTorch profiler (CUDA
        activity: CUPTI kernel records)."""
        from torch.profiler import ProfilerActivity, profile

        if not self._profiler_warmed:  # the first session of a process may miss activity: spend it on a probe
            with profile(activities=[ProfilerActivity.CUDA]):
                self.probe.add_(1.0)
                torch.cuda.synchronize()
            self._profiler_warmed = True
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            work()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                return json.load(f)

    def kernel_time(self, impl, warmup: int, calls: int) -> dict:
        self.warm(impl, warmup)

        def work():
            for _ in range(calls):
                impl.call()

        return kernel_summary(self._profiled(work), calls)

    def kernel_segments(self, impls: list, per_call: list[int], warmup: int, calls: int, cold: bool) -> list[list[float]]:
        """Per-call kernel time of consecutive segments (`warmup` unmeasured
        calls, then `calls` measured ones, of each implementation in turn),
        all in one profiled run, split by kernels per call."""

        def work():
            for impl in impls:
                for _ in range(warmup):
                    impl.call()
                for _ in range(calls):
                    if cold:
                        self.evict_l2()
                    impl.call()
                torch.cuda.synchronize()

        events = kernel_events(self._profiled(work))
        return split_calls(events, [(warmup, calls, k) for k in per_call])

    def compile_token(self, impl):
        if impl.kind != "torch_compile":
            return None
        from torch._dynamo.utils import counters

        return counter_snapshot(counters)

    def recompiled(self, impl, token) -> dict:
        from torch._dynamo.utils import counters

        return counter_diff(token, counter_snapshot(counters))

    def release(self, state: OpState) -> None:
        state.tensors.clear()
        state.views.clear()
        state.ref = None
        torch.cuda.empty_cache()
