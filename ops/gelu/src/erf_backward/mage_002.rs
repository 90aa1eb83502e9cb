//! gelu_erf_backward mage-002: one pass over x and dy with dbias's partial
//! sums kept in registers per chunk of rows, then a short pass over the
//! partials.
//!
//! Kernel body: [`crate::bias_gradient::tiles`] (`tiles` and `totals`,
//! shared with gelu_backward mage-002; frozen history), of which this
//! module declares the entries `gelu_erf_backward_tiles` and
//! `gelu_erf_backward_totals`; the element's arithmetic,
//! [`gelu_erf_grad_with`](super::element_gradient::gelu_erf_grad_with) (as
//! [`ErfGradient`]), in
//! [`element_gradient`](super::element_gradient), shared with mage-001;
//! the partials' combine and totals in `mage_common::device::column_sums`.
//!
//! What changed: gelu_backward mage-002's structure on the exact form's
//! element. mage-001 stores dx, then gives each column one thread that
//! reads it back row after row (for gelu_backward at 4096x768 that was 144
//! of mage-001's 155.71 µs). Here the grid is column tiles × chunks of
//! rows. A 256-thread block covers a tile of [`TILE`] columns over one
//! chunk: each warp is one row of the tile at a time, each lane four
//! columns (16-byte loads of x, dy and bias and a 16-byte store of dx where
//! the width is a multiple of 4; four scalar accesses, bounds-checked,
//! where it is not), the eight warps taking rows `r, r + 8, ...` of the
//! chunk, two at a time (both rows' loads issued before either is used).
//! Each thread keeps its four columns' sums of dx in registers; at the end
//! of the chunk the eight warps' sums are added in warp order through
//! shared memory and one partial row per block goes to a scratch `[chunks,
//! ⌈width/4⌉·4]`. The second kernel adds each column's partials: a block
//! of 1024 threads a 32-column strip, each warp a contiguous 32nd of the
//! chunks in chunk order, then the 32 segments in order. Every grouping
//! follows from the shape, so dbias is the same bits on every run; no
//! floating-point atomics. dx is mage-001's bits (the same
//! [`gelu_erf_grad_with`](super::element_gradient::gelu_erf_grad_with));
//! dbias is regrouped, within the tolerance's `γ_(rows+2)` for any order.
//!
//! The chunk rule ([`chunk_rows`]): rows per chunk a multiple of 8 (every
//! warp the same count of rows) and at least 8, chosen so that tiles ×
//! chunks is about [`TARGET_BLOCKS`] = 1056 blocks: the tile kernel's 64
//! registers (`tests/resources.rs`; gelu_backward's has 56, no spills in
//! either) still let four 256-thread blocks share an SM (4·256·64 is the
//! SM's 65536), 528 on 132 SMs, so two full waves of equal blocks; one
//! register more would leave three blocks an SM, and the target would
//! have to follow. At the sweep shapes (gelu_backward mage-002's, the
//! same rule): 4096x768 6 tiles × 171 chunks of 24 rows; 8192x768 6 × 171
//! of 48; 4096x3072 24 × 43 of 96; 16384x4096 32 × 33 of 504; 1000x1001 8
//! × 125 of 8.
//!
//! Prediction (H200, ~4 TB/s HBM, hot L2 of 50 MB): the bytes are
//! gelu_backward mage-002's (`12·rows·width` in the first pass, 0.1-0.6 MB
//! of partials from L2 in the second), so at the shapes where that stage
//! is memory-bound this one should be within a few percent of its times
//! (11.18, 23.14, 41.50, 205.60 and 7.08 µs in `results/backward-3`); the
//! element has about three times that stage's arithmetic (three
//! `ex2.approx` against one, the fit's ten FMAs), which four blocks of
//! eight warps an SM should still hide under the loads in flight.
//!
//! Measured (`results/backward-5`, one H200, CUPTI kernel time, hot L2):
//! 12.83 µs at 4096x768 against mage-001's 155.89 (0.082), and within a
//! few percent of gelu_backward mage-002's `results/backward-3` times at
//! the sweep shapes, as predicted (24.74, 42.48, 200.72 and 7.57 µs at
//! 8192x768, 4096x3072, 16384x4096 and 1000x1001): the element's extra
//! arithmetic hides under the loads. Against PyTorch: FASTER than
//! torch.compile at four shapes, SLOWER at 1000x1001 (7.57 against
//! 6.74), where the two launches and a one-wave grid of a 4 MB problem
//! cost more than the bytes.
//!
//! <!-- mage:table compare results/backward-5/comparison.json ops=gelu_erf_backward -->
//! | op | workload | Mage current | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|
//! | gelu_erf_backward | 4096x768 | **12.81** (2) mage-002 | 18.18 (2) | 14.27 (3) | 16.17 | 0.79 |
//! | gelu_erf_backward | 8192x768 | **24.74** (2) mage-002 | 34.25 (2) | 26.28 (3) | 29.27 | 0.85 |
//! | gelu_erf_backward | 4096x3072 | **42.48** (2) mage-002 | 56.51 (2) | 50.90 (3) | 50.34 | 0.84 |
//! | gelu_erf_backward | 16384x4096 | **200.72** (2) mage-002 | 257.74 (2) | 247.55 (3) | 253.72 | 0.79 |
//! | gelu_erf_backward | 1000x1001 | 7.57 (2) mage-002 | 9.54 (2) | **6.74** (3) | 14.54 | 0.52 |
//! <!-- /mage:table -->

use super::element_gradient::ErfGradient;
pub use crate::bias_gradient::tiles::{GROUPS, SHARED_BYTES, TARGET_BLOCKS, THREADS, TILE, chunk_rows};
use crate::bias_gradient::tiles::{tiles, totals};

mage_common::kernel! {
    /// Block (tile, chunk): dx for columns `tile·TILE ..` of rows
    /// `chunk·chunk_rows ..`, and the tile's partial dbias over those rows
    /// into `partials[chunk][..]` (row stride `⌈width/4⌉·4`, the columns
    /// past `width` zero). Needs [`SHARED_BYTES`] of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_erf_backward_tiles(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32) {
        unsafe { tiles::<ErfGradient>(x, bias, dy, dx, partials, rows, width, chunk_rows) }
    }
}

mage_common::kernel! {
    /// dbias: each column's partials added over the chunks (see
    /// `column_total`). Needs `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn gelu_erf_backward_totals(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
        unsafe { totals(partials, dbias, chunks, width) }
    }
}

/// Every shape: the scalar quads take widths that are not a multiple of 4,
/// a chunk's last rows and a tile's last columns are bounds-checked.
#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(_: &[u32]) -> bool {
    true
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "one pass: a block per 128-column tile and chunk of rows writes dx (16-byte accesses) and its partial dbias row, held in registers; the chunks added in order by a second kernel",
    kernels: &[&gelu_erf_backward_tiles::KERNEL, &gelu_erf_backward_totals::KERNEL],
    supports,
    plan: |d| crate::bias_gradient::tiles::plan(d, &gelu_erf_backward_tiles::KERNEL, &gelu_erf_backward_totals::KERNEL),
};
