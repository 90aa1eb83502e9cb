//! layernorm_backward mage-003: a warp per row with the row, its gradient
//! and gamma held in registers; each warp's column sums kept in registers
//! over all its rows, then added warp by warp in order.
//!
//! Kernel bodies: this module (`layernorm_backward_warp_held_*`,
//! `layernorm_backward_warp_totals`).
//!
//! What changed: mage-002's row kernel gives each row a 256-thread block
//! that reads the row five times and meets at a barrier after every
//! reduction, and its column pass reads x and dy again. Here a warp holds
//! its lanes' quads of x and dy (and of gamma, loaded once for all its
//! rows), reduces with shuffles only, writes dx, and adds `dy·x̂` and `dy`
//! into per-lane column sums it keeps across rows: x and dy are read once.
//! Warp `g` of the grid takes rows `g, g + W, g + 2W, ...` (W warps in
//! all, a fixed number), writes its column sums, and a last kernel adds the
//! W partial rows of each column in a fixed order: the same bits on every
//! run. Widths that are multiples of 4, up to 1024 (8 quads per lane).

use crate::EPS;
use mage_common::device::*;

/// Warps per block.
pub const WARPS: u32 = 8;
/// The most blocks of the row kernel: two per SM of the H200.
pub const MAX_BLOCKS: u32 = 264;
/// Threads per block of the totals kernel.
pub const COLUMN_THREADS: u32 = 128;

#[inline(always)]
unsafe fn warp_rows<const Q: usize>(
    x: *const f32,
    gamma: *const f32,
    dy: *const f32,
    dx: *mut f32,
    partials: *mut f32,
    rows: u32,
    width: u32,
) {
    let (lane, quads, n) = (lane_id(), width / 4, width as f32);
    let warps = grid_dim_x() * WARPS;
    let g = block_idx_x() * WARPS + warp_id();
    let quad = |i: usize| lane + 32 * i as u32;
    unsafe {
        let mut gam = [F32x4::ZERO; Q];
        for (i, v) in gam.iter_mut().enumerate() {
            if quad(i) < quads {
                *v = ld_nc4(gamma, 4 * quad(i));
            }
        }
        let (mut dg, mut db) = ([F32x4::ZERO; Q], [F32x4::ZERO; Q]);
        let mut row = g;
        while row < rows {
            let base = row * width;
            let shift = ld_nc(x, base);
            let (mut held, mut grad) = ([F32x4::ZERO; Q], [F32x4::ZERO; Q]);
            let mut s = 0.0;
            for i in 0..Q {
                if quad(i) < quads {
                    held[i] = ld_nc4(x, base + 4 * quad(i)).map(|a| a - shift);
                    grad[i] = ld_nc4(dy, base + 4 * quad(i));
                    s += held[i].sum();
                }
            }
            let mean = warp_sum(s) / n;
            let mut m2 = 0.0;
            for (i, v) in held.iter().enumerate() {
                if quad(i) < quads {
                    m2 += v.map(|a| (a - mean) * (a - mean)).sum();
                }
            }
            let rstd = 1.0 / sqrt(warp_sum(m2) / n + EPS);
            let (mut sg, mut sgx) = (0.0, 0.0);
            for i in 0..Q {
                if quad(i) < quads {
                    let xhat = held[i].map(|a| (a - mean) * rstd);
                    let gi = grad[i].zip(gam[i], |d, w| d * w);
                    sg += gi.sum();
                    sgx += gi.zip(xhat, |a, b| a * b).sum();
                }
            }
            let (mean_g, mean_gx) = (warp_sum(sg) / n, warp_sum(sgx) / n);
            for i in 0..Q {
                if quad(i) < quads {
                    let xhat = held[i].map(|a| (a - mean) * rstd);
                    let gi = grad[i].zip(gam[i], |d, w| d * w);
                    st4(dx, base + 4 * quad(i), gi.zip(xhat, |gv, h| rstd * (gv - mean_g - h * mean_gx)));
                    dg[i] = dg[i].zip(grad[i].zip(xhat, |d, h| d * h), |a, b| a + b);
                    db[i] = db[i].zip(grad[i], |a, b| a + b);
                }
            }
            row += warps;
        }
        // Every warp writes its partial row, zeros where it had no rows.
        for i in 0..Q {
            if quad(i) < quads {
                st4(partials, 2 * g * width + 4 * quad(i), dg[i]);
                st4(partials, (2 * g + 1) * width + 4 * quad(i), db[i]);
            }
        }
    }
}

