//! mage-006: one 128-thread block per row, the row held in registers.
//!
//! The shape Triton's kernel uses: grid = rows, each thread holds one quad
//! of the row and a masked second quad (so widths up to 1024), the row is
//! read from global memory once, the four warps reduce their
//! [`Moments`](mage_common::stats::Moments) by shuffles into eight floats of
//! shared memory behind one barrier, and the output is written from the
//! same registers. `rsqrt.approx` replaces `1 / sqrt`. Lean thread state
//! and a single pass are what buy occupancy and bandwidth here.

use crate::EPS;
use mage_common::device::*;
use mage_common::stats::Moments;

pub const THREADS: u32 = 128;
/// Widest row the two held quads cover.
pub const MAX_WIDTH: u32 = THREADS * 8;

/// Quads of warp `w`'s lanes that fall inside a row of `quads` quads, over both slots.
#[inline(always)]
fn warp_quads(w: u32, quads: u32) -> u32 {
    let slot = |start: u32| quads.saturating_sub(start).min(32);
    slot(w * 32) + slot(THREADS + w * 32)
}

mage_common::kernel! {
    /// Block `r` normalises row `r`; 32 bytes of shared memory.
    pub unsafe fn layernorm_row(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32) {
        let _ = rows;
        let (t, base, quads) = (thread_idx_x(), block_idx_x() * width, width / 4);
        let (q0, q1) = (t, t + THREADS);
        let (has0, has1) = (q0 < quads, q1 < quads);
        let shift = unsafe { ld_nc(x, base) };
        let load = |q: u32| unsafe { ld_nc4(x, base + 4 * q).map(|v| v - shift) };
        let v0 = if has0 { load(q0) } else { F32x4::ZERO };
        let v1 = if has1 { load(q1) } else { F32x4::ZERO };
        let mut m = Moments::EMPTY;
        if has0 {
            m = Moments::of_quad(v0);
        }
        if has1 {
            m = m.merge(Moments::of_quad(v1));
        }
        let m = m.warp_reduce();
        if lane_id() == 0 {
            smem_st(warp_id() * 8, m.mean);
            smem_st(warp_id() * 8 + 4, m.m2);
        }
        sync_threads();
        let mut total = Moments::EMPTY;
        for w in 0..THREADS / 32 {
            let n = (4 * warp_quads(w, quads)) as f32;
            total = total.merge(Moments { n, mean: smem_ld(w * 8), m2: smem_ld(w * 8 + 4) });
        }
        let rstd = rsqrt_approx(total.variance() + EPS);
        let write = |q: u32, v: F32x4| unsafe {
            let out = v.zip3(ld_nc4(gamma, 4 * q), ld_nc4(beta, 4 * q), |v, g, b| fma((v - total.mean) * rstd, g, b));
            st4(y, base + 4 * q, out);
        };
        if has0 {
            write(q0, v0);
        }
        if has1 {
            write(q1, v1);
        }
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
        use mage_common::emu::Dim3;
        mage_common::op::Launch {
            kernel: &layernorm_row::KERNEL,
            grid: Dim3::x(d[0]),
            block: Dim3::x(THREADS),
            shared_bytes: THREADS / 32 * 8,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
