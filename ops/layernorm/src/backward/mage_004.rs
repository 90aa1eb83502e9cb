//! layernorm_backward mage-004: mage-003 with the row statistics saved:
//! a small kernel writes them first, the gradient kernel reads them
//! instead of recomputing them.
//!
//! Kernel bodies: [`held_gradient`](super::held_gradient) (`held_gradient`,
//! shared with mage-003, and `layernorm_backward_totals`), over
//! `mage_common::device::column_sums`; this module
//! (`layernorm_backward_statistics`).
//!
//! What changed: the gradient kernel is mage-003's body with `SAVED`: it
//! reads each row's `(shift, centre, rstd)` from a `[rows, 3]` that
//! `layernorm_backward_statistics` (a block per row, the statistics of
//! `block_tree::row_statistics`, as mage-001's row kernel finds them)
//! writes first, a stand-in for a forward that saves them. The shift and
//! centre are saved apart, not their FP32 sum: the sum would lose what x̂
//! needs where the mean is far larger than the row's spread (the
//! far-from-zero case of `tests/backward.rs`). Everything else is
//! mage-003's: entries, chunks, the totals. The entries' registers (72,
//! 90, 96, 96 against mage-003's 80, 90, 116, 128) give the same blocks
//! an SM, so the two gradient kernels' CUPTI times compare the statistics
//! alone.
//!
//! Prediction: the row is in registers either way, so recomputing costs
//! no bytes, only two group reductions a row (a butterfly of five
//! shuffles each, and for rows over more than one warp a barrier and the
//! warps' sums from shared memory) and about six operations an element;
//! saving costs three 4-byte loads a row. The gradient kernels are
//! memory-bound: within ~3% of each other at 8192x768, 4096x4096 and
//! 16384x4096, up to ~10% apart (mage-004's the faster) at 4096x768 and
//! 1024x2048, where a block's rows are few and the barriers of each row
//! sit between its loads and its stores. The whole plan is slower than
//! mage-003's: the statistics kernel reads x once more (a third more
//! bytes, ~4 µs at 4096x768, ~70 µs at 16384x4096), which is why
//! `current` picks mage-003 for this op, whose inputs carry no saved
//! statistics.
//!
//! Measured: not yet measured on the GPU.

use super::held_gradient::gradient_entries;
#[cfg(not(target_arch = "nvptx64"))]
use super::held_gradient::{entries_support, entry_for};
use mage_common::device::*;

mage_common::kernel! {
    /// A block per row: the row's `(shift, centre, rstd)` into `stats`
    /// (`[rows, 3]`), as `block_tree::row_statistics` finds them: the
    /// statistics a forward would save. Needs `block_tree::THREADS * 4`
    /// bytes of shared memory.
    pub unsafe fn layernorm_backward_statistics(x: *const f32, stats: *mut f32, rows: u32, width: u32) {
        let _ = rows;
        let row = block_idx_x();
        unsafe {
            let (shift, centre, rstd) = crate::block_tree::row_statistics(x, row * width, width);
            if thread_idx_x() == 0 {
                st(stats, 3 * row, shift);
                st(stats, 3 * row + 1, centre);
                st(stats, 3 * row + 2, rstd);
            }
        }
    }
}

gradient_entries! { saved;
    layernorm_backward_saved_32x2x8 => (32, 2, 8, 80, 3),
    layernorm_backward_saved_96x2x2 => (96, 2, 2, 96, 3),
    layernorm_backward_saved_256x2x1 => (256, 2, 1, 128, 2),
    layernorm_backward_saved_512x2x1 => (512, 2, 1, 128, 1),
}

/// Every kernel entry of the stage.
#[cfg(not(target_arch = "nvptx64"))]
pub static KERNELS: &[&mage_common::Kernel] = &[
    &layernorm_backward_statistics::KERNEL,
    &layernorm_backward_saved_32x2x8::KERNEL,
    &layernorm_backward_saved_96x2x2::KERNEL,
    &layernorm_backward_saved_256x2x1::KERNEL,
    &layernorm_backward_saved_512x2x1::KERNEL,
    &super::held_gradient::layernorm_backward_totals::KERNEL,
];

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-004",
    summary: "mage-003 with the row statistics saved first by a block-per-row kernel and read by the gradient kernel instead of recomputed",
    kernels: KERNELS,
    supports: |d| entries_support(ENTRIES, d),
    plan: |d| {
        use super::held_gradient::{chunk_rows, layernorm_backward_totals, shared_bytes};
        use mage_common::device::column_sums::{TOTALS_COLUMNS, TOTALS_SHARED_BYTES, TOTALS_THREADS};
        use mage_common::kernel::Dim3;
        use mage_common::op::{Arg, Launch, Plan};
        let (rows, width) = (d[0], d[1]);
        let e = entry_for(ENTRIES, width);
        let per = chunk_rows(e, rows);
        let chunks = rows.div_ceil(per);
        let stride = width.div_ceil(4) * 4;
        Plan {
            launches: vec![
                Launch {
                    kernel: &layernorm_backward_statistics::KERNEL,
                    grid: Dim3::x(rows),
                    block: Dim3::x(crate::block_tree::THREADS),
                    shared_bytes: crate::block_tree::THREADS * 4,
                    args: vec![Arg::Input(0), Arg::Scratch(1), Arg::U32(rows), Arg::U32(width)],
                },
                Launch {
                    kernel: e.kernel,
                    grid: Dim3::x(chunks),
                    block: Dim3::x(e.block()),
                    shared_bytes: shared_bytes(e.quads, e.rows, e.block()),
                    args: vec![
                        Arg::Input(0),
                        Arg::Input(1),
                        Arg::Input(2),
                        Arg::Scratch(1),
                        Arg::Output(0),
                        Arg::Scratch(0),
                        Arg::U32(rows),
                        Arg::U32(width),
                        Arg::U32(per),
                    ],
                },
                Launch {
                    kernel: &layernorm_backward_totals::KERNEL,
                    grid: Dim3::x((2 * stride).div_ceil(TOTALS_COLUMNS)),
                    block: Dim3::x(TOTALS_THREADS),
                    shared_bytes: TOTALS_SHARED_BYTES,
                    args: vec![Arg::Scratch(0), Arg::Output(1), Arg::Output(2), Arg::U32(chunks), Arg::U32(width)],
                },
            ],
            scratch: vec![(2 * chunks * stride) as usize, 3 * rows as usize],
        }
    },
};
