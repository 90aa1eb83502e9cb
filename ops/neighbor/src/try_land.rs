//! try-land: mage-004 with the gathers landing in shared memory through
//! `cp.async`, so a row of up to 24 edges (at width 64) is one round of
//! gathers (a candidate for small graphs without heavy rows).
//!
//! What changed, and why it might help: Nsight Compute of mage-004 on the
//! default uniform graph shows a kernel that waits on memory (long
//! scoreboard stalls lead, achieved occupancy below what the registers
//! allow). Each warp's critical path is rowptr, the edge batch, then rounds
//! of gathers: a lane holds [`GATHERS_IN_FLIGHT`](crate::GATHERS_IN_FLIGHT)
//! (8) gathered quads in registers, so a round covers 16 edges at width 64
//! and the rows of 17 to 32 edges (about four rows in ten of the default
//! uniform graph, whose mean is 16) wait for a second round after the
//! first has come back. More gathers in flight per lane would need more
//! registers than let the 4,096 rows run in one wave. Here the gathered
//! quads land in shared memory instead: `cp.async.cg` of 16 bytes per lane
//! and step, [`LAND_STEPS`] (12) steps issued before one wait, then the
//! multiply-adds read them back (each lane reads only what it landed, so no
//! barrier). Registers stop bounding the bytes in flight; a warp's 6 KB of
//! landing room does, 48 KB per block of 8 warps, 4 blocks per SM.
//!
//! 50 registers, 48 KB of shared memory per block of 8 warps: 32 warps
//! per SM, as mage-004.
//!
//! Prediction at 4096x64 with 65,536 uniform edges: if the time is the
//! latency of the rounds, as the counters suggest, dropping the second
//! round (all but about two rows in a hundred take one) takes one loaded
//! L2 round trip off the critical path: about a fifth off mage-004's time,
//! about 3.8 µs. If the time is instead L2 bandwidth (16.8 MB of gathers,
//! which at the 5 to 7 TB/s reported for Hopper's L2 take 2.4 to 3.4 µs,
//! about mage-004's kernel time less a launch), it does not move, and no
//! kernel that brings each edge's row of `x` through L2 reaches 2.9 µs:
//! that needs L1 hits, which uniform random sources do not give (the rows
//! one SM holds gather about 500 of the 4,096 rows of `x`, few of them
//! twice). The measurement tells which.
//!
//! Each group sums its edges in order and the groups meet in a fixed
//! butterfly: deterministic, and the GPU and the emulator agree bit for
//! bit. Needs `width % 4 == 0`.
//!
//! Not yet measured on the GPU.

use crate::{EdgeBatch, QuadGroups, WARPS_PER_BLOCK, warp_in_grid};
use mage_common::device::*;

/// Quads each lane lands per round before it waits: 24 edges at width 64.
pub const LAND_STEPS: u32 = 12;

/// Shared bytes per warp: [`LAND_STEPS`] quads per lane.
pub const SLAB_BYTES: u32 = LAND_STEPS * 32 * 16;

mage_common::kernel! {
    /// Warp `r` of the grid writes row `r` of the `[n, width]` output;
    /// `width % 4 == 0`, [`SLAB_BYTES`] of shared memory per warp.
    pub unsafe fn neighbor_land_row(x: *const f32, w: *const f32, rowptr: *const u32, indices: *const u32, out: *mut f32, n: u32, width: u32) {
        let row = warp_in_grid();
        if row >= n {
            return;
        }
        let (start, end) = unsafe { (ld_nc_u32(rowptr, row), ld_nc_u32(rowptr, row + 1)) };
        let lanes = QuadGroups::new(width);
        // Step u of a round lands this lane's quad at slab + 512·u.
        let slab = warp_id() * SLAB_BYTES + lane_id() * 16;
        lanes.for_each_chunk(|q, at_x| {
            let mut acc = F32x4::ZERO;
            let mut e = start;
            while e < end {
                let batch = unsafe { EdgeBatch::load(w, indices, e, end) };
                let stop = (end - e).min(32);
                let mut k = 0;
                while k < stop {
                    // Step u: this group's edge k + u·groups + group of the batch.
                    let at = |u: u32| k + u * lanes.groups + lanes.group;
                    let mut steps = 0;
                    while steps < LAND_STEPS && k + steps * lanes.groups < stop {
                        let source = shuffle_idx(f32::from_bits(batch.source), at(steps)).to_bits();
                        if at(steps) < stop {
                            unsafe { cp_async_cg_16(slab + 512 * steps, x, source * width + at_x) };
                        }
                        steps += 1;
                    }
                    cp_async_commit();
                    cp_async_wait_group::<0>();
                    // Four steps at a time, so that four shared loads are in
                    // flight; steps past the round's are not added.
                    let add = |acc: F32x4, u: u32, v: F32x4| {
                        let weight = shuffle_idx(batch.weight, at(u));
                        if u < steps && at(u) < stop { v.zip(acc, |v, a| fma(weight, v, a)) } else { acc }
                    };
                    let mut u = 0;
                    while u < steps {
                        let landed = |u: u32| smem_ld4(slab + 512 * u);
                        let (v0, v1, v2, v3) = (landed(u), landed(u + 1), landed(u + 2), landed(u + 3));
                        acc = add(add(add(add(acc, u, v0), u + 1, v1), u + 2, v2), u + 3, v3);
                        u += 4;
                    }
                    k += steps * lanes.groups;
                }
                e += stop;
            }
            let acc = lanes.combine(acc);
            if lanes.stores(q) {
                unsafe { st4(out, row * width + 4 * q, acc) };
            }
        });
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-land",
    summary: "one warp per row, gathers landed in shared memory with cp.async, up to 12 quads per lane in flight, one kernel",
    kernels: &[&neighbor_land_row::KERNEL],
    supports: crate::mage_004::supports,
    plan: |d| crate::warp_launch_shared(&neighbor_land_row::KERNEL, d[0], WARPS_PER_BLOCK * SLAB_BYTES, crate::graph_args(d)).into(),
};
