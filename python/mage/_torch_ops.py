"""Mage's kernels as PyTorch ops: ``torch.library.custom_op``s in the
namespace ``mage`` (``torch.ops.mage.*``) with PyTorch's signatures, fake
(meta) implementations for ``torch.compile`` and autograd through Mage's
gradient ops.

=================  ==============================================  =========================
op                 forward (Mage op)                               backward (Mage op)
=================  ==============================================  =========================
layer_norm         layernorm                                       layernorm_backward
gelu (none)        gelu_erf (bias of zeros)                        gelu_erf_backward
gelu (tanh)        gelu (bias of zeros)                            gelu_backward
bias_gelu          gelu                                            gelu_backward
linear             matmul_nt (x·Wᵀ), bias added by torch           matmul (dx), matmul_tn (dW)
matmul             matmul                                          matmul_nt (dA), matmul_tn (dB)
triangle           triangle                                        triangle_backward
neighbor           neighbor (stage picked from the mage.Graph)     neighbor_backward
=================  ==============================================  =========================

Semantics are PyTorch's: any leading dims (flattened to the op's 2-D or
3-D view, or looped over for batched matmul and triangle), ``weight`` and
``bias`` ``None``, empty tensors (torch's result, nothing launched).
Non-contiguous inputs are made contiguous (``.contiguous()``: a copy).
Refused, each with a one-line ``mage.MageError``: a dtype other than
float32 (no cast is made), a tensor not on a CUDA device, and a GELU
``approximate`` other than ``"none"`` (exact erf, PyTorch's default:
Mage's ``gelu_erf``) and ``"tanh"`` (Mage's ``gelu``). An op this build
lacks (``matmul_nt``, ``matmul_tn``) is a one-line error naming it.

In eager mode a call runs the op's function directly, its gradient
through an ``autograd.Function`` of the same backward (the dispatcher's
Python layers around a custom op cost more host time than the launch);
under torch.compile, any mode, a transform or a tensor subclass it is
the custom op (``_call``). The package's ``layer_norm``, ``gelu``,
``bias_gelu``, ``linear`` (without bias) and ``matmul`` first try the
plain path: one ``Launcher.run_plain``, which checks and launches where
the call is the common one (float32 CUDA tensors the Mage op takes as
they are, no gradient wanted, no mode) and does nothing otherwise. Where
an input wants a gradient, the same five take their autograd.Function,
whose forward tries the plain path too.

Every call allocates its outputs (and a plan's scratch) from PyTorch's
caching allocator (``torch.empty_like`` or ``new_empty`` of an input),
launches on torch's current stream, and neither copies to the host nor
synchronises: a call can be captured in a CUDA graph. The weight and bias
a kernel reads where the caller passed None (ones, zeros) are made once per
width, device and stream and kept, never from inside a capture. A
``mage.Graph`` checks and analyses its CSR once, at construction.

The inputs of ``neighbor_backward`` are read from the registry at call
time (``op_info("neighbor_backward")["inputs"]``, by role), as are its
outputs, so that a change of that op's signature needs no change here.
"""

import math
import struct
import weakref
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import _C

MageError = _C.MageError

_LAUNCHERS = {}


def _launcher(op: str, needed_by: str):
    """The op's `Launcher`, made once; a missing op is one line naming it."""
    launcher = _LAUNCHERS.get(op)
    if launcher is None:
        if op not in _C.ops():
            raise MageError(f"mage.{needed_by} needs Mage's op `{op}`, which this build of Mage does not have (its ops: {', '.join(_C.ops())})")
        launcher = _LAUNCHERS[op] = _C.Launcher(op)
    return launcher


try:
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - a torch without CUDA support

    def _raw_stream(device):
        return torch.cuda.current_stream(device).cuda_stream


_F32 = torch.float32


def _check(t: Tensor, what: str, op: str) -> None:
    """Refuses what Mage's kernels do not take: one line each."""
    if not t.is_cuda:
        raise MageError(f"mage.{op}: {what} is on {t.device}; Mage's kernels run on CUDA tensors (.cuda())")
    if t.dtype is not _F32:
        raise MageError(f"mage.{op}: {what} is {t.dtype}; Mage's kernels compute in torch.float32 only (no cast is made: .float() first)")


def _check_fake(t: Tensor, what: str, op: str) -> None:
    """The checks a fake (meta) call can make: the dtype (a fake tensor may
    stand for a CUDA one on any device)."""
    if t.dtype != torch.float32:
        raise MageError(f"mage.{op}: {what} is {t.dtype}; Mage's kernels compute in torch.float32 only (no cast is made: .float() first)")


def _same_device(op: str, first: Tensor, *others: Tuple[str, Optional[Tensor]]) -> None:
    device = first.get_device()
    for what, t in others:
        if t is not None and t.get_device() != device:
            raise MageError(f"mage.{op}: {what} is on {t.device}, the input on {first.device}; every tensor must be on one device")


def _run(op: str, needed_by: str, inputs, stage: str = "current", graph=None, constants=None):
    """One launch of `op` on contiguous float32 CUDA `inputs`; its outputs.
    `constants`: ``[(name, value)]`` of the op's constants to set (``eps``)."""
    launcher = _launcher(op, needed_by)
    device = max(inputs[0].get_device(), 0)
    return launcher.run(inputs, device, _raw_stream(device), stage, graph, constants)


def _eps_of(op: str) -> float:
    return _C.op_info(op)["constants"]["eps"]


_LN_EPS = _eps_of("layernorm")


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


_EPS_CONSTANTS = {}


def _eps_constants(eps: float):
    """The kernels' ``eps`` parameter set to `eps` (rounded to float32, as
    the kernels add it); None at the op's own value, whose plans pass it.
    Kept per value: a model passes the same few."""
    constants = _EPS_CONSTANTS.get(eps, _EPS_CONSTANTS)
    if constants is _EPS_CONSTANTS:
        constants = None if _f32(eps) == _f32(_LN_EPS) else [("eps", _f32(eps))]
        if len(_EPS_CONSTANTS) < 64:
            _EPS_CONSTANTS[eps] = constants
    return constants


_FILLED = {}


