//! layernorm_backward mage-001: a block per row for dx, a thread per column
//! for dgamma and dbeta; the row statistics recomputed, not saved.
//!
//! Kernel bodies: [`row_gradient`](super::row_gradient)
//! (`layernorm_backward_rows`, shared with mage-002) and this module
//! (`layernorm_backward_columns`).
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

use super::row_gradient::layernorm_backward_rows;
pub use crate::block_tree::THREADS;
use mage_common::device::*;

/// Threads per block of the column kernel.
pub const COLUMN_THREADS: u32 = 128;

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
                    cluster: Dim3::ONE,
                    args: vec![
                        Arg::Input(0),
                        Arg::Input(1),
                        Arg::Input(2),
                        Arg::Output(0),
                        Arg::Scratch(0),
                        Arg::U32(rows),
                        Arg::U32(width),
                        Arg::F32(crate::EPS),
                    ],
                },
                Launch {
                    kernel: &layernorm_backward_columns::KERNEL,
                    grid: Dim3::x(width.div_ceil(COLUMN_THREADS)),
                    block: Dim3::x(COLUMN_THREADS),
                    shared_bytes: 0,
                    cluster: Dim3::ONE,
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
