"""mage_compare: Mage's same-session comparison harness (the Python side).

`cargo xtask compare` prepares a directory (manifest.json, case inputs,
PTX) and runs, on a GPU machine::

    PYTHONPATH=python python3 -m mage_compare <dir> [--out comparison.json]

For every op of the manifest it verifies and uploads the inputs once,
computes a float64 reference, checks every implementation (the manifest's
Rust stages from their PTX, PyTorch eager, torch.compile, Triton kernels
of this package, cuSPARSE for `neighbor`) before and after timing, times
each with three named instruments in hot and/or cold L2, and decides
paired A/B verdicts from interleaved rounds. The JSON schema is in
:mod:`mage_compare.report`.

Importing this package (and every module the tests import) pulls in only
the standard library; torch, triton, numpy and cuda-python are imported
inside the GPU-only modules (`gpu`, `impls`, `reference`,
`triton_kernels`).
"""

SCHEMA = "mage-compare/1"
__version__ = "1.0.0"
