//! triangle_backward mage-001: one output element per thread for each
//! gradient, straight from global memory.
//!
//! Kernel bodies: this module (`triangle_backward_da`,
//! `triangle_backward_db`).
//!
//! The plain form of the gradients, written to be obviously right, one
//! kernel each over the flat `[n, n, c]` grid of its output, consecutive
//! threads on consecutive channels (a warp's loads coalesced along `c`) as
//! in forward mage-001:
//!
//! * thread `(i, k, ch)` of the first writes `dA[i, k, ch] = Σ_j dO[i, j,
//!   ch]·B[j, k, ch]`, walking `dO`'s row `i` (stride `c`) and `B`'s column
//!   `k` (stride `n·c`);
//! * thread `(j, k, ch)` of the second writes `dB[j, k, ch] = Σ_i dO[i, j,
//!   ch]·A[i, k, ch]`, walking `dO`'s column `j` and `A`'s column `k`
//!   (both stride `n·c`).
//!
//! Each thread sums its `n` terms in order (`j` or `i` = 0, 1, ..., one
//! `fma.rn.f32` per term), with no atomics and nothing shared between
//! threads: the same bits on every run, and on the emulator.
//!
//! Not measured yet: it is the reference point later stages are judged
//! against.

use mage_common::device::*;

/// Threads per block of both kernels.
pub const THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `t` writes element `t` of the `[n, n, c]` gradient of A:
    /// `dA[i, k, ch] = Σ_j dO[i, j, ch]·B[j, k, ch]`, `j` in order.
    pub unsafe fn triangle_backward_da(b: *const f32, d: *const f32, da: *mut f32, n: u32, c: u32) {
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t < n * n * c {
            unsafe {
                // SAFETY: t < n·n·c, so n and c are nonzero (drops the division-by-zero checks).
                core::hint::assert_unchecked(n > 0 && c > 0);
                let (ch, ik) = (t % c, t / c);
                let (i, k) = (ik / n, ik % n);
                // dO[i, 0, ch] and B[0, k, ch].
                let (mut pd, mut pb) = ((i * n) * c + ch, k * c + ch);
                let mut acc = 0.0;
                for _ in 0..n {
                    acc = fma(ld_nc(d, pd), ld_nc(b, pb), acc);
                    pd += c;
                    pb += n * c;
                }
                st(da, t, acc);
            }
        }
    }
}

mage_common::kernel! {
    /// Thread `t` writes element `t` of the `[n, n, c]` gradient of B:
    /// `dB[j, k, ch] = Σ_i dO[i, j, ch]·A[i, k, ch]`, `i` in order.
    pub unsafe fn triangle_backward_db(a: *const f32, d: *const f32, db: *mut f32, n: u32, c: u32) {
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t < n * n * c {
            unsafe {
                // SAFETY: t < n·n·c, so n and c are nonzero (drops the division-by-zero checks).
                core::hint::assert_unchecked(n > 0 && c > 0);
                let (ch, jk) = (t % c, t / c);
                let (j, k) = (jk / n, jk % n);
                // dO[0, j, ch] and A[0, k, ch].
                let (mut pd, mut pa) = (j * c + ch, k * c + ch);
                let mut acc = 0.0;
                for _ in 0..n {
                    acc = fma(ld_nc(d, pd), ld_nc(a, pa), acc);
                    pd += n * c;
                    pa += n * c;
                }
                st(db, t, acc);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "one output element per thread for dA and for dB (a kernel each), the n terms in order",
    kernels: &[&triangle_backward_da::KERNEL, &triangle_backward_db::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        use mage_common::op::{Arg, Launch, Plan};
        let (n, c) = (d[0], d[1]);
        let grid = Dim3::x((n * n * c).div_ceil(THREADS));
        Plan {
            launches: vec![
                Launch {
                    kernel: &triangle_backward_da::KERNEL,
                    grid,
                    block: Dim3::x(THREADS),
                    shared_bytes: 0,
                    cluster: Dim3::ONE,
                    args: vec![Arg::Input(1), Arg::Input(2), Arg::Output(0), Arg::U32(n), Arg::U32(c)],
                },
                Launch {
                    kernel: &triangle_backward_db::KERNEL,
                    grid,
                    block: Dim3::x(THREADS),
                    shared_bytes: 0,
                    cluster: Dim3::ONE,
                    args: vec![Arg::Input(0), Arg::Input(2), Arg::Output(1), Arg::U32(n), Arg::U32(c)],
                },
            ],
            scratch: vec![],
        }
    },
};
