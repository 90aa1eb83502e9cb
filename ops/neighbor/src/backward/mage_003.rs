//! neighbor_backward mage-003: mage-002's one pass over the transpose,
//! with a source node's out-edges walked 16 at a time (every one of their
//! dY vectors gathered before the first is used, the next 16 transpose
//! entries already loaded) and each round's 16 dot products summed by one
//! reduce-scatter over the group.
//!
//! Kernel body: this module (`neighbor_backward_rounds4` where `width % 4
//! == 0`, `neighbor_backward_rounds1` otherwise; one generic body).
//!
//! What changed against mage-002, and why it should help. Both stages give
//! each source node `s` a group of 16 lanes (two nodes a warp at width
//! 64), hold `x[s]` in registers, and keep dX the documented chain: each
//! element one `fma` chain over `s`'s out-edges in increasing edge order.
//! mage-002's time goes to one serial walk per warp, and the default graph
//! is one wave, so the kernel lasts as long as its longest walk:
//!
//! * **Eight edges a step, two round trips a step.** mage-002 loads the
//!   step's eight `t_rows` and `t_edges` entries (the whole group at one
//!   address), waits, then gathers `w[e]` and dY, waits again. The heaviest
//!   source of the default graph has 34 out-edges (both generators draw
//!   sources alike): five steps, ten dependent round trips. Here a round is
//!   16 edges: lane `i` of the group loads one transpose entry (16 entries
//!   in one coalesced load per array), the rows and weights reach the
//!   lanes that use them by `shfl.idx`, and the next round's entries are
//!   loaded before this round's gathers, so a round costs one round trip
//!   (its `w[e]` and its 16 dY gathers, issued together). The heaviest
//!   source is three rounds.
//! * **A butterfly per edge.** mage-002 sums each edge's dot product over
//!   the group with its own four dependent `shfl.xor` (a loop, since the
//!   group size is a run-time value), then branches to lane 0's store:
//!   eight such chains one after the other per step. Here the 16 dot
//!   products of a round are summed by one reduce-scatter: lanes `i` and
//!   `i ^ 8` each keep one of every pair of values and send the other (8
//!   shuffles), then `i ^ 4`, `i ^ 2`, `i ^ 1` on what is left (4, 2 and 1
//!   shuffles): 15 shuffles for
//!   16 edges instead of 64, each level started as soon as its pair of
//!   values exists, and lane `i` ends holding the edge whose entry it
//!   loaded (lane `i` loads entry `reversed(i)`, its four bits reversed,
//!   which is where the levels leave that edge's sum), so one predicated
//!   store writes the round's dw.
//! * The warp's round count is the larger of its two groups' (one
//!   shuffle, where mage-002 takes a five-level butterfly of the max).
//!
//! So both outputs are the same bits on every run, dX is mage-002's chain
//! bit for bit, and each dw is a fixed tree: each lane's vector (4 floats
//! or 1) an `fma` chain in column order from zero, zeros for lanes past the
//! row, the 16 lanes summed by a butterfly over xor 8, 4, 2, 1 (what every
//! value of the reduce-scatter goes through: a full butterfly's pairs in
//! the same order), rows wider than one chunk (64 floats where `width % 4
//! == 0`, 16 otherwise) walked once per chunk and the chunks' sums added
//! in order, as in mage-002.
//!
//! The prediction, before any measurement. Registers (`tests/resources.rs`):
//! 122 for the quad entry (the 16 gathered quads are 64 of them), 64 for
//! the scalar one; no spills. (A first form that summed the 16 dot
//! products only after the last of them, on lane bits 8, 4, 2, 1 by the
//! upper and lower halves of its values, took 132 and 82: one block of 8
//! warps a SM; pairing neighbours as they are made frees them as the
//! round goes.) At 122 (128 allocated) two blocks of 8 warps fit an SM,
//! so the default graph's 2,048 warps (256 blocks) still run in one wave
//! on 132 SMs, and the time is the longest chain: the bounds of
//! `s`'s list (with `x[s]`), its first entries, then one round trip per
//! round, and after each round about 300 instructions (32 shuffles of rows
//! and weights, 15 of the reduce-scatter, 128 `fma`), about 0.15 µs. Of the
//! default graph's 2,048 warps, 645 take one round, 1,401 two, 2 three:
//! the longest chain is five dependent round trips, against mage-002's
//! eleven plus five steps of eight serial butterflies. mage-004 (the
//! forward's warp per row on the same graph, one wave, four dependent
//! round trips for its heaviest row of 32 edges: rowptr, the batch of
//! edges, two rounds of 16 gathers) measured 4.71 µs: about 0.9 µs a
//! round trip at this load after a launch of about 1 µs. So about 1 + 5 ×
//! 0.9 + 3 × 0.15 ≈ 6 µs for the two warps of three rounds, 5 µs for the
//! rest. Through L2: the dY gathers, 65,536 × 256 B = 16.8 MB; x and dX,
//! 2.1 MB; `t_rows` and `t_edges`, 0.5 MB; `w[e]` and `dw[e]`, a 32-byte
//! sector each per edge (edge numbers are scattered in the transpose),
//! 4.2 MB: about 24 MB, 3.4 µs at 7 TB/s, under the chain. About 5.5 µs
//! (4.5 to 6.5) on both generators, against mage-002's 12.72 and 12.40
//! and torch.compile's 8.35 and 8.31 (`results/backward-6`).
//!
//! At 7x9x23 (the scalar entry, four warps in one block, one round
//! each): the launch and three dependent
//! round trips at no load, about 1.6 µs (1.4 to 1.9), against mage-002's
//! 2.88 (the same round trips plus eight serial butterflies) and
//! torch.compile's 1.99. At 65536x64x1048576: 32,768 warps at 16 a SM,
//! 15.5 waves, each warp about 3.7 dependent round trips (the bounds, the
//! entries, 1.7 rounds on average) and 1.7 rounds of work, about 3.6 µs:
//! some 56 µs in all, against about 380 MB through L2 (268 MB of
//! gathers, 34 MB of x and dX, 67 MB of `w` and `dw` sectors, 8 MB of the
//! transpose), 54 µs at 7 TB/s: about 55 to 65 µs on either generator,
//! against mage-002's 108 and 104 and torch.compile's 113 and 109. A
//! source of `D` out-edges is still one group's serial walk: `D / 16`
//! rounds of one round trip and about 0.15 µs, where mage-002 takes `D /
//! 8` steps of two round trips and eight serial butterflies, so about a
//! quarter of mage-002's time for such a node. Rows wider than one chunk
//! pay one walk of the list per chunk.
//!
//! Measured (`results/backward-7`, `results/backward-8`, CUPTI kernel
//! time, hot L2, medians): 7.41 µs at 4096x64x65536 uniform (mage-002
//! 12.45, torch.compile 8.61), 6.10 power-law (12.02, 8.58), 90.88 at
//! 65536x64x1048576 uniform (108.52, 116.14), 78.32 power-law (105.17,
//! 111.47), 2.01 at 7x9x23 (2.92, 2.08): slower than predicted at the
//! default shape (5.5), faster at the large ones; judged FASTER than
//! mage-002 at all five, and `current` takes it everywhere.

