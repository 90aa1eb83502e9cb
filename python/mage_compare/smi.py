"""nvidia-smi, read only: name, driver, clocks and performance state.

Runs `nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,pstate
--format=csv,noheader,nounits` (optionally `--id=<uuid>`) and never any
command that changes a setting.
"""

from __future__ import annotations

import subprocess
import time

QUERY = "name,driver_version,clocks.sm,clocks.mem,pstate"
FIELDS = ("name", "driver_version", "sm_mhz", "mem_mhz", "pstate")


def _num(s: str) -> int | float | None:
    try:
        f = float(s)
    except ValueError:
        return None
    return int(f) if f.is_integer() else f


def parse_line(line: str) -> dict:
    """One csv,noheader,nounits line; `[N/A]`/`N/A` and unparsable clocks become null."""
    parts = [p.strip() for p in line.split(",")]
    out: dict = {"raw": line.strip()}
    if len(parts) != len(FIELDS):
        out["error"] = f"expected {len(FIELDS)} fields, found {len(parts)}"
        for k in FIELDS:
            out.setdefault(k, None)
        return out
    for k, v in zip(FIELDS, parts):
        missing = v == "" or "N/A" in v or v.startswith("[")
        if k in ("sm_mhz", "mem_mhz"):
            out[k] = None if missing else _num(v)
        else:
            out[k] = None if missing else v
    return out


def parse_output(text: str) -> list[dict]:
    return [parse_line(l) for l in text.splitlines() if l.strip()]


def query(uuid: str | None = None, timeout: float = 20.0) -> dict:
    """A snapshot: {utc, gpus: [parsed lines], gpu: the one line (or the
    first), command, error}. Never raises."""
    cmd = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]
    snap: dict = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "error": None}
    attempts = [cmd + [f"--id={uuid}"], cmd] if uuid else [cmd]
    errors = []
    for c in attempts:
        try:
            p = subprocess.run(c, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(f"{' '.join(c)}: {e}")
            continue
        if p.returncode != 0:
            errors.append(f"{' '.join(c)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")
            continue
        gpus = parse_output(p.stdout)
        snap.update(command=" ".join(c), gpus=gpus, gpu=gpus[0] if gpus else None)
        if len(gpus) > 1:
            errors.append(f"{len(gpus)} GPUs listed; `gpu` is the first")
        snap["error"] = "; ".join(errors) or None
        return snap
    snap.update(command=" ".join(cmd), gpus=[], gpu=None, error="; ".join(errors))
    return snap
