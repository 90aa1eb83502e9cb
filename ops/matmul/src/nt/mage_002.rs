//! matmul_nt mage-002: FP32 accuracy from TF32 tensor cores (3xTF32), B
//! stored `[n, k]`.
//!
//! Kernel body: [`crate::tf32x3`] (matmul mage-009's and mage-010's
//! product, generic over where B lies) with B's [`crate::tf32x3::NByK`]
//! layout; this module holds its entries and plan.
//!
//! ## What changed
//!
//! matmul's mage-009 computes `Cᵀ = Bᵀ · Aᵀ`: `wgmma`'s shared operand is
//! the A tile as two 128-byte-swizzled K-major planes (hi: the copied
//! floats, read truncated; lo: written by the split), and its register
//! operand a fragment of `Bᵀ` read from a padded row-major B tile. TF32
//! `wgmma` has no transpose bit, and here nothing needs one: B `[n, k]` is
//! K-contiguous like A, so the same 16-byte `cp.async` copies put its tile
//! (128 rows of 32 K, 16 KiB) in the A planes' swizzle, the fragment takes
//! the natural register layout (fragment row `ρ` of warp `w` is column `16
//! w + ρ` of the warpgroup's slice; K `l % 4` and `l % 4 + 4` are chunks
//! `2 s` and `2 s + 1` of the swizzled row): four scalar `ld.shared` per
//! fragment instead of two 64-bit ones, conflict-free (a warp's 8 rows of
//! an atom XOR the chunk to 8 different ones). The accumulators land in C
//! with the natural mapping: registers `4 q` and `4 q + 2` are columns
//! `col` and `col + 8` of row `8 q + 2 (l % 4)`. The A tile, the split,
//! the pipeline (four stages, K tiles of 32, a partial sum per tile), the
//! tile rows (64 or 128, [`tile_rows`]) and the error analysis are
//! mage-009's (its module doc): each output is the same sum of the same
//! split products as mage-009's on B transposed back, to the bit
//! (`tests/transposed.rs`).
//!
//! 16-byte copies need `k` a multiple of 4 (A's and B's rows are both `k`
//! floats; C is stored by the element): the `_v4` entries there, the
//! `_scalar` ones (4-byte copies) elsewhere. Every shape is supported.
//!
//! ## Prediction (H200)
//!
//! The same bytes as mage-009 from L2 (32 KiB a K tile at 128 rows) and in
//! shared memory (the B tile 16 KiB instead of 17, the fragment loads the
//! same 16 KiB), the same occupancy, one launch. ptxas (13.0.88, sm_90a):
//! 255 registers at 128 rows (mage-009: 247), 161 at 64 (140), no stack,
//! no spills; still one block of 256 threads per SM, bound by shared
//! memory (201712 or 136176 bytes) as mage-009 is. Two more `ld.shared` per step and
//! thread (the short-scoreboard stalls Nsight found leading in mage-009
//! are these loads) may cost a few percent: 1024³ (64 rows, 128 blocks)
//! 31-33 µs against mage-009's 31.18, 4096³ (128 rows, 1024 blocks)
//! 1600-1690 µs against 1607: within 1.05x of matmul's `current`.
//!
//! ## Measured
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=matmul_nt,matmul -->
//! | op | workload | Mage current | torch | torch_compile | triton | triton_tuned | triton_tf32x3 | torch_tf32 | floor | Mage / floor |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | matmul_nt | 1024x1024x1024 | **30.72** mage-002 | 54.55 | 54.77 | – | – | – | – | 42.24 | 0.73 |
//! | matmul | 1024x1024x1024 | **31.14** mage-009 | 55.25 | 55.69 | 61.61 | 56.27 | 65.82 | 12.64 | 42.24 | 0.74 |
//! | matmul_nt | 4096x4096x4096 | **1609** mage-002 | 2750 | 2727 | – | – | – | – | 2703 | 0.60 |
//! | matmul | 4096x4096x4096 | **1622** mage-009 | 2692 | 2671 | 3261 | 3218 | 2548 | 350.65 | 2703 | 0.60 |
//! <!-- /mage:table -->

#[cfg(not(target_arch = "nvptx64"))]
pub use crate::tf32x3::{BN, THREADS, shared_bytes, tile_rows};
use crate::tf32x3::{NByK, Rows64, Rows128, body};

mage_common::kernel! {
    /// 128 rows x 128 columns of C per block; `k` a multiple of 4: 16-byte copies. 256 threads.
    pub unsafe fn matmul_nt_3xtf32_m128_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows128, NByK>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 128 x 128 per block, any shape: 4-byte copies.
    pub unsafe fn matmul_nt_3xtf32_m128_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows128, NByK>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block; `k` a multiple of 4.
    pub unsafe fn matmul_nt_3xtf32_m64_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows64, NByK>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block, any shape.
    pub unsafe fn matmul_nt_3xtf32_m64_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows64, NByK>(a, b, c, m, n, k) }
    }
}

/// Whether the rows of A and B (`k` floats each) take 16-byte copies.
#[cfg(not(target_arch = "nvptx64"))]
pub fn vector_rows(d: &[u32]) -> bool {
    d[2].is_multiple_of(4)
}

/// The launch with `rows` (64 or 128) rows per block.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan_with_rows(d: &[u32], rows: u32) -> mage_common::op::Plan {
    let kernel = match (rows, vector_rows(d)) {
        (128, true) => &matmul_nt_3xtf32_m128_v4::KERNEL,
        (128, false) => &matmul_nt_3xtf32_m128_scalar::KERNEL,
        (64, true) => &matmul_nt_3xtf32_m64_v4::KERNEL,
        (64, false) => &matmul_nt_3xtf32_m64_scalar::KERNEL,
        _ => panic!("matmul_nt mage-002 has tiles of 64 or 128 rows, not {rows}"),
    };
    crate::tiled_launch(d, kernel, rows, BN, THREADS, shared_bytes(rows))
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    plan_with_rows(d, tile_rows(d))
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "3xTF32 (FP32 accuracy) on wgmma: matmul mage-009's product with B's [n, k] tile copied K-major into A's 128-byte swizzle, 128x128 or 64x128 tiles",
    kernels: &[
        &matmul_nt_3xtf32_m128_v4::KERNEL,
        &matmul_nt_3xtf32_m128_scalar::KERNEL,
        &matmul_nt_3xtf32_m64_v4::KERNEL,
        &matmul_nt_3xtf32_m64_scalar::KERNEL,
    ],
    supports: |_| true,
    plan,
};
