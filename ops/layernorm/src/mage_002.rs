//! mage-002: one warp per row, 128-bit quads, shuffle reductions.
//!
//! Kernel body: this module (`layernorm_warp`).
//!
//! A reduction that needed a block now needs a warp: 32 lanes read the row
//! in quads and meet in registers through `shuffle_xor` butterflies, with no
//! shared memory and no barrier. Eight rows share a 256-thread block. Still
//! three passes over the row (mean, centred sums, output). Widths must be a
//! multiple of 4.
//!
//! Measured: under half of mage-001's time on rows up to 1024, and the
//! fastest stage at 8192x768. GPU kernel time per call (CUPTI) and event
//! span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=mage-002 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 6.93 | 13.50 |
//! | 8192x768 | 11.94 | 18.26 |
//! | 1024x2048 | 7.50 | 13.95 |
//! | 4096x4096 | 73.31 | 79.66 |
//! | 16384x4096 | 263.83 | 268.91 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const WARPS: u32 = 8;

mage_common::kernel! {
    /// Warp `w` of block `b` normalises row `b * WARPS + w`.
    pub unsafe fn layernorm_warp(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
        let row = block_idx_x() * WARPS + warp_id();
        if row >= rows {
            return;
        }
        let (lane, quads, base, n) = (lane_id(), width / 4, row * width, width as f32);
        unsafe {
            let shift = ld_nc(x, base);
            let mut s = 0.0;
            let mut q = lane;
            while q < quads {
                s += ld_nc4(x, base + 4 * q).map(|v| v - shift).sum();
                q += 32;
            }
            let mean0 = warp_sum(s) / n;
            let (mut sd, mut sd2) = (0.0, 0.0);
            q = lane;
            while q < quads {
                let d = ld_nc4(x, base + 4 * q).map(|v| v - shift - mean0);
                sd += d.sum();
                sd2 += d.zip(d, |a, b| a * b).sum();
                q += 32;
            }
            let (sd, sd2) = (warp_sum(sd), warp_sum(sd2));
            let mean = mean0 + sd / n;
            let rstd = 1.0 / sqrt(((sd2 - sd * sd / n) / n).max(0.0) + eps);
            q = lane;
            while q < quads {
                let d = ld_nc4(x, base + 4 * q).map(|v| v - shift - mean);
                let out = d.zip3(ld_nc4(gamma, 4 * q), ld_nc4(beta, 4 * q), |d, g, b| fma(d * rstd, g, b));
                st4(y, base + 4 * q, out);
                q += 32;
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1] % 4 == 0
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "one warp per row, 128-bit quads, shuffle reductions",
    kernels: &[&layernorm_warp::KERNEL],
    supports,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &layernorm_warp::KERNEL,
            grid: Dim3::x(d[0].div_ceil(WARPS)),
            block: Dim3::x(WARPS * 32),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