def _filled(value: float, width: int, like: Tensor) -> Tensor:
    """A float32 ``[width]`` of `value` on `like`'s device, the weight or
    bias a kernel reads where the caller passed None: made once per
    (value, width, device, stream) and kept (at most 64), so that a call
    neither allocates it nor launches its fill again. Never kept from inside
    a CUDA graph capture, whose memory is the graph's."""
    device = like.get_device()
    if device < 0:  # not a CUDA tensor
        return torch.full((width,), value, device=like.device)
    key = (value, width, device, _raw_stream(device))
    t = _FILLED.get(key)
    if t is None:
        t = torch.full((width,), value, device=like.device)
        if len(_FILLED) < 64 and not torch.cuda.is_current_stream_capturing():
            _FILLED[key] = t
    return t


def _width(shape: Sequence[int]) -> int:
    w = 1
    for d in shape:
        w *= d
    return w


# ---------------------------------------------------------------- eager calls
#
# In eager mode a call skips the dispatcher's Python layers around a custom
# op (argument binding, the autograd wrapper, the backend wrapper's checks)
# and runs the op's own function, with its gradient through a
# torch.autograd.Function of the same backward and setup: the same
# computation and the same checks, less host time per call (see
# python/gpu_checks/host_time.py). Every other call goes through the
# dispatcher, as a custom op: under torch.compile (Dynamo, AOTAutograd),
# under any dispatch or torch-function mode (fake tensors, FlopCounter,
# torch.device as a context), under functorch transforms, for tensor
# subclasses, and for tensors not on a CUDA device (meta tensors get the
# fake implementation, CPU ones the op's refusal).

_IMPLS = {}  # op name -> the op's Python function (filled at the end of the module)
_FUNCTIONS = {}  # op name -> a torch.autograd.Function with the op's gradient
_GRADIENTS = {}  # op name -> (backward, setup_context), as registered with the op
_PLAIN = (Tensor, torch.nn.Parameter)
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_transforms = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", lambda: None)


def _register_autograd(op, backward, setup_context) -> None:
    """``op.register_autograd(backward, setup_context=...)``, kept for the eager path too."""
    op.register_autograd(backward, setup_context=setup_context)
    _GRADIENTS[op._name] = (backward, setup_context)


def _plain(args) -> bool:
    """Whether a call may skip the dispatcher: no mode, no transform, only
    plain tensors, the first of them on a CUDA device."""
    if _dispatch_modes() or _function_modes() or _transforms() is not None:
        return False
    first = None
    for a in args:
        if isinstance(a, Tensor):
            if type(a) not in _PLAIN:
                return False
            if first is None:
                first = a
    return first is not None and first.is_cuda


_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling
_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", lambda t: False)
# ``autograd.Function.apply`` less its Python layer (default arguments bound
# for a ``setup_context`` these Functions do not define, and functorch's dead
# wrappers unwrapped, which `_apply` checks for first): the C++ apply itself.
_C_APPLY = getattr(getattr(torch._C, "_FunctionBase", None), "__dict__", {}).get("apply")


def _needs_grad(args) -> bool:
    if _grad_enabled():
        for a in args:
            if type(a) in _PLAIN and a.requires_grad:
                return True
    return False


def _call(name: str, *args):
    """``torch.ops.mage.<name>(*args)``, by the eager path where it may."""
    impl = _IMPLS.get(name)
    if impl is None or _is_compiling() or not _plain(args):
        return getattr(torch.ops.mage, name)(*args)
    if _needs_grad(args):
        function = _FUNCTIONS.get(name)
        if function is None:  # an op without a gradient: the dispatcher says so as torch does
            return getattr(torch.ops.mage, name)(*args)
        return function._mage_apply(*args)
    return impl(*args)


def _function(name: str, impl, backward, setup_context):
    def forward(ctx, *args):
        out = impl(*args)
        setup_context(ctx, args, out)
        return out

    def grad(ctx, *grads):
        return backward(ctx, *grads)

    # The gradient ops have no gradient themselves: a second derivative is refused.
    function = type(f"mage_{name}", (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(once_differentiable(grad))})
    c_apply = _C_APPLY.__get__(None, function) if _C_APPLY is not None else None

    def apply(*args):
        if c_apply is None:
            return function.apply(*args)
        for a in args:
            if isinstance(a, Tensor) and _wrapped(a):
                return function.apply(*args)
        return c_apply(*args)

    function._mage_apply = staticmethod(apply)
    return function


# ---------------------------------------------------------------- layer_norm


def _layer_norm_checks(x, normalized_shape, weight, bias, eps, fake=False):
    check = _check_fake if fake else _check
    check(x, "input", "layer_norm")
    if weight is not None:
        check(weight, "weight", "layer_norm")
    if bias is not None:
        check(bias, "bias", "layer_norm")
    if not fake and (weight is not None or bias is not None):
        _same_device("layer_norm", x, ("weight", weight), ("bias", bias))
    ns = normalized_shape if type(normalized_shape) is tuple else tuple(normalized_shape)
    n = len(ns)
    shape = x.shape
    if n == 1:  # the common case, compared without slicing a torch.Size
        if len(shape) == 0 or shape[-1] != ns[0]:
            raise MageError(f"mage.layer_norm: normalized_shape {list(ns)} is not the trailing shape of an input of shape {list(shape)}")
    elif n == 0 or len(shape) < n or shape[-n:] != ns:
        raise MageError(f"mage.layer_norm: normalized_shape {list(ns)} is not the trailing shape of an input of shape {list(shape)}")
    if weight is not None and weight.shape != ns:
        raise MageError(f"mage.layer_norm: weight is {list(weight.shape)}; normalized_shape is {list(ns)}")
    if bias is not None and bias.shape != ns:
        raise MageError(f"mage.layer_norm: bias is {list(bias.shape)}; normalized_shape is {list(ns)}")
    if type(eps) is not float and not isinstance(eps, (int, float)) or eps - eps != 0:
        raise MageError(f"mage.layer_norm: eps = {eps!r}; it must be a finite number")
    return ns


