//! The second kernel of the one-pass gradient stages (mage-003, mage-005):
//! dgamma and dbeta from the partial rows the gradient kernel wrote, one
//! pair a chunk of rows (`[chunks, 2, ⌈width/4⌉·4]`: dgamma's, then
//! dbeta's), each column's chunks added in chunk order
//! (`mage_common::device::column_sums::column_total`).

use mage_common::device::column_sums::{TOTALS_COLUMNS, column_total};
use mage_common::device::*;

mage_common::kernel! {
    /// dgamma and dbeta: each column's partials added over the chunks
    /// (`column_total` over the `2·⌈width/4⌉·4` columns of a partial row:
    /// dgamma's, then dbeta's). Needs `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn layernorm_backward_totals(partials: *const f32, dgamma: *mut f32, dbeta: *mut f32, chunks: u32, width: u32) {
        let stride = width.div_ceil(4) * 4;
        let total = unsafe { column_total(partials, chunks, 2 * stride, 2 * stride) };
        let j = block_idx_x() * TOTALS_COLUMNS + thread_idx_x();
        if thread_idx_x() < 32 {
            unsafe {
                if j < width {
                    st(dgamma, j, total);
                } else if j >= stride && j - stride < width {
                    st(dbeta, j - stride, total);
                }
            }
        }
    }
}

/// The launch of [`layernorm_backward_totals`] over `chunks` partial
/// rows of a `width`-wide gradient, partials in scratch 0.
#[cfg(not(target_arch = "nvptx64"))]
pub fn totals_launch(chunks: u32, width: u32) -> mage_common::op::Launch {
    use mage_common::device::column_sums::{TOTALS_SHARED_BYTES, TOTALS_THREADS};
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch};
    let stride = width.div_ceil(4) * 4;
    Launch {
        kernel: &layernorm_backward_totals::KERNEL,
        grid: Dim3::x((2 * stride).div_ceil(TOTALS_COLUMNS)),
        block: Dim3::x(TOTALS_THREADS),
        shared_bytes: TOTALS_SHARED_BYTES,
        cluster: Dim3::ONE,
        args: vec![Arg::Scratch(0), Arg::Output(1), Arg::Output(2), Arg::U32(chunks), Arg::U32(width)],
    }
}
