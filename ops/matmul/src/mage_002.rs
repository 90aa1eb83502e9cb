//! mage-002: a 64x64 block tile, a 4x4 register tile per thread, K step 32,
//! 128-bit global loads.
//!
//! Kernel body: this module (`matmul_reg4x4_*`), over the crate root's
//! `load_quad`, `rank1_update` and `store_tile`.
//!
//! What: a 256-thread block computes a 64x64 tile of C, each thread a 4x4
//! piece of it held in 16 registers. For each K step of 32 the block copies
//! A's 64x32 tile and B's 32x64 tile into shared memory (16 KiB) with
//! 128-bit global loads, two quads of each per thread; then each thread
//! reads 4 values of the A tile and 4 of the B tile per `k` and does the 16
//! multiply-adds of their outer product.
//!
//! Why it should help: mage-001 needs two shared loads per multiply-add;
//! the register tile needs 8 per 16 (a quarter as many), and each value
//! loaded from global memory now serves 64 outputs instead of 16. The
//! 128-bit loads quarter the load instructions of the copies.
//!
//! Tails: quads outside A or B are zero-filled. 128-bit loads and stores
//! need rows of a multiple of 4 floats, so the plan launches
//! `matmul_reg4x4_v4` where `n` and `k` are multiples of 4 and
//! `matmul_reg4x4_scalar` (the same kernel with four guarded scalar
//! accesses per quad) otherwise.
//!
//! Measured: about 2.5 times faster than mage-001 from 1024³ up. GPU kernel
//! time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-matmul.json stage=mage-002 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 256x256x256 | 17.73 | 24.35 |
//! | 512x512x512 | 34.57 | 39.70 |
//! | 1024x1024x1024 | 115.90 | 121.42 |
//! | 2048x2048x2048 | 893.89 | 901.50 |
//! | 4096x4096x4096 | 6965 | 6986 |
//! | 1000x1037x999 | 184.49 | 193.17 |
//! <!-- /mage:table -->

use crate::{load_quad, rank1_update, store_tile};
use mage_common::device::*;

pub const BM: u32 = 64;
pub const BN: u32 = 64;
pub const BK: u32 = 32;
pub const THREADS: u32 = 256;
/// Floats of the A tile, `As[r][kk]` (row stride `BK`).
const A_FLOATS: u32 = BM * BK;
/// Floats of the B tile, `Bs[kk][c]` (row stride `BN`), after the A tile.
const B_FLOATS: u32 = BK * BN;
pub const SHARED_BYTES: u32 = (A_FLOATS + B_FLOATS) * 4;

/// The kernel body; `VEC` picks 128-bit or scalar global accesses.
#[inline(always)]
unsafe fn body<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let (tx, ty) = (t % 16, t / 16);
    let tiles_n = n.div_ceil(BN).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * BM, block_idx_x() % tiles_n * BN);
    let mut acc = [[0.0f32; 4]; 4];
    let mut k0 = 0;
    while k0 < k {
        // Quad q of the A tile: row q / 8, columns 4 (q % 8)..; of the B tile: row q / 16, columns 4 (q % 16)...
        let mut va = [F32x4::ZERO; 2];
        let mut vb = [F32x4::ZERO; 2];
        for i in 0..2 {
            let q = t + THREADS * i as u32;
            va[i] = unsafe { load_quad::<VEC>(a, row0 + q / 8, m, k0 + 4 * (q % 8), k) };
            vb[i] = unsafe { load_quad::<VEC>(b, k0 + q / 16, k, col0 + 4 * (q % 16), n) };
        }
        for i in 0..2 {
            let q = t + THREADS * i as u32;
            smem_st4((q / 8 * BK + 4 * (q % 8)) * 4, va[i]);
            smem_st4((A_FLOATS + q / 16 * BN + 4 * (q % 16)) * 4, vb[i]);
        }
        sync_threads();
        for kk in 0..BK {
            let av = [0, 1, 2, 3].map(|i| smem_ld(((ty * 4 + i) * BK + kk) * 4));
            let bv = [0, 1, 2, 3].map(|j| smem_ld((A_FLOATS + kk * BN + tx * 4 + j) * 4));
            rank1_update(&mut acc, av, bv);
        }
        // Everyone is done with the tiles before they are overwritten.
        sync_threads();
        k0 += BK;
    }
    unsafe { store_tile::<VEC>(c, &acc, row0 + ty * 4, col0 + tx * 4, m, n) }
}

mage_common::kernel! {
    /// `n` and `k` multiples of 4: 128-bit global loads and stores. `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_reg4x4_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// Any shape: scalar global loads and stores.
    pub unsafe fn matmul_reg4x4_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false>(a, b, c, m, n, k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if crate::vector_rows(d) { &matmul_reg4x4_v4::KERNEL } else { &matmul_reg4x4_scalar::KERNEL };
    crate::tiled_launch(d, kernel, BM, BN, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "64x64 block tile, 4x4 register tile per thread, K step 32, 128-bit global loads",
    kernels: &[&matmul_reg4x4_v4::KERNEL, &matmul_reg4x4_scalar::KERNEL],
    supports: |_| true,
    plan,
};
