//! mage-001: 16x16 shared tiles, one output per thread.
//!
//! Kernel body: this module (`matmul_tile16`).
//!
//! What: a 256-thread block computes a 16x16 tile of C. For each K step of
//! 16, every thread copies one element of A's 16x16 tile and one of B's
//! into shared memory (zero outside the matrices), the block meets at a
//! barrier, and each thread runs 16 fused multiply-adds over a row of the
//! A tile and a column of the B tile.
//!
//! Why: the textbook starting point. Each element of A and B is read from
//! global memory `n / 16` and `m / 16` times instead of `n` and `m` times,
//! but every multiply-add needs two shared loads, so shared bandwidth
//! bounds it long before the FMA units do.
//!
//! Measured: the fastest stage at 256³, where its 256 blocks fill the GPU
//! and the others' do not; slow everywhere else. GPU kernel time per call
//! (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-matmul.json stage=mage-001 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 256x256x256 | 7.42 | 12.78 |
//! | 512x512x512 | 39.39 | 45.71 |
//! | 1024x1024x1024 | 283.27 | 288.66 |
//! | 2048x2048x2048 | 2169 | 2177 |
//! | 4096x4096x4096 | 17450 | 17489 |
//! | 1000x1037x999 | 281.33 | 288.45 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const TILE: u32 = 16;
pub const THREADS: u32 = TILE * TILE;
/// The A tile, then the B tile, 16x16 floats each.
pub const SHARED_BYTES: u32 = 2 * TILE * TILE * 4;

mage_common::kernel! {
    /// Block `b` computes tile `(b / tiles_n, b % tiles_n)` of C; `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_tile16(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        let t = thread_idx_x();
        let (tx, ty) = (t % TILE, t / TILE);
        // At least 1 (n >= 1), said so the division needs no zero check.
        let tiles_n = n.div_ceil(TILE).max(1);
        let (row, col) = (block_idx_x() / tiles_n * TILE + ty, block_idx_x() % tiles_n * TILE + tx);
        // As[ty][tx] and Bs[ty][tx], byte offsets.
        let (a_at, b_at) = (t * 4, (THREADS + t) * 4);
        let mut acc = 0.0;
        let mut k0 = 0;
        while k0 < k {
            let (ka, kb) = (k0 + tx, k0 + ty);
            smem_st(a_at, if row < m && ka < k { unsafe { ld_nc(a, row * k + ka) } } else { 0.0 });
            smem_st(b_at, if kb < k && col < n { unsafe { ld_nc(b, kb * n + col) } } else { 0.0 });
            sync_threads();
            for kk in 0..TILE {
                acc = fma(smem_ld((ty * TILE + kk) * 4), smem_ld((THREADS + kk * TILE + tx) * 4), acc);
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
    crate::tiled_launch(d, &matmul_tile16::KERNEL, TILE, TILE, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "16x16 shared tiles, one output per thread, 256 threads",
    kernels: &[&matmul_tile16::KERNEL],
    supports: |_| true,
    plan,
};
