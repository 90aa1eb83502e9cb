//! mage-003: mage-002's merge-path shares, with coalesced edge batches and
//! 128-bit gathers split over lane groups.
//!
//! Kernel body: this module (`neighbor_merge_quad`); the partition and the
//! carries' fix-up kernel in [`crate::merge_path`] (shared with mage-002;
//! frozen: ptxas resources pinned by `tests/resources.rs`).
//!
//! What changed, and why it should help: in mage-002 every lane loads each
//! edge's index and weight itself (a broadcast, but one load instruction
//! per lane per edge, and the gather has to wait for it), and gathers
//! `x[j, :]` as 32-bit words, two per lane per edge at width 64. Here:
//!
//! * **Edge batches.** Lane `l` loads the index and weight of edge
//!   `e + l`, 32 edges with two coalesced loads; each step hands them to
//!   the lanes that need them with `shfl.sync.idx`, so the gathers of a
//!   batch depend on one load round trip, not one per edge; the gather
//!   loop is unrolled by hand ([`UNROLL`] steps: LLVM does not unroll a
//!   loop holding shuffles), so four gathers are in flight per lane.
//! * **Quads and lane groups.** A row of `x` is `width / 4` quads; the warp
//!   splits into groups of `g` lanes (the quads rounded up to a power of
//!   two, at most 32), lane `i` of a group gathers quad `i` with one
//!   `ld.global.nc.v4.f32`, and the `32 / g` groups take alternate edges
//!   (at width 64: two groups of 16 lanes, two edges per step, every lane
//!   busy). At a row's end the groups' sums meet by `shfl.xor` butterflies
//!   and the first group stores quads. A quarter of mage-002's gather
//!   instructions for the same bytes, and no idle lanes at widths
//!   below 64.
//!
//! Partition, carries and the fix-up kernel are mage-002's (the fix-up is
//! the same entry). Each group sums its edges in order and the groups meet
//! in a fixed butterfly, so the result is deterministic and the GPU and the
//! emulator agree bit for bit. Needs `width % 4 == 0` (16-byte aligned
//! quads); [`current`](crate::current) uses mage-002 otherwise.
//!
//! Measured: the fastest stage on the large uniform graph; on the power-law
//! graphs a little behind mage-002. GPU kernel time per call (CUPTI, both
//! kernels) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-neighbor.json stage=mage-003 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x64x65536 | 8.97 | 16.64 |
//! | 4096x64x65536 power-law | 19.75 | 25.89 |
//! | 65536x64x1048576 | 43.28 | 49.66 |
//! | 65536x64x1048576 power-law | 78.69 | 85.22 |
//! <!-- /mage:table -->

use crate::merge_path::merge_path;
use crate::warp_in_grid;
use mage_common::device::*;

/// Edge steps per iteration of the gather loop (written out as four `fetch`es).
pub const UNROLL: u32 = 4;

mage_common::kernel! {
    /// As `neighbor_merge` (mage-002), with 128-bit gathers split over lane
    /// groups; `width % 4 == 0` and `items` positive.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_merge_quad(
        x: *const f32,
        w: *const f32,
        rowptr: *const u32,
        indices: *const u32,
        out: *mut f32,
        carry: *mut f32,
        carry_row: *mut f32,
        n: u32,
        width: u32,
        edges: u32,
        items: u32,
    ) {
        // SAFETY: the plan passes a positive share size.
        unsafe { core::hint::assert_unchecked(items > 0) };
        let total = n + edges;
        let workers = total.div_ceil(items);
        let p = warp_in_grid();
        if p >= workers {
            return;
        }
        let d0 = p * items;
        let d1 = total.min(d0 + items);
        let (r0, r1) = unsafe { merge_path(rowptr, d0, d1, n, edges) };
        let (e0, e1) = (d0 - r0, d1 - r1);
        let lane = lane_id();
        let quads = width / 4;
        // Lanes per group (a power of two), groups per warp, this lane's group and quad.
        let size = quads.min(32).next_power_of_two();
        let groups = 32 / size;
        let (group, slot) = (lane / size, lane % size);
        let mut q0 = 0;
        while q0 < quads {
            let q = q0 + slot;
            // Lanes past the last quad gather the last quad (valid) and do not store.
            let at_x = 4 * q.min(quads - 1);
            let mut e = e0;
            let mut r = r0;
            loop {
                // Rows r0..r1 end inside this share; row r1 is the carry.
                let end = if r < r1 { unsafe { ld_nc_u32(rowptr, r + 1) } } else { e1 };
                let mut acc = F32x4::ZERO;
                while e < end {
                    let batch = (end - e).min(32);
                    let (mine_j, mine_w) = if lane < batch { unsafe { (ld_nc_u32(indices, e + lane), ld_nc(w, e + lane)) } } else { (0, 0.0) };
                    // UNROLL steps at a time: all their gathers are issued
                    // before the first FMA waits on one.
                    let mut k = 0;
                    while k < batch {
                        // Step u: this group's edge k + u·groups + group of the batch.
                        let fetch = |u: u32| {
                            let src = k + u * groups + group;
                            let j = shuffle_idx(f32::from_bits(mine_j), src).to_bits();
                            let wv = shuffle_idx(mine_w, src);
                            if src < batch { (true, wv, unsafe { ld_nc4(x, j * width + at_x) }) } else { (false, 0.0, F32x4::ZERO) }
                        };
                        let (s0, s1, s2, s3) = (fetch(0), fetch(1), fetch(2), fetch(3));
                        let add = |acc: F32x4, (ok, wv, xv): (bool, f32, F32x4)| if ok { xv.zip(acc, |v, a| fma(wv, v, a)) } else { acc };
                        acc = add(add(add(add(acc, s0), s1), s2), s3);
                        k += UNROLL * groups;
                    }
                    e += batch;
                }
                let mut m = size;
                while m < 32 {
                    acc = acc.zip(acc.map(|v| shuffle_xor(v, m)), |a, b| a + b);
                    m *= 2;
                }
                if group == 0 && q < quads {
                    let (dst, at) = if r < r1 { (out, r * width) } else { (carry, p * width) };
                    unsafe { st4(dst, at + 4 * q, acc) };
                }
                if r == r1 {
                    break;
                }
                r += 1;
            }
            q0 += size;
        }
        if lane == 0 {
            unsafe { st(carry_row, p, f32::from_bits(r1)) };
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::op::{Plan, Stage};

    pub fn supports(d: &[u32]) -> bool {
        d[1].is_multiple_of(4) && crate::merge_path::merge_supports(d)
    }

    /// mage-002's launches with this stage's main kernel.
    pub fn plan_with(d: &[u32], items: u32) -> Plan {
        crate::merge_path::merge_plan(d, items, &neighbor_merge_quad::KERNEL)
    }

    pub fn plan(d: &[u32]) -> Plan {
        plan_with(d, crate::merge_path::merge_items(d))
    }

    pub static STAGE: Stage = Stage {
        name: "mage-003",
        summary: "merge-path shares, coalesced edge batches shuffled to lane groups, 128-bit gathers",
        kernels: &[&neighbor_merge_quad::KERNEL, &crate::merge_path::neighbor_fixup::KERNEL],
        supports,
        plan,
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
