"""Triton kernels for the comparison, FP32 throughout (GPU only; imports triton).

Each kernel is the plain, idiomatic Triton way of writing the op, with
fixed tiles (no tuning) except :func:`matmul_tuned`:

* matmul: 64x64x32 tiles, grouped program order for L2 reuse,
  ``tl.dot(..., input_precision="ieee")`` (true FP32, no TF32);
  ``matmul_tuned`` autotunes the same kernel over 8 tile configs;
  ``matmul_tf32x3`` is the same kernel with ``input_precision="tf32x3"``
  (3xTF32 on the tensor cores), autotuned over 5 tensor-core tiles;
* layernorm: one program per row, the row held in one block of
  next_pow2(width), shifted by its first element, two-pass
  mean/variance, the registry's eps;
* gelu: bias + tanh-GELU fused, one program per 1024 elements;
  ``0.5*(1 + tanh(u)) = 1/(1 + exp(-2u))`` so tanh comes from exp;
* triangle: O[i, j, :] for an 8x8 block of (i, j) and a block of
  channels, looping over k with FMAs (channels are the vector lanes);
* neighbor: one program per destination row, looping over its edges.

The launch helpers write into a preallocated `out`; they launch on
torch's current stream.
"""

from __future__ import annotations

import triton
import triton.language as tl

#: Largest row block (elements) the held-row kernels accept.
MAX_ROW_BLOCK = 16384


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   PRECISION: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N]: one BLOCK_M x BLOCK_N tile per program,
    programs grouped GROUP_M tile-rows at a time so neighbours share B;
    PRECISION is tl.dot's input_precision ("ieee": true FP32)."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


#: The autotuned variant: the same kernel over 8 FP32-sized configs (the
#: shared memory of each fits the H200's 227 KiB at its stage count).
TUNE_CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 16, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16, "GROUP_M": 8}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=2, num_stages=4),
]

_matmul_tuned_kernel = triton.autotune(configs=TUNE_CONFIGS, key=["M", "N", "K"])(_matmul_kernel)


def _matmul_args(a, b, out):
    M, K = a.shape
    N = b.shape[1]
    return (a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))


def matmul(a, b, out):
    """Fixed 64x64x32 tiles, 4 warps, 3 stages."""
    args = _matmul_args(a, b, out)
    M, N = args[3], args[4]
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    _matmul_kernel[grid](*args, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, PRECISION="ieee", num_warps=4, num_stages=3)


def _autotuned(kernel, a, b, out, precision):
    args = _matmul_args(a, b, out)
    M, N = args[3], args[4]
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](*args, PRECISION=precision)


def matmul_tuned(a, b, out):
    """The autotuned variant; the first call at a shape runs the tuning."""
    _autotuned(_matmul_tuned_kernel, a, b, out, "ieee")


#: Tensor-core tiles for the 3xTF32 variant (`input_precision="tf32x3"`:
#: three TF32 products per term, FP32-level accuracy), autotuned like
#: `matmul_tuned`.
TF32X3_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 16, "GROUP_M": 8}, num_warps=8, num_stages=3),
]

_matmul_tf32x3_kernel = triton.autotune(configs=TF32X3_CONFIGS, key=["M", "N", "K"])(_matmul_kernel)


def matmul_tf32x3(a, b, out):
    """3xTF32 on the tensor cores, autotuned at the shape on its first call."""
    _autotuned(_matmul_tf32x3_kernel, a, b, out, "tf32x3")


def _best_config(kernel):
    best = getattr(kernel, "best_config", None)
    if best is None:
        return None
    return {"kwargs": dict(best.kwargs), "num_warps": best.num_warps, "num_stages": best.num_stages}


def matmul_tf32x3_best_config():
    """The config autotuning picked for the 3xTF32 variant, or None."""
    return _best_config(_matmul_tf32x3_kernel)


def matmul_tuned_best_config():
    """The config autotuning picked (after a call), as a dict, or None."""
    return _best_config(_matmul_tuned_kernel)


@triton.jit
def _layernorm_kernel(x_ptr, g_ptr, b_ptr, y_ptr, width, eps, BLOCK: tl.constexpr):
    """One row per program: the row shifted by its first element (so a
    large mean costs no precision), its mean, then the variance of the
    centred row (biased); y = (x - mean) * rstd * gamma + beta."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < width
    x0 = tl.load(x_ptr + row * width)
    x = tl.where(mask, tl.load(x_ptr + row * width + cols, mask=mask, other=0.0) - x0, 0.0)
    mean = tl.sum(x, axis=0) / width
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / width
    rstd = 1.0 / tl.sqrt(var + eps)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * width + cols, d * rstd * g + b, mask=mask)


def layernorm_config(width: int) -> dict:
    block = triton.next_power_of_2(max(width, 1))
    if block > MAX_ROW_BLOCK:
        raise ValueError(f"width {width} needs a block of {block} > {MAX_ROW_BLOCK}; the one-row-per-program kernel does not cover it")
    return {"BLOCK": block, "num_warps": min(max(block // 256, 1), 8)}


def layernorm(x, gamma, beta, out, eps):
    rows, width = x.shape
    cfg = layernorm_config(width)
    _layernorm_kernel[(rows,)](x, gamma, beta, out, width, eps, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])


@triton.jit
def _gelu_kernel(x_ptr, bias_ptr, y_ptr, total, width, c, cubic, BLOCK: tl.constexpr):
    """y = gelu_tanh(x + bias[col]) over the flattened [rows, width] array,
    with 0.5*z*(1 + tanh(u)) computed as z / (1 + exp(-2u))."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + offs % width, mask=mask, other=0.0)
    z = x + bias
    u = c * (z + cubic * z * z * z)
    tl.store(y_ptr + offs, z / (1.0 + tl.exp(-2.0 * u)), mask=mask)


