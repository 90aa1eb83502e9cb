//! The merge path: the shared code of the merge-path stages (mage-002,
//! mage-003). [`merge_path`] cuts the merge of the row ends with the edge
//! numbers into equal shares of rows + edges (one per warp); the carries'
//! fix-up kernel `neighbor_fixup` adds each share's carry (the partial sum
//! of a row split between shares) to its row; [`merge_plan`] is the
//! stages' two launches, [`merge_items`] the share size and
//! [`merge_supports`] the shapes whose scratch fits. Frozen history:
//! mage-002's and mage-003's ptxas resources are pinned by
//! `tests/resources.rs` and their sums by `tests/stages.rs`, so a new stage
//! that changes this code takes a module of its own.

use mage_common::device::{block_idx_x, lane_id, ld, ld_nc, ld_nc_u32, st, thread_idx_x, warp_sum};

/// The rows consumed at diagonals `d0` and `d1` of the merge path of
/// `rowptr[1..=n]` with `0..edges`: for each, the number of rows `i` with
/// `rowptr[i + 1] + i + 1 <= d` (a condition true for a prefix of rows,
/// the tie going to the row end). Lanes 0–15 probe 16 pivots of the first
/// search and lanes 16–31 of the second; one warp sum counts both (the
/// second weighted by 32), so every lane holds both ranges and the loop is
/// warp-uniform.
///
/// # Safety
/// `rowptr` must hold `n + 1` entries; every lane of the warp must call this.
#[inline(always)]
pub unsafe fn merge_path(rowptr: *const u32, d0: u32, d1: u32, n: u32, edges: u32) -> (u32, u32) {
    let lane = lane_id();
    let (mut lo0, mut hi0) = (d0.saturating_sub(edges), d0.min(n));
    let (mut lo1, mut hi1) = (d1.saturating_sub(edges), d1.min(n));
    // Each answer lies in [lo, hi]: rows below lo are consumed; row hi is
    // not, or hi is the end of the range.
    while lo0 < hi0 || lo1 < hi1 {
        let (s0, s1) = ((hi0 - lo0).div_ceil(16), (hi1 - lo1).div_ceil(16));
        let (lo, hi, s, d, weight) = if lane < 16 { (lo0, hi0, s0, d0, 1.0) } else { (lo1, hi1, s1, d1, 32.0) };
        // Lane l of a half probes the last row of the l-th of 16 slices of `s` rows.
        let probe = lo + (lane % 16 + 1) * s;
        let below = s > 0 && probe <= hi && unsafe { ld_nc_u32(rowptr, probe) } + probe <= d;
        let sum = warp_sum(if below { weight } else { 0.0 }) as u32;
        let (c0, c1) = (sum % 32, sum / 32);
        if s0 > 0 {
            hi0 = hi0.min(lo0 + (c0 + 1) * s0 - 1);
            lo0 += c0 * s0;
        }
        if s1 > 0 {
            hi1 = hi1.min(lo1 + (c1 + 1) * s1 - 1);
            lo1 += c1 * s1;
        }
    }
    (lo0, lo1)
}

/// Threads per block of the merge-path stages' fix-up kernel.
pub const FIX_THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `t` = `p·width + col`: if worker `p` starts a run of carries
    /// into row `r`, adds the run's carries (in worker order) to `out[r, col]`.
    /// `items` must be positive.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_fixup(
        rowptr: *const u32,
        carry: *const f32,
        carry_row: *const u32,
        out: *mut f32,
        n: u32,
        width: u32,
        edges: u32,
        items: u32,
    ) {
        // SAFETY: the plan passes a positive share size.
        unsafe { core::hint::assert_unchecked(items > 0) };
        let workers = (n + edges).div_ceil(items);
        let t = block_idx_x() * FIX_THREADS + thread_idx_x();
        if t >= workers * width {
            return;
        }
        unsafe {
            // SAFETY: t < workers·width, so width > 0.
            core::hint::assert_unchecked(width > 0);
            let (p, col) = (t / width, t % width);
            let r = ld_nc_u32(carry_row, p);
            if r >= n || (p > 0 && ld_nc_u32(carry_row, p - 1) == r) {
                return;
            }
            // Worker q carries into row r while (q + 1)·items <= r + rowptr[r + 1].
            let last = ((r + ld_nc_u32(rowptr, r + 1)) / items).min(workers);
            let mut s = 0.0;
            let mut q = p;
            while q < last {
                s += ld_nc(carry, q * width + col);
                q += 1;
            }
            let i = r * width + col;
            st(out, i, ld(out, i) + s);
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::{TARGET_WARPS, warp_launch};
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};

    /// Items (rows + edges) per warp of the merge-path stages for these
    /// dims.
    pub fn merge_items(d: &[u32]) -> u32 {
        (d[0] + d[2]).div_ceil(TARGET_WARPS).clamp(32, 1024)
    }

    /// Whether the merge-path stages' scratch fits (at most 2^30 floats) and
    /// their item count fits a u32 with room.
    pub fn merge_supports(d: &[u32]) -> bool {
        let (n, width, edges) = (d[0] as u64, d[1] as u64, d[2] as u64);
        let workers = (n + edges).div_ceil(merge_items(d) as u64);
        n + edges < 1 << 31 && workers * width <= 1 << 30
    }

    /// A merge-path stage's two launches with `items` per warp: its `main`
    /// kernel, then the fix-up that adds the carries.
    pub fn merge_plan(d: &[u32], items: u32, main: &'static Kernel) -> Plan {
        let (n, width, edges) = (d[0], d[1], d[2]);
        let workers = (n + edges).div_ceil(items);
        let sizes = vec![Arg::U32(n), Arg::U32(width), Arg::U32(edges), Arg::U32(items)];
        let mut main_args =
            vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Output(0), Arg::Scratch(0), Arg::Scratch(1)];
        main_args.extend(&sizes);
        let mut fix = vec![Arg::Input(2), Arg::Scratch(0), Arg::Scratch(1), Arg::Output(0)];
        fix.extend(&sizes);
        Plan {
            launches: vec![
                warp_launch(main, workers, main_args),
                Launch {
                    kernel: &neighbor_fixup::KERNEL,
                    grid: Dim3::x((workers * width).div_ceil(FIX_THREADS)),
                    block: Dim3::x(FIX_THREADS),
                    shared_bytes: 0,
                    cluster: Dim3::ONE,
                    args: fix,
                },
            ],
            scratch: vec![workers as usize * width as usize, workers as usize],
        }
    }
}
