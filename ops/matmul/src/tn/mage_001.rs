//! matmul_tn mage-001: 16x16 shared tiles, one output per thread.
//!
//! Kernel body: this module (`matmul_tn_tile16`).
//!
//! What: matmul's first stage with A stored `[k, m]`. A 256-thread block
//! computes a 16x16 tile of C. For each K step of 16, every thread copies
//! one element of A's tile and one of B's into shared memory, both by K
//! row (`As[p][i] = A[k0 + p, row0 + i]`, `Bs[p][j] = B[k0 + p, col0 +
//! j]`: a half-warp reads 16 consecutive floats of a row of each; zero
//! outside the matrices), the block meets at a barrier, and each thread
//! runs 16 fused multiply-adds over a column of each tile (a half-warp
//! reads one float of `As`, a broadcast, and 16 consecutive ones of `Bs`).
//!
//! Each output is `acc = fma(a[p, i], b[p, j], acc)` for `p = 0, 1, ..., k
//! - 1` in that order: matmul mage-001's bits on A transposed back
//! (`tests/transposed.rs` holds it to that).
//!
//! Why: the obviously right starting point, and the stage `current` keeps
//! where the 3xTF32 product's error bound leaves the tolerance (k < 64) or
//! its tiles leave the GPU idle.
//!
//! Prediction: matmul mage-001's times (the same loads and multiply-adds;
//! 7.42 µs at 256³, 283 at 1024³ on the H200, `results/candidates-1`).
//!
//! Measured: not yet measured on the GPU.

use mage_common::device::*;

pub const TILE: u32 = 16;
pub const THREADS: u32 = TILE * TILE;
/// The A tile, then the B tile, 16x16 floats each, K rows.
pub const SHARED_BYTES: u32 = 2 * TILE * TILE * 4;

mage_common::kernel! {
    /// Block `b` computes tile `(b / tiles_n, b % tiles_n)` of C; `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_tn_tile16(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        let t = thread_idx_x();
        let (tx, ty) = (t % TILE, t / TILE);
        // At least 1 (n >= 1), said so the division needs no zero check.
        let tiles_n = n.div_ceil(TILE).max(1);
        let (row0, col0) = (block_idx_x() / tiles_n * TILE, block_idx_x() % tiles_n * TILE);
        let (row, col) = (row0 + ty, col0 + tx);
        // As[ty][tx] = A[k0 + ty, row0 + tx] and Bs[ty][tx] = B[k0 + ty, col], byte offsets.
        let (a_at, b_at) = (t * 4, (THREADS + t) * 4);
        let a_col = row0 + tx;
        let mut acc = 0.0;
        let mut k0 = 0;
        while k0 < k {
            let kk = k0 + ty;
            smem_st(a_at, if kk < k && a_col < m { unsafe { ld_nc(a, kk * m + a_col) } } else { 0.0 });
            smem_st(b_at, if kk < k && col < n { unsafe { ld_nc(b, kk * n + col) } } else { 0.0 });
            sync_threads();
            for p in 0..TILE {
                acc = fma(smem_ld((p * TILE + ty) * 4), smem_ld((THREADS + p * TILE + tx) * 4), acc);
            }
            // Everyone is done with the tiles before they are overwritten.
            sync_threads();
            k0 += TILE;
        }
        if row < m && col < n {
            unsafe { st(c, row * n + col, acc) }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    crate::tiled_launch(d, &matmul_tn_tile16::KERNEL, TILE, TILE, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "16x16 shared tiles, one output per thread, 256 threads",
    kernels: &[&matmul_tn_tile16::KERNEL],
    supports: |_| true,
    plan,
};
