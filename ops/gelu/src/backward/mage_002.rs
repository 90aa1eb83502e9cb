//! gelu_backward mage-002: one pass over x and dy with dbias's partial
//! sums kept in registers per chunk of rows, then a short pass over the
//! partials.
//!
//! Kernel body: [`crate::bias_gradient::tiles`] (`tiles` and `totals`,
//! shared with gelu_erf_backward mage-002; frozen history), of which this
//! module declares the entries `gelu_backward_tiles` and
//! `gelu_backward_totals`; the element's arithmetic,
//! [`gelu_grad_with`](super::element_gradient::gelu_grad_with) (as
//! [`TanhGradient`]), in [`element_gradient`](super::element_gradient),
//! shared with mage-001; the partials' combine and totals in
//! `mage_common::device::column_sums`.
//!
//! What changed: mage-001 stores dx, then gives each column one thread that
//! reads it back row after row: at 4096x768, 768 threads each a chain of
//! 4096 dependent loads and adds, 144 of its 155.71 µs. Here the grid is
//! column tiles × chunks of rows. A 256-thread block covers a tile of
//! [`TILE`] columns over one chunk: each warp is one row of the tile at a
//! time, each lane four columns (16-byte loads of x, dy and bias and a
//! 16-byte store of dx where the width is a multiple of 4; four scalar
//! accesses, bounds-checked, where it is not), the eight warps taking rows
//! `r, r + 8, ...` of the chunk, two at a time (both rows' loads issued
//! before either is used). Each thread keeps its four columns' sums of dx
//! in registers; at the end of the chunk the eight warps' sums are added
//! in warp order through shared memory and one partial row per block goes
//! to a scratch `[chunks, ⌈width/4⌉·4]`. The second kernel adds each
//! column's partials: a block of 1024 threads a 32-column strip, each warp
//! a contiguous 32nd of the chunks in chunk order, then the 32 segments in
//! order. Every grouping follows from the shape, so dbias is the same bits
//! on every run; no floating-point atomics. dx is mage-001's bits (the same
//! [`gelu_grad_with`](super::element_gradient::gelu_grad_with)); dbias
//! is regrouped, within the tolerance's `γ_(rows+2)` for any order.
//!
//! The chunk rule ([`chunk_rows`]): rows per chunk a multiple of 8 (every
//! warp the same count of rows) and at least 8, chosen so that tiles ×
//! chunks is about [`TARGET_BLOCKS`] = 1056 blocks: the tile kernel's 56
//! registers (`tests/resources.rs`) let four 256-thread blocks share an SM,
//! 528 on 132 SMs, so two full waves of equal blocks. Fewer blocks would
//! leave SMs idle (or each thread with fewer loads in flight); many more
//! would grow the partials and the second pass without moving more bytes,
//! and shorten the chunks below a row a warp. At the
//! sweep shapes: 4096x768 6 tiles × 171 chunks of 24 rows; 8192x768 6 ×
//! 171 of 48; 4096x3072 24 × 43 of 96; 16384x4096 32 × 33 of 504; 1000x1001
//! 8 × 125 of 8. The partials are 0.1-0.6 MB, read once from L2.
//!
//! Prediction (H200, ~4 TB/s HBM, hot L2 of 50 MB): the first pass moves
//! `12·rows·width` bytes (x, dy read, dx written) in one launch; the second
//! reads `4·chunks·width` (0.1-0.6 MB) from L2 with 24-128 blocks, about
//! 2 µs of latency (each thread loads ⌈chunks/32⌉ ≤ 6 partials together).
//! Four blocks of eight warps an SM, each warp two rows' 16-byte loads of
//! x and dy in flight (4 KB), are 64 KB in flight an SM, above the ~20 KB
//! that 4 TB/s at ~600 ns of latency needs. 4096x768 (37.7 MB, x and dy
//! L2-resident when hot): ~10-11 + 2 µs, about the same as torch.compile's
//! 13.45 and 12x faster than mage-001's 155.71; 8192x768 (75.5 MB): ~20 + 2 µs;
//! 4096x3072 (151 MB): ~40 + 2 µs; 16384x4096 (805 MB): ~205 + 2 µs, about
//! 1.03x a device copy of those bytes (~200 µs); 1000x1001 (12 MB, scalar
//! path): ~5 + 2 µs.
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=gelu_backward -->
//! | op | workload | Mage current | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|
//! | gelu_backward | 4096x768 | **11.18** (2) mage-002 | 17.44 (2) | 13.50 (3) | 16.71 | 0.67 |
//! | gelu_backward | 8192x768 | **23.14** (2) mage-002 | 34.35 (2) | 26.04 (3) | 30.03 | 0.77 |
//! | gelu_backward | 4096x3072 | **41.50** (2) mage-002 | 56.53 (2) | 50.37 (3) | 50.60 | 0.82 |
//! | gelu_backward | 16384x4096 | **205.60** (2) mage-002 | 260.03 (2) | 249.35 (3) | 252.34 | 0.81 |
//! | gelu_backward | 1000x1001 | 7.08 (2) mage-002 | 9.11 (2) | **6.54** (3) | 13.51 | 0.52 |
//! <!-- /mage:table -->

use super::element_gradient::TanhGradient;
pub use crate::bias_gradient::tiles::{GROUPS, SHARED_BYTES, TARGET_BLOCKS, THREADS, TILE, chunk_rows};
use crate::bias_gradient::tiles::{tiles, totals};

mage_common::kernel! {
    /// Block (tile, chunk): dx for columns `tile·TILE ..` of rows
    /// `chunk·chunk_rows ..`, and the tile's partial dbias over those rows
    /// into `partials[chunk][..]` (row stride `⌈width/4⌉·4`, the columns
    /// past `width` zero). Needs [`SHARED_BYTES`] of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_backward_tiles(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32) {
        unsafe { tiles::<TanhGradient>(x, bias, dy, dx, partials, rows, width, chunk_rows) }
    }
}

mage_common::kernel! {
    /// dbias: each column's partials added over the chunks (see
    /// `column_total`). Needs `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn gelu_backward_totals(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
        unsafe { totals(partials, dbias, chunks, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "one pass: a block per 128-column tile and chunk of rows writes dx (16-byte accesses) and its partial dbias row, held in registers; the chunks added in order by a second kernel",
    kernels: &[&gelu_backward_tiles::KERNEL, &gelu_backward_totals::KERNEL],
    supports: |_| true,
    plan: |d| crate::bias_gradient::tiles::plan(d, &gelu_backward_tiles::KERNEL, &gelu_backward_totals::KERNEL),
};
