//! mage-007: one warp per row, the row held in registers.
//!
//! Kernel body: this module (its `layernorm_warp_held_*` entries).
//!
//! mage-002 reads each row three times (mean, centred sums, output); mage-006
//! reads once but needs a block barrier and a grid of one block per row.
//! Here a warp owns a row as in mage-002 and each lane keeps its `Q` quads
//! in registers from the load to the store, as in mage-006: one read, two
//! butterfly reductions (the mean, then the second moment centred on it),
//! no shared memory, no barrier. `Q` is a compile-time constant so the
//! held array lives in registers (unrolled loops, constant indices); one
//! entry per `Q` up to 8 (rows of 1024; at `Q` = 12 LLVM stops unrolling
//! and the array goes to local memory), and the plan picks the smallest
//! that covers the width.
//!
//! Measured: faster than mage-006 and mage-002 at 4096x768; at 8192x768 it
//! loses to mage-002: 56 registers per thread allow half the resident warps,
//! which matters once the grid is more than one wave. GPU kernel time per
//! call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=mage-007 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 5.69 | 12.19 |
//! | 8192x768 | 13.87 | 20.56 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const WARPS: u32 = 8;

#[inline(always)]
unsafe fn warp_row<const Q: usize>(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
    let row = block_idx_x() * WARPS + warp_id();
    if row >= rows {
        return;
    }
    let (lane, quads, base, n) = (lane_id(), width / 4, row * width, width as f32);
    let quad = |i: usize| lane + 32 * i as u32;
    unsafe {
        let shift = ld_nc(x, base);
        let mut held = [F32x4::ZERO; Q];
        let mut s = 0.0;
        for (i, v) in held.iter_mut().enumerate() {
            if quad(i) < quads {
                *v = ld_nc4(x, base + 4 * quad(i)).map(|a| a - shift);
                s += v.sum();
            }
        }
        let mean = warp_sum(s) / n;
        let mut m2 = 0.0;
        for (i, v) in held.iter().enumerate() {
            if quad(i) < quads {
                m2 += v.map(|a| (a - mean) * (a - mean)).sum();
            }
        }
        let rstd = rsqrt_approx(warp_sum(m2) / n + eps);
        for (i, v) in held.iter().enumerate() {
            let q = quad(i);
            if q < quads {
                let out = v.zip3(ld_nc4(gamma, 4 * q), ld_nc4(beta, 4 * q), |v, g, b| fma((v - mean) * rstd, g, b));
                st4(y, base + 4 * q, out);
            }
        }
    }
}

macro_rules! held_entries {
    ($($name:ident => $q:literal),*) => {
        $(mage_common::kernel! {
            #[doc = concat!("Rows of up to ", stringify!($q), " × 128 elements, ", stringify!($q), " quads held per lane.")]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
                unsafe { warp_row::<$q>(x, gamma, beta, y, rows, width, eps) }
            }
        })*

        /// (quads per lane, entry), smallest first.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[(u32, &mage_common::Kernel)] = &[$(($q, &$name::KERNEL)),*];
    };
}

held_entries!(layernorm_warp_held_2 => 2, layernorm_warp_held_4 => 4, layernorm_warp_held_6 => 6, layernorm_warp_held_8 => 8);

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1] % 4 == 0 && d[1] <= ENTRIES.last().unwrap().0 * 128
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    let per_lane = (d[1] / 4).div_ceil(32);
    let kernel = ENTRIES.iter().find(|(q, _)| *q >= per_lane).expect("supports() bounds the width").1;
    mage_common::op::Launch {
        kernel,
        grid: Dim3::x(d[0].div_ceil(WARPS)),
        block: Dim3::x(WARPS * 32),
        shared_bytes: 0,
        cluster: Dim3::ONE,
        args: crate::args(d[0], d[1]),
    }
    .into()
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-007",
    summary: "one warp per row, row held in registers, one read, butterflies only",
    kernels: &[
        &layernorm_warp_held_2::KERNEL,
        &layernorm_warp_held_4::KERNEL,
        &layernorm_warp_held_6::KERNEL,
        &layernorm_warp_held_8::KERNEL,
    ],
    supports,
    plan,
};