use crate::warp_in_grid;
use mage_common::device::*;

/// Lanes per source node: a warp takes two nodes.
pub const LANES: u32 = 16;

/// Out-edges a group walks per round: one transpose entry per lane, and
/// every one of their dY vectors gathered before the first is used.
pub const ROUND: u32 = 16;

/// What a lane holds of a row: one float, or a 16-byte quad (`width % 4
/// == 0`).
trait Vector: Copy {
    /// Floats per vector.
    const FLOATS: u32;
    const ZERO: Self;
    /// The vector at `p[i..]`.
    ///
    /// # Safety
    /// As [`ld_nc`] (or [`ld_nc4`], `i` a multiple of 4) for each float.
    unsafe fn load(p: *const f32, i: u32) -> Self;
    /// Stores it at `p[i..]`.
    ///
    /// # Safety
    /// As [`st`] (or [`st4`]) for each float.
    unsafe fn store(self, p: *mut f32, i: u32);
    /// `acc + w·self`, one `fma` per float.
    fn fma_into(self, w: f32, acc: Self) -> Self;
    /// `Σ self[c]·x[c]`, one `fma` chain in column order from zero.
    fn dot(self, x: Self) -> f32;
}

impl Vector for f32 {
    const FLOATS: u32 = 1;
    const ZERO: f32 = 0.0;
    #[inline(always)]
    unsafe fn load(p: *const f32, i: u32) -> f32 {
        unsafe { ld_nc(p, i) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, i: u32) {
        unsafe { st(p, i, self) }
    }
    #[inline(always)]
    fn fma_into(self, w: f32, acc: f32) -> f32 {
        fma(w, self, acc)
    }
    #[inline(always)]
    fn dot(self, x: f32) -> f32 {
        fma(self, x, 0.0)
    }
}

impl Vector for F32x4 {
    const FLOATS: u32 = 4;
    const ZERO: F32x4 = F32x4::ZERO;
    #[inline(always)]
    unsafe fn load(p: *const f32, i: u32) -> F32x4 {
        unsafe { ld_nc4(p, i) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, i: u32) {
        unsafe { st4(p, i, self) }
    }
    #[inline(always)]
    fn fma_into(self, w: f32, acc: F32x4) -> F32x4 {
        self.zip(acc, |v, a| fma(w, v, a))
    }
    #[inline(always)]
    fn dot(self, x: F32x4) -> f32 {
        fma(self.w, x.w, fma(self.z, x.z, fma(self.y, x.y, fma(self.x, x.x, 0.0))))
    }
}

/// Calls `$f(0)`, `$f(1)`, ..., `$f(15)`: written out, since LLVM does not
/// unroll a loop holding shuffles and the arrays must stay in registers.
macro_rules! sixteen {
    ($f:ident) => {
        $f(0);
        $f(1);
        $f(2);
        $f(3);
        $f(4);
        $f(5);
        $f(6);
        $f(7);
        $f(8);
        $f(9);
        $f(10);
        $f(11);
        $f(12);
        $f(13);
        $f(14);
        $f(15);
    };
}

/// The transpose entry lane `slot` of a group holds in a round, and the
/// edge of the round whose dot product it ends up with: `slot` with its
/// four bits reversed (see [`pair`]).
#[inline(always)]
fn reversed(slot: u32) -> u32 {
    ((slot & 1) << 3) | ((slot & 2) << 1) | ((slot & 4) >> 1) | ((slot & 8) >> 3)
}

/// One level of the group's reduce-scatter, on two values that differ in
/// the lowest bit of their index: this lane keeps the one its lane bit `m`
/// selects (`b` where the bit is set), sends the other to lane `slot ^ m`
/// and adds what that lane sends back. Levels on lane bits 8, 4, 2 and 1,
/// each pairing the previous level's results, leave lane `slot` with the
/// group's sum of value [`reversed`]`(slot)`, every value summed over the
/// lanes by a butterfly over xor 8, 4, 2, 1 (the same pairs in the same
/// order as a full butterfly: `a + b` and `b + a` are the same bits), in 15
/// shuffles rather than 4 per value, and each pair combined as soon as
/// both of its values exist.
#[inline(always)]
fn pair(a: f32, b: f32, slot: u32, m: u32) -> f32 {
    let (keep, send) = if slot & m != 0 { (b, a) } else { (a, b) };
    keep + shuffle_xor(send, m)
}

/// The body of both entries; see the module doc. `T` is `F32x4` (`width %
/// 4 == 0`) or `f32`.
///
/// # Safety
/// The buffers as the op defines them, the transpose checked against the
/// graph; `n` and `width` positive.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn walk_rounds<T: Vector>(
    x: *const f32,
    w: *const f32,
    dy: *const f32,
    t_rowptr: *const u32,
    t_rows: *const u32,
    t_edges: *const u32,
    dx: *mut f32,
    dw: *mut f32,
    n: u32,
    width: u32,
) {
    let lane = lane_id();
    let (group, slot) = (lane / LANES, lane % LANES);
    let first_lane = group * LANES;
    let s = warp_in_grid() * (32 / LANES) + group;
    let node = s < n;
    // This lane's vector of x[s] in the chunk of columns from c0 (zeros
    // past the row): the first goes out with the list's bounds.
    let x_at = |c0: u32| {
        let col = c0 + slot * T::FLOATS;
        if node && col < width { unsafe { T::load(x, s * width + col) } } else { T::ZERO }
    };
    let mut xs = x_at(0);
    let (start, end) = if node { unsafe { (ld_nc_u32(t_rowptr, s), ld_nc_u32(t_rowptr, s + 1)) } } else { (0, 0) };
    // The warp walks the longer of its two lists' rounds.
    let own = (end - start).div_ceil(ROUND);
    let rounds = own.max(shuffle_xor(f32::from_bits(own), LANES).to_bits());
    // This lane's transpose entry of the round from `base` (entry
    // `reversed(slot)` of the round): its row and edge.
    let mine_at = reversed(slot);
    let entry = |base: u32| {
        let i = base + mine_at;
        if i < end { unsafe { (ld_nc_u32(t_rows, i), ld_nc_u32(t_edges, i)) } } else { (0, 0) }
    };
    let mut c0 = 0;
    while c0 < width {
        let col = c0 + slot * T::FLOATS;
        let in_row = col < width;
        // A valid address for lanes past the row (where T is a quad,
        // width % 4 == 0: a quad that starts in the row ends in it).
        let at = col.min(width - T::FLOATS);
        let mut acc = T::ZERO;
        let mut next = entry(start);
        let mut k = 0;
        while k < rounds {
            let base = start + k * ROUND;
            let (row, edge) = next;
            let mine = base + mine_at < end;
            // The next round's entries go out before this round's gathers.
            next = entry(base + ROUND);
            let weight = if mine { unsafe { ld_nc(w, edge) } } else { 0.0 };
            let live = |u: usize| base + (u as u32) < end;
            // Edge u of the round is the entry of lane `reversed(u)`.
            let from = |u: usize| first_lane + reversed(u as u32);
            let mut g = [T::ZERO; ROUND as usize];
            let mut gather = |u: usize| {
                let r = shuffle_idx(f32::from_bits(row), from(u)).to_bits();
                if live(u) {
                    g[u] = unsafe { T::load(dy, r * width + at) };
                }
            };
            sixteen!(gather);
            // The reduce-scatter's levels, filled as the edges are used.
            let (mut p, mut q1, mut q2, mut q3) = (0f32, [0f32; 8], [0f32; 4], [0f32; 2]);
            let mut step = |u: usize| {
                let weight = shuffle_idx(weight, from(u));
                if live(u) {
                    acc = g[u].fma_into(weight, acc);
                }
                // Lanes past the row add zeros to the dot products.
                let dot = if in_row { g[u].dot(xs) } else { 0.0 };
                if u.is_multiple_of(2) {
                    p = dot;
                } else {
                    q1[u / 2] = pair(p, dot, slot, 8);
                    if u % 4 == 3 {
                        q2[u / 4] = pair(q1[u / 2 - 1], q1[u / 2], slot, 4);
                    }
                    if u % 8 == 7 {
                        q3[u / 8] = pair(q2[u / 4 - 1], q2[u / 4], slot, 2);
                    }
                }
            };
            sixteen!(step);
            let total = pair(q3[0], q3[1], slot, 1);
            if mine {
                unsafe { st(dw, edge, if c0 == 0 { total } else { ld(dw, edge) + total }) };
            }
            k += 1;
        }
        if node && in_row {
            unsafe { acc.store(dx, s * width + col) };
        }
        c0 += LANES * T::FLOATS;
        xs = x_at(c0);
    }
}

mage_common::kernel! {
    /// Group `g` of warp `v` (groups of [`LANES`] lanes) writes row `s =
    /// 2v + g` of dX and the dw of `s`'s out-edges; `width % 4 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_backward_rounds4(x: *const f32, w: *const f32, dy: *const f32, t_rowptr: *const u32, t_rows: *const u32, t_edges: *const u32, dx: *mut f32, dw: *mut f32, n: u32, width: u32) {
        unsafe { walk_rounds::<F32x4>(x, w, dy, t_rowptr, t_rows, t_edges, dx, dw, n, width) }
    }
}

