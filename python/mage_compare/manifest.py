"""Loading and validating `<dir>/manifest.json` (pure Python).

The Rust side (`cargo xtask compare`) writes the manifest; its shape is

    {"namespace": str, "mode": "hot" | "cold" | "both",
     "span_verdicts": bool (optional, default false),
     "environment": {str: any},
     "ops": [{"op": str, "dims": [int], "generator": str, "label": str,
              "case_dir": str,
              "stages": ["current", "mage-001", ...],
              "current_picks": str (optional: the stage `current` picks here),
              "pairs": [{"a": str, "b": str}]}]}

`case_dir` is relative to the manifest's directory. What an op is (its
inputs, shapes, tolerance, stages) is not in the manifest: the harness asks
the Python module `mage` (the Rust registry) when it reads the case. A
manifest that does not have this shape is a :class:`ManifestError` naming
the offending path (``ops[0].pairs[1].a``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ops import BEST_ALTERNATIVE, BUILTIN_NAMES, rust_name

MODES = ("hot", "cold", "both")


class ManifestError(ValueError):
    """The manifest cannot be used at all."""


@dataclass
class OpSpec:
    index: int
    op: str
    dims: list[int]
    generator: str
    label: str
    case_dir: str
    case_path: Path
    stages: list[str]
    pairs: list[tuple[str, str]] = field(default_factory=list)
    current_picks: str | None = None

    @property
    def title(self) -> str:
        return f"{self.op} {self.label}"


@dataclass
class Manifest:
    dir: Path
    namespace: str
    mode: str
    environment: dict
    ops: list[OpSpec]
    span_verdicts: bool = False

    @property
    def hot(self) -> bool:
        return self.mode in ("hot", "both")

    @property
    def cold(self) -> bool:
        return self.mode in ("cold", "both")


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


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(path, f"expected a non-empty string, found {json.dumps(v)}")
    return v


def _list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise _fail(path, f"expected a list, found {type(v).__name__}")
    return v


def parse_op(obj: Any, index: int, base: Path) -> OpSpec:
    path = f"ops[{index}]"
    op = _str(_get(obj, "op", path), f"{path}.op")
    dims = [_int(d, f"{path}.dims[{i}]") for i, d in enumerate(_list(_get(obj, "dims", path), f"{path}.dims"))]
    case_dir = _str(_get(obj, "case_dir", path), f"{path}.case_dir")
    generator = _str(obj.get("generator", "normal"), f"{path}.generator")
    label = _str(obj.get("label", "x".join(map(str, dims))), f"{path}.label")
    stages = [_str(s, f"{path}.stages[{i}]") for i, s in enumerate(_list(_get(obj, "stages", path), f"{path}.stages"))]
    if len(set(stages)) != len(stages):
        raise _fail(f"{path}.stages", "a stage appears twice")
    names = {rust_name(s) for s in stages}
    pairs = []
    for i, p in enumerate(_list(obj.get("pairs", []), f"{path}.pairs")):
        pp = f"{path}.pairs[{i}]"
        a, b = _str(_get(p, "a", pp), f"{pp}.a"), _str(_get(p, "b", pp), f"{pp}.b")
        if a == b:
            raise _fail(pp, f"compares `{a}` with itself")
        for arm, name in (("a", a), ("b", b)):
            if name not in names and name not in BUILTIN_NAMES and name != BEST_ALTERNATIVE:
                raise _fail(f"{pp}.{arm}", f"`{name}` is neither a stage of this op's entry nor a built-in implementation")
        pairs.append((a, b))
    picks = obj.get("current_picks")
    return OpSpec(index, op, dims, generator, label, case_dir, base / case_dir, stages, pairs,
                  _str(picks, f"{path}.current_picks") if picks is not None else None)


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
    span_verdicts = obj.get("span_verdicts", False)
    if not isinstance(span_verdicts, bool):
        raise _fail("span_verdicts", f"expected true or false, found {json.dumps(span_verdicts)}")
    ops_raw = _list(_get(obj, "ops", "(top)"), "ops")
    if not ops_raw:
        raise _fail("ops", "the manifest lists no ops")
    ops = [parse_op(o, i, base) for i, o in enumerate(ops_raw)]
    return Manifest(base, namespace, mode, env, ops, span_verdicts)


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
