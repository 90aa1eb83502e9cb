"""Reading a case directory: sha256 verification and input checks (pure Python).

A case directory holds `input.json` ({op, dims, seed, ...}),
`inputs.sha256.json` ({file: sha256 hex}) and one little-endian `.bin`
file per input. :func:`read_case` reads every input the manifest lists
once, hashes the bytes it read and compares them with
`inputs.sha256.json`, so the bytes uploaded are exactly the bytes
verified. Any problem is a :class:`CaseError` for that op alone.
"""

from __future__ import annotations

import hashlib
import json
import sys
from array import array
from pathlib import Path
from typing import Sequence

from .manifest import OpSpec


class CaseError(ValueError):
    """The case directory of one op cannot be used."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseError(f"{path}: missing") from None
    except (OSError, json.JSONDecodeError) as e:
        raise CaseError(f"{path}: {e}") from None


def read_case(spec: OpSpec) -> tuple[list[bytes], dict[str, str]]:
    """Every input's bytes, in manifest order, and their sha256, after
    checking them against `inputs.sha256.json`, their lengths against the
    manifest, and `input.json`'s op and dims against the manifest."""
    case = spec.case_path
    if not case.is_dir():
        raise CaseError(f"{case}: the case directory does not exist")
    meta = _json(case / "input.json")
    if isinstance(meta, dict):
        if "op" in meta and meta["op"] != spec.op:
            raise CaseError(f"{case / 'input.json'}: op is `{meta['op']}`; the manifest says `{spec.op}`")
        if "dims" in meta and list(meta["dims"]) != list(spec.dims):
            raise CaseError(f"{case / 'input.json'}: dims are {meta['dims']}; the manifest says {spec.dims}")
    else:
        raise CaseError(f"{case / 'input.json'}: expected an object")
    sums = _json(case / "inputs.sha256.json")
    if not isinstance(sums, dict):
        raise CaseError(f"{case / 'inputs.sha256.json'}: expected an object of file: sha256")
    datas: list[bytes] = []
    shas: dict[str, str] = {}
    for inp in spec.inputs:
        path = case / inp.file
        want = sums.get(inp.file)
        if not isinstance(want, str):
            raise CaseError(f"{case / 'inputs.sha256.json'}: no sha256 for {inp.file}")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CaseError(f"{path}: missing") from None
        except OSError as e:
            raise CaseError(f"{path}: {e}") from None
        if len(data) != 4 * inp.len:
            raise CaseError(f"{path}: {len(data)} bytes; the manifest expects {inp.len} {inp.elem} values ({4 * inp.len} bytes)")
        got = sha256_bytes(data)
        if got != want.strip().lower():
            raise CaseError(f"{path}: sha256 {got} does not match inputs.sha256.json ({want})")
        datas.append(data)
        shas[inp.file] = got
    return datas, shas


def u32_array(data: bytes) -> array:
    """Little-endian u32 values of `data`."""
    a = array("I")
    if a.itemsize != 4:  # pragma: no cover - every mainstream platform has a 4-byte unsigned int
        a = array("L")
    a.frombytes(data)
    if sys.byteorder != "little":  # pragma: no cover
        a.byteswap()
    return a


def check_csr(n: int, edges: int, rowptr: Sequence[int], indices: Sequence[int]) -> str | None:
    """Why (rowptr, indices) is not a CSR graph every kernel may walk
    safely, or None: rowptr has n+1 entries, starts at 0, never decreases
    and ends at `edges`; every index is below n; and every value fits in
    an int32 (the Python implementations read them as torch.int32/int64)."""
    if len(rowptr) != n + 1:
        return f"rowptr has {len(rowptr)} entries; n = {n} needs {n + 1}"
    if len(indices) != edges:
        return f"indices has {len(indices)} entries; edges = {edges}"
    if rowptr[0] != 0:
        return f"rowptr[0] is {rowptr[0]}; a CSR row pointer must start at 0"
    prev = 0
    for i, p in enumerate(rowptr):
        if p < prev:
            return f"rowptr decreases at row {i - 1}: rowptr[{i - 1}] = {prev} > rowptr[{i}] = {p}"
        prev = p
    if rowptr[n] != edges:
        return f"rowptr[{n}] is {rowptr[n]}; it must equal the edge count {edges}"
    if edges and max(indices) >= n:
        e = next(i for i, j in enumerate(indices) if j >= n)
        return f"indices[{e}] is {indices[e]}; every index must be below n = {n}"
    if edges >= 2**31 or n >= 2**31:
        return "more than 2^31 - 1 edges or rows: the int32 index tensors cannot hold them"
    return None
