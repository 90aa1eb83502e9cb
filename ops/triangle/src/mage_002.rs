//! mage-002: a 4×4 register tile of (i, j) per thread, one channel.
//!
//! Kernel body: this module (`triangle_tile`).
//!
//! What changed, and why it should help: mage-001 spends two loads on every
//! FMA. Here a thread owns the sixteen outputs `O[i0..i0+4, j0..j0+4, ch]`;
//! each step of `k` loads four `A[i, k, ch]` and four `B[j, k, ch]` into
//! registers and does all sixteen FMAs with them: 8 loads per 16 FMAs, a
//! quarter of mage-001's load instructions (and of its L1 traffic) for the
//! same arithmetic, with eight independent loads in flight per step.
//! Consecutive threads still take consecutive channels, so loads stay
//! coalesced along `c` and threads with the same tile row share lines.
//! No shared memory and no barriers: L1 does the reuse across threads.
//! Works for every `c`.
//!
//! Rows past `n` (when `n % 4 != 0`) are clamped to row `n − 1` for the
//! loads, which keeps the inner loop free of branches, and are not stored.
//! The tile has a sixteenth of mage-001's threads, so small shapes leave
//! the GPU idle; [`current`](crate::current) keeps those on mage-001.
//!
//! Measured: slower than mage-001 at 128x32 (a quarter of the threads),
//! faster from 256x32. GPU kernel time per call (CUPTI) and event span, hot
//! L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-triangle.json stage=mage-002 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 64x8 | 24.34 | 30.94 |
//! | 128x32 | 49.65 | 55.79 |
//! | 256x32 | 107.32 | 114.69 |
//! | 128x64 | 51.24 | 58.05 |
//! | 256x64 | 434.52 | 448.02 |
//! | 512x32 | 1655 | 1671 |
//! | 7x5 | 3.02 | 9.25 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub const THREADS: u32 = 128;
/// The (i, j) tile edge a thread owns.
pub const TILE: u32 = 4;

mage_common::kernel! {
    /// Thread `t` = ((ti·nt + tj)·c + ch) owns `O[4ti.., 4tj.., ch]`, `nt = ⌈n/4⌉`.
    pub unsafe fn triangle_tile(a: *const f32, b: *const f32, o: *mut f32, n: u32, c: u32) {
        let nt = n.div_ceil(TILE);
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t >= nt * nt * c {
            return;
        }
        // SAFETY: t < nt·nt·c, so n and c are nonzero.
        unsafe { core::hint::assert_unchecked(n > 0 && c > 0 && nt > 0) };
        let (ch, rest) = (t % c, t / c);
        let (i0, j0) = (TILE * (rest / nt), TILE * (rest % nt));
        let row = |r: u32| (r.min(n - 1) * n) * c + ch;
        let pa: [u32; 4] = core::array::from_fn(|q| row(i0 + q as u32));
        let pb: [u32; 4] = core::array::from_fn(|q| row(j0 + q as u32));
        let mut acc = [[0f32; 4]; 4];
        let mut kc = 0;
        for _ in 0..n {
            let av: [f32; 4] = core::array::from_fn(|q| unsafe { ld_nc(a, pa[q] + kc) });
            let bv: [f32; 4] = core::array::from_fn(|q| unsafe { ld_nc(b, pb[q] + kc) });
            for ii in 0..4 {
                for jj in 0..4 {
                    acc[ii][jj] = fma(av[ii], bv[jj], acc[ii][jj]);
                }
            }
            kc += c;
        }
        for (ii, row) in acc.iter().enumerate() {
            for (jj, v) in row.iter().enumerate() {
                let (i, j) = (i0 + ii as u32, j0 + jj as u32);
                if i < n && j < n {
                    unsafe { st(o, (i * n + j) * c + ch, *v) };
                }
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn threads(d: &[u32]) -> u32 {
    let nt = d[0].div_ceil(TILE);
    nt * nt * d[1]
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "4x4 (i, j) register tile per thread, one channel, 8 loads per 16 FMAs",
    kernels: &[&triangle_tile::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &triangle_tile::KERNEL,
            grid: Dim3::x(threads(d).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