def gelu(x, bias, out, c, cubic):
    """`c` = sqrt(2/pi) and `cubic` = 0.044715, from the registry."""
    rows, width = x.shape
    total = rows * width
    block = 1024
    _gelu_kernel[(triton.cdiv(total, block),)](x, bias, out, total, width, c, cubic, BLOCK=block, num_warps=4)


@triton.jit
def _triangle_kernel(a_ptr, b_ptr, o_ptr, n, C, BI: tl.constexpr, BJ: tl.constexpr, BC: tl.constexpr):
    """O[i, j, c] = sum_k A[i, k, c] * B[j, k, c] for a BI x BJ block of
    (i, j) and BC channels: per k, one [BI, BC] slice of A and one
    [BJ, BC] slice of B feed BI*BJ*BC FMAs."""
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    j = tl.program_id(1) * BJ + tl.arange(0, BJ)
    c = tl.program_id(2) * BC + tl.arange(0, BC)
    mi = i < n
    mj = j < n
    mc = c < C
    a_base = a_ptr + i[:, None].to(tl.int64) * n * C + c[None, :]
    b_base = b_ptr + j[:, None].to(tl.int64) * n * C + c[None, :]
    acc = tl.zeros((BI, BJ, BC), dtype=tl.float32)
    for k in range(0, n):
        a = tl.load(a_base + k * C, mask=mi[:, None] & mc[None, :], other=0.0)
        b = tl.load(b_base + k * C, mask=mj[:, None] & mc[None, :], other=0.0)
        acc += a[:, None, :] * b[None, :, :]
    o = o_ptr + (i[:, None, None].to(tl.int64) * n + j[None, :, None]) * C + c[None, None, :]
    tl.store(o, acc, mask=mi[:, None, None] & mj[None, :, None] & mc[None, None, :])


def triangle_config(C: int) -> dict:
    return {"BI": 8, "BJ": 8, "BC": min(triton.next_power_of_2(max(C, 1)), 32), "num_warps": 4}


def triangle(a, b, out):
    n, _, C = a.shape
    cfg = triangle_config(C)
    grid = (triton.cdiv(n, cfg["BI"]), triton.cdiv(n, cfg["BJ"]), triton.cdiv(C, cfg["BC"]))
    _triangle_kernel[grid](a, b, out, n, C, BI=cfg["BI"], BJ=cfg["BJ"], BC=cfg["BC"], num_warps=cfg["num_warps"])


@triton.jit
def _neighbor_kernel(x_ptr, w_ptr, rowptr_ptr, idx_ptr, out_ptr, width, BLOCK_W: tl.constexpr):
    """out[i, :] = sum over the edges e of row i of w[e] * x[indices[e], :];
    one program per destination row, the row's edges in order."""
    i = tl.program_id(0)
    cols = tl.arange(0, BLOCK_W)
    mask = cols < width
    start = tl.load(rowptr_ptr + i)
    end = tl.load(rowptr_ptr + i + 1)
    acc = tl.zeros((BLOCK_W,), dtype=tl.float32)
    for e in range(start, end):
        src = tl.load(idx_ptr + e).to(tl.int64)
        wv = tl.load(w_ptr + e)
        acc += wv * tl.load(x_ptr + src * width + cols, mask=mask, other=0.0)
    tl.store(out_ptr + i.to(tl.int64) * width + cols, acc, mask=mask)


def neighbor_config(width: int) -> dict:
    block = triton.next_power_of_2(max(width, 1))
    if block > MAX_ROW_BLOCK:
        raise ValueError(f"width {width} needs a block of {block} > {MAX_ROW_BLOCK}")
    return {"BLOCK_W": block, "num_warps": min(max(block // 128, 1), 8)}


def neighbor(x, w, rowptr, indices, out):
    """rowptr and indices are int32 tensors (the u32 bytes of the case)."""
    n, width = x.shape
    cfg = neighbor_config(width)
    _neighbor_kernel[(n,)](x, w, rowptr, indices, out, width, BLOCK_W=cfg["BLOCK_W"], num_warps=cfg["num_warps"])
