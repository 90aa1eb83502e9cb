//! matmul_tn mage-002: FP32 accuracy from TF32 tensor cores (3xTF32), A
//! stored `[k, m]`: A transposed into scratch by a launch of its own, then
//! matmul mage-009's product.
//!
//! Kernel bodies: [`super::transpose`] (`matmul_tn_transpose`'s) and
//! [`crate::tf32x3`] (matmul mage-009's and mage-010's product, with B's
//! [`crate::tf32x3::KByN`] layout, matmul's); this module holds the
//! entries and the plan.
//!
//! ## What changed
//!
//! TF32 `wgmma` takes its shared operand K-major only (no transpose bit
//! for tf32), and mage-009's shared operand is A's tile: here A `[k, m]`
//! arrives M-contiguous. This stage is the fallback the design allows: a
//! first launch transposes A into an `m` x `k` scratch matrix (32x32 tiles
//! through shared memory, rows of 33 floats, so both its reads and its
//! writes are whole 128-byte rows and its shared accesses conflict-free),
//! and the second is mage-009's product on it and B, unchanged: its
//! output is mage-009's on A transposed back, to the bit
//! (`tests/transposed.rs`). Entries as mage-009's: `_v4` (16-byte copies)
//! where `k` and `n` are multiples of 4, `_scalar` elsewhere; 64 or 128
//! rows by [`tile_rows`]. Every shape is supported.
//!
//! The transpose inside the product (each K tile copied raw and split from
//! there into the K-major planes, saving the scratch round trip) is
//! mage-003, at 64 rows only: four stages of 128 rows with a raw buffer do
//! not fit in a block's 227 KiB.
//!
//! ## Prediction (H200)
//!
//! The product is mage-009's: 31.18 µs at 1024³ and 1607 at 4096³
//! (`results/mage-012`). The transpose reads and writes `m·k·4` bytes
//! each: 8 MiB at 1024³, about 2-3 µs from a hot L2 with 1024 blocks of
//! 256 threads, and a launch; 128 MiB at 4096³, about 32-35 µs at ~4 TB/s
//! (A's 64 MiB does not stay in the 50 MB L2). So 1024³ 33-36 µs
//! (1.07-1.15x of matmul's `current`) and 4096³ 1640-1650 µs (1.02x).
//!
//! ## Measured
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=matmul_tn,matmul -->
//! | op | workload | Mage current | torch | torch_compile | triton | triton_tuned | triton_tf32x3 | torch_tf32 | floor | Mage / floor |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | matmul_tn | 1024x1024x1024 | **33.80** (2) mage-002 | 51.34 (2) | 51.83 (2) | – | – | – | – | 42.24 | 0.80 |
//! | matmul | 1024x1024x1024 | **31.14** mage-009 | 55.25 | 55.69 | 61.61 | 56.27 | 65.82 | 12.64 | 42.24 | 0.74 |
//! | matmul_tn | 4096x4096x4096 | **1624** (2) mage-002 | 2667 | 2647 | – | – | – | – | 2703 | 0.60 |
//! | matmul | 4096x4096x4096 | **1622** mage-009 | 2692 | 2671 | 3261 | 3218 | 2548 | 350.65 | 2703 | 0.60 |
//! <!-- /mage:table -->

#[cfg(not(target_arch = "nvptx64"))]
pub use crate::tf32x3::{BN, THREADS, shared_bytes, tile_rows};
use crate::tf32x3::{KByN, Rows64, Rows128, body};

pub use super::transpose::{TRANSPOSE_SHARED_BYTES, TRANSPOSE_THREADS, TRANSPOSE_TILE};

mage_common::kernel! {
    /// `dst` (`cols` x `rows`) = the transpose of `src` (`rows` x `cols`),
    /// both row-major; block `b` takes tile `(b / tiles_c, b % tiles_c)` of
    /// `src`. `TRANSPOSE_SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_tn_transpose(src: *const f32, dst: *mut f32, rows: u32, cols: u32) {
        unsafe { super::transpose::transpose(src, dst, rows, cols, rows) }
    }
}

mage_common::kernel! {
    /// 128 rows x 128 columns of C per block from the transposed A; `n`, `k` multiples of 4: 16-byte copies. 256 threads.
    pub unsafe fn matmul_tn_3xtf32_m128_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows128, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 128 x 128 per block, any shape: 4-byte copies.
    pub unsafe fn matmul_tn_3xtf32_m128_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows128, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block; `n`, `k` multiples of 4.
    pub unsafe fn matmul_tn_3xtf32_m64_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows64, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block, any shape.
    pub unsafe fn matmul_tn_3xtf32_m64_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows64, KByN>(a, b, c, m, n, k) }
    }
}

/// The two launches with `rows` (64 or 128) rows per block: the transpose
/// of A (`[k, m]`) into scratch 0 (`[m, k]`), then the product of it and B.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan_with_rows(d: &[u32], rows: u32) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    let (m, k) = (d[0], d[2]);
    let kernel = match (rows, crate::vector_rows(d)) {
        (128, true) => &matmul_tn_3xtf32_m128_v4::KERNEL,
        (128, false) => &matmul_tn_3xtf32_m128_scalar::KERNEL,
        (64, true) => &matmul_tn_3xtf32_m64_v4::KERNEL,
        (64, false) => &matmul_tn_3xtf32_m64_scalar::KERNEL,
        _ => panic!("matmul_tn mage-002 has tiles of 64 or 128 rows, not {rows}"),
    };
    let mut product = crate::tiled_launch(d, kernel, rows, BN, THREADS, shared_bytes(rows)).launches.remove(0);
    product.args[0] = Arg::Scratch(0);
    let transpose = Launch {
        kernel: &matmul_tn_transpose::KERNEL,
        grid: Dim3::x(k.div_ceil(TRANSPOSE_TILE) * m.div_ceil(TRANSPOSE_TILE)),
        block: Dim3::x(TRANSPOSE_THREADS),
        shared_bytes: TRANSPOSE_SHARED_BYTES,
        cluster: Dim3::ONE,
        args: vec![Arg::Input(0), Arg::Scratch(0), Arg::U32(k), Arg::U32(m)],
    };
    Plan { launches: vec![transpose, product], scratch: vec![m as usize * k as usize] }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    plan_with_rows(d, tile_rows(d))
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "3xTF32 (FP32 accuracy) on wgmma: A transposed into scratch by a tiled launch, then matmul mage-009's product, 128x128 or 64x128 tiles",
    kernels: &[
        &matmul_tn_transpose::KERNEL,
        &matmul_tn_3xtf32_m128_v4::KERNEL,
        &matmul_tn_3xtf32_m128_scalar::KERNEL,
        &matmul_tn_3xtf32_m64_v4::KERNEL,
        &matmul_tn_3xtf32_m64_scalar::KERNEL,
    ],
    supports: |_| true,
    plan,
};
