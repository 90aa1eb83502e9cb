//! The gather helpers of the warp-per-row stages (mage-004, mage-005):
//! [`QuadGroups`] (how a warp's lanes cover a row of 16-byte quads),
//! [`EdgeBatch`] (32 edges loaded by one coalesced load each of indices and
//! weights, handed out by shuffles) and [`accumulate`] (a lane's weighted
//! sum of 128-bit gathers over a run of edges, [`GATHERS_IN_FLIGHT`]
//! issued before the first is used). Frozen history: mage-004's and
//! mage-005's ptxas resources are pinned by `tests/resources.rs` and their
//! sums by `tests/stages.rs`, so a new stage that changes these takes a
//! module of its own.

use mage_common::device::{F32x4, fma, lane_id, ld_nc, ld_nc_u32, ld_nc4, shuffle_idx, shuffle_xor};

/// How a warp covers a row of `width / 4` 16-byte quads: groups of `size`
/// lanes (the quads rounded up to a power of two, at most 32), lane `slot`
/// of a group on quad `slot` of a chunk of `size` quads, and the
/// `groups = 32 / size` groups taking turns over the edges.
#[derive(Clone, Copy)]
pub struct QuadGroups {
    pub size: u32,
    pub groups: u32,
    pub group: u32,
    pub slot: u32,
    quads: u32,
}

impl QuadGroups {
    /// For rows of `width` floats (a positive multiple of 4).
    #[inline(always)]
    pub fn new(width: u32) -> QuadGroups {
        let quads = width / 4;
        let size = quads.min(32).next_power_of_two();
        let lane = lane_id();
        QuadGroups { size, groups: 32 / size, group: lane / size, slot: lane % size, quads }
    }

    /// Runs `f(q, at_x)` for each chunk of `size` quads of the row: `q` is
    /// this lane's quad, `at_x` the first float it gathers. Lanes past the
    /// last quad gather the last one (valid) and must not store.
    #[inline(always)]
    pub fn for_each_chunk(self, mut f: impl FnMut(u32, u32)) {
        let mut q0 = 0;
        while q0 < self.quads {
            let q = q0 + self.slot;
            f(q, 4 * q.min(self.quads - 1));
            q0 += self.size;
        }
    }

    /// Whether this lane stores quad `q` of a combined sum: the first group's
    /// lanes, within the row.
    #[inline(always)]
    pub fn stores(self, q: u32) -> bool {
        self.group == 0 && q < self.quads
    }

    /// The sum of every group's `acc`, on every lane: a butterfly across
    /// groups in a fixed order (the same bits on every lane and every run).
    #[inline(always)]
    pub fn combine(self, mut acc: F32x4) -> F32x4 {
        let mut m = self.size;
        while m < 32 {
            acc = acc.zip(acc.map(|v| shuffle_xor(v, m)), |a, b| a + b);
            m *= 2;
        }
        acc
    }
}

/// 32 consecutive edges from `base`: lane `l` holds the source row and the
/// weight of edge `base + l` (zeros from `limit` on). Loaded with two
/// coalesced loads and handed out by shuffles.
#[derive(Clone, Copy)]
pub struct EdgeBatch {
    pub base: u32,
    source: u32,
    weight: f32,
}

impl EdgeBatch {
    /// # Safety
    /// `w` and `indices` must hold at least `limit` entries.
    #[inline(always)]
    pub unsafe fn load(w: *const f32, indices: *const u32, base: u32, limit: u32) -> EdgeBatch {
        let e = base + lane_id();
        if e < limit {
            unsafe { EdgeBatch { base, source: ld_nc_u32(indices, e), weight: ld_nc(w, e) } }
        } else {
            EdgeBatch { base, source: 0, weight: 0.0 }
        }
    }
}

/// Gathers issued per lane before the first of them is waited on. Between
/// issue and use only the gathered quads stay live (each weight is
/// shuffled out of the batch again at its multiply-add), so with eight
/// mage-004 needs 56 registers and 32 warps fit an SM (with the weights
/// held, eight needed 78 registers and 24 warps).
pub const GATHERS_IN_FLIGHT: u32 = 8;

/// `acc` plus this lane's part of `Σ w[e]·x[indices[e], at_x..at_x + 4]`
/// over the edges `e..end` (warp-uniform, `batch.base <= e`): group `g`
/// takes edges `e + g`, `e + g + groups`, ... in order, so each lane's sum
/// has a fixed order. `batch` is reloaded (up to `limit`) as the edges
/// pass its end. [`GATHERS_IN_FLIGHT`] 128-bit gathers are issued before
/// the first multiply-add waits on one; the steps are written out because
/// LLVM does not unroll a loop holding shuffles.
///
/// # Safety
/// Every lane of the warp must call this with the same `e`, `end`, `limit`
/// and batch; the edges below `limit` must index rows of `x` (`width`
/// floats each, `at_x + 4 <= width`, 16-byte aligned).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn accumulate(
    x: *const f32,
    w: *const f32,
    indices: *const u32,
    width: u32,
    at_x: u32,
    lanes: QuadGroups,
    batch: &mut EdgeBatch,
    limit: u32,
    mut e: u32,
    end: u32,
    mut acc: F32x4,
) -> F32x4 {
    while e < end {
        if e >= batch.base + 32 {
            *batch = unsafe { EdgeBatch::load(w, indices, e, limit) };
        }
        let stop = end.min(batch.base + 32) - batch.base;
        let mut k = e - batch.base;
        while k < stop {
            // Step u: this group's edge at lane k + u·groups + group of the
            // batch. Its weight is shuffled out again when the gather is
            // used, so that only the gathered quads stay live meanwhile.
            let at = |u: u32| k + u * lanes.groups + lanes.group;
            let fetch = |u: u32| {
                let source = shuffle_idx(f32::from_bits(batch.source), at(u)).to_bits();
                if at(u) < stop { unsafe { ld_nc4(x, source * width + at_x) } } else { F32x4::ZERO }
            };
            let (s0, s1, s2, s3) = (fetch(0), fetch(1), fetch(2), fetch(3));
            let (s4, s5, s6, s7) = (fetch(4), fetch(5), fetch(6), fetch(7));
            let add = |acc: F32x4, u: u32, v: F32x4| {
                let weight = shuffle_idx(batch.weight, at(u));
                if at(u) < stop { v.zip(acc, |v, a| fma(weight, v, a)) } else { acc }
            };
            acc = add(add(add(add(acc, 0, s0), 1, s1), 2, s2), 3, s3);
            acc = add(add(add(add(acc, 4, s4), 5, s5), 6, s6), 7, s7);
            k += GATHERS_IN_FLIGHT * lanes.groups;
        }
        e = batch.base + stop;
    }
    acc
}
