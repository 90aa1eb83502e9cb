//! mage-001: one 256-thread block per row, three passes over the row.
//!
//! Kernel body: this module (`layernorm_block_tree`), with the row's
//! statistics from [`block_tree`](crate::block_tree).
//!
//! Each thread strides over the row; partial sums meet in shared memory
//! through a tree of barriers (eight halvings). Pass one finds the mean of
//! the row shifted by its first element, pass two the centred sums
//! (corrected two-pass: the mean is refined by the mean deviation), pass
//! three writes. The starting point: every partial answer waits at every
//! barrier, and the row is read three times.
//!
//! Measured: slow on narrow rows, and among the history stages the fastest
//! on rows of 4096, its strided scalar loop keeping many loads in flight.
//! GPU kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=mage-001 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 18.32 | 24.06 |
//! | 8192x768 | 38.51 | 44.32 |
//! | 1024x2048 | 7.93 | 14.50 |
//! | 4096x4096 | 52.00 | 58.38 |
//! | 16384x4096 | 176.78 | 181.63 |
//! <!-- /mage:table -->

pub use crate::block_tree::THREADS;
use crate::block_tree::row_statistics;
use mage_common::device::*;

mage_common::kernel! {
    /// One block per row; the tree reductions need `THREADS * 4` bytes of shared memory.
    pub unsafe fn layernorm_block_tree(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
        let _ = rows;
        let (t, base) = (thread_idx_x(), block_idx_x() * width);
        unsafe {
            let (shift, mean, rstd) = row_statistics(x, base, width, eps);
            let mut c = t;
            while c < width {
                let d = ld_nc(x, base + c) - shift - mean;
                st(y, base + c, fma(d * rstd, ld_nc(gamma, c), ld_nc(beta, c)));
                c += THREADS;
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "256-thread block per row, shared-memory tree reductions, three passes",
    kernels: &[&layernorm_block_tree::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &layernorm_block_tree::KERNEL,
            grid: Dim3::x(d[0]),
            block: Dim3::x(THREADS),
            shared_bytes: THREADS * 4,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