@torch.library.custom_op("mage::layer_norm", mutates_args=())
def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """``torch.nn.functional.layer_norm`` through Mage's ``layernorm``."""
    ns = _layer_norm_checks(input, normalized_shape, weight, bias, eps)
    if input.numel() == 0:
        return torch.empty_like(input, memory_format=torch.contiguous_format)
    # A 2-D contiguous input over its last axis, and 1-D contiguous weight
    # and bias, go to the kernels as they are (each view costs host time).
    flat = len(ns) == 1
    width = ns[0] if flat else _width(ns)
    x2 = input if flat and input.dim() == 2 and input.is_contiguous() else input.reshape(-1, width).contiguous()
    gamma = _filled(1.0, width, input) if weight is None else _flat(weight, flat, width)
    beta = _filled(0.0, width, input) if bias is None else _flat(bias, flat, width)
    (y,) = _run("layernorm", "layer_norm", (x2, gamma, beta), constants=_eps_constants(eps))
    return y if x2 is input else y.view(input.shape)


def _flat(t: Tensor, one_axis: bool, width: int) -> Tensor:
    """`t` as the contiguous 1-D tensor of `width` a kernel reads."""
    return t if one_axis and t.is_contiguous() else t.reshape(width).contiguous()


@layer_norm.register_fake
def _(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    _layer_norm_checks(input, normalized_shape, weight, bias, eps, fake=True)
    return torch.empty_like(input, memory_format=torch.contiguous_format)


@torch.library.custom_op("mage::layer_norm_backward", mutates_args=())
def layer_norm_backward(grad: Tensor, input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor], eps: float = 1e-5) -> Tuple[Tensor, Tensor, Tensor]:
    """(d input, d weight, d bias) through Mage's ``layernorm_backward``."""
    ns = tuple(normalized_shape)
    width = _width(ns)
    for what, t in (("grad", grad), ("input", input)):
        _check(t, what, "layer_norm_backward")
    if input.numel() == 0:
        return torch.zeros_like(input, memory_format=torch.contiguous_format), input.new_zeros(ns), input.new_zeros(ns)
    x2 = input.reshape(-1, width).contiguous()
    gamma = _filled(1.0, width, input) if weight is None else weight.reshape(width).contiguous()
    dy = grad.reshape(-1, width).contiguous()
    dx, dgamma, dbeta = _run("layernorm_backward", "layer_norm", (x2, gamma, dy), constants=_eps_constants(eps))
    return dx.view(input.shape), dgamma.view(ns), dbeta.view(ns)


@layer_norm_backward.register_fake
def _(grad, input, normalized_shape, weight, eps=1e-5):
    ns = tuple(normalized_shape)
    return torch.empty_like(input, memory_format=torch.contiguous_format), input.new_empty(ns), input.new_empty(ns)


def _layer_norm_setup(ctx, inputs, output):
    x, normalized_shape, weight, bias, eps = inputs
    ctx.normalized_shape = tuple(normalized_shape)
    ctx.eps = eps
    ctx.has = (weight is not None, bias is not None)
    ctx.save_for_backward(x, weight)


def _layer_norm_grad(ctx, grad):
    x, weight = ctx.saved_tensors
    dx, dw, db = _call("layer_norm_backward", grad, x, ctx.normalized_shape, weight, ctx.eps)
    return dx, None, dw if ctx.has[0] else None, db if ctx.has[1] else None, None


_register_autograd(layer_norm, _layer_norm_grad, _layer_norm_setup)


# ---------------------------------------------------------------- gelu


#: Mage's forward and gradient op for each ``approximate`` of ``mage.gelu``.
_GELU_OPS = {"none": ("gelu_erf", "gelu_erf_backward"), "tanh": ("gelu", "gelu_backward")}


def _gelu_approximate(approximate: str) -> None:
    if approximate not in _GELU_OPS:
        raise MageError(f"mage.gelu: approximate={approximate!r}; it must be 'none' or 'tanh'")


def _bias_gelu_checks(x, bias, op, fake=False):
    check = _check_fake if fake else _check
    check(x, "input", op)
    if bias is not None:
        check(bias, "bias", op)
        if not fake:
            _same_device(op, x, ("bias", bias))
        if x.dim() == 0 or tuple(bias.shape) != (x.shape[-1],):
            raise MageError(f"mage.{op}: bias is {list(bias.shape)}; an input of shape {list(x.shape)} takes a bias of [{x.shape[-1] if x.dim() else 1}]")


def _gelu_forward(x: Tensor, bias: Optional[Tensor], op: str, forward: str = "gelu") -> Tensor:
    """Mage's `forward` (``gelu`` or ``gelu_erf``) on `x` with `bias` (zeros
    where None) over the last axis."""
    if x.numel() == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    width = x.shape[-1] if x.dim() else 1
    x2 = x if x.dim() == 2 and x.is_contiguous() else x.reshape(-1, width).contiguous()
    b = _filled(0.0, width, x) if bias is None else bias.contiguous()
    (y,) = _run(forward, op, (x2, b))
    return y if x2 is x else y.view(x.shape)


