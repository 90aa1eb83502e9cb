//! layernorm_backward mage-001: a block per row for dx, a thread per column
//! for dgamma and dbeta; the row statistics recomputed, not saved.
//!
//! Kernel bodies: this module (`layernorm_backward_rows`,
//! `layernorm_backward_columns`), with the row's statistics and the block's
//! sums from [`block_tree`](crate::block_tree), as forward mage-001.
//!
//! The plain form of the gradient, written to be obviously right. With
//! `x̂ = (x - mean)·rstd` and `g = dy·gamma`:
//! `dx = rstd·(g - mean(g) - x̂·mean(g·x̂))`, `dgamma[c] = Σ_r dy·x̂`,
//! `dbeta[c] = Σ_r dy`. The first kernel gives each row a 256-thread
//! block: it finds the row's mean and rstd as forward mage-001 does (two
//! passes over the row shifted by its first element), then `Σ g` and
//! `Σ g·x̂` through a shared-memory tree, then writes dx and the row's statistics
//! to scratch. The second gives each column a thread that walks
//! every row in order, so dgamma and dbeta are the same bits on every run:
//! no floating-point atomics, one fixed summation order.
//!
//! Not measured yet: it is the reference point later stages are judged
//! against.

pub use crate::block_tree::THREADS;
use crate::block_tree::{block_sum, row_statistics};
use mage_common::device::*;

/// Threads per block of the column kernel.
pub const COLUMN_THREADS: u32 = 128;

mage_common::kernel! {
    /// One block per row: dx, and the row's shift, centre and rstd into
    /// `stats` (`[rows, 3]`; the mean is shift + centre). Needs `THREADS * 4` bytes of shared memory.
    pub unsafe fn layernorm_backward_rows(x: *const f32, gamma: *const f32, dy: *const f32, dx: *mut f32, stats: *mut f32, rows: u32, width: u32) {
        let _ = rows;
        let (t, row) = (thread_idx_x(), block_idx_x());
        let base = row * width;
        let n = width as f32;
        unsafe {
            // The mean as the shift plus the centre of the shifted row: both
            // kept, since their FP32 sum loses what x̂ needs where the mean is
            // far larger than the row's spread.
            let (shift, centre, rstd) = row_statistics(x, base, width);
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

mage_common::kernel! {
    /// One thread per column: `dgamma[c] = Σ_r dy·x̂` and `dbeta[c] = Σ_r dy`,
    /// rows in order, `x̂` from the row statistics `stats` (`[rows, 3]`),
    /// computed as the row kernel computes it.
    pub unsafe fn layernorm_backward_columns(x: *const f32, dy: *const f32, stats: *const f32, dgamma: *mut f32, dbeta: *mut f32, rows: u32, width: u32) {
        let c = block_idx_x() * COLUMN_THREADS + thread_idx_x();
        if c < width {
            unsafe {
                let (mut sg, mut sb) = (0.0, 0.0);
                let mut r = 0;
                while r < rows {
                    let (shift, centre, rstd) = (ld(stats, 3 * r), ld(stats, 3 * r + 1), ld(stats, 3 * r + 2));
                    let d = ld_nc(dy, r * width + c);
                    sg += d * ((ld_nc(x, r * width + c) - shift - centre) * rstd);
                    sb += d;
                    r += 1;
                }
                st(dgamma, c, sg);
                st(dbeta, c, sb);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "a 256-thread block per row for dx (statistics recomputed), a thread per column for dgamma and dbeta, rows in order",
    kernels: &[&layernorm_backward_rows::KERNEL, &layernorm_backward_columns::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        use mage_common::op::{Arg, Launch, Plan};
        let (rows, width) = (d[0], d[1]);
        Plan {
            launches: vec![
                Launch {
                    kernel: &layernorm_backward_rows::KERNEL,
                    grid: Dim3::x(rows),
                    block: Dim3::x(THREADS),
                    shared_bytes: THREADS * 4,
                    args: vec![
                        Arg::Input(0),
                        Arg::Input(1),
                        Arg::Input(2),
                        Arg::Output(0),
                        Arg::Scratch(0),
                        Arg::U32(rows),
                        Arg::U32(width),
                    ],
                },
                Launch {
                    kernel: &layernorm_backward_columns::KERNEL,
                    grid: Dim3::x(width.div_ceil(COLUMN_THREADS)),
                    block: Dim3::x(COLUMN_THREADS),
                    shared_bytes: 0,
                    args: vec![
                        Arg::Input(0),
                        Arg::Input(2),
                        Arg::Scratch(0),
                        Arg::Output(1),
                        Arg::Output(2),
                        Arg::U32(rows),
                        Arg::U32(width),
                    ],
                },
            ],
            scratch: vec![3 * rows as usize],
        }
    },
};
