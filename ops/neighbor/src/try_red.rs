//! try-red: merge-path shares whose shared rows are summed with
//! `red.global.add.f32` instead of a fix-up kernel; a cheap first launch
//! finds the shares' bounds and zeroes those rows (a candidate for graphs
//! with heavy rows, and for large ones).
//!
//! What changed, and why it should help: mage-002 and mage-003 balance a
//! power-law graph by cutting the merge path of rows + edges into equal
//! shares, but a row split over many shares is finished by a fix-up kernel
//! in which one thread per column adds the row's carries one after another:
//! the heaviest row of the default power-law graph (14,000 edges) is split
//! over about 440 shares, a serial chain of 440 loads per column, and the
//! second kernel's own time comes on top. Here:
//!
//! * **Bounds (first launch, small).** Each warp runs the merge-path search
//!   for two share boundaries and writes the row each boundary falls in to
//!   scratch. Those rows are the only ones two shares can touch; the first
//!   boundary inside each zeroes it in `out`.
//! * **Work (second launch).** Warp `p` reads its two bounds (one load
//!   instead of the search on its own critical path), then loads the ends
//!   of up to 32 of its rows with one coalesced load and its edges in
//!   batches of 32, and walks its rows with the gather loop of try-rows (lane
//!   groups, 128-bit gathers, 8 in flight per lane). A row inside the share
//!   is stored; a boundary row gets its part added with `red.global.add.f32`
//!   (fire and forget: nothing waits for it), so no second pass over the
//!   carries and no serial chain: the hub's 440 parts land in L2's atomic
//!   units while the other shares run.
//!
//! Every output element is written: a row inside a share by exactly one
//! store, a boundary row by the zeroing and then an add of every part.
//!
//! Summation order: each part is summed in a fixed order (edges in order
//! per lane group, then a fixed butterfly), but the parts of a boundary row
//! land in whatever order the hardware applies the adds, so those rows may
//! differ in their last bits from run to run and between the GPU and the
//! emulator (which also adds in arrival order); rows inside a share are
//! deterministic. The data-derived tolerance is meant to cover it: a
//! boundary row of `k` parts adds `k` roundings, each at most `u` times a
//! sum of some of the row's parts, where a serial sum rounds once per edge
//! at its edge-order partial sums; on data like the generators' both kinds
//! of partial sums have the same size (a row whose parts cancel in edge
//! order but not in another order could exceed it; no test builds one).
//! `red.global.add.f32` flushes subnormal inputs and results to zero, which
//! moves a sum by less than 2^-126 per add.
//!
//! Prediction on the default power-law graph (4096x64, 65,536 edges, 2,176
//! shares of 32 items): bounds about 1.5 µs (three search steps, the first
//! ones hitting L1), work about 4 µs (one load of bounds, one of row ends
//! and edges, then per row one or two rounds of gathers, under 16.8 MB of
//! gathers at about 7 TB/s), about 5.5 µs in all against mage-002's 18.1.
//! On 1M edges (about 4,220 shares of 264 items, 32 warps per SM: all that
//! fit at 56 registers) it is bound by L2 bandwidth like the others, about
//! 40 µs of work plus about 2 µs of bounds, uniform or power-law (mage-003
//! 42.9 uniform, mage-002 74.0 power-law). Needs `width % 4 == 0`.
//!
//! Not yet measured on the GPU.

use crate::{EdgeBatch, QuadGroups, accumulate, merge_path, warp_in_grid};
use mage_common::device::neighbor::red_add;
use mage_common::device::*;

/// The number of shares the share size aims at: 32 warps per SM of the
/// H200, as many as stay resident at the work kernel's 56 registers.
pub const TARGET_SHARES: u32 = 132 * 32;

/// The number of shares of `items` items of a merge path of `total` items.
///
/// # Safety
/// `items` must be positive (the plan passes a positive share size).
#[inline(always)]
unsafe fn share_count(total: u32, items: u32) -> u32 {
    unsafe { core::hint::assert_unchecked(items > 0) };
    total.div_ceil(items)
}

/// A window of 32 row ends: lane `l` holds `rowptr[base + 1 + l]`, the end
/// of row `base + l` (0 past row `last`).
struct RowEnds {
    base: u32,
    end: u32,
}

impl RowEnds {
    #[inline(always)]
    unsafe fn load(rowptr: *const u32, base: u32, last: u32) -> RowEnds {
        let i = base + 1 + lane_id();
        RowEnds { base, end: if i <= last { unsafe { ld_nc_u32(rowptr, i) } } else { 0 } }
    }

    /// The end of row `r` (`base <= r < last`, warp-uniform), moving the
    /// window to `r` when `r` is past it.
    #[inline(always)]
    unsafe fn of(&mut self, rowptr: *const u32, r: u32, last: u32) -> u32 {
        if r >= self.base + 32 {
            *self = unsafe { RowEnds::load(rowptr, r, last) };
        }
        shuffle_idx(f32::from_bits(self.end), r - self.base).to_bits()
    }
}

/// `red_add` of a quad to `p[i..i + 4]`.
#[inline(always)]
unsafe fn red_add4(p: *mut f32, i: u32, v: F32x4) {
    unsafe {
        red_add(p, i, v.x);
        red_add(p, i + 1, v.y);
        red_add(p, i + 2, v.z);
        red_add(p, i + 3, v.w);
    }
}

