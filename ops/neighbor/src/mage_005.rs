//! mage-005: light rows one warp each, heavy rows cut into equal chunks of
//! edges; two kernels, neither of which walks light rows one after another
//! (graphs with heavy rows).
//!
//! Kernel body: this module (`neighbor_light_rows`, `neighbor_heavy_chunks`);
//! the edge batches and gathers in [`crate::gather`] (shared with mage-004;
//! frozen: ptxas resources pinned by `tests/resources.rs`).
//!
//! Where mage-002's time goes on the default power-law graph, which holds
//! as many edges as the uniform one and takes about four times mage-001's
//! uniform time. Its shares are cut by amount, so every warp does the same
//! work, but the amount is rows plus edges, and the two ends of the degree
//! distribution cost differently:
//!
//! * **The light tail.** Outside the 160 or so rows of more than 32 edges,
//!   the rows of the power-law graph hold about three edges each. A share
//!   of 32 items there is seven or eight rows and their edges (at 1M edges,
//!   264 items: nearly ninety rows of two edges), and the warp walks them
//!   one after another: per row a load of its end, then its gathers, then
//!   its store, each row's gathers issued only after the previous row's
//!   have come back. On the uniform graph a share holds two rows. The same
//!   walk is in mage-003 and in the removed try-red, and all three lose
//!   about as much on the power-law graph whatever they do with the carries
//!   (`docs/attempts.md`); at 1M edges the loss is larger still.
//! * **The hub.** Its 14,000 edges are split over about 440 shares, whose
//!   carries the fix-up kernel adds one after another per column.
//! * **Share setup.** Every warp first searches rowptr for both ends of its
//!   share: three dependent rounds of a load and a warp sum before the
//!   first gather.
//! * **Two launches**, the second short but with the hub's chain in it.
//! * **Gathers.** mage-002 gathers 4 bytes per lane per edge, one edge at a
//!   time; mage-003 and mage-004 use 128-bit gathers split over lane
//!   groups.
//!
//! Here the light tail runs as in mage-004, and the heavy rows as a merge
//! path over edges alone:
//!
//! * **Light rows (first kernel).** A row of at most [`HEAVY`] edges is one
//!   warp's work with mage-004's gather loop (one batch of edges, lane
//!   groups, 8 gathers in flight per lane), so the light rows each take one
//!   round of gathers, all at once. Where there are more rows than
//!   [`TARGET_WARPS`](crate::TARGET_WARPS), a warp takes rows `r, r + W, r + 2W, ...` (`W` warps
//!   in the grid) and issues the next row's batch and the bounds of the row
//!   after it before this row's gathers, so the rowptr and batch round trips
//!   of one row hide under the gathers of the one before (mage-004 loses
//!   the large uniform graph waiting on them). A heavy row is zeroed.
//! * **Heavy rows (second kernel).** The edges are cut into chunks of
//!   [`chunk`] edges (32 at the default size, 256 at 1M edges), one warp
//!   each. The warp loads its batch of edges while it searches rowptr for
//!   the row holding its first edge (32 pivots per step; the last step's
//!   load is the window of row bounds it walks with), then walks the rows
//!   of its chunk, skipping light ones. A heavy row inside the chunk is
//!   stored; the part of one that crosses the chunk's start or end goes to
//!   shared memory, where the 8 warps of a block (consecutive chunks) sum
//!   the parts of each row in chunk order. A row inside the block's edges
//!   is then stored, and a row that crosses the block's ends gets the
//!   block's sum added with `red.global.add.f32`, onto the zeros the first
//!   kernel wrote: the hub of the default power-law graph takes about 55
//!   adds per element (one per block) instead of a chain of 440 carries.
//!   The first kernel must zero before the second adds, hence two launches;
//!   both do a share of the gathers.
//!
//! Summation order: light rows, heavy rows inside a chunk, and heavy rows
//! inside a block are summed in a fixed order (edges in order per lane
//! group, a fixed butterfly, the block's parts in chunk order), and the GPU
//! and the emulator agree bit for bit on them. A row that crosses a
//! block's ends receives its blocks' sums in whatever order the adds land,
//! so its last bits may differ from run to run and between the GPU and the
//! emulator. The data-derived tolerance is meant to cover it as it covers
//! the merge-path carries: each add rounds once, at a partial sum of the
//! row's parts, and on data like the generators' those are of the size of
//! the row's edge-order partial sums (a row whose parts cancel in edge
//! order but not in another order could exceed it; no test builds one).
//! `red.global.add.f32` flushes subnormal inputs and results to zero, which
//! moves a sum by less than 2^-126 per add.
//!
//! 64 registers in each kernel, no spills: 32 warps per SM.
//!
//! Prediction at 4096x64 with 65,536 power-law edges: the first kernel
//! about 3 µs (3,900 light rows of about three edges, one round of gathers
//! each, 3 MB of gathers); the second about 3 µs (2,048 warps of 32 edges:
//! the search under the batch load, two rounds of gathers, 13.6 MB of
//! gathers for the heavy rows' 53,000 edges, the hub's adds spread over the
//! kernel): about 6 µs in all, a third of mage-002's time. At 65,536 rows
//! and 1M power-law edges: the second kernel carries nearly nine edges in
//! ten (chunks of 256, a batch reload every 32 edges), bound by L2
//! bandwidth at about 40 µs; the first walks about 15 light rows per warp
//! at one round of gathers each, about 10 µs; about 50 µs in all, two
//! thirds of mage-002's time. On uniform graphs it costs mage-004's time
//! plus a second kernel that searches and finds no heavy rows, so
//! `current` would not pick it there. Needs `width % 4 == 0`.
//!
//! Measured (as `try-split`, in one session with mage-002 and mage-003):
//! faster than mage-002 on both power-law graphs, short of the prediction
//! at 4096 rows; slower than mage-003 on the large uniform graph, where
//! `current` does not pick it. GPU kernel time per call (CUPTI, both
//! kernels) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-2/sweep-neighbor.json stage=try-split -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x64x65536 | 8.66 | 15.30 |
//! | 4096x64x65536 power-law | 13.36 | 20.00 |
//! | 65536x64x1048576 | 61.14 | 67.57 |
//! | 65536x64x1048576 power-law | 65.98 | 71.68 |
//! <!-- /mage:table -->

