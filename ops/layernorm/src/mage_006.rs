//! mage-006: one 128-thread block per row, the row held in registers.
//!
//! Kernel body: [`crate::row_held`] (shared with mage-008; frozen: ptxas
//! resources pinned by `tests/resources.rs`).
//!
//! The shape Triton's kernel uses: grid = rows, each thread holds one quad
//! of the row and a masked second quad (so widths up to 1024), the row is
//! read from global memory once, the four warps reduce by shuffles into
//! eight floats of shared memory behind one barrier (each warp's sum and its
//! second moment centred on its own mean; the block merges them with
//! `M2 = Σ m2_w + Σ n_w (mean_w − mean)²`), and the output is written from
//! the same registers. `rsqrt.approx` replaces `1 / sqrt`. Lean thread state
//! and a single pass are what buy occupancy and bandwidth here.
//!
//! A first version merged Chan-style
//! [`Moments`](mage_common::stats::Moments) through the shuffle tree (a
//! division at each of the five steps and at each of the four warp merges)
//! and measured slower (`docs/attempts.md`): at this size the kernel is
//! bound by instructions per row as much as by bytes. GPU kernel time per
//! call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=mage-006 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 6.88 | 13.34 |
//! | 8192x768 | 15.07 | 21.44 |
//! <!-- /mage:table -->

use crate::row_held::row_held;

pub const THREADS: u32 = 128;
/// Widest row the two held quads cover.
pub const MAX_WIDTH: u32 = THREADS * 8;

mage_common::kernel! {
    /// Block `r` normalises row `r`; 32 bytes of shared memory.
    pub unsafe fn layernorm_row(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
        let _ = rows;
        unsafe { row_held::<THREADS>(x, gamma, beta, y, width, eps) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1] % 4 == 0 && d[1] <= MAX_WIDTH
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-006",
    summary: "128-thread block per row, row held in registers, one read, one barrier, rsqrt.approx",
    kernels: &[&layernorm_row::KERNEL],
    supports,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &layernorm_row::KERNEL,
            grid: Dim3::x(d[0]),
            block: Dim3::x(THREADS),
            shared_bytes: THREADS / 32 * 8,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
