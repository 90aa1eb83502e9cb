//! mage-003: a 4×4 (i, j) tile of channel quads per thread, 128-bit loads.
//!
//! Kernel body: this module (`triangle_tile_quad`).
//!
//! What changed, and why it should help: a thread of mage-002 owns one
//! channel, so every load moves 4 bytes. Here a thread owns four
//! consecutive channels as well, 64 outputs `O[i0..i0+4, j0..j0+4,
//! ch..ch+4]` in 64 registers: each step of `k` is four
//! `ld.global.nc.v4.f32` of A, four of B and 64 FMAs. That is 8 load
//! instructions per 64 FMAs (mage-002: 8 per 16, mage-001: 2 per 1), so
//! the issue slots and the LSU go to arithmetic, and each load brings four
//! times the bytes. Channels stay the fastest-varying thread index, so a
//! warp's quads are contiguous along `c`. Needs `c % 4 == 0` (quads must be
//! 16-byte aligned); rows past `n` are clamped for loads and not stored, as
//! in mage-002.
//!
//! A sixty-fourth of mage-001's threads: blocks are 64 threads so that
//! mid-sized shapes still spread over every SM, and
//! [`current`](crate::current) only picks this stage where the shape has
//! enough tiles to fill the GPU.
//!
//! Measured: the fastest history stage from 128x64 up, behind mage-001 at
//! the smallest shapes. GPU kernel time per call (CUPTI) and event span, hot
//! L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-triangle.json stage=mage-003 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 64x8 | 19.93 | 26.56 |
//! | 128x32 | 35.89 | 42.45 |
//! | 256x32 | 86.71 | 94.14 |
//! | 128x64 | 36.55 | 43.55 |
//! | 256x64 | 152.36 | 160.34 |
//! | 512x32 | 625.83 | 639.49 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const THREADS: u32 = 64;
/// The (i, j) tile edge a thread owns.
pub const TILE: u32 = 4;

mage_common::kernel! {
    /// Thread `t` = ((ti·nt + tj)·c/4 + q) owns `O[4ti.., 4tj.., 4q..4q + 4]`; `c % 4 == 0`.
    pub unsafe fn triangle_tile_quad(a: *const f32, b: *const f32, o: *mut f32, n: u32, c: u32) {
        let (nt, quads) = (n.div_ceil(TILE), c / 4);
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t >= nt * nt * quads {
            return;
        }
        // SAFETY: t < nt·nt·c/4, so n, nt and c/4 are nonzero.
        unsafe { core::hint::assert_unchecked(n > 0 && quads > 0 && nt > 0) };
        let (ch, rest) = (4 * (t % quads), t / quads);
        let (i0, j0) = (TILE * (rest / nt), TILE * (rest % nt));
        let row = |r: u32| (r.min(n - 1) * n) * c + ch;
        let pa: [u32; 4] = core::array::from_fn(|q| row(i0 + q as u32));
        let pb: [u32; 4] = core::array::from_fn(|q| row(j0 + q as u32));
        let mut acc = [[F32x4::ZERO; 4]; 4];
        let mut kc = 0;
        for _ in 0..n {
            let av: [F32x4; 4] = core::array::from_fn(|q| unsafe { ld_nc4(a, pa[q] + kc) });
            let bv: [F32x4; 4] = core::array::from_fn(|q| unsafe { ld_nc4(b, pb[q] + kc) });
            for ii in 0..4 {
                for jj in 0..4 {
                    acc[ii][jj] = av[ii].zip3(bv[jj], acc[ii][jj], fma);
                }
            }
            kc += c;
        }
        for (ii, row) in acc.iter().enumerate() {
            for (jj, v) in row.iter().enumerate() {
                let (i, j) = (i0 + ii as u32, j0 + jj as u32);
                if i < n && j < n {
                    unsafe { st4(o, (i * n + j) * c + ch, *v) };
                }
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1].is_multiple_of(4)
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn threads(d: &[u32]) -> u32 {
    let nt = d[0].div_ceil(TILE);
    nt * nt * (d[1] / 4)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "4x4 (i, j) tile of channel quads per thread, 128-bit loads, 8 loads per 64 FMAs",
    kernels: &[&triangle_tile_quad::KERNEL],
    supports,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &triangle_tile_quad::KERNEL,
            grid: Dim3::x(threads(d).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
