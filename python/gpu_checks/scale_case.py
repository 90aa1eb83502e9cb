"""Scales the float inputs of a case directory in place, for checks of the
tolerance at other scales on the GPU: `python3 scale_case.py CASE SCALE
[--rows]`. With --rows, each row of the first input (its last axis) is
multiplied by its own 10^U(-3,3) (seeded) instead. The case's
expected.bin, which no longer matches, is removed, and inputs.sha256.json
is rewritten for the new bytes (and without expected.bin)."""

import argparse
import hashlib
import json
import random
import struct
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("case", type=Path)
    p.add_argument("scale", type=float)
    p.add_argument("--rows", action="store_true")
    a = p.parse_args()
    spec = json.loads((a.case / "input.json").read_text())
    dims = spec["dims"]
    floats = {"matmul": ["a", "b"], "triangle": ["a", "b"], "neighbor": ["a", "b"], "layernorm": ["a"], "gelu": ["a", "b"]}[spec["op"]]
    rng = random.Random(5)
    for i, stem in enumerate(floats):
        path = a.case / f"{stem}.bin"
        raw = path.read_bytes()
        values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        if a.rows:
            if i > 0:
                continue
            row = dims[2] if spec["op"] == "matmul" else dims[-1] if spec["op"] == "triangle" else dims[1]
            factors = [10 ** rng.uniform(-3, 3) for _ in range(len(values) // row + 1)]
            values = [v * factors[j // row] for j, v in enumerate(values)]
        else:
            values = [v * a.scale for v in values]
        path.write_bytes(struct.pack(f"<{len(values)}f", *values))
    (a.case / "expected.bin").unlink(missing_ok=True)
    sums_path = a.case / "inputs.sha256.json"
    sums = json.loads(sums_path.read_text())
    sums.pop("expected.bin", None)
    for name in list(sums):
        sums[name] = hashlib.sha256((a.case / name).read_bytes()).hexdigest()
    sums_path.write_text(json.dumps(sums, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