mage_common::kernel! {
    /// Warp `k` finds share boundaries `b = 2k, 2k + 1` (up to `workers`,
    /// the number of shares of `items` items): `bounds[b]` = the rows
    /// consumed at diagonal `min(b·items, n + edges)`, stored as the f32 of
    /// the same bits. For `0 < b < workers` that row (if below `n`) is
    /// shared by shares `b - 1` and `b`, and the first boundary inside it
    /// zeroes it in `out`. `items` positive, `width % 4 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_share_bounds(rowptr: *const u32, out: *mut f32, bounds: *mut f32, n: u32, width: u32, edges: u32, items: u32) {
        let total = n + edges;
        let workers = unsafe { share_count(total, items) };
        let b0 = 2 * warp_in_grid();
        if b0 > workers {
            return;
        }
        let (r0, r1) = unsafe { merge_path(rowptr, (b0 * items).min(total), ((b0 + 1) * items).min(total), n, edges) };
        for (b, r) in [(b0, r0), (b0 + 1, r1)] {
            if b > workers {
                break;
            }
            unsafe {
                if lane_id() == 0 {
                    st(bounds, b, f32::from_bits(r));
                }
                // Row r's first item is at diagonal rowptr[r] + r; the first
                // boundary at or after it (at least boundary 1) zeroes it.
                if b > 0 && b < workers && r < n && b == (ld_nc_u32(rowptr, r) + r).div_ceil(items).max(1) {
                    let mut c = 4 * lane_id();
                    while c < width {
                        st4(out, r * width + c, F32x4::ZERO);
                        c += 128;
                    }
                }
            }
        }
    }
}

mage_common::kernel! {
    /// Warp `p` walks items `p·items .. (p + 1)·items` of the merge path,
    /// between the rows `bounds[p]` and `bounds[p + 1]`: stores the rows
    /// inside its share, adds its parts of the boundary rows with
    /// `red.global.add.f32`. `items` positive, `width % 4 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_share_red(
        x: *const f32,
        w: *const f32,
        rowptr: *const u32,
        indices: *const u32,
        bounds: *const u32,
        out: *mut f32,
        n: u32,
        width: u32,
        edges: u32,
        items: u32,
    ) {
        let total = n + edges;
        let workers = unsafe { share_count(total, items) };
        let p = warp_in_grid();
        if p >= workers {
            return;
        }
        let (r0, r1) = unsafe { (ld_nc_u32(bounds, p), ld_nc_u32(bounds, p + 1)) };
        let d0 = p * items;
        let (e0, e1) = (d0 - r0, total.min(d0 + items) - r1);
        let lanes = QuadGroups::new(width);
        lanes.for_each_chunk(|q, at_x| {
            let mut batch = unsafe { EdgeBatch::load(w, indices, e0, e1) };
            let mut ends = unsafe { RowEnds::load(rowptr, r0, r1) };
            let (mut r, mut e) = (r0, e0);
            // The last share's r1 is n: no row, no edges.
            while r <= r1 && r < n {
                let end = if r < r1 { unsafe { ends.of(rowptr, r, r1) } } else { e1 };
                let part = unsafe { accumulate(x, w, indices, width, at_x, lanes, &mut batch, e1, e, end, F32x4::ZERO) };
                let part = lanes.combine(part);
                // Row r0 is shared with the share before (if any), r1 with the one after.
                let shared = (r == r0 && p > 0) || (r == r1 && p + 1 < workers);
                if lanes.stores(q) {
                    let at = r * width + 4 * q;
                    unsafe {
                        if !shared {
                            st4(out, at, part);
                        } else if end > e {
                            red_add4(out, at, part);
                        }
                    }
                }
                e = end;
                r += 1;
            }
        });
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::warp_launch;
    use mage_common::op::{Arg, Plan, Stage};

    /// Items (rows + edges) per share for these dims.
    pub fn items(d: &[u32]) -> u32 {
        (d[0] + d[2]).div_ceil(TARGET_SHARES).clamp(32, 1024)
    }

    /// Quads, and item counts that fit a u32 with room.
    pub fn supports(d: &[u32]) -> bool {
        d[1].is_multiple_of(4) && (d[0] as u64 + d[2] as u64) < 1 << 31
    }

    /// The two launches with `items` per share (tests vary it to split rows
    /// over many shares).
    pub fn plan_with(d: &[u32], items: u32) -> Plan {
        let (n, width, edges) = (d[0], d[1], d[2]);
        let workers = (n + edges).div_ceil(items);
        let sizes = [Arg::U32(n), Arg::U32(width), Arg::U32(edges), Arg::U32(items)];
        let mut find = vec![Arg::Input(2), Arg::Output, Arg::Scratch(0)];
        find.extend(sizes);
        let mut work = vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Scratch(0), Arg::Output];
        work.extend(sizes);
        // Boundaries 0..=workers, two per warp.
        let pairs = (workers + 2) / 2;
        Plan {
            launches: vec![
                warp_launch(&neighbor_share_bounds::KERNEL, pairs, find),
                warp_launch(&neighbor_share_red::KERNEL, workers, work),
            ],
            scratch: vec![workers as usize + 1],
        }
    }

    pub fn plan(d: &[u32]) -> Plan {
        plan_with(d, items(d))
    }

    pub static STAGE: Stage = Stage {
        name: "try-red",
        summary: "merge-path shares, bounds and zeroed shared rows from a first launch, shared rows summed with red.global.add.f32",
        kernels: &[&neighbor_share_bounds::KERNEL, &neighbor_share_red::KERNEL],
        supports,
        plan,
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