macro_rules! backward_held_entries {
    ($($name:ident => $q:literal),*) => {
        $(mage_common::kernel! {
            #[doc = concat!("Rows of up to ", stringify!($q), " × 128 elements, ", stringify!($q), " quads of x, dy and gamma held per lane.")]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32) {
                unsafe { warp_rows::<$q>(x, gamma, dy, dx, partials, rows, width) }
            }
        })*

        /// (quads per lane, entry), smallest first.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[(u32, &mage_common::Kernel)] = &[$(($q, &$name::KERNEL)),*];
    };
}

backward_held_entries!(
    layernorm_backward_warp_held_2 => 2,
    layernorm_backward_warp_held_4 => 4,
    layernorm_backward_warp_held_6 => 6,
    layernorm_backward_warp_held_8 => 8
);

mage_common::kernel! {
    /// One thread per column: dgamma and dbeta as the `warps` partial rows
    /// added in a fixed order (four running sums by warp number mod 4, then
    /// `(s0 + s1) + (s2 + s3)`).
    pub unsafe fn layernorm_backward_warp_totals(partials: *const f32, dgamma: *mut f32, dbeta: *mut f32, warps: u32, width: u32) {
        let c = block_idx_x() * COLUMN_THREADS + thread_idx_x();
        if c < width {
            unsafe {
                let (mut g, mut b) = ([0.0f32; 4], [0.0f32; 4]);
                let mut w = 0;
                while w < warps {
                    g[(w % 4) as usize] += ld(partials, 2 * w * width + c);
                    b[(w % 4) as usize] += ld(partials, (2 * w + 1) * width + c);
                    w += 1;
                }
                st(dgamma, c, (g[0] + g[1]) + (g[2] + g[3]));
                st(dbeta, c, (b[0] + b[1]) + (b[2] + b[3]));
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1] % 4 == 0 && d[1] <= ENTRIES.last().unwrap().0 * 128
}

/// Blocks of the row kernel for `rows` rows.
#[cfg(not(target_arch = "nvptx64"))]
pub fn blocks(rows: u32) -> u32 {
    rows.div_ceil(WARPS).min(MAX_BLOCKS)
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    let (rows, width) = (d[0], d[1]);
    let per_lane = (width / 4).div_ceil(32);
    let kernel = ENTRIES.iter().find(|(q, _)| *q >= per_lane).expect("supports() bounds the width").1;
    let warps = blocks(rows) * WARPS;
    Plan {
        launches: vec![
            Launch {
                kernel,
                grid: Dim3::x(blocks(rows)),
                block: Dim3::x(WARPS * 32),
                shared_bytes: 0,
                args: vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output(0), Arg::Scratch(0), Arg::U32(rows), Arg::U32(width)],
            },
            Launch {
                kernel: &layernorm_backward_warp_totals::KERNEL,
                grid: Dim3::x(width.div_ceil(COLUMN_THREADS)),
                block: Dim3::x(COLUMN_THREADS),
                shared_bytes: 0,
                args: vec![Arg::Scratch(0), Arg::Output(1), Arg::Output(2), Arg::U32(warps), Arg::U32(width)],
            },
        ],
        scratch: vec![2 * (warps * width) as usize],
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "a warp per row, x, dy and gamma held, column sums kept per warp across its rows, then added warp by warp",
    kernels: &[
        &layernorm_backward_warp_held_2::KERNEL,
        &layernorm_backward_warp_held_4::KERNEL,
        &layernorm_backward_warp_held_6::KERNEL,
        &layernorm_backward_warp_held_8::KERNEL,
        &layernorm_backward_warp_totals::KERNEL,
    ],
    supports,
    plan,
};