mage_common::kernel! {
    /// As [`neighbor_backward_rounds4`], one float per lane: any width.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_backward_rounds1(x: *const f32, w: *const f32, dy: *const f32, t_rowptr: *const u32, t_rows: *const u32, t_edges: *const u32, dx: *mut f32, dw: *mut f32, n: u32, width: u32) {
        unsafe { walk_rounds::<f32>(x, w, dy, t_rowptr, t_rows, t_edges, dx, dw, n, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::warp_launch;
    use mage_common::op::Stage;

    /// Floats per lane at this width: 4 (quads) where `width % 4 == 0`,
    /// else 1.
    pub fn floats_per_lane(width: u32) -> u32 {
        if width.is_multiple_of(4) { 4 } else { 1 }
    }

    pub static STAGE: Stage = Stage {
        name: "mage-003",
        summary: "two source nodes a warp, 16 out-edges a round with all 16 dY rows gathered at once and the next round's entries loaded early, dw by a reduce-scatter over the group",
        kernels: &[&neighbor_backward_rounds4::KERNEL, &neighbor_backward_rounds1::KERNEL],
        supports: |_| true,
        plan: |d| {
            let (n, width) = (d[0], d[1]);
            let kernel = if floats_per_lane(width) == 4 { &neighbor_backward_rounds4::KERNEL } else { &neighbor_backward_rounds1::KERNEL };
            let args = crate::backward::transpose_pass_args(n, width);
            warp_launch(kernel, n.div_ceil(32 / LANES), args).into()
        },
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
