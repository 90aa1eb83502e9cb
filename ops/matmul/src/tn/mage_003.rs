//! matmul_tn mage-003: the transpose of A inside the 3xTF32 product: each
//! K tile of A copied raw into the stage and split from there into
//! mage-009's K-major planes, 64 rows of C per block, one launch.
//!
//! Kernel body: [`crate::tf32x3`] (matmul mage-009's and mage-010's
//! product) with the [`crate::tf32x3::AKByM`] layout (A `[k, m]`: its copy
//! and split); this module holds the entries and the plan.
//!
//! ## What changed
//!
//! mage-002 transposes A into scratch in a launch of its own (`2·m·k·4`
//! bytes through memory) before mage-009's product. Here the product
//! reads A `[k, m]` itself: each thread copies 32 contiguous bytes of one
//! K row of the tile by `cp.async` into a raw buffer of the stage (32 K
//! rows of 68 floats), and after its wait writes the 8 values it copied
//! into both K-major planes (hi: the float itself, read as TF32 by the
//! multiply; lo: `tf32(x - trunc(x))`), one 4-byte store each, a warp's 32
//! lanes the 32 K of one row of a plane (conflict-free). The rest is
//! mage-009's: B's tile and fragments, four stages, partial sums per K
//! tile, so the output is mage-009's on A transposed back, to the bit
//! (`tests/transposed.rs`). Only 64-row tiles: four stages of 128 rows
//! with the raw buffer (66 KiB each) exceed the 227 KiB a block may have;
//! three stages at 128 rows would change the pipeline mage-009's body is
//! built around. `_v4` entries (16-byte copies) where `m` and `n` are
//! multiples of 4 (the rows of A and B), `_scalar` ones elsewhere.
//!
//! ptxas (13.0.88, sm_90a): 151 registers (164 in the `_scalar` entry;
//! mage-009 at 64 rows: 140), no stack, no spills; 173040 bytes of shared
//! memory (four stages of 43008), one block of 256 threads per SM as
//! mage-009's.
//!
//! ## Prediction (H200)
//!
//! No transpose launch and no scratch: at 1024³ it saves mage-002's 8 MiB
//! round trip and one launch (3-5 µs). The split costs more shared traffic
//! than mage-009's: per K tile at 64 rows the raw copy (8 KiB written),
//! its reads (8 KiB) and the hi plane's stores (8 KiB) join mage-009's 104
//! KiB, about 23% more, and mage-009 at 64 rows is bound by shared memory
//! by its model (832 clocks a tile against 768 of tensor work; Nsight put
//! L1 at 57% at 1024³, latency leading). If shared bandwidth binds: 1024³
//! about 36 µs (1.15x of matmul's `current`, 31.18); if latency does, as
//! Nsight read mage-009, 31-34 µs (1.0-1.1x). At 4096³ 64-row tiles run 16
//! waves of 2048 blocks against mage-009's 8 of 128 rows: about 1.2x of
//! its 1607 µs, so `current` keeps mage-002 there (its 128-row product
//! and transpose: about 1.02x) and takes this stage nowhere until the two
//! are measured against each other.
//!
//! ## Measured
//!
//! Not yet measured on the GPU.

use crate::tf32x3::{AKByM, Rows64, body};
#[cfg(not(target_arch = "nvptx64"))]
use crate::tf32x3::{BN, THREADS, layout_shared_bytes};

mage_common::kernel! {
    /// 64 rows x 128 columns of C per block, A `[k, m]` split in the kernel; `m`, `n` multiples of 4: 16-byte copies. 256 threads.
    pub unsafe fn matmul_tn_3xtf32_split_m64_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows64, AKByM>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block, any shape: 4-byte copies.
    pub unsafe fn matmul_tn_3xtf32_split_m64_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows64, AKByM>(a, b, c, m, n, k) }
    }
}

/// Whether the rows of A (`m` floats) and B (`n` floats) take 16-byte copies.
#[cfg(not(target_arch = "nvptx64"))]
pub fn vector_rows(d: &[u32]) -> bool {
    d[0].is_multiple_of(4) && d[1].is_multiple_of(4)
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if vector_rows(d) { &matmul_tn_3xtf32_split_m64_v4::KERNEL } else { &matmul_tn_3xtf32_split_m64_scalar::KERNEL };
    crate::tiled_launch(d, kernel, 64, BN, THREADS, layout_shared_bytes::<AKByM>(64))
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "3xTF32 on wgmma with A's transpose in the kernel: each K tile copied raw by cp.async and split into K-major planes, 64x128 tiles",
    kernels: &[&matmul_tn_3xtf32_split_m64_v4::KERNEL, &matmul_tn_3xtf32_split_m64_scalar::KERNEL],
    supports: |_| true,
    plan,
};