use crate::gather::{EdgeBatch, QuadGroups, accumulate};
use crate::{WARPS_PER_BLOCK, warp_in_grid};
use mage_common::device::atomic::red_add;
use mage_common::device::*;

/// Rows with more edges than this are heavy: the second kernel sums them.
/// One batch of edges covers a light row.
pub const HEAVY: u32 = 32;

/// No row: a free slot of a block's parts.
const NONE: u32 = u32::MAX;

/// The bit of a slot's tag that says the row crosses the block's ends, so
/// the block's sum is added rather than stored (rows are below 2^31).
const ADD: u32 = 1 << 31;

/// A slot's tag: the row, and [`ADD`] if the block's sum must be added.
#[inline(always)]
fn tag(row: u32, add: bool) -> u32 {
    if add { row | ADD } else { row }
}

/// Parts per warp in a block's shared memory: the row that crosses the
/// chunk's start, and the row that crosses its end.
const SLOTS_PER_WARP: u32 = 2;

/// Bytes of shared memory before the parts: one row number per slot.
const ROW_BYTES: u32 = 4 * SLOTS_PER_WARP * WARPS_PER_BLOCK;

/// 32 consecutive entries of rowptr: lane `l` holds `rowptr[base + l]`
/// (0 past `n`), so the start and end of rows `base..base + 31`.
#[derive(Clone, Copy)]
struct Window {
    base: u32,
    value: u32,
}

impl Window {
    #[inline(always)]
    unsafe fn load(rowptr: *const u32, base: u32, n: u32) -> Window {
        let i = base + lane_id();
        Window { base, value: if i <= n { unsafe { ld_nc_u32(rowptr, i) } } else { 0 } }
    }

    /// `rowptr[i]` (`base <= i <= n`, warp-uniform), moving the window to
    /// `i` when `i` is past it.
    #[inline(always)]
    unsafe fn at(&mut self, rowptr: *const u32, i: u32, n: u32) -> u32 {
        if i >= self.base + 32 {
            *self = unsafe { Window::load(rowptr, i, n) };
        }
        shuffle_idx(f32::from_bits(self.value), i - self.base).to_bits()
    }
}

