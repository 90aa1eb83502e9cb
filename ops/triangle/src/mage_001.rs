//! mage-001: one output per thread, straight from global memory.
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
//! Measured on the H200 (CUPTI kernel time, hot L2): 31.45 µs at 128x32
//! (the fastest stage there), 247.1 µs at 256x32.

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
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
