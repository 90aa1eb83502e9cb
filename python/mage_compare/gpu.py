"""The GPU backend (GPU only): torch for memory, events and the profiler,
cuda-python's driver bindings for the Rust PTX.

Everything runs on torch's current stream of device 0, in torch's primary
context: torch is initialised first, then the driver bindings take the
current context (`cuCtxGetCurrent`) and load each PTX module into it, so
Rust kernels, Triton kernels and torch kernels share one context and one
stream. Nothing here changes a clock or a device setting; the only
function attribute set is the opt-in to more than 48 KiB of dynamic
shared memory a Rust launch asks for.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from . import smi
from .impls import Broken, RustImpl, build_cusparse, build_torch, build_torch_compile, build_triton
from .manifest import Manifest, OpSpec
from .numeric import compare_arrays
from .ops import BUILTIN_IMPLS, dims_label
from .profparse import counter_diff, counter_snapshot, kernel_summary
from .reference import build_reference, neighbor_dst, u32_to_int64
from .stats import median

DEFAULT_SHARED_LIMIT = 48 << 10
CONTROL_BYTES = 256 << 20
JIT_LOG_BYTES = 1 << 16


class CudaError(RuntimeError):
    pass


class CudaDriver:
    """The few driver calls the harness makes, each result checked."""

    def __init__(self):
        try:
            from cuda.bindings import driver as cu
        except ImportError:  # cuda-python before 12.6
            from cuda import cuda as cu  # type: ignore[no-redef]
        self.cu = cu
        ctx = self._call(cu.cuCtxGetCurrent, what="cuCtxGetCurrent")
        if ctx is None or int(ctx) == 0:
            raise CudaError("no current CUDA context after torch's initialisation")
        self.ctx = ctx
        self.modules: dict[str, Any] = {}
        self._shared_set: dict[int, int] = {}

    def _name(self, err) -> str:
        try:
            r = self.cu.cuGetErrorName(err)
            name = r[1] if isinstance(r, tuple) else None
            if isinstance(name, bytes):
                return name.decode()
        except Exception:  # noqa: BLE001
            pass
        return getattr(err, "name", str(err))

    def _call(self, fn, *args, what: str):
        res = fn(*args)
        err, rest = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise CudaError(f"{what}: {self._name(err)}")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def driver_version(self) -> str:
        v = self._call(self.cu.cuDriverGetVersion, what="cuDriverGetVersion")
        return f"{v // 1000}.{v % 1000 // 10}"

    def load_module(self, key: str, image: bytes):
        """JIT-loads PTX (once per path) with the JIT's error log captured."""
        if key in self.modules:
            return self.modules[key]
        if b"\0" in image:
            raise CudaError(f"{key}: the PTX contains a NUL byte")
        buf = ctypes.create_string_buffer(image)  # NUL-terminated
        cu = self.cu
        err_log = bytearray(JIT_LOG_BYTES)
        opts = [cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER, cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        try:
            res = cu.cuModuleLoadDataEx(ctypes.addressof(buf), len(opts), opts, [err_log, JIT_LOG_BYTES])
        except TypeError:  # bindings that do not take these option values: no log
            res = cu.cuModuleLoadData(ctypes.addressof(buf))
        err, module = res[0], res[1]
        if err != cu.CUresult.CUDA_SUCCESS:
            log = err_log.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()
            raise CudaError(f"loading {key}: {self._name(err)}" + (f": {log}" if log else ""))
        self.modules[key] = module
        return module

    def function(self, module, name: str):
        return self._call(self.cu.cuModuleGetFunction, module, name.encode(), what=f"cuModuleGetFunction({name})")

    def allow_shared(self, func, nbytes: int) -> None:
        if nbytes <= DEFAULT_SHARED_LIMIT:
            return
        attr = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        now = self._call(self.cu.cuFuncGetAttribute, attr, func, what="cuFuncGetAttribute")
        if now is not None and now >= nbytes:
            return
        self._call(self.cu.cuFuncSetAttribute, func, attr, int(nbytes), what=f"allowing {nbytes} B of dynamic shared memory")

    def launch(self, func, grid, block, shared: int, stream, params_addr: int, kernel: str) -> None:
        res = self.cu.cuLaunchKernel(func, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, stream,
                                     params_addr, 0)
        err = res[0] if isinstance(res, tuple) else res
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise CudaError(f"cuLaunchKernel `{kernel}` (grid {list(grid)}, block {list(block)}, {shared} B shared): "
                            f"{self._name(err)}")

    def reset_persisting_l2(self) -> None:
        self._call(self.cu.cuCtxResetPersistingL2Cache, what="cuCtxResetPersistingL2Cache")

    def persisting_l2_limit(self) -> int | None:
        return self._call(self.cu.cuCtxGetLimit, self.cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                          what="cuCtxGetLimit(PERSISTING_L2_CACHE_SIZE)")

    def stream(self, handle: int):
        return self.cu.CUstream(handle)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@dataclass
class OpState:
    spec: OpSpec
    bases: list  # padded device tensors, one per input, kernel-argument order
    views: dict  # typed, shaped views by role name (+ derived int64 tensors)
    ref: Any  # float64 reference on the device
    reference_info: dict = field(default_factory=dict)


def _views(spec: OpSpec, flat: list) -> dict:
    d = spec.dims
    if spec.op == "matmul":
        m, n, k = d
        return {"a": flat[0].view(m, k), "b": flat[1].view(k, n)}
    if spec.op == "layernorm":
        return {"x": flat[0].view(d[0], d[1]), "gamma": flat[1], "beta": flat[2]}
    if spec.op == "gelu":
        return {"x": flat[0].view(d[0], d[1]), "bias": flat[1]}
    if spec.op == "triangle":
        n, c = d
        return {"a": flat[0].view(n, n, c), "b": flat[1].view(n, n, c)}
    if spec.op == "neighbor":
        n, width, edges, _ = d
        rowptr64 = u32_to_int64(flat[2])
        indices64 = u32_to_int64(flat[3])
        return {"x": flat[0].view(n, width), "w": flat[1], "rowptr": flat[2], "indices": flat[3],
                "rowptr64": rowptr64, "indices64": indices64, "dst64": neighbor_dst(rowptr64, n, edges)}
    raise ValueError(f"unknown op {spec.op}")


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
        self.cuda: CudaDriver | None = None
        self.cuda_error: str | None = None
        try:
            self.cuda = CudaDriver()
        except Exception as e:  # noqa: BLE001 - Rust entries report it
            self.cuda_error = f"cuda-python driver bindings unavailable: {type(e).__name__}: {e}"
        self.stream_handle = torch.cuda.current_stream().cuda_stream
        self.stream = self.cuda.stream(self.stream_handle) if self.cuda else None
        self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        self.evict = torch.empty(settings.evict_bytes // 4, dtype=torch.float32, device=self.device)
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
        ptx = {}
        for spec in self.manifest.ops:
            for r in spec.rust:
                if r.ptx not in ptx:
                    try:
                        ptx[r.ptx] = hashlib.sha256(r.ptx_path.read_bytes()).hexdigest()
                    except OSError as e:
                        ptx[r.ptx] = f"unreadable: {e}"
        limit = None
        if self.cuda:
            try:
                limit = self.cuda.persisting_l2_limit()
            except Exception as e:  # noqa: BLE001
                limit = f"unreadable: {e}"
        return {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "triton": triton_version,
            "numpy": _version("numpy"),
            "cuda_python": _version("cuda-python") or _version("cuda-bindings"),
            "cuda_bindings": _version("cuda-bindings"),
            "cupy": _version("cupy-cuda13x"),
            "platform": platform.platform(),
            "gpu": {
                "name": p.name,
                "uuid": str(getattr(p, "uuid", "")) or None,
                "capability": f"{p.major}.{p.minor}",
                "sm_count": p.multi_processor_count,
                "l2_bytes": getattr(p, "L2_cache_size", None),
                "total_memory_bytes": p.total_memory,
                "driver_cuda_version": self.cuda.driver_version() if self.cuda else None,
            },
            "torch_settings": self.torch_settings,
            "l2_persisting_limit_bytes": limit,
            "cuda_driver_bindings": self.cuda_error or "ok",
            "ptx_sha256": ptx,
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

    def prepare_op(self, spec: OpSpec, datas: list[bytes]) -> OpState:
        bases, flat = [], []
        for inp, data in zip(spec.inputs, datas):
            dtype = torch.float32 if inp.elem == "f32" else torch.int32
            base = torch.empty(max(inp.len, 1), dtype=dtype, device=self.device)
            if inp.len:
                base[: inp.len].copy_(torch.frombuffer(bytearray(data), dtype=dtype))
            bases.append(base)
            flat.append(base[: inp.len])
        torch.cuda.synchronize()
        views = _views(spec, flat)
        ref, info = build_reference(spec, views, self.golden_dir, self.use_golden)
        return OpState(spec, bases, views, ref.reshape(spec.output_shape), info)

    def implementations(self, state: OpState) -> list:
        spec = state.spec
        out = []
        for entry in spec.rust:
            if entry.name in self.skip or "rust" in self.skip:
                continue
            if entry.problem:
                out.append(Broken(entry.name, "rust", entry.stage, f"plan problem: {entry.problem}"))
                continue
            if self.cuda is None:
                out.append(Broken(entry.name, "rust", entry.stage, self.cuda_error or "no CUDA driver bindings"))
                continue
            try:
                out.append(RustImpl(entry, self.cuda, self.stream, state.bases, spec.output_shape, self.device))
            except Exception as e:  # noqa: BLE001
                out.append(Broken(entry.name, "rust", entry.stage, f"{type(e).__name__}: {e}"))
        tag = f"{spec.index}_{dims_label(spec.dims)}"
        for name, kind in BUILTIN_IMPLS[spec.op]:
            if name in self.skip or kind in self.skip:
                continue
            try:
                if kind == "torch":
                    impl = build_torch(spec.op, state.views, spec.output_len, self.device)
                elif kind == "torch_compile":
                    impl = build_torch_compile(spec.op, state.views, spec.output_len, tag, self.device)
                elif kind == "cusparse":
                    impl = build_cusparse(state.views, spec.dims, spec.output_len, self.device)
                else:
                    impl = build_triton(spec.op, name, state.views, spec.output_shape, self.device)
            except Exception as e:  # noqa: BLE001
                impl = Broken(name, kind, None, f"{type(e).__name__}: {e}")
            out.append(impl)
        torch.cuda.synchronize()
        return out

    def check(self, state: OpState, impl) -> dict:
        poison = impl.checked_call()
        out = impl.result()
        spec = state.spec
        if out.dtype != torch.float32 or out.numel() != spec.output_len:
            raise ValueError(f"the output is {out.dtype} with {out.numel()} values; expected float32 with {spec.output_len}")
        block = compare_arrays(out, state.ref, spec.tol_abs, spec.tol_rel)
        block["poison"] = poison
        return block

    def reset_l2(self) -> None:
        if self.cuda is None:
            raise CudaError(self.cuda_error or "no CUDA driver bindings")
        self.cuda.reset_persisting_l2()

    def warm(self, impl, calls: int) -> None:
        for _ in range(calls):
            impl.call()
        torch.cuda.synchronize()

    def span(self, impl, samples: int, cold: bool) -> list[float]:
        return self._spans(impl.call, samples, before=self.evict.zero_ if cold else None)

    def b2b(self, impl, calls: int) -> float:
        start, end = self.events
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            impl.call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls

    def kernel_time(self, impl, warmup: int, calls: int) -> dict:
        from torch.profiler import ProfilerActivity, profile

        if not self._profiler_warmed:  # the first session of a process may miss activity: spend it on a probe
            with profile(activities=[ProfilerActivity.CUDA]):
                self.probe.add_(1.0)
                torch.cuda.synchronize()
            self._profiler_warmed = True
        self.warm(impl, warmup)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                impl.call()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                trace = json.load(f)
        return kernel_summary(trace, calls)

    def compile_token(self, impl):
        if impl.kind != "torch_compile":
            return None
        from torch._dynamo.utils import counters

        return counter_snapshot(counters)

    def recompiled(self, impl, token) -> dict:
        from torch._dynamo.utils import counters

        return counter_diff(token, counter_snapshot(counters))

    def release(self, state: OpState) -> None:
        state.bases.clear()
        state.views.clear()
        state.ref = None
        torch.cuda.empty_cache()
