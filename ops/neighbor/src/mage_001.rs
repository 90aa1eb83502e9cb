//! mage-001: one thread per output element, walking its row's edges.
//!
//! Kernel body: this module (`neighbor_row`).
//!
//! Thread `t` computes `out[i, col]` (`i = t / width`): it loads
//! `rowptr[i]`, `rowptr[i + 1]`, then for each edge the index and weight
//! (the same addresses for every thread of the row, served as broadcasts)
//! and `x[indices[e], col]` (consecutive threads take consecutive columns,
//! so a warp's gathers are coalesced within the source row), accumulating
//! with `fma` in edge order. The starting point: fine on uniform graphs,
//! but a row's edges are one serial chain of dependent loads per thread,
//! so on a power-law graph the whole launch waits for the heaviest row
//! (14,000 edges at 4096 rows and 65,536 edges) while the other SMs idle.
//!
//! Measured: fast on uniform graphs of up to 2^17 edges, and hundreds of
//! times slower on the power-law graphs, where one row's thousands of edges
//! run in sequence. GPU kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-neighbor.json stage=mage-001 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x64x65536 | 4.89 | 10.08 |
//! | 4096x64x65536 power-law | 923.12 | 931.47 |
//! | 65536x64x1048576 | 51.48 | 56.74 |
//! | 65536x64x1048576 power-law | 16745 | 16730 |
//! | 7x9x23 | 1.34 | 7.46 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `t` writes element `t` of the `[n, width]` output.
    pub unsafe fn neighbor_row(x: *const f32, w: *const f32, rowptr: *const u32, indices: *const u32, out: *mut f32, n: u32, width: u32) {
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t < n * width {
            unsafe {
                // SAFETY: t < n·width, so width > 0 (drops the division-by-zero checks).
                core::hint::assert_unchecked(width > 0);
                let (i, col) = (t / width, t % width);
                let (mut e, end) = (ld_nc_u32(rowptr, i), ld_nc_u32(rowptr, i + 1));
                let mut acc = 0.0;
                while e < end {
                    acc = fma(ld_nc(w, e), ld_nc(x, ld_nc_u32(indices, e) * width + col), acc);
                    e += 1;
                }
                st(out, t, acc);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "one thread per output element, serial over its row's edges",
    kernels: &[&neighbor_row::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        use mage_common::op::Arg;
        mage_common::op::Launch {
            kernel: &neighbor_row::KERNEL,
            grid: Dim3::x((d[0] * d[1]).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Output(0), Arg::U32(d[0]), Arg::U32(d[1])],
        }
        .into()
    },
};
