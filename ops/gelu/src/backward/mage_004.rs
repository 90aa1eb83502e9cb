//! gelu_backward mage-004: one launch. A block owns a strip of eight columns
//! over every row, writes their dx and adds their dbias itself.
//!
//! Kernel body: [`crate::bias_gradient::strips`] (`strips`, shared with
//! gelu_erf_backward mage-004), of which this module declares the entry
//! `gelu_backward_strips`; the element's arithmetic (as [`TanhGradient`]) in
//! [`element_gradient`](super::element_gradient), shared with the earlier
//! stages.
//!
//! What changed: mage-002 writes each chunk's partial dbias row to scratch
//! and adds the partials in a second launch; at 1000x1001 that launch is
//! about 2.2 µs of its 7.10 (`results/backward-7`), latency from end to
//! end (`results/nsight-3`: 26 cycles of long_scoreboard stall per issued
//! instruction), and torch.compile's three kernels take 6.53. Here the
//! grid is the strips alone (126 blocks of 512 threads at width 1001, one
//! an SM): lane `l` of warp `w` takes column `l % 8` of the strip and
//! rows `4w + l / 8 + 64i`, eight rows at a time with their 16 loads
//! issued together; its dx sum runs in row order, the four lanes of a
//! column are added by two butterfly steps and the 16 warps' sums in warp
//! order through shared memory, and the strip's dbias is stored. Every
//! grouping follows from the shape: the same bits on every run, no
//! atomics. dx is mage-002's bits.
//!
//! Prediction (H200, hot L2): at 1000x1001 each thread issues all of its
//! 32 loads of x and dy in two batches, 8 MB in flight over the 126 SMs,
//! so the pass is a few latencies (about 2 µs for 12 MB, the scalar
//! accesses of odd rows reading up to twice the sectors they use from L2)
//! plus the launch: about 4.5 µs against mage-002's 7.10 and
//! torch.compile's 6.53. It leaves SMs idle below about 1000 columns and
//! gives each block many rows at tall shapes (4096x768: 96 blocks of 4096
//! rows), where mage-002's tiles keep the GPU full: a stage for short,
//! wide shapes, not for the sweep's large ones.
//!
//! Measured (`results/backward-10`, CUPTI kernel time, hot L2, medians):
//! 8.09 µs at 1000x1001 against mage-002's 7.14, judged SLOWER (the
//! prediction was wrong by nearly 2x: one block an SM streaming scalar
//! strips of odd rows is slower than mage-002's two launches); about 2.1x
//! mage-002 at 4096x768. `current` keeps mage-002 (`docs/attempts.md`).

use super::element_gradient::TanhGradient;
use crate::bias_gradient::strips::strips;
pub use crate::bias_gradient::strips::{BATCH, ROWS_AT_ONCE, SHARED_BYTES, STRIP, THREADS};

mage_common::kernel! {
    /// Block `strip`: dx of columns `strip·STRIP ..` of every row and their
    /// dbias. Needs [`SHARED_BYTES`] of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_backward_strips(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, dbias: *mut f32, rows: u32, width: u32) {
        unsafe { strips::<TanhGradient>(x, bias, dy, dx, dbias, rows, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-004",
    summary: "one launch: a block per strip of eight columns over every row writes dx and adds dbias itself (rows in order, lanes by butterfly, warps in order)",
    kernels: &[&gelu_backward_strips::KERNEL],
    supports: |_| true,
    plan: |d| crate::bias_gradient::strips::plan(d, &gelu_backward_strips::KERNEL),
};
