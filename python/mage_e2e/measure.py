"""The instruments (GPU only).

- **Kernel time per step**: the PyTorch profiler's CUDA activity (CUPTI
  kernel records) over ``calls`` back-to-back steps, every kernel's
  duration summed and divided by ``calls`` (``mage_compare.profparse``);
  memcpy and memset records are not kernels and are left out (none of
  the steps makes one).
- **Wall time per step**: CUDA events around ``calls`` back-to-back
  steps, divided by ``calls``: what the step costs the application, host
  launch path included; a CUDA graph's replay is what shortens it.

Both: warm-up first, then rounds in rotated order of the
implementations, medians over rounds. Nothing here changes a clock or a
device setting.
"""

from __future__ import annotations

import json
import os
import tempfile

import torch

from mage_compare.profparse import kernel_summary

from .agreement import median


def fp32_settings() -> dict:
    """True FP32 matmuls in torch and inductor (no TF32), as stated."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return {"float32_matmul_precision": torch.get_float32_matmul_precision(),
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}


class Instruments:
    def __init__(self):
        self._probe = torch.zeros(1, device="cuda")
        self._profiled(lambda: self._probe.add_(1.0))  # a process's first profile may miss activity

    @staticmethod
    def _profiled(work) -> dict:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            work()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                return json.load(f)

    def kernel(self, step, calls: int) -> dict:
        def work():
            for _ in range(calls):
                step()

        return kernel_summary(self._profiled(work), calls)

    @staticmethod
    def wall(step, calls: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls

    def measure(self, steps: dict, warmup: int, calls: int, rounds: int, progress=None) -> dict:
        """Kernel and wall time per step of each of ``steps`` (name →
        callable), medians over ``rounds`` in rotated order."""
        names = list(steps)
        for n in names:
            for _ in range(warmup):
                steps[n]()
        torch.cuda.synchronize()
        wall = {n: [] for n in names}
        kern = {n: [] for n in names}
        summary = {}
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                wall[n].append(self.wall(steps[n], calls))
                s = self.kernel(steps[n], calls)
                kern[n].append(s["kernel_us"])
                summary[n] = s
            if progress:
                progress(f"round {r + 1}/{rounds}")
        out = {}
        for n in names:
            k = [v for v in kern[n] if v is not None]
            out[n] = {
                "kernel_us": median(k) if k else None,
                "kernel_us_rounds": kern[n],
                "wall_us": median(wall[n]),
                "wall_us_rounds": wall[n],
                "kernels_per_step": summary[n]["kernels_per_call"],
                "top_kernels": summary[n]["kernels"][:6],
            }
        return out


def graphed(step):
    """``step`` captured in a CUDA graph (after a warm-up on a side
    stream, as torch.cuda.graph asks), returned as a replay that gives the
    captured outputs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()

    def replay():
        graph.replay()
        return out

    replay.graph = graph
    return replay


def relative_errors(outputs, reference, names) -> dict:
    """``‖o − r‖_F / ‖r‖_F`` of each output against its float64 reference."""
    errs = {}
    for name, o, r in zip(names, outputs, reference):
        r = r.detach().double()
        d = (o.detach().double() - r).norm()
        errs[name] = float(d / r.norm()) if float(r.norm()) > 0 else float(d)
    return errs
