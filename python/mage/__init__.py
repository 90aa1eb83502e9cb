"""Mage's GPU kernels for Python: the op registry, launches on torch
tensors, and PyTorch ops.

Two layers:

- the extension module ``mage._C`` (Rust, ``python/ext``), every name of
  which is re-exported here: the registry (``ops``, ``op_info``,
  ``input_shapes``, ``output_shapes``, ``cost``, ...), ``prepare`` /
  ``launch`` of any stage on preallocated tensors, ``compare``,
  ``read_case``, ``MageError``. It needs no torch and no GPU to import;
- where torch is installed, PyTorch ops (``torch.library.custom_op``,
  ``torch.ops.mage.*``) registered at ``import mage``, with fake
  implementations and autograd, their Python functions here
  (``mage.layer_norm``, ``mage.gelu``, ``mage.bias_gelu``, ``mage.linear``,
  ``mage.matmul``, ``mage.triangle``, ``mage.neighbor`` with
  ``mage.Graph``), and ``mage.nn`` (``LayerNorm``, ``Linear``, ``GELU``).
  See ``mage/_torch_ops.py`` and ``python/README.md``.

``import mage`` imports torch only where it is installed; without it the
registry works as before and the torch names raise ``ImportError`` saying
so.
"""

import importlib.util as _util
import pkgutil as _pkgutil

# The extension may lie in another folder named `mage` on the path (a
# checkout's build under target/python/<profile>/); in a bundle or a wheel
# it lies beside this file.
__path__ = _pkgutil.extend_path(__path__, __name__)

try:
    from . import _C  # noqa: E402
except ImportError as e:
    raise ImportError(f"the extension module mage._C is not on the path ({e}); `cargo test -p xtask --test python_harness` or `cargo xtask bundle` builds it") from e
from ._C import *  # noqa: E402,F401,F403
from ._C import Call, CaseDir, GraphInfo, Launcher, MageError  # noqa: E402,F401

__all__ = [n for n in dir(_C) if not n.startswith("_")]

_TORCH_NAMES = ("layer_norm", "gelu", "bias_gelu", "linear", "matmul", "triangle", "neighbor", "Graph")

if _util.find_spec("torch") is not None:
    from . import _torch_ops  # noqa: E402
    from ._torch_ops import Graph, bias_gelu, gelu, layer_norm, linear, matmul, neighbor, triangle  # noqa: E402,F401

    __all__ += list(_TORCH_NAMES) + ["nn"]

    def __getattr__(name):
        if name == "nn":
            import importlib

            return importlib.import_module(".nn", __name__)
        raise AttributeError(f"module 'mage' has no attribute {name!r}")
else:

    def __getattr__(name):
        if name in _TORCH_NAMES or name == "nn":
            raise ImportError(f"mage.{name} needs torch, which is not installed (pip install torch)")
        raise AttributeError(f"module 'mage' has no attribute {name!r}")