/// The row holding edge `a` (`a < rowptr[n]`): the number of row ends
/// `rowptr[1..=n]` at or below `a`, and a window holding that row's start
/// and end. Each step probes 32 pivots with one load per lane and counts
/// them with a warp sum; the last step's load is the window.
///
/// # Safety
/// `rowptr` must hold `n + 1` entries (`n >= 1`); every lane must call this.
#[inline(always)]
unsafe fn row_of_edge(rowptr: *const u32, a: u32, n: u32) -> (u32, Window) {
    let lane = lane_id();
    let count = |yes: bool| warp_sum(if yes { 1.0 } else { 0.0 }) as u32;
    // The answer lies in [lo, hi].
    let (mut lo, mut hi) = (0, n - 1);
    while hi - lo > 30 {
        let s = (hi - lo).div_ceil(32);
        let probe = lo + (lane + 1) * s;
        let k = count(probe <= hi && unsafe { ld_nc_u32(rowptr, probe) } <= a);
        hi = hi.min(lo + (k + 1) * s - 1);
        lo += k * s;
    }
    let window = unsafe { Window::load(rowptr, lo, n) };
    (lo + count(lane >= 1 && lo + lane <= hi && window.value <= a), window)
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
    /// Warp `r` of the grid writes rows `r, r + W, r + 2W, ...` (`W` warps in
    /// the grid): the sum of a row of at most `heavy` edges, zeros for a
    /// heavier one. `width % 4 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_light_rows(x: *const f32, w: *const f32, rowptr: *const u32, indices: *const u32, out: *mut f32, n: u32, width: u32, heavy: u32) {
        let stride = grid_dim_x() * WARPS_PER_BLOCK;
        let mut row = warp_in_grid();
        if row >= n {
            return;
        }
        let bounds = |r: u32| if r < n { unsafe { (ld_nc_u32(rowptr, r), ld_nc_u32(rowptr, r + 1)) } } else { (0, 0) };
        let lanes = QuadGroups::new(width);
        let (mut start, mut end) = bounds(row);
        let mut batch = unsafe { EdgeBatch::load(w, indices, start, end) };
        let (mut next_start, mut next_end) = bounds(row + stride);
        loop {
            // The next row's batch and the bounds of the row after it go
            // out before this row's gathers.
            let next_batch = unsafe { EdgeBatch::load(w, indices, next_start, next_end) };
            let after = bounds(row + 2 * stride);
            let light = end - start <= heavy;
            lanes.for_each_chunk(|q, at_x| {
                let acc = if light {
                    let mut b = batch;
                    lanes.combine(unsafe { accumulate(x, w, indices, width, at_x, lanes, &mut b, end, start, end, F32x4::ZERO) })
                } else {
                    F32x4::ZERO
                };
                if lanes.stores(q) {
                    unsafe { st4(out, row * width + 4 * q, acc) };
                }
            });
            row += stride;
            if row >= n {
                break;
            }
            (start, end, batch) = (next_start, next_end, next_batch);
            (next_start, next_end) = after;
        }
    }
}