@torch.library.custom_op("mage::gelu", mutates_args=())
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``torch.nn.functional.gelu``: ``approximate="none"`` (exact erf,
    PyTorch's default) through Mage's ``gelu_erf``, ``"tanh"`` through
    Mage's ``gelu``, each with a bias of zeros."""
    _gelu_approximate(approximate)
    _bias_gelu_checks(input, None, "gelu")
    return _gelu_forward(input, None, "gelu", _GELU_OPS[approximate][0])


@gelu.register_fake
def _(input, approximate="none"):
    _gelu_approximate(approximate)
    _bias_gelu_checks(input, None, "gelu", fake=True)
    return torch.empty_like(input, memory_format=torch.contiguous_format)


@torch.library.custom_op("mage::bias_gelu", mutates_args=())
def bias_gelu(input: Tensor, bias: Tensor) -> Tensor:
    """``gelu(input + bias, approximate="tanh")`` fused: Mage's ``gelu``
    (bias over the last axis)."""
    _bias_gelu_checks(input, bias, "bias_gelu")
    return _gelu_forward(input, bias, "bias_gelu")


@bias_gelu.register_fake
def _(input, bias):
    _bias_gelu_checks(input, bias, "bias_gelu", fake=True)
    return torch.empty_like(input, memory_format=torch.contiguous_format)


def _gelu_backward(op: str, grad: Tensor, input: Tensor, bias: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """(d input, d bias) through Mage's gradient op `op` (``gelu_backward``
    or ``gelu_erf_backward``), bias zeros where None."""
    width = input.shape[-1] if input.dim() else 1
    if input.numel() == 0:
        return torch.zeros_like(input, memory_format=torch.contiguous_format), input.new_zeros(width)
    x2 = input.reshape(-1, width).contiguous()
    b = _filled(0.0, width, input) if bias is None else bias.contiguous()
    dy = grad.reshape(-1, width).contiguous()
    dx, db = _run(op, "gelu", (x2, b, dy))
    return dx.view(input.shape), db


def _gelu_backward_fake(grad, input, bias):
    width = input.shape[-1] if input.dim() else 1
    return torch.empty_like(input, memory_format=torch.contiguous_format), input.new_empty(width)


@torch.library.custom_op("mage::bias_gelu_backward", mutates_args=())
def bias_gelu_backward(grad: Tensor, input: Tensor, bias: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """(d input, d bias) of tanh GELU through Mage's ``gelu_backward``."""
    return _gelu_backward("gelu_backward", grad, input, bias)


bias_gelu_backward.register_fake(_gelu_backward_fake)


@torch.library.custom_op("mage::gelu_erf_backward", mutates_args=())
def gelu_erf_backward(grad: Tensor, input: Tensor, bias: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """(d input, d bias) of exact (erf) GELU through Mage's ``gelu_erf_backward``."""
    return _gelu_backward("gelu_erf_backward", grad, input, bias)


gelu_erf_backward.register_fake(_gelu_backward_fake)


def _gelu_setup(ctx, inputs, output):
    ctx.approximate = inputs[1] if len(inputs) > 1 else "none"
    ctx.save_for_backward(inputs[0])


def _gelu_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    dx, _ = _call("gelu_erf_backward" if ctx.approximate == "none" else "bias_gelu_backward", grad, x, None)
    return dx, None


_register_autograd(gelu, _gelu_grad, _gelu_setup)


def _bias_gelu_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _bias_gelu_grad(ctx, grad):
    x, bias = ctx.saved_tensors
    dx, db = _call("bias_gelu_backward", grad, x, bias)
    return dx, db


_register_autograd(bias_gelu, _bias_gelu_grad, _bias_gelu_setup)


# ---------------------------------------------------------------- matmul


def _mm_checks(a, b, op, fake=False):
    check = _check_fake if fake else _check
    check(a, "input", op)
    check(b, "other" if op == "matmul" else "weight", op)
    if not fake:
        _same_device(op, a, ("other", b))


def _batched(op: str, needed_by: str, a: Tensor, b: Tensor, out_shape) -> Tensor:
    """`op` (a Mage 2-D product) on `a` [..., p, q] and `b` [..., r, s] of
    one batch shape: one launch per batch element (one in all where there
    is no batch)."""
    batch = tuple(a.shape[:-2])
    if a.numel() == 0 or b.numel() == 0 or _width(out_shape) == 0:
        return a.new_zeros(out_shape)
    if len(batch) == 0:
        return _run(op, needed_by, (a.contiguous(), b.contiguous()))[0].view(out_shape)
    a3 = a.reshape(-1, *a.shape[-2:]).contiguous()
    b3 = b.reshape(-1, *b.shape[-2:]).contiguous()
    outs = [_run(op, needed_by, (a3[i], b3[i]))[0] for i in range(a3.shape[0])]
    return torch.stack(outs).view(out_shape)


def _matmul_forward(a: Tensor, b: Tensor) -> Tensor:
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    m, k = a2.shape[-2], a2.shape[-1]
    if b2.shape[-2] != k:
        raise MageError(f"mage.matmul: input {list(a.shape)} and other {list(b.shape)} cannot be multiplied ({k} != {b2.shape[-2]})")
    n = b2.shape[-1]
    batch = tuple(torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    shape = list(batch) + [m, n]
    if b2.dim() == 2 and a2.dim() >= 2:
        # Leading dims of `a` only: one product of [B·m, k] by [k, n].
        if a2.numel() == 0 or b2.numel() == 0 or m * n == 0:
            out = a2.new_zeros(shape)
        else:
            out = _run("matmul", "matmul", (a2.reshape(-1, k).contiguous(), b2.contiguous()))[0].view(shape)
    else:
        out = _batched("matmul", "matmul", a2.expand(*batch, m, k), b2.expand(*batch, k, n), shape)
    if a.dim() == 1:
        out = out.squeeze(-2)
    if b.dim() == 1:
        out = out.squeeze(-1)
    return out


def _matmul_shape(a: Tensor, b: Tensor):
    if a.dim() == 0 or b.dim() == 0:
        raise MageError(f"mage.matmul: both arguments need at least 1 dimension; got {a.dim()}D and {b.dim()}D tensors")
    return torch.matmul(a, b).shape


@torch.library.custom_op("mage::matmul", mutates_args=())
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """``torch.matmul`` (leading batch dims, broadcast; 1-D operands as
    torch treats them) through Mage's ``matmul``."""
    _mm_checks(input, other, "matmul")
    if input.dim() == 0 or other.dim() == 0:
        raise MageError(f"mage.matmul: both arguments need at least 1 dimension; got {input.dim()}D and {other.dim()}D tensors")
    return _matmul_forward(input, other)


@matmul.register_fake
def _(input, other):
    _mm_checks(input, other, "matmul", fake=True)
    return input.new_empty(_matmul_shape(input, other))


def _nt_tn_checks(a, b, op):
    if a.dim() < 2 or b.dim() < 2 or a.shape[:-2] != b.shape[:-2]:
        raise MageError(f"mage.{op}: input {list(a.shape)} and other {list(b.shape)} must be 2-D or more with one batch shape")
    inner = (a.shape[-1], b.shape[-1]) if op == "matmul_nt" else (a.shape[-2], b.shape[-2])
    if inner[0] != inner[1]:
        raise MageError(f"mage.{op}: input {list(a.shape)} and other {list(b.shape)} cannot be multiplied ({inner[0]} != {inner[1]})")


@torch.library.custom_op("mage::matmul_nt", mutates_args=())
def matmul_nt(input: Tensor, other: Tensor) -> Tensor:
    """``input @ other.mT`` (``input`` [..., m, k], ``other`` [..., n, k],
    one batch shape) through Mage's ``matmul_nt``."""
    _mm_checks(input, other, "matmul_nt")
    _nt_tn_checks(input, other, "matmul_nt")
    shape = list(input.shape[:-1]) + [other.shape[-2]]
    return _batched("matmul_nt", "matmul", input, other, shape)


@matmul_nt.register_fake
def _(input, other):
    _nt_tn_checks(input, other, "matmul_nt")
    return input.new_empty(list(input.shape[:-1]) + [other.shape[-2]])


@torch.library.custom_op("mage::matmul_tn", mutates_args=())
def matmul_tn(input: Tensor, other: Tensor) -> Tensor:
    """``input.mT @ other`` (``input`` [..., k, m], ``other`` [..., k, n],
    one batch shape) through Mage's ``matmul_tn``."""
    _mm_checks(input, other, "matmul_tn")
    _nt_tn_checks(input, other, "matmul_tn")
    shape = list(input.shape[:-2]) + [input.shape[-1], other.shape[-1]]
    return _batched("matmul_tn", "matmul", input, other, shape)


@matmul_tn.register_fake
def _(input, other):
    _nt_tn_checks(input, other, "matmul_tn")
    return input.new_empty(list(input.shape[:-2]) + [input.shape[-1], other.shape[-1]])


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_grad(ctx, grad):
    a, b = ctx.saved_tensors
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    batch = tuple(torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    # The gradient as [*batch, m, n] (1-D operands had an axis dropped).
    g = grad.reshape(*batch, m, n)
    da = db = None
    if b2.dim() == 2:
        # `a`'s leading dims only: each gradient is one product of the flattened rows.
        rows = math.prod(a2.shape[:-1])
        g2, a_rows = g.reshape(rows, n), a2.reshape(rows, k)
        if ctx.needs_input_grad[0]:
            da = _call("matmul_nt", g2, b2).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            db = _call("matmul_tn", a_rows, g2).reshape(b.shape)
        return da, db
    if ctx.needs_input_grad[0]:
        # dA = dC·Bᵀ: matmul_nt of dC [.., m, n] and B [.., k, n].
        da = _call("matmul_nt", g, b2.expand(*batch, k, n))
        da = da.sum_to_size(a2.shape).reshape(a.shape)
    if ctx.needs_input_grad[1]:
        # dB = Aᵀ·dC: matmul_tn of A [.., m, k] and dC [.., m, n].
        db = _call("matmul_tn", a2.expand(*batch, m, k), g)
        db = db.sum_to_size(b2.shape).reshape(b.shape)
    return da, db


_register_autograd(matmul, _matmul_grad, _matmul_setup)


def _matmul_nt_grad(ctx, grad):
    a, b = ctx.saved_tensors
    # C = A·Bᵀ: dA = dC·B (matmul), dB = dCᵀ·A (matmul_tn).
    da = _call("matmul", grad, b) if ctx.needs_input_grad[0] else None
    db = _call("matmul_tn", grad, a) if ctx.needs_input_grad[1] else None
    return da, db


_register_autograd(matmul_nt, _matmul_nt_grad, _matmul_setup)


def _matmul_tn_grad(ctx, grad):
    a, b = ctx.saved_tensors
    # C = Aᵀ·B: dA = B·dCᵀ (matmul_nt), dB = A·dC (matmul).
    da = _call("matmul_nt", b, grad) if ctx.needs_input_grad[0] else None
    db = _call("matmul", a, grad) if ctx.needs_input_grad[1] else None
    return da, db


_register_autograd(matmul_tn, _matmul_tn_grad, _matmul_setup)


# ---------------------------------------------------------------- linear


def _linear_checks(x, weight, bias, fake=False):
    _mm_checks(x, weight, "linear", fake)
    if bias is not None:
        (_check_fake if fake else _check)(bias, "bias", "linear")
        if not fake:
            _same_device("linear", x, ("bias", bias))
    if weight.dim() != 2 or x.dim() == 0 or x.shape[-1] != weight.shape[1]:
        raise MageError(f"mage.linear: input {list(x.shape)} and weight {list(weight.shape)} cannot be multiplied (weight must be [out_features, {x.shape[-1] if x.dim() else '?'}])")
    if bias is not None and tuple(bias.shape) not in ((weight.shape[0],), ()):
        raise MageError(f"mage.linear: bias is {list(bias.shape)}; weight {list(weight.shape)} takes a bias of [{weight.shape[0]}]")


@torch.library.custom_op("mage::linear", mutates_args=())
def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``torch.nn.functional.linear``: ``input·weightᵀ`` through Mage's
    ``matmul_nt``, then ``+ bias`` (torch's add)."""
    _linear_checks(input, weight, bias)
    out_shape = list(input.shape[:-1]) + [weight.shape[0]]
    k = input.shape[-1]
    if input.numel() == 0 or weight.numel() == 0:
        y = input.new_zeros(out_shape)
    else:
        x2 = input if input.dim() == 2 and input.is_contiguous() else input.reshape(-1, k).contiguous()
        (y,) = _run("matmul_nt", "linear", (x2, weight.contiguous()))
        if x2 is not input:
            y = y.view(out_shape)
    if bias is not None:
        y = y.add_(bias) if y.numel() else y + bias
    return y


@linear.register_fake
def _(input, weight, bias=None):
    _linear_checks(input, weight, bias, fake=True)
    return input.new_empty(list(input.shape[:-1]) + [weight.shape[0]])


def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight)


def _linear_grad(ctx, grad):
    x, weight = ctx.saved_tensors
    n, k = weight.shape
    g2 = grad.reshape(-1, n)
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        # dx = dy·W: [M, n] by [n, k].
        dx = _call("matmul", g2, weight).view(x.shape)
    if ctx.needs_input_grad[1]:
        # dW = dyᵀ·x: matmul_tn of dy [M, n] and x [M, k].
        dw = _call("matmul_tn", g2, x.reshape(-1, k))
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = g2.sum(0)
    return dx, dw, db


_register_autograd(linear, _linear_grad, _linear_setup)


# ---------------------------------------------------------------- triangle


def _triangle_checks(a, b, fake=False):
    check = _check_fake if fake else _check
    check(a, "a", "triangle")
    check(b, "b", "triangle")
    if not fake:
        _same_device("triangle", a, ("b", b))
    if a.dim() < 3 or a.shape != b.shape or a.shape[-3] != a.shape[-2]:
        raise MageError(f"mage.triangle: a {list(a.shape)} and b {list(b.shape)} must both be [..., n, n, c]")


def _triangle_run(op: str, tensors, shape_of_outputs):
    """`op` over the leading dims of [..., n, n, c] tensors: one launch per
    leading index."""
    first = tensors[0]
    if first.numel() == 0:
        return [first.new_zeros(s) for s in shape_of_outputs]
    if first.dim() == 3:
        return [o.view(s) for o, s in zip(_run(op, "triangle", [t.contiguous() for t in tensors]), shape_of_outputs)]
    flat = [t.reshape(-1, *t.shape[-3:]).contiguous() for t in tensors]
    per = [_run(op, "triangle", [f[i] for f in flat]) for i in range(flat[0].shape[0])]
    return [torch.stack([p[j] for p in per]).view(s) for j, s in enumerate(shape_of_outputs)]


@torch.library.custom_op("mage::triangle", mutates_args=())
def triangle(a: Tensor, b: Tensor) -> Tensor:
    """Outgoing triangle multiplication: ``O[..., i, j, c] = Σ_k A[..., i, k,
    c]·B[..., j, k, c]`` through Mage's ``triangle``."""
    _triangle_checks(a, b)
    return _triangle_run("triangle", (a, b), [a.shape])[0]


@triangle.register_fake
def _(a, b):
    _triangle_checks(a, b, fake=True)
    return torch.empty_like(a, memory_format=torch.contiguous_format)


@torch.library.custom_op("mage::triangle_backward", mutates_args=())
def triangle_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(dA, dB) through Mage's ``triangle_backward``."""
    _check(grad, "grad", "triangle_backward")
    da, db = _triangle_run("triangle_backward", (a, b, grad), [a.shape, b.shape])
    return da, db


@triangle_backward.register_fake
def _(grad, a, b):
    return torch.empty_like(a, memory_format=torch.contiguous_format), torch.empty_like(b, memory_format=torch.contiguous_format)


def _triangle_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _triangle_grad(ctx, grad):
    a, b = ctx.saved_tensors
    return _call("triangle_backward", grad, a, b)


_register_autograd(triangle, _triangle_grad, _triangle_setup)


# ---------------------------------------------------------------- neighbor

_GRAPHS = weakref.WeakValueDictionary()


def _version(t: Tensor):
    try:
        return t._version
    except RuntimeError:  # an inference tensor has no version counter
        return None


class Graph:
    """A CSR graph for ``mage.neighbor``: ``rowptr`` (``num_nodes + 1``
    values) and ``indices`` (one per edge) on one CUDA device, int32 (an
    int64 graph is converted once, here, after a range check).

    Built once, it is checked once and analysed once: its rowptr and
    indices are copied to the host (one synchronisation of the current
    stream), checked as Mage's content check does (rowptr starts at 0,
    never decreases and ends at the edge count; every index below
    ``num_nodes``) and rowptr kept on the host for the dispatcher. No call
    of ``mage.neighbor`` on it copies to the host or synchronises. Writing
    to its rowptr or indices in place afterwards is refused at the next
    call (torch's version counter); build a new ``Graph`` then.
    """

    def __init__(self, rowptr: Tensor, indices: Tensor, num_nodes: int):
        for what, t in (("rowptr", rowptr), ("indices", indices)):
            if not isinstance(t, Tensor):
                raise MageError(f"mage.Graph: {what} is {type(t).__name__}, not a torch tensor")
            if t.device.type != "cuda":
                raise MageError(f"mage.Graph: {what} is on {t.device}; Mage's kernels run on CUDA tensors (.cuda())")
            if t.dtype not in (torch.int32, torch.int64):
                raise MageError(f"mage.Graph: {what} is {t.dtype}; it must be torch.int32 (or torch.int64, converted once)")
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
            raise MageError(f"mage.Graph: num_nodes is {num_nodes!r}; it must be a whole number from 1")
        converted = []
        for what, t in (("rowptr", rowptr), ("indices", indices)):
            if t.dtype == torch.int64:
                if t.numel() and (int(t.min()) < 0 or int(t.max()) >= 2**31):
                    raise MageError(f"mage.Graph: {what} holds a value outside 0 to 2^31 - 1; Mage's graphs are int32")
                t = t.to(torch.int32)
            t = t.contiguous()
            # A view starting off a 16-byte boundary gets a block of its own (the extension refuses it).
            converted.append(t.clone() if t.data_ptr() % 16 else t)
        self.rowptr, self.indices = converted
        self.num_nodes = num_nodes
        self.info = _C.GraphInfo(self.rowptr, self.indices, num_nodes)
        self.id = self.info.id
        self.t_rowptr, self.t_rows, self.t_edges = _transpose(self.rowptr, self.indices, num_nodes)
        self._versions = (_version(self.rowptr), _version(self.indices))
        _GRAPHS[self.id] = self

    @property
    def num_edges(self) -> int:
        return self.info.edges

    def stage(self, width: int) -> str:
        """The neighbor stage Mage's dispatcher picks for this graph and
        ``width`` features."""
        return self.info.stage(width)

    def __repr__(self):
        return f"mage.Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, device={self.rowptr.device})"


def _transpose(rowptr: Tensor, indices: Tensor, num_nodes: int) -> Tuple[Tensor, Tensor, Tensor]:
    """The transpose ``neighbor_backward`` reads, ``(t_rowptr, t_rows,
    t_edges)``, int32, built once per graph on the graph's device: each
    source's edges in increasing edge order (a stable sort of indices),
    the row of each, and the offsets of each source's edges."""
    index = indices.long()
    order = torch.sort(index, stable=True).indices
    rows = torch.repeat_interleave(torch.arange(num_nodes, device=index.device), torch.diff(rowptr.long()))
    counts = torch.bincount(index, minlength=num_nodes)
    t_rowptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)]).to(torch.int32)
    return t_rowptr, rows[order].to(torch.int32).contiguous(), order.to(torch.int32).contiguous()


def _graph(graph_id: int, rowptr: Tensor, indices: Tensor) -> Graph:
    g = _GRAPHS.get(graph_id)
    if g is None:
        raise MageError(f"mage.neighbor: graph {graph_id} is gone (no mage.Graph of that id is alive)")
    if g.rowptr.data_ptr() != rowptr.data_ptr() or g.indices.data_ptr() != indices.data_ptr():
        # Not the graph's own tensors (``mage.neighbor`` always passes
        # those): copies are accepted if equal, which reads them on the host
        # (a synchronisation, on this path only; opcheck passes copies).
        same = (rowptr.shape == g.rowptr.shape and indices.shape == g.indices.shape and rowptr.device == g.rowptr.device
                and indices.device == g.indices.device and torch.equal(rowptr, g.rowptr) and torch.equal(indices, g.indices))
        if not same:
            raise MageError(f"mage.neighbor: rowptr and indices are not those of mage.Graph {graph_id}")
    if (_version(g.rowptr), _version(g.indices)) != g._versions:
        raise MageError("mage.neighbor: the graph's rowptr or indices were written in place after mage.Graph checked them; build a new mage.Graph")
    return g


def _neighbor_checks(rowptr, indices, x, w, fake=False):
    check = _check_fake if fake else _check
    check(x, "x", "neighbor")
    check(w, "w", "neighbor")
    if not fake:
        _same_device("neighbor", x, ("w", w), ("rowptr", rowptr))
    if x.dim() < 1 or x.shape[0] != rowptr.shape[0] - 1:
        raise MageError(f"mage.neighbor: x is {list(x.shape)}; a graph of {rowptr.shape[0] - 1} nodes takes x of [{rowptr.shape[0] - 1}, ...]")
    if tuple(w.shape) != tuple(indices.shape):
        raise MageError(f"mage.neighbor: w is {list(w.shape)}; a graph of {indices.shape[0]} edges takes one weight per edge")


@torch.library.custom_op("mage::neighbor", mutates_args=())
def _neighbor(rowptr: Tensor, indices: Tensor, x: Tensor, w: Tensor, graph_id: int) -> Tensor:
    """``Y[i] = Σ_{e in row i} w[e]·x[indices[e]]`` through Mage's
    ``neighbor``, the stage picked from the graph (``mage.neighbor``)."""
    _neighbor_checks(rowptr, indices, x, w)
    g = _graph(graph_id, rowptr, indices)
    if x.numel() == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    x2 = x.reshape(x.shape[0], -1).contiguous()
    if indices.numel() == 0:
        return x.new_zeros(x.shape)
    (y,) = _run("neighbor", "neighbor", (x2, w.contiguous(), g.rowptr, g.indices), graph=g.info)
    return y.view(x.shape)


@_neighbor.register_fake
def _(rowptr, indices, x, w, graph_id):
    _neighbor_checks(rowptr, indices, x, w, fake=True)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("mage::neighbor_backward", mutates_args=())
def _neighbor_backward(grad: Tensor, rowptr: Tensor, indices: Tensor, x: Tensor, w: Tensor, graph_id: int) -> Tuple[Tensor, Tensor]:
    """(dx, dw) through Mage's ``neighbor_backward``, its inputs and outputs
    matched by role from the registry at call time."""
    g = _graph(graph_id, rowptr, indices)
    if x.numel() == 0 or indices.numel() == 0:
        return torch.zeros_like(x, memory_format=torch.contiguous_format), torch.zeros_like(w, memory_format=torch.contiguous_format)
    width = x.numel() // x.shape[0]
    have = {
        "x": x.reshape(x.shape[0], width).contiguous(),
        "w": w.contiguous(),
        "rowptr": g.rowptr,
        "indices": g.indices,
        "dY": grad.reshape(x.shape[0], width).contiguous(),
        "t_rowptr": g.t_rowptr,
        "t_rows": g.t_rows,
        "t_edges": g.t_edges,
    }
    info = _C.op_info("neighbor_backward")
    roles = [i["role"] for i in info["inputs"]]
    missing = [r for r in roles if r not in have]
    if missing:
        raise MageError(f"mage.neighbor: neighbor_backward takes {', '.join(roles)}; this package knows no input {', '.join(missing)}")
    outs = dict(zip([o["role"] for o in info["outputs"]], _run("neighbor_backward", "neighbor", [have[r] for r in roles], graph=g.info)))
    dx = outs.get("dX", outs.get("dx"))
    if dx is None or "dw" not in outs:
        raise MageError(f"mage.neighbor: neighbor_backward writes {', '.join(outs)}; this package reads dX and dw")
    return dx.view(x.shape), outs["dw"]


@_neighbor_backward.register_fake
def _(grad, rowptr, indices, x, w, graph_id):
    return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(w, memory_format=torch.contiguous_format)


def _neighbor_setup(ctx, inputs, output):
    rowptr, indices, x, w, graph_id = inputs
    ctx.graph_id = graph_id
    ctx.save_for_backward(rowptr, indices, x, w)


def _neighbor_grad(ctx, grad):
    rowptr, indices, x, w = ctx.saved_tensors
    dx, dw = _call("neighbor_backward", grad, rowptr, indices, x, w, ctx.graph_id)
    return None, None, dx, dw, None


_register_autograd(_neighbor, _neighbor_grad, _neighbor_setup)


def neighbor(graph: Graph, x: Tensor, w: Tensor) -> Tensor:
    """``Y[i] = Σ_{e in row i} w[e]·x[indices[e]]`` over ``graph`` (a
    ``mage.Graph``); ``x`` is [num_nodes, ...] (trailing dims flattened to
    the width), ``w`` one weight per edge. ``torch.ops.mage.neighbor(rowptr,
    indices, x, w, graph.id)`` underneath."""
    if not isinstance(graph, Graph):
        raise MageError(f"mage.neighbor: graph is {type(graph).__name__}; it must be a mage.Graph (mage.Graph(rowptr, indices, num_nodes))")
    return _call("neighbor", graph.rowptr, graph.indices, x, w, graph.id)


# ---------------------------------------------------------------- the eager path's tables
#
# Every custom op of this module, by name: its function and, where it has a
# gradient, an autograd.Function. Where this torch's custom ops do not keep
# their function (`_init_fn`), nothing is filled and every call goes
# through the dispatcher.

for _op in [v for v in list(globals().values()) if hasattr(v, "_opoverload") and callable(getattr(v, "_init_fn", None))]:
    _IMPLS[_op._name] = _op._init_fn
    if _op._name in _GRADIENTS:
        _FUNCTIONS[_op._name] = _function(_op._name, _op._init_fn, *_GRADIENTS[_op._name])
del _op

# ---------------------------------------------------------------- the package's functions
#
# What ``mage.layer_norm`` and the others are: the custom op by the eager
# path where it may (``_call``), ``torch.ops.mage.*`` otherwise. Before
# either, the plain path: where the call is the common one (float32 CUDA
# tensors of the shapes the Mage op takes, contiguous, no gradient wanted,
# no mode), one ``Launcher.run_plain`` makes every check the op's function
# would and launches, with no Python layer between; it returns None (and
# has done nothing) otherwise, and the call takes ``_call``; an input that
# wants a gradient goes to ``_call`` at once (autograd). Only a
# launcher a call has made is used (the full path makes it, or says the op
# is missing), and only an ``eps`` a full call has checked.

_SHAPES = (list, tuple, torch.Size)
_GELU_FORWARD = {approximate: ops[0] for approximate, ops in _GELU_OPS.items()}


def _rows(x: Tensor, width):
    """`x` [..., width] as the 2-D [rows, width] a kernel reads: itself,
    or a view of a contiguous `x`; None otherwise."""
    shape = x.shape
    if len(shape) == 2:
        return x
    if len(shape) > 2 and shape[-1] == width and x.is_contiguous():
        return x.view(-1, width)
    return None


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """``torch.nn.functional.layer_norm`` through Mage's ``layernorm`` (``torch.ops.mage.layer_norm``)."""
    if (not _is_compiling() and type(input) is Tensor and type(normalized_shape) in _SHAPES and len(normalized_shape) == 1 and type(eps) is float
            and not (input.requires_grad and _grad_enabled())):
        launcher = _LAUNCHERS.get("layernorm")
        constants = _EPS_CONSTANTS.get(eps, _EPS_CONSTANTS)
        width = normalized_shape[0]
        if launcher is not None and constants is not _EPS_CONSTANTS and type(width) is int and input.shape[-1:] == (width,):
            x2 = _rows(input, width)
            if x2 is not None:
                gamma = _filled(1.0, width, input) if weight is None else weight
                beta = _filled(0.0, width, input) if bias is None else bias
                out = launcher.run_plain((x2, gamma, beta), constants)
                if out is not None:
                    return out[0] if x2 is input else out[0].view(input.shape)
    return _call("layer_norm", input, normalized_shape, weight, bias, eps)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``torch.nn.functional.gelu`` through Mage's gelu ops (``torch.ops.mage.gelu``)."""
    if not _is_compiling() and type(input) is Tensor and type(approximate) is str and input.dim() >= 2 and not (input.requires_grad and _grad_enabled()):
        launcher = _LAUNCHERS.get(_GELU_FORWARD.get(approximate))
        width = input.shape[-1]
        x2 = _rows(input, width) if launcher is not None else None
        if x2 is not None:
            out = launcher.run_plain((x2, _filled(0.0, width, input)))
            if out is not None:
                return out[0] if x2 is input else out[0].view(input.shape)
    return _call("gelu", input, approximate)


def bias_gelu(input: Tensor, bias: Tensor) -> Tensor:
    """``gelu(input + bias, approximate="tanh")`` fused (``torch.ops.mage.bias_gelu``)."""
    if not _is_compiling() and type(input) is Tensor and input.dim() >= 2 and not (input.requires_grad and _grad_enabled()):
        launcher = _LAUNCHERS.get("gelu")
        x2 = _rows(input, input.shape[-1]) if launcher is not None else None
        if x2 is not None:
            out = launcher.run_plain((x2, bias))
            if out is not None:
                return out[0] if x2 is input else out[0].view(input.shape)
    return _call("bias_gelu", input, bias)


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``torch.nn.functional.linear`` through Mage's ``matmul_nt`` (``torch.ops.mage.linear``)."""
    if bias is None and not _is_compiling() and type(input) is Tensor and not (input.requires_grad and _grad_enabled()):
        launcher = _LAUNCHERS.get("matmul_nt")
        if launcher is not None:
            out = launcher.run_plain((input, weight))
            if out is not None:
                return out[0]
    return _call("linear", input, weight, bias)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """``torch.matmul`` through Mage's ``matmul`` (``torch.ops.mage.matmul``)."""
    if not _is_compiling() and type(input) is Tensor and not (input.requires_grad and _grad_enabled()):
        launcher = _LAUNCHERS.get("matmul")
        if launcher is not None:
            out = launcher.run_plain((input, other))
            if out is not None:
                return out[0]
    return _call("matmul", input, other)


# An input that wants a gradient takes `_call`, then the op's
# autograd.Function; for the ops above, that Function's forward is the
# package's function itself, which (grad mode off inside a forward) tries
# the plain path before the op's full function.
for _name, _public in (("layer_norm", layer_norm), ("gelu", gelu), ("bias_gelu", bias_gelu), ("linear", linear), ("matmul", matmul)):
    if _name in _FUNCTIONS:
        _FUNCTIONS[_name] = _function(_name, _public, *_GRADIENTS[_name])
del _name, _public


def triangle(a: Tensor, b: Tensor) -> Tensor:
    """``O[..., i, j, c] = Σ_k A[..., i, k, c]·B[..., j, k, c]`` through Mage's ``triangle`` (``torch.ops.mage.triangle``)."""
    return _call("triangle", a, b)
