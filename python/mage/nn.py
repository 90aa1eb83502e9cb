"""Drop-in modules for ``torch.nn``'s ``LayerNorm``, ``Linear`` and
``GELU`` whose forward is Mage's op (``torch.ops.mage.*``).

Each subclasses torch's module: the same constructor arguments and
defaults, the same parameters, initialisation, ``state_dict`` keys and
``extra_repr``, so a state_dict moves between torch's module and Mage's
either way. Only ``forward`` differs, with the ops' refusals: float32 CUDA
tensors only. ``GELU`` computes both of torch's forms: its default
``approximate="none"`` (exact erf) through Mage's ``gelu_erf`` and
``gelu_erf_backward``, ``"tanh"`` through ``gelu`` and ``gelu_backward``.
"""

import torch
from torch import Tensor

from . import _torch_ops as F

__all__ = ["LayerNorm", "Linear", "GELU"]


class LayerNorm(torch.nn.LayerNorm):
    """``torch.nn.LayerNorm`` through ``mage.layer_norm``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, list(self.normalized_shape), self.weight, self.bias, self.eps)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` through ``mage.linear``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)


class GELU(torch.nn.GELU):
    """``torch.nn.GELU`` through ``mage.gelu`` (``approximate="none"``,
    the default, or ``"tanh"``)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, self.approximate)
