//! mage-012: small k on CUDA cores: a 4x4 register tile per thread, its
//! terms read straight from global memory, no shared memory, no barrier.
//!
//! Kernel body: this module (`matmul_small_k_v4`, `matmul_small_k_scalar`).
//!
//! ## What changed
//!
//! Below k = 64 `current` runs mage-006 (or mage-007 from 72 tiles of
//! 128x128): 64x64 block tiles whose K goes in tiles of 32 through shared
//! memory, each tile zero-filled past `k`. At k = 1 a block still copies a
//! 32-K tile of A and B into shared memory, meets at barriers and runs 32
//! rank-1 updates of which 31 add zeros: 1024x1024x1 took 4.13 µs
//! (Triton 2.91), against about 1.5 µs for writing the 4 MiB of C at 3
//! TB/s. Here a block of 256 threads owns 32 rows x 128 columns of C; warp
//! `w` rows `4 w..4 w + 4`, lane `l` columns `4 l..4 l + 4`, so each of a
//! warp's four 128-bit stores of C covers 512 contiguous bytes of one
//! row. A thread runs exactly `k` rank-1 updates of its 4x4 tile: per term
//! `p` four scalar loads of A's column `p` (the same address in every lane
//! of a warp: one broadcast each) and one 128-bit load of B's row `p`
//! (`ld.global.nc`, a warp's 512 contiguous bytes), then 16 `fma`. Nothing
//! is staged, so nothing waits on a barrier, and no term is a zero added
//! for a tile's sake.
//!
//! Each output is `acc = fma(a[i, p], b[p, j], acc)` for `p = 0, 1, ...,
//! k - 1` in order from `acc = 0`, so its bits are those of every stage in
//! [`crate::FMA_STAGES`] (`tests/stages.rs`), on the emulator and on the
//! GPU. It takes any `m, n, k >= 1`: rows past `m` and columns past `n`
//! are computed on zeros and not stored; the `_v4` entry (128-bit loads of
//! B, stores of C) where `n` is a multiple of 4, `_scalar` (guarded scalar
//! loads and stores) otherwise. It is meant for `k < 64`, where the 3xTF32
//! stages are not (mage-009's error bound) and the shared tiles of mage-006
//! and mage-007 spend more on the tile than on the terms.
//!
//! ## Prediction (H200, 132 SMs, 1.98 GHz)
//!
//! - 1024x1024x1: 256 blocks (all resident at once, about 2 per SM), each
//!   thread 4 loads of A, one of B, 16 `fma` and four 128-bit stores: the
//!   4 MiB of C, 1.4 µs at 3 TB/s, and the launch's ramp: 2.2-2.6 µs
//!   (mage-006 4.13, Triton 2.91). Up to k ≈ 32 the same, the loads
//!   hitting L1 (B's 4 KiB a term); at k = 63, 66 M `fma` and 5 load
//!   instructions per 16 `fma`: about 2.5-3.5 µs.
//! - 256³: 16 blocks of 256 steps each on 16 SMs, about 25 instructions a
//!   step for 8 warps: 6-8 µs, no better than mage-001 (7.46).
//! - 512³: 64 blocks of 512 steps, 13-15 µs: worse than mage-009 (16.54)
//!   only a little, and far from mage-011's split.
//! - 1000x1037x999: 288 blocks, about 2 per SM, of 999 steps: FMA- and
//!   issue-bound, about 55-60 µs against mage-010's 63-75: not where it is
//!   meant to run (and from k = 64 the 3xTF32 stages hold those shapes).
//!
//! ## Measured
//!
//! `results/mage-013` (CUPTI kernel time, hot L2, medians): 1024x1024x1
//! 2.03 µs (mage-006 4.10, torch.compile 3.58), 2048x2048x1 5.01 (mage-007
//! 7.50, Triton 6.94): as predicted. Where k is long it lost by far more
//! than predicted: 256³ 58.35 µs (predicted 6-8), 512³ 119.46 (13-15),
//! 1000x1037x999 337.00 (55-60), 4096x4096x63 139.20 (mage-007 59.26).
//! Each term is four broadcast loads and one 128-bit load for 16 `fma`,
//! every load on the path of the next `fma`, with 8 warps a block and
//! few blocks: the loop waits on L1 latency, not on the FMA pipes (not
//! profiled). `current` takes it at k = 1 only ([`crate::current`]).

use crate::{load_quad, rank1_update, store_tile};
use mage_common::device::*;

/// Threads per block: 8 warps.
pub const THREADS: u32 = 256;
/// Rows of C per block: 4 per warp.
pub const BM: u32 = 32;
/// Columns of C per block: 4 per lane.
pub const BN: u32 = 128;

/// The kernel body; `VEC`: `n` a multiple of 4 (128-bit loads of B and
/// stores of C).
///
/// # Safety
/// `a`, `b` and `c` hold the `m * k`, `k * n` and `m * n` matrices.
#[inline(always)]
unsafe fn body<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    // At least 1 (n >= 1), said so the division needs no zero check.
    let tiles_n = n.div_ceil(BN).max(1);
    let (row, col) = (block_idx_x() / tiles_n * BM + 4 * (t / 32), block_idx_x() % tiles_n * BN + 4 * (t % 32));
    if row >= m || col >= n {
        return;
    }
    let a_at = |i: u32, p: u32| if row + i < m { unsafe { ld_nc(a, (row + i) * k + p) } } else { 0.0 };
    let mut acc = [[0f32; 4]; 4];
    for p in 0..k {
        let x = [a_at(0, p), a_at(1, p), a_at(2, p), a_at(3, p)];
        // SAFETY: `b` holds the `k * n` matrix.
        let y = unsafe { load_quad::<VEC>(b, p, k, col, n) }.to_array();
        rank1_update(&mut acc, x, y);
    }
    // SAFETY: `c` holds the `m * n` output; this thread alone writes the tile.
    unsafe { store_tile::<VEC>(c, &acc, row, col, m, n) }
}

mage_common::kernel! {
    /// Block `b`: rows `32 (b / tiles_n)..` and columns `128 (b % tiles_n)..`
    /// of C, a 4x4 tile per thread; `n` a multiple of 4. 256 threads, no
    /// shared memory.
    pub unsafe fn matmul_small_k_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// As the `_v4` entry, any `n`: scalar loads of B and stores of C.
    pub unsafe fn matmul_small_k_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false>(a, b, c, m, n, k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if crate::vector_b_rows(d) { &matmul_small_k_v4::KERNEL } else { &matmul_small_k_scalar::KERNEL };
    crate::tiled_launch(d, kernel, BM, BN, THREADS, 0)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-012",
    summary: "small k on CUDA cores: a 4x4 register tile per thread from global memory, no shared memory or barrier, one fma per term in order, 128-bit loads of B and stores of C",
    kernels: &[&matmul_small_k_v4::KERNEL, &matmul_small_k_scalar::KERNEL],
    supports: |_| true,
    plan,
};
