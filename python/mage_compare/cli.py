"""`python3 -m mage_compare <dir> [--out comparison.json]`.

Exit status: 0 when every phase ran (per-op and per-implementation
errors are in the JSON), 1 when the session could not start or stopped
early (no GPU, missing torch; the JSON's `error` says why), 2 when the
manifest cannot be used (also written to the JSON's `error` when the
directory exists).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from . import SCHEMA
from .manifest import ManifestError, load_manifest
from .ops import KINDS
from .report import write_report
from .runner import Settings, run_session


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m mage_compare", description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="the directory `cargo xtask compare` prepared (holds manifest.json)")
    p.add_argument("--out", type=Path, default=None, help="where the JSON goes (default <dir>/comparison.json)")
    p.add_argument("--quick", action="store_true", help="few samples per instrument (a smoke test, not a measurement)")
    p.add_argument("--skip", action="append", default=[], metavar="NAME_OR_KIND",
                   help=f"do not build implementations of this name or kind ({', '.join(KINDS)}); repeatable")
    p.add_argument("--only-op", action="append", default=[], metavar="OP", help="run only these ops; repeatable")
    p.add_argument("--golden-dir", type=Path, default=None,
                   help="fixtures/golden with <op>.py numpy references (default: the repository's, if present)")
    p.add_argument("--no-golden", action="store_true", help="skip the numpy golden cross-check of the reference")
    p.add_argument("--spread", choices=("minmax", "iqr"), default="minmax", help="the spread verdicts decide on (default minmax)")
    return p.parse_args(argv)


def _fatal_report(args: argparse.Namespace, out: Path, error: str) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report = {"schema": SCHEMA, "complete": False, "namespace": None, "mode": None, "manifest": str(args.dir / "manifest.json"),
              "started_utc": now, "finished_utc": now, "error": error, "environment": {}, "procedure": {}, "control": None,
              "ops": [], "results": [], "verdicts": [], "flags": []}
    try:
        write_report(out, report)
    except OSError as e:
        print(f"error: could not write {out}: {e}", file=sys.stderr)


def main(argv: Sequence[str] | None = None, backend_factory: Callable | None = None) -> int:
    args = parse_args(argv)
    out = args.out or (args.dir / "comparison.json")
    try:
        manifest = load_manifest(args.dir)
    except ManifestError as e:
        print(f"error: {e}", file=sys.stderr)
        if args.dir.is_dir() or args.out:
            _fatal_report(args, out, str(e))
        return 2
    if args.only_op:
        manifest.ops = [o for o in manifest.ops if o.op in args.only_op]
        if not manifest.ops:
            msg = f"--only-op {', '.join(args.only_op)} leaves no op of the manifest"
            print(f"error: {msg}", file=sys.stderr)
            _fatal_report(args, out, msg)
            return 2
    settings = Settings.quick() if args.quick else Settings()
    settings.spread = args.spread
    try:
        if backend_factory is None:
            from .gpu import TorchBackend  # torch, triton, cuda-python: only here

            backend = TorchBackend(manifest, settings, skip=set(args.skip), golden_dir=args.golden_dir,
                                   use_golden=not args.no_golden)
        else:
            backend = backend_factory(manifest, settings, set(args.skip))
    except Exception as e:  # noqa: BLE001 - no GPU, no torch: say so in the JSON
        msg = f"could not start the GPU backend: {type(e).__name__}: {e}"
        print(f"error: {msg}", file=sys.stderr)
        _fatal_report(args, out, msg)
        return 1
    report = run_session(manifest, backend, settings, out)
    print(f"wrote {out}", file=sys.stderr)
    return 0 if report.get("complete") else 1


if __name__ == "__main__":
    sys.exit(main())
