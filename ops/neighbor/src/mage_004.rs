//! mage-004: one warp per row, 128-bit gathers spread over lane groups,
//! one kernel (for graphs without heavy rows).
//!
//! Kernel body: this module (`neighbor_warp_row`); the edge batches and
//! gathers in [`crate::gather`] (shared with mage-005; frozen: ptxas
//! resources pinned by `tests/resources.rs`).
//!
//! What changed, and why it should help: mage-001 (the stage `current`
//! ran on small light graphs) gives each output element its own thread,
//! and each thread walks its row one edge at a time: per edge a 4-byte
//! gather that waits on the index load before it, about one L2 round trip
//! per edge. mage-003 has the better inner loop but pays for the merge-path
//! search, the carries and a second kernel, which on a light graph buy
//! nothing. Here warp `r` takes row `r` whole:
//!
//! * lane `l` loads the index and weight of edge `start + l` (32 edges, two
//!   coalesced loads) and shuffles them out;
//! * the warp splits into groups of lanes, one lane per 16-byte quad of a
//!   row of `x` (at width 64: two groups of 16), the groups taking
//!   alternate edges, and each lane issues
//!   [`GATHERS_IN_FLIGHT`](crate::gather::GATHERS_IN_FLIGHT) (8)
//!   `ld.global.nc.v4.f32` before its first multiply-add waits: a row of up
//!   to 16 edges (the default uniform graph's mean) is one batch load and
//!   one round of gathers;
//! * the groups' sums meet in a `shfl.xor` butterfly and the first group
//!   stores the row with 128-bit stores.
//!
//! The prediction, made before it ran: 56 registers, so 32 warps fit an SM
//! and all 4,096 rows of the default uniform graph run in one wave; the
//! critical path is rowptr, the edge batch, one or two rounds of gathers
//! and the store, under the 16.8 MB of gathers from L2 (about 2.4 µs at
//! 7 TB/s): about 3 µs of kernel time. On 65,536 rows and 1M uniform edges,
//! bound by L2 bandwidth, about as fast as mage-003. A heavy row is one
//! warp's serial work (14,000 edges: about 900 rounds of gathers), so this
//! stage is for graphs without heavy rows only.
//!
//! What was measured (CUPTI kernel time, hot L2, in the table below, from
//! `results/candidates-1/sweep-neighbor.json`): on the default uniform
//! graph it is the fastest stage, a little ahead of mage-001 and well short
//! of the prediction; the event span around one call is a little longer
//! than mage-001's there. Nsight Compute at that graph
//! (`results/candidates-1/nsight/neighbor-try-rows-4096x64x65536.json`)
//! shows a kernel waiting on memory: long-scoreboard stalls lead by far,
//! and the achieved occupancy is below the 32 warps per SM that the
//! registers allow, there being fewer rows than warps that fit. On the
//! large uniform graph it loses to mage-003 and to mage-001; the likely
//! reason is that each warp spends most of its life on the rowptr and
//! batch round trips of one short row, so little gather traffic is in
//! flight. On power-law graphs the heavy rows serialise it, as predicted,
//! and it is slower than mage-001 there. `current` runs it where mage-001
//! ran before: small graphs without heavy rows.
//!
//! <!-- mage:table stage results/candidates-1/sweep-neighbor.json stage=try-rows -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x64x65536 | 4.71 | 11.07 |
//! | 4096x64x65536 power-law | 1173 | 1181 |
//! | 65536x64x1048576 | 57.25 | 62.18 |
//! | 65536x64x1048576 power-law | 19148 | 19140 |
//! <!-- /mage:table -->
//!
//! (Measured as `try-rows`, the name it had as a candidate.)
//!
//! Each group sums its edges in order and the groups meet in a fixed
//! butterfly: deterministic, and the GPU and the emulator agree bit for
//! bit. Needs `width % 4 == 0`.

use crate::gather::{EdgeBatch, QuadGroups, accumulate};
use crate::warp_in_grid;
use mage_common::device::*;

mage_common::kernel! {
    /// Warp `r` of the grid writes row `r` of the `[n, width]` output;
    /// `width % 4 == 0`.
    pub unsafe fn neighbor_warp_row(x: *const f32, w: *const f32, rowptr: *const u32, indices: *const u32, out: *mut f32, n: u32, width: u32) {
        let row = warp_in_grid();
        if row >= n {
            return;
        }
        let (start, end) = unsafe { (ld_nc_u32(rowptr, row), ld_nc_u32(rowptr, row + 1)) };
        let lanes = QuadGroups::new(width);
        lanes.for_each_chunk(|q, at_x| {
            let mut batch = unsafe { EdgeBatch::load(w, indices, start, end) };
            let acc = unsafe { accumulate(x, w, indices, width, at_x, lanes, &mut batch, end, start, end, F32x4::ZERO) };
            let acc = lanes.combine(acc);
            if lanes.stores(q) {
                unsafe { st4(out, row * width + 4 * q, acc) };
            }
        });
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::{graph_args, warp_launch};
    use mage_common::op::Stage;

    pub fn supports(d: &[u32]) -> bool {
        d[1].is_multiple_of(4)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-004",
        summary: "one warp per row, coalesced edge batches shuffled to lane groups, 128-bit gathers, one kernel",
        kernels: &[&neighbor_warp_row::KERNEL],
        supports,
        plan: |d| warp_launch(&neighbor_warp_row::KERNEL, d[0], graph_args(d)).into(),
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
