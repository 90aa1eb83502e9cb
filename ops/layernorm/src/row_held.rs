//! The held row: the kernel body of mage-006 and mage-008. A block
//! normalises one row, each of its `T` threads holding two quads of it
//! (rows up to `8 T`): one read, two butterflies per warp, one barrier
//! (`row_held`). Frozen history: mage-006's and mage-008's ptxas
//! resources are pinned by `tests/resources.rs` and their outputs by
//! `tests/stages.rs`, so a new stage that changes the body takes a module
//! of its own.

use mage_common::device::*;

/// Quads of warp `w`'s lanes that fall inside a row of `quads` quads, over
/// both slots of a `T`-thread block.
#[inline(always)]
fn warp_quads<const T: u32>(w: u32, quads: u32) -> u32 {
    let slot = |start: u32| quads.saturating_sub(start).min(32);
    slot(w * 32) + slot(T + w * 32)
}

/// The body of a block-per-row kernel with `T` threads holding two quads
/// each (rows up to `8 T`): mage-006 is `T` = 128, mage-008 wider blocks.
#[inline(always)]
pub(crate) unsafe fn row_held<const T: u32>(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, width: u32, eps: f32) {
    let (t, base, quads) = (thread_idx_x(), block_idx_x() * width, width / 4);
    let (q0, q1) = (t, t + T);
    let (has0, has1) = (q0 < quads, q1 < quads);
    let shift = unsafe { ld_nc(x, base) };
    let load = |q: u32| unsafe { ld_nc4(x, base + 4 * q).map(|v| v - shift) };
    let v0 = if has0 { load(q0) } else { F32x4::ZERO };
    let v1 = if has1 { load(q1) } else { F32x4::ZERO };
    // Each warp: its sum, then its second moment centred on its own mean,
    // both from the held registers (two butterflies, no division chain).
    let w = warp_id();
    let n_w = (4 * warp_quads::<T>(w, quads)) as f32;
    let sum_w = warp_sum(v0.sum() + v1.sum());
    let mean_w = if n_w > 0.0 { sum_w / n_w } else { 0.0 };
    let sq = |v: F32x4, has: bool| if has { v.map(|a| (a - mean_w) * (a - mean_w)).sum() } else { 0.0 };
    let m2_w = warp_sum(sq(v0, has0) + sq(v1, has1));
    if lane_id() == 0 {
        smem_st(w * 8, sum_w);
        smem_st(w * 8 + 4, m2_w);
    }
    sync_threads();
    // Merge the warps: mean from the sums, M2 = Σ m2_w + Σ n_w (mean_w - mean)².
    let mut sum = 0.0;
    for v in 0..T / 32 {
        sum += smem_ld(v * 8);
    }
    let mean = sum / width as f32;
    let mut m2 = 0.0;
    for v in 0..T / 32 {
        let n_v = (4 * warp_quads::<T>(v, quads)) as f32;
        if n_v > 0.0 {
            let d = smem_ld(v * 8) / n_v - mean;
            m2 += smem_ld(v * 8 + 4) + n_v * d * d;
        }
    }
    let rstd = rsqrt_approx(m2 / width as f32 + eps);
    let write = |q: u32, v: F32x4| unsafe {
        let out = v.zip3(ld_nc4(gamma, 4 * q), ld_nc4(beta, 4 * q), |v, g, b| fma((v - mean) * rstd, g, b));
        st4(y, base + 4 * q, out);
    };
    if has0 {
        write(q0, v0);
    }
    if has1 {
        write(q1, v1);
    }
}
