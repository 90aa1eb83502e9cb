"""Loading and validating `<dir>/manifest.json` (pure Python).

The Rust side (`cargo xtask compare`) writes the manifest; its shape is

    {"namespace": str, "mode": "hot" | "cold" | "both",
     "environment": {str: any},
     "ops": [{"op": str, "dims": [int], "case_dir": str,
              "inputs": [{"file": str, "role": str, "elem": "f32" | "u32", "len": int}],
              "output_len": int, "output_shape": [int],
              "tolerance": {"abs": number, "rel": number},
              "rust": [{"name": str, "stage": str, "ptx": str,
                        "plan": {"scratch": [int],
                                 "launches": [{"kernel": str, "grid": [x, y, z], "block": [x, y, z],
                                               "shared_bytes": int,
                                               "args": [{"input": i} | {"output": true} | {"scratch": i}
                                                        | {"u32": v} | {"f32": v}]}]}}]}],
     "verdict_pairs": [{"op": str, "a": str, "b": str}]}

Paths are relative to the manifest's directory. A manifest that does not
have this shape is a :class:`ManifestError` naming the offending path
(``ops[0].rust[1].plan.launches[0].args[3]``). Problems that only concern
one op or one Rust entry (an op the harness does not know, lengths that
disagree with the dims, an input or scratch index out of range, a launch
over the hardware limits) do not stop the run: they are kept in
``OpSpec.problem`` / ``RustEntry.problem`` and reported for that op or
entry in the JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ops import BEST_ALTERNATIVE, BUILTIN_NAMES, check_against_def

MODES = ("hot", "cold", "both")
ELEMS = ("f32", "u32")
ARG_KINDS = ("input", "output", "scratch", "u32", "f32")

U32_MAX = 2**32 - 1
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS = 1024


class ManifestError(ValueError):
    """The manifest cannot be used at all."""


@dataclass(frozen=True)
class Arg:
    kind: str  # input | output | scratch | u32 | f32
    value: Any = None  # input/scratch index, u32 int, f32 float; None for output

    def as_json(self) -> dict:
        return {self.kind: True if self.kind == "output" else self.value}


@dataclass
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: list[Arg]


@dataclass
class Plan:
    scratch: list[int]
    launches: list[Launch]


@dataclass
class RustEntry:
    name: str
    stage: str
    ptx: str
    ptx_path: Path
    plan: Plan
    problem: str | None = None


@dataclass
class InputSpec:
    file: str
    role: str
    elem: str
    len: int


@dataclass
class OpSpec:
    index: int
    op: str
    dims: list[int]
    case_dir: str
    case_path: Path
    inputs: list[InputSpec]
    output_len: int
    output_shape: list[int]
    tol_abs: float
    tol_rel: float
    rust: list[RustEntry]
    problem: str | None = None

    @property
    def label(self) -> str:
        return f"{self.op} {'x'.join(str(d) for d in self.dims)}"


@dataclass
class VerdictPair:
    op: str
    a: str
    b: str


@dataclass
class Manifest:
    dir: Path
    namespace: str
    mode: str
    environment: dict
    ops: list[OpSpec]
    verdict_pairs: list[VerdictPair] = field(default_factory=list)

    @property
    def hot(self) -> bool:
        return self.mode in ("hot", "both")

    @property
    def cold(self) -> bool:
        return self.mode in ("cold", "both")


# -- small typed getters -------------------------------------------------------


def _fail(path: str, msg: str) -> ManifestError:
    return ManifestError(f"manifest.json: {path}: {msg}")


def _get(obj: dict, key: str, path: str) -> Any:
    if not isinstance(obj, dict):
        raise _fail(path, f"expected an object, found {type(obj).__name__}")
    if key not in obj:
        raise _fail(path, f"missing key `{key}`")
    return obj[key]


def _int(v: Any, path: str, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _fail(path, f"expected an integer, found {json.dumps(v)}")
    if v < lo:
        raise _fail(path, f"expected an integer >= {lo}, found {v}")
    return v


def _num(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(path, f"expected a number, found {json.dumps(v)}")
    return float(v)


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(path, f"expected a non-empty string, found {json.dumps(v)}")
    return v


def _list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise _fail(path, f"expected a list, found {type(v).__name__}")
    return v


def _dim3(v: Any, path: str) -> tuple[int, int, int]:
    v = _list(v, path)
    if len(v) != 3:
        raise _fail(path, f"expected [x, y, z], found {len(v)} values")
    return tuple(_int(x, f"{path}[{i}]", lo=1) for i, x in enumerate(v))  # type: ignore[return-value]


# -- parsing --------------------------------------------------------------------


def parse_arg(obj: Any, path: str) -> Arg:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise _fail(path, f"an argument is an object with exactly one of {', '.join(ARG_KINDS)}; found {json.dumps(obj)}")
    (kind, v), = obj.items()
    if kind == "input" or kind == "scratch":
        return Arg(kind, _int(v, f"{path}.{kind}"))
    if kind == "output":
        if v is not True:
            raise _fail(path, f"`output` must be true, found {json.dumps(v)}")
        return Arg("output")
    if kind == "u32":
        n = _int(v, f"{path}.u32")
        if n > U32_MAX:
            raise _fail(path, f"u32 value {n} does not fit in 32 bits")
        return Arg("u32", n)
    if kind == "f32":
        return Arg("f32", _num(v, f"{path}.f32"))
    raise _fail(path, f"unknown argument kind `{kind}` (one of {', '.join(ARG_KINDS)})")


def parse_plan(obj: Any, path: str) -> Plan:
    scratch = [_int(s, f"{path}.scratch[{i}]") for i, s in enumerate(_list(_get(obj, "scratch", path), f"{path}.scratch"))]
    launches = []
    for i, l in enumerate(_list(_get(obj, "launches", path), f"{path}.launches")):
        lp = f"{path}.launches[{i}]"
        args = [parse_arg(a, f"{lp}.args[{j}]") for j, a in enumerate(_list(_get(l, "args", lp), f"{lp}.args"))]
        launches.append(
            Launch(
                kernel=_str(_get(l, "kernel", lp), f"{lp}.kernel"),
                grid=_dim3(_get(l, "grid", lp), f"{lp}.grid"),
                block=_dim3(_get(l, "block", lp), f"{lp}.block"),
                shared_bytes=_int(l.get("shared_bytes", 0), f"{lp}.shared_bytes"),
                args=args,
            )
        )
    if not launches:
        raise _fail(path, "a plan needs at least one launch")
    return Plan(scratch, launches)


def plan_problem(plan: Plan, n_inputs: int) -> str | None:
    """Why a plan cannot be launched as written, or None."""
    for i, l in enumerate(plan.launches):
        at = f"launch {i} (`{l.kernel}`)"
        for axis, (g, lim) in enumerate(zip(l.grid, MAX_GRID)):
            if g > lim:
                return f"{at}: grid {'xyz'[axis]} = {g} exceeds {lim}"
        for axis, (b, lim) in enumerate(zip(l.block, MAX_BLOCK)):
            if b > lim:
                return f"{at}: block {'xyz'[axis]} = {b} exceeds {lim}"
        if l.block[0] * l.block[1] * l.block[2] > MAX_THREADS:
            return f"{at}: block {list(l.block)} has more than {MAX_THREADS} threads"
        for j, a in enumerate(l.args):
            if a.kind == "input" and a.value >= n_inputs:
                return f"{at}, argument {j}: input {a.value}, but the op has {n_inputs} inputs"
            if a.kind == "scratch" and a.value >= len(plan.scratch):
                return f"{at}, argument {j}: scratch {a.value}, but the plan has {len(plan.scratch)} scratch buffers"
            if a.kind == "f32" and not math.isfinite(a.value):
                return f"{at}, argument {j}: f32 value {a.value} is not finite"
    return None


def parse_op(obj: Any, index: int, base: Path) -> OpSpec:
    path = f"ops[{index}]"
    op = _str(_get(obj, "op", path), f"{path}.op")
    dims = [_int(d, f"{path}.dims[{i}]") for i, d in enumerate(_list(_get(obj, "dims", path), f"{path}.dims"))]
    case_dir = _str(_get(obj, "case_dir", path), f"{path}.case_dir")
    inputs = []
    for i, inp in enumerate(_list(_get(obj, "inputs", path), f"{path}.inputs")):
        ip = f"{path}.inputs[{i}]"
        elem = _str(_get(inp, "elem", ip), f"{ip}.elem")
        if elem not in ELEMS:
            raise _fail(f"{ip}.elem", f"unknown element type `{elem}` (f32 or u32)")
        file = _str(_get(inp, "file", ip), f"{ip}.file")
        if "/" in file or "\\" in file or file in (".", ".."):
            raise _fail(f"{ip}.file", f"`{file}` must be a plain file name inside the case directory")
        inputs.append(InputSpec(file, str(inp.get("role", "")), elem, _int(_get(inp, "len", ip), f"{ip}.len")))
    output_len = _int(_get(obj, "output_len", path), f"{path}.output_len")
    output_shape = [_int(d, f"{path}.output_shape[{i}]") for i, d in enumerate(_list(_get(obj, "output_shape", path), f"{path}.output_shape"))]
    tol = _get(obj, "tolerance", path)
    tol_abs = _num(_get(tol, "abs", f"{path}.tolerance"), f"{path}.tolerance.abs")
    tol_rel = _num(_get(tol, "rel", f"{path}.tolerance"), f"{path}.tolerance.rel")
    if tol_abs < 0 or tol_rel < 0 or not (math.isfinite(tol_abs) and math.isfinite(tol_rel)):
        raise _fail(f"{path}.tolerance", "abs and rel must be finite and >= 0")
    rust = []
    names: set[str] = set()
    for i, r in enumerate(_list(obj.get("rust", []), f"{path}.rust")):
        rp = f"{path}.rust[{i}]"
        name = _str(_get(r, "name", rp), f"{rp}.name")
        if name in names:
            raise _fail(f"{rp}.name", f"`{name}` appears twice for this op")
        if name in BUILTIN_NAMES or name == BEST_ALTERNATIVE:
            raise _fail(f"{rp}.name", f"`{name}` is the name of a built-in implementation")
        names.add(name)
        ptx = _str(_get(r, "ptx", rp), f"{rp}.ptx")
        plan = parse_plan(_get(r, "plan", rp), f"{rp}.plan")
        entry = RustEntry(name, _str(_get(r, "stage", rp), f"{rp}.stage"), ptx, base / ptx, plan)
        entry.problem = plan_problem(plan, len(inputs))
        rust.append(entry)
    spec = OpSpec(index, op, dims, case_dir, base / case_dir, inputs, output_len, output_shape, tol_abs, tol_rel, rust)
    spec.problem = check_against_def(op, dims, [i.__dict__ for i in inputs], output_len, output_shape)
    return spec


def parse_manifest(obj: Any, base: Path) -> Manifest:
    if not isinstance(obj, dict):
        raise ManifestError("manifest.json: the top level must be an object")
    namespace = _str(_get(obj, "namespace", "(top)"), "namespace")
    mode = _str(_get(obj, "mode", "(top)"), "mode")
    if mode not in MODES:
        raise _fail("mode", f"`{mode}` is not one of {', '.join(MODES)}")
    env = obj.get("environment", {})
    if not isinstance(env, dict):
        raise _fail("environment", "expected an object")
    ops_raw = _list(_get(obj, "ops", "(top)"), "ops")
    if not ops_raw:
        raise _fail("ops", "the manifest lists no ops")
    ops = [parse_op(o, i, base) for i, o in enumerate(ops_raw)]
    pairs = []
    for i, p in enumerate(_list(obj.get("verdict_pairs", []), "verdict_pairs")):
        pp = f"verdict_pairs[{i}]"
        pair = VerdictPair(_str(_get(p, "op", pp), f"{pp}.op"), _str(_get(p, "a", pp), f"{pp}.a"), _str(_get(p, "b", pp), f"{pp}.b"))
        if pair.a == pair.b:
            raise _fail(pp, f"compares `{pair.a}` with itself")
        pairs.append(pair)
    return Manifest(base, namespace, mode, env, ops, pairs)


def load_manifest(directory: str | Path) -> Manifest:
    """Reads and validates `<directory>/manifest.json`."""
    base = Path(directory)
    path = base / "manifest.json"
    if not base.is_dir():
        raise ManifestError(f"{base}: not a directory")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path}: no manifest (the directory `cargo xtask compare` prepares has one)") from None
    except OSError as e:
        raise ManifestError(f"{path}: {e}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{path}: not valid JSON: {e}") from None
    return parse_manifest(obj, base)
