//! mage-001: one output per thread, straight from global memory.
//!
//! Kernel body: this module (`triangle_naive`).
//!
//! Thread `t` of the flat `[n, n, c]` grid computes `O[i, j, ch]` with a
//! loop of `n` FMAs, loading `A[i, k, ch]` and `B[j, k, ch]` through the
//! read-only path each time. Consecutive threads take consecutive channels,
//! so a warp's loads are coalesced along `c` (for `c ≥ 32`, one 128-byte
//! line per load) and threads that share `i` or `j` hit the same lines in
//! L1. The starting point: two load instructions per FMA, every operand
//! used once per thread, so the kernel is bound by L1/LSU throughput, not
//! by arithmetic.
//!
//! Measured: the fastest of the history stages on the smallest shapes, and
//! far behind the tiled stages from 256x32 up. GPU kernel time per call
//! (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-triangle.json stage=mage-001 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 64x8 | 4.44 | 10.53 |
//! | 128x32 | 31.69 | 37.82 |
//! | 256x32 | 250.69 | 258.91 |
//! | 128x64 | 66.18 | 73.44 |
//! | 256x64 | 549.63 | 560.61 |
//! | 512x32 | 2083 | 2103 |
//! | 7x5 | 1.45 | 7.89 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `t` writes element `t` of the `[n, n, c]` output.
    pub unsafe fn triangle_naive(a: *const f32, b: *const f32, o: *mut f32, n: u32, c: u32) {
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t < n * n * c {
            unsafe {
                // SAFETY: t < n·n·c, so n and c are nonzero (drops the division-by-zero checks).
                core::hint::assert_unchecked(n > 0 && c > 0);
                let (ch, ij) = (t % c, t / c);
                let (i, j) = (ij / n, ij % n);
                let (mut pa, mut pb) = ((i * n) * c + ch, (j * n) * c + ch);
                let mut acc = 0.0;
                for _ in 0..n {
                    acc = fma(ld_nc(a, pa), ld_nc(b, pb), acc);
                    pa += c;
                    pb += c;
                }
                st(o, t, acc);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn threads(d: &[u32]) -> u32 {
    d[0] * d[0] * d[1]
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "one output per thread, two global loads per FMA",
    kernels: &[&triangle_naive::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &triangle_naive::KERNEL,
            grid: Dim3::x(threads(d).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
