//! layernorm_backward mage-002: mage-001's dx; dgamma and dbeta summed over
//! chunks of rows by many threads, then the chunks summed in order.
//!
//! Kernel bodies: [`row_gradient`](super::row_gradient)
//! (`layernorm_backward_rows`, as mage-001) and this module
//! (`layernorm_backward_column_partials`, `layernorm_backward_column_totals`).
//!
//! What changed: mage-001 sums each column with one thread walking every
//! row, so at 4096x768 only 768 threads (six blocks on 132 SMs) do the
//! whole column pass, each a chain of 4096 dependent adds. Here a thread
//! sums one column over a chunk of `CHUNK_ROWS` rows (grid: column blocks ×
//! chunks, 384 blocks at 4096x768), writes its two partial sums, and a last
//! kernel adds each column's partials chunk by chunk. The order is fixed,
//! so dgamma and dbeta are still the same bits on every run; the sums are
//! regrouped, which the tolerance's `γ_(rows+2)` covers for any order.

use super::row_gradient::layernorm_backward_rows;
pub use crate::block_tree::THREADS;
use mage_common::device::*;

/// Threads per block of the column kernels.
pub const COLUMN_THREADS: u32 = 128;
/// Rows one thread of the partial-sum kernel covers.
pub const CHUNK_ROWS: u32 = 64;

mage_common::kernel! {
    /// Thread (column c, chunk k): `Σ dy·x̂` and `Σ dy` over rows
    /// `k·CHUNK_ROWS ..` of column c, into `partials[2k][c]` and
    /// `partials[2k + 1][c]`; `x̂` from the row statistics `stats` (`[rows, 3]`)
    /// as the row kernel computes it.
    pub unsafe fn layernorm_backward_column_partials(x: *const f32, dy: *const f32, stats: *const f32, partials: *mut f32, rows: u32, width: u32) {
        let c = block_idx_x() * COLUMN_THREADS + thread_idx_x();
        let k = block_idx_y();
        if c < width {
            unsafe {
                let (mut sg, mut sb) = (0.0, 0.0);
                let end = rows.min((k + 1) * CHUNK_ROWS);
                let mut r = k * CHUNK_ROWS;
                while r < end {
                    let (shift, centre, rstd) = (ld(stats, 3 * r), ld(stats, 3 * r + 1), ld(stats, 3 * r + 2));
                    let d = ld_nc(dy, r * width + c);
                    sg += d * ((ld_nc(x, r * width + c) - shift - centre) * rstd);
                    sb += d;
                    r += 1;
                }
                st(partials, 2 * k * width + c, sg);
                st(partials, (2 * k + 1) * width + c, sb);
            }
        }
    }
}

mage_common::kernel! {
    /// One thread per column: dgamma and dbeta as the column's partials
    /// added chunk by chunk, in order.
    pub unsafe fn layernorm_backward_column_totals(partials: *const f32, dgamma: *mut f32, dbeta: *mut f32, chunks: u32, width: u32) {
        let c = block_idx_x() * COLUMN_THREADS + thread_idx_x();
        if c < width {
            unsafe {
                let (mut sg, mut sb) = (0.0, 0.0);
                let mut k = 0;
                while k < chunks {
                    sg += ld(partials, 2 * k * width + c);
                    sb += ld(partials, (2 * k + 1) * width + c);
                    k += 1;
                }
                st(dgamma, c, sg);
                st(dbeta, c, sb);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "mage-001's dx; the column sums over chunks of 64 rows by many threads, then the chunks added in order",
    kernels: &[&layernorm_backward_rows::KERNEL, &layernorm_backward_column_partials::KERNEL, &layernorm_backward_column_totals::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        use mage_common::op::{Arg, Launch, Plan};
        let (rows, width) = (d[0], d[1]);
        let chunks = rows.div_ceil(CHUNK_ROWS);
        let column_blocks = width.div_ceil(COLUMN_THREADS);
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
                    kernel: &layernorm_backward_column_partials::KERNEL,
                    grid: Dim3 { x: column_blocks, y: chunks, z: 1 },
                    block: Dim3::x(COLUMN_THREADS),
                    shared_bytes: 0,
                    cluster: Dim3::ONE,
                    args: vec![Arg::Input(0), Arg::Input(2), Arg::Scratch(0), Arg::Scratch(1), Arg::U32(rows), Arg::U32(width)],
                },
                Launch {
                    kernel: &layernorm_backward_column_totals::KERNEL,
                    grid: Dim3::x(column_blocks),
                    block: Dim3::x(COLUMN_THREADS),
                    shared_bytes: 0,
                    cluster: Dim3::ONE,
                    args: vec![Arg::Scratch(1), Arg::Output(1), Arg::Output(2), Arg::U32(chunks), Arg::U32(width)],
                },
            ],
            scratch: vec![3 * rows as usize, 2 * (chunks * width) as usize],
        }
    },
};
