//! matmul_nt mage-001: 16x16 shared tiles, one output per thread.
//!
//! Kernel body: [`crate::tile16`] (shared with matmul_tn mage-001); this module holds its entry and plan.
//!
//! What: matmul's first stage with B stored `[n, k]`. A 256-thread block
//! computes a 16x16 tile of C. For each K step of 16, every thread copies
//! one element of A's 16x16 tile and one of B's (row `ty` of the B tile is
//! C's column `col0 + ty`, K along the row, so both copies read 16
//! consecutive floats of a row per half-warp; zero outside the matrices),
//! the block meets at a barrier, and each thread runs 16 fused
//! multiply-adds over a row of the A tile and a row of the B tile. The B
//! tile's rows are 17 floats apart, so the 16 threads of a half-warp, which
//! read 16 different rows at the same K, fall on 16 different banks.
//!
//! Each output is `acc = fma(a[i, p], b[j, p], acc)` for `p = 0, 1, ..., k
//! - 1` in that order: matmul mage-001's bits on B transposed back
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

use crate::tile16::{SHARED_BYTES, THREADS, TILE, body};

mage_common::kernel! {
    /// Block `b` computes tile `(b / tiles_n, b % tiles_n)` of C; `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_nt_tile16(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, false>(a, b, c, m, n, k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    crate::tiled_launch(d, &matmul_nt_tile16::KERNEL, TILE, TILE, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "16x16 shared tiles, one output per thread, 256 threads",
    kernels: &[&matmul_nt_tile16::KERNEL],
    supports: |_| true,
    plan,
};