mage_common::kernel! {
    /// Warp `k` of the grid sums the heavy rows' edges among edges
    /// `k·chunk .. (k + 1)·chunk`: stores a heavy row that lies inside the
    /// chunk, and meets the other warps of its block over the rows that
    /// cross a chunk's ends; a row inside the block's edges is stored, one
    /// that crosses them gets the block's part added to `out` (zeroed by
    /// `neighbor_light_rows`). `chunk` positive, `width % 4 == 0`, shared
    /// memory as the plan gives.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_heavy_chunks(
        x: *const f32,
        w: *const f32,
        rowptr: *const u32,
        indices: *const u32,
        out: *mut f32,
        n: u32,
        width: u32,
        edges: u32,
        chunk: u32,
        heavy: u32,
    ) {
        let warp = warp_id();
        let a = warp_in_grid() * chunk;
        let b = edges.min(a + chunk);
        let block_a = block_idx_x() * WARPS_PER_BLOCK * chunk;
        let block_b = edges.min(block_a + WARPS_PER_BLOCK * chunk);
        // Warps past the last edge take part in the block's barriers only.
        let active = a < edges;
        let lanes = QuadGroups::new(width);
        let (first, window) = if active { unsafe { row_of_edge(rowptr, a, n) } } else { (n, Window { base: 0, value: 0 }) };
        let slot_at = |slot: u32| ROW_BYTES + (slot * lanes.size + lanes.slot) * 16;
        let (head_slot, tail_slot) = (SLOTS_PER_WARP * warp, SLOTS_PER_WARP * warp + 1);
        lanes.for_each_chunk(|q, at_x| {
            let mut batch = unsafe { EdgeBatch::load(w, indices, a, b) };
            let mut rows = window;
            // The slots of the rows that cross the chunk's start and its
            // end: the row's tag, and this chunk's part of it.
            if lane_id() == 0 {
                smem_st(4 * head_slot, f32::from_bits(NONE));
                smem_st(4 * tail_slot, f32::from_bits(NONE));
            }
            let mut r = first;
            while r < n {
                let (start, end) = unsafe { (rows.at(rowptr, r, n), rows.at(rowptr, r + 1, n)) };
                if start >= b {
                    break;
                }
                if end - start > heavy {
                    let (e0, e1) = (start.max(a), end.min(b));
                    let part = lanes.combine(unsafe { accumulate(x, w, indices, width, at_x, lanes, &mut batch, b, e0, e1, F32x4::ZERO) });
                    if start >= a && end <= b {
                        if lanes.stores(q) {
                            unsafe { st4(out, r * width + 4 * q, part) };
                        }
                    } else {
                        let slot = if start < a { head_slot } else { tail_slot };
                        if lane_id() == 0 {
                            smem_st(4 * slot, f32::from_bits(tag(r, start < block_a || end > block_b)));
                        }
                        if lanes.group == 0 {
                            smem_st4(slot_at(slot), part);
                        }
                    }
                }
                r += 1;
            }
            sync_threads();
            // The first slot holding a row sums the row's parts, in chunk order.
            for slot in head_slot..=tail_slot {
                let row = smem_ld(4 * slot).to_bits();
                if row == NONE || (0..slot).any(|s| smem_ld(4 * s).to_bits() == row) {
                    continue;
                }
                if lanes.stores(q) {
                    let mut sum = F32x4::ZERO;
                    for s in slot..SLOTS_PER_WARP * WARPS_PER_BLOCK {
                        if smem_ld(4 * s).to_bits() == row {
                            sum = sum.zip(smem_ld4(slot_at(s)), |a, b| a + b);
                        }
                    }
                    let at = (row & !ADD) * width + 4 * q;
                    unsafe {
                        if row & ADD != 0 {
                            red_add4(out, at, sum);
                        } else {
                            st4(out, at, sum);
                        }
                    }
                }
            }
            sync_threads();
        });
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::{TARGET_WARPS, graph_args, warp_launch, warp_launch_shared};
    use mage_common::op::{Arg, Plan, Stage};

    /// Edges per warp of the second kernel: the edges over
    /// [`TARGET_WARPS`](crate::TARGET_WARPS), a multiple of 32 between 32 and 1024.
    pub fn chunk(d: &[u32]) -> u32 {
        d[2].div_ceil(TARGET_WARPS).next_multiple_of(32).clamp(32, 1024)
    }

    /// Quads, and edge counts that fit a u32 with room for a grid of chunks.
    pub fn supports(d: &[u32]) -> bool {
        d[1].is_multiple_of(4) && (d[0] as u64 + d[2] as u64) < 1 << 31
    }

    /// Shared bytes of the second kernel: the slots' row numbers, then a
    /// quad per slot and lane of a group.
    pub fn shared_bytes(width: u32) -> u32 {
        let size = (width / 4).min(32).next_power_of_two();
        ROW_BYTES + SLOTS_PER_WARP * WARPS_PER_BLOCK * size * 16
    }

    /// The two launches with `light_warps` warps for the light rows (rounded
    /// up to whole blocks), `chunk` edges per warp of the second, and rows of
    /// more than `heavy` edges left to the second (tests vary all three).
    pub fn plan_with(d: &[u32], light_warps: u32, chunk: u32, heavy: u32) -> Plan {
        let (width, edges) = (d[1], d[2]);
        let mut light = graph_args(d);
        light.push(Arg::U32(heavy));
        let mut split = graph_args(d);
        split.extend([Arg::U32(edges), Arg::U32(chunk), Arg::U32(heavy)]);
        let chunks = edges.div_ceil(chunk).max(1);
        Plan {
            launches: vec![
                warp_launch(&neighbor_light_rows::KERNEL, light_warps, light),
                warp_launch_shared(&neighbor_heavy_chunks::KERNEL, chunks, shared_bytes(width), split),
            ],
            scratch: vec![],
        }
    }

    pub fn plan(d: &[u32]) -> Plan {
        plan_with(d, d[0].min(TARGET_WARPS), chunk(d), HEAVY)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-005",
        summary: "light rows one warp each, heavy rows in equal chunks of edges summed per block and added with red.global.add.f32",
        kernels: &[&neighbor_light_rows::KERNEL, &neighbor_heavy_chunks::KERNEL],
        supports,
        plan,
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
