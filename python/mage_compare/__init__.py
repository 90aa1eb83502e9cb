"""mage_compare: Mage's same-session comparison harness (the Python side).

`cargo xtask compare` prepares a directory (manifest.json, case inputs)
and runs, on a GPU machine, with the Python module `mage` (the Rust
extension, `mage.abi3.so`) on the path::

    PYTHONPATH=python python3 -m mage_compare <dir> [--out comparison.json]

For every workload of the manifest it reads and verifies the case through
the Rust registry, uploads the inputs once, computes a float64 reference,
checks every implementation (Mage's stages launched through `mage`, the
same Rust launch path as `cargo xtask run`; PyTorch eager, torch.compile,
Triton kernels of this package, cuSPARSE for `neighbor`) before and after
timing, times each with named instruments in hot and/or cold L2, and
decides paired A/B verdicts on GPU kernel time from interleaved rounds.
The JSON schema is in :mod:`mage_compare.report`.

Importing this package (and every module the tests import) pulls in only
the standard library; torch, triton, numpy and `mage` are imported inside
the GPU-only modules (`gpu`, `impls`, `reference`, `triton_kernels`) and
`definitions`.
"""

SCHEMA = "mage-compare/2"
__version__ = "1.0.0"
