//! The row kernel layernorm_backward's mage-001 and mage-002 share: a
//! 256-thread block per row computes dx, and writes the row's statistics
//! for the column sums. Frozen with mage-001: mage-002 changed only how the
//! columns are summed.

pub use crate::block_tree::THREADS;
use crate::block_tree::{block_sum, row_statistics};
use mage_common::device::*;

mage_common::kernel! {
    /// One block per row: dx, and the row's shift, centre and rstd into
    /// `stats` (`[rows, 3]`; the mean is shift + centre). Needs `THREADS * 4` bytes of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn layernorm_backward_rows(x: *const f32, gamma: *const f32, dy: *const f32, dx: *mut f32, stats: *mut f32, rows: u32, width: u32, eps: f32) {
        let _ = rows;
        let (t, row) = (thread_idx_x(), block_idx_x());
        let base = row * width;
        let n = width as f32;
        unsafe {
            // The mean as the shift plus the centre of the shifted row: both
            // kept, since their FP32 sum loses what x̂ needs where the mean is
            // far larger than the row's spread.
            let (shift, centre, rstd) = row_statistics(x, base, width, eps);
            let (mut sg, mut sgx) = (0.0, 0.0);
            let mut c = t;
            while c < width {
                let xhat = (ld_nc(x, base + c) - shift - centre) * rstd;
                let g = ld_nc(dy, base + c) * ld_nc(gamma, c);
                sg += g;
                sgx += g * xhat;
                c += THREADS;
            }
            let (mean_g, mean_gx) = (block_sum(sg) / n, block_sum(sgx) / n);
            c = t;
            while c < width {
                let xhat = (ld_nc(x, base + c) - shift - centre) * rstd;
                let g = ld_nc(dy, base + c) * ld_nc(gamma, c);
                st(dx, base + c, rstd * (g - mean_g - xhat * mean_gx));
                c += THREADS;
            }
            if t == 0 {
                st(stats, 3 * row, shift);
                st(stats, 3 * row + 1, centre);
                st(stats, 3 * row + 2, rstd);
            }
        }
    }
}
