"""comparison.json: its schema, and the atomic writer.

The file is written with `json.dump(..., allow_nan=False)` after every
non-finite float has become null, to a temporary file in the same
directory, flushed, fsync'ed and moved over the target with
`os.replace`, after each phase (``complete`` false) and at the end
(``complete`` true). A reader therefore sees either the previous complete
write or the new one, never a torn file.

Schema ``mage-compare/2``. Times are microseconds (float); every number
that is not measured is null. ``dims`` are the manifest's dims.

Top level::

    schema          "mage-compare/2"
    complete        bool: every phase ran (false in intermediate writes or
                    after an abort; see `error`)
    namespace       str, from the manifest
    mode            "hot" | "cold" | "both", from the manifest
    manifest        str: path of the manifest read
    started_utc     "YYYY-MM-DDTHH:MM:SSZ"
    finished_utc    same, or null while running
    error           null, or why the session stopped (a manifest that
                    cannot be used, no GPU, an abort); `results` then
                    holds what was measured before
    environment     object:
        manifest        the manifest's `environment` block, verbatim
        python, torch, torch_cuda, triton, numpy, cupy: version strings or null
        mage_module     {commit, path}: the Python module `mage` that launched
                        the Rust stages (its PTX is built in)
        l2_evict_bytes  bytes the cold mode's eviction memset writes
        platform        str
        gpu             {name, uuid, capability "9.0", sm_count, l2_bytes,
                         total_memory_bytes}
        torch_settings  {float32_matmul_precision_before, float32_matmul_precision,
                         matmul_allow_tf32, cudnn_allow_tf32, compile: {mode, fullgraph, dynamic}}
        ptx_sha256      {package: sha256 hex of its PTX}, from the manifest
        inputs_sha256   {"<label> (<case_dir>)": {file: sha256 hex}}: every verified
                        input (also in ops[].inputs_sha256)
        nvidia_smi      {start: snapshot, end: snapshot}; a snapshot is
                        {utc, command, gpu: {name, driver_version, sm_mhz,
                         mem_mhz, pstate, raw} | null, gpus: [same], error}
    procedure       object: settings (sample counts: first_warmup,
                    segment_warmup, span_samples, span_rounds, b2b_calls,
                    b2b_runs, profiler_warmup, profiler_calls,
                    verdict_rounds, verdict_samples, control_samples,
                    drift_limit, spread), instruments
                    {span, b2b, kernel, control, launch_probe: text},
                    modes {hot, cold: text}, phases [text], rotation,
                    l2, poison (text)
    ceilings        {fp32_flops_per_us, sgemm_8192_us, instrument} | {error}: the
                    FP32 rate measured at the session's start
    control         object (null only in a report whose `error` stopped the
                    session before it started):
        instrument, launch_probe_instrument   text
        start_us, end_us   median span of the control copy at start / end
        drift       (end_us - start_us) / start_us
        flagged     abs(drift) > limit (or the control could not be measured)
        limit       0.03
        max_abs_checkpoint_drift   largest abs relative change of any checkpoint from start
        checkpoints [{at: "start" | "after_event_timing" | "after_profiler" | "end",
                      utc, copy_us, copy_samples_us: [float],
                      launch_probe_us, launch_probe_samples_us: [float], error}]
    ops             one per manifest workload, in manifest order:
        {op, dims, generator, label "4096x768" | "4096x64x65536 power-law",
         case_dir,
         inputs_sha256: {file: sha256 hex} | null (verified by the Rust
                         registry against inputs.sha256.json),
         tolerance: {abs, rel, source}: the op's tolerance for these inputs,
         current_picks: the stage `current` picks for these inputs,
         floor: {bytes, flops, copy_us (a device copy of the same bytes,
                 hot), copy_instrument, compute_us (flops at the
                 ceilings' FP32 rate), floor_us (the larger), bound
                 "memory" | "compute", cold_copy_us and
                 cold_copy_instrument (in cold mode: the copy with L2
                 evicted before each sample, timed like a cold span),
                 error} | null,
         reference: {primary: text, golden: {path, seconds, max_abs_diff,
                     agree, error} | null, seconds} | null,
         implementations: [name],
         round_orders: {hot: [[name]] | null, cold: [[name]] | null}
                       (the order each span round measured in),
         best_alternative: {implementation, chosen_by: "hot.kernel_us" |
                            "hot.span.median_us" | "cold.span.median_us",
                            value_us, candidates: {name: value_us}} | null
                           (never an implementation outside the op's
                           contract: info.outside_contract),
         notes: [str],
         error: null | str (the op was not run: sha256 mismatch, missing
                file, unknown op, bad CSR, upload failure...; no results
                rows exist for it)}
    results         one per implementation of every workload that ran:
        op, dims, generator, label, case_dir
        implementation  "rust current" | "rust mage-006" | ... | "torch" |
                        "torch_compile" | "triton" | "triton_tuned" |
                        "triton_tf32x3" | "torch_tf32" | "cusparse"
        kind            "rust" | "torch" | "torch_compile" | "triton" | "cusparse"
        stage           the Rust stage ("current", "mage-006", ...) or null
        output          "preallocated" (written into a buffer of its own,
                        poisoned before each check) | "returned" (a new
                        tensor per call, checked as returned; see
                        correct_*.poison)
        correct_before, correct_after   a check block or null (not run):
            {passed, checked, failures, nan_count, max_abs_err,
             rel_l2_err (Frobenius-relative), max_rel_err (max abs
             error over max |ref|), first_failures: [{index, out, ref}],
             tolerance: {abs, rel},
             poison: {output: "preallocated", pattern: "0x7FC0BEEF"} |
                     {output: "returned", blocks_poisoned: int,
                      result_in_poisoned_block: bool}}
            correct_before runs before any timing; correct_after after
            every timing loop and verdict of the session
        hot             null (not measured, or the implementation failed) or
            {mode: "hot",
             kernel_us: float | null, kernels_per_call: float | null,
             kernel_instrument: "kernel",
             kernels: [{name, per_call, us_per_call}] | null,
             profiler_excluded: {gpu_memcpy|gpu_memset: count} (absent if not profiled),
             span: {median_us, round_medians_us: [float], range_us
                    (max - min of the round medians), samples_us: [float]
                    (every sample, round after round), instrument: "span",
                    mode: "hot"} | null (mode "cold"),
             b2b_us: {median, runs: [float], calls_per_run, instrument:
                      "b2b", mode: "hot"} | null (mode "cold")}
            (in mode "cold" the block holds only the profiler's kernel time,
            which is always measured warm)
        cold            null (mode "hot", or failed) or
            {mode: "cold", span: {... as hot.span, mode: "cold"}}
            (cold mode has no b2b: an eviction between back-to-back calls
            would be inside the span)
        l2_persisting_resets  int: cuCtxResetPersistingL2Cache calls made
                        before this implementation's segments
        recompiled      null (not torch_compile) | bool: torch.compile's
                        Dynamo counters moved during a timed segment
                        (notes say where)
        info            object, per kind: rust {stage_run (the stage that
                        ran: `current`'s pick for "rust current"),
                        by_current, launches_per_call, launches: [{kernel,
                        grid, block, shared_bytes}], scratch};
                        triton {compile_seconds, precision, config} or, for
                        triton_tuned, {compile_seconds (tuning included),
                        precision, best_config: {kwargs, num_warps,
                        num_stages}, configs}; torch and cusparse {function};
                        torch_compile {compile: {function, mode, dynamic,
                        fullgraph, warm_calls, compile_and_warm_seconds}}
        notes           [str]
        error           null | str: not built, wrong (before or after
                        timing), or a failed measurement; an
                        implementation with an error has hot and cold null
                        (its times are not kept) except where it failed
                        only its profiler run (then notes say so)
    verdicts        one per (pair, instrument, mode); the automatic pair
                    {a: "rust current", b: "best alternative"} first for
                    each workload that has "rust current", then the
                    manifest's pairs for that workload:
        op, dims, label, a, b   names as given ("best alternative" allowed)
        a_implementation, b_implementation   the implementations measured
        auto            bool
        mode            "hot" | "cold"
        instrument      "kernel" (per-call GPU kernel time; the verdicts
                        that say which kernel is faster) | "span" (event
                        span around one call: the launch path, only where
                        the manifest asks for span verdicts)
        instrument_text what the instrument measures
        order           "A-B-B-A"
        rounds, samples_per_segment   8, 50 (calls per segment)
        ratios          [float | null]: per round median(A)/median(B)
        median_ratio    float
        spread          {kind: "min-max" | "iqr", low, high}: the spread
                        the verdict used
        iqr, minmax     {low, high}: both spreads of the ratios
        round_medians_us {a: [float], b: [float]}
        samples_us      {a: [[float] per round], b: [[float] per round]}:
                        per-call kernel µs, or span µs
        verdict         "FASTER" (A faster: spread.high < 0.98) |
                        "SLOWER" (spread.low > 1.02) | "SAME" (median in
                        [0.98, 1.02] and spread in [0.95, 1.05]) |
                        "UNCERTAIN" | null (not measured: see error)
        note            null | str
        error           null | str
    flags           [str]: session-level warnings (control drift, clock or
                    pstate changes between the nvidia-smi snapshots)
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path, PurePath
from typing import Any


def sanitize(obj: Any) -> Any:
    """A JSON-ready copy: non-finite floats become None, tuples lists,
    paths strings, dict keys strings."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, dict):
        return {str(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    if isinstance(obj, PurePath):
        return str(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return sanitize(obj.item())
    return str(obj)


def write_report(path: str | Path, report: dict) -> None:
    """Writes `report` to `path` atomically (temp file + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(sanitize(report), allow_nan=False, indent=1)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
