//! neighbor_backward mage-002: one launch over the transpose the caller
//! passes: a group of lanes per source node, its row of x held in
//! registers, its out-edges walked in increasing order, dX and dw in one
//! pass.
//!
//! Kernel body: this module (`neighbor_backward_sources4` where `width %
//! 4 == 0`, `neighbor_backward_sources1` otherwise; one generic body).
//!
//! What changed, and why it should help: mage-001 rebuilds the transpose
//! on every call (six launches of integer work, a one-block scan among
//! them, and ranks quadratic in a node's out-degree), then gives each
//! element of dX a thread whose every edge is three dependent loads
//! (`order`, `row`, dY), and reads each dY row a second time for dw. The
//! transpose is a property of the graph alone, so here it is an input
//! (`t_rowptr`, `t_rows`, `t_edges`, checked against the graph on the
//! host before any launch), and one kernel does the rest:
//!
//! * a group of `size` lanes per source node `s`, `size` the width's
//!   vectors (16-byte quads where `width % 4 == 0`, single floats
//!   otherwise) rounded up to a power of two, at most 32: at width 64,
//!   16 lanes, so a warp takes two nodes. Lane `slot` of the group holds
//!   `x[s]`'s vector `slot` of each chunk of `size` vectors in registers;
//! * the group walks `t_rowptr[s]..t_rowptr[s + 1]` eight entries at a
//!   time: for each, its row `r = t_rows[i]` and edge `e = t_edges[i]`
//!   (loads the whole group makes of one address), `w[e]`, and the lane's
//!   vector of `dY[r]`: eight gathers in flight before the first is used;
//! * per edge, in order: `dX[s] += w[e]·dY[r]` (each element one `fma`
//!   chain over the node's out-edges in increasing edge order, as in
//!   mage-001), and `dw[e] = ⟨dY[r], x[s]⟩`: each lane's vector as an
//!   `fma` chain in column order, then a butterfly over the group's lanes
//!   (`shfl.xor` by 1, 2, ..., `size / 2`, each lane adding the other's
//!   value to its own: the same bits on every lane), lane 0 of the group
//!   storing it. Rows wider than 32 vectors take one pass per chunk, and
//!   each chunk's dot product is added to the previous chunks' in order;
//! * the warp walks as many steps as its longest list (a butterfly of
//!   `max`), so that every shuffle is executed by the whole warp; steps
//!   past a group's own list are predicated off.
//!
//! So both outputs are the same bits on every run (no atomics of any
//! kind), dX is the documented chain bit for bit, and each dY row is
//! gathered once per edge for both gradients.
//!
//! The prediction, from the bytes: dY gathered once per edge, `edges ·
//! width · 4` bytes, from L2 (dY is 1 MB at 4096x64, 16.8 MB at
//! 65536x64: both fit the H200's L2); x read and dX written once, `2 · n
//! · width · 4`; `t_rows`, `t_edges` and `dw` 4 bytes per edge, coalesced
//! or nearly; `w[e]` and the `dw[e]` stores a 32-byte sector per edge
//! each (the edge numbers of one node are scattered). At 4096x64x65536:
//! 16.8 MB of gathers, 2.1 MB of x and dX, about 4.7 MB of scattered
//! sectors: about 24 MB through L2, 2.4 µs at 10 TB/s. Registers: 80
//! for the quad entry, 56 for the scalar one (`tests/resources.rs`; eight
//! quads of dY in flight, x's and dX's quads, eight rows, edge numbers
//! and weights), so up to 24 warps per SM; the default graph is 2,048
//! warps, one wave on 132 SMs with room to spare, so the time is the
//! latency of its longest lists: a mean out-degree of 16 is two steps of
//! about two dependent L2 round trips each (the transpose entries, then
//! w and dY), about 1.5 µs, plus the launch: about 4 µs of kernel time
//! on both generators (their sources are drawn alike), against mage-001's
//! 47 and torch.compile's 8.4 (`results/backward-2`). At 65536x64x1048576:
//! 268 MB of gathers from L2, 33 MB of x and dX, about 75 MB of sectors:
//! about 380 MB through L2, about 40 µs on either generator, against
//! mage-001's 586 and 572 and torch.compile's 115 and 110. At 7x9x23 (one
//! block of four warps, one float per lane): the launch and about three
//! dependent L2 round trips, about 1.5 µs (the forward's one-kernel
//! stages take 1.3 there), against torch.compile's 2.16. A node that is
//! the source of `D` edges is `D / 8` steps of one group, each about two
//! dependent L2 round trips (0.5 to 1 µs): some 60 to 120 µs per thousand
//! out-edges, the case the split noted in the op's doc would take.
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=neighbor_backward -->
//! | op | workload | Mage current | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|
//! | neighbor_backward | 4096x64x65536 | 12.78 mage-002 | 114.83 (6) | **8.35** (2) | 12.06 | 1.06 |
//! | neighbor_backward | 4096x64x65536 power-law | 12.29 mage-002 | 114.97 (6) | **8.36** (2) | 12.23 | 1.00 |
//! | neighbor_backward | 65536x64x1048576 | **108.10** mage-002 | 1760 (6) | 113.41 (2) | 22.80 | 4.74 |
//! | neighbor_backward | 65536x64x1048576 power-law | **104.56** mage-002 | 1760 (6) | 108.83 (2) | 23.02 | 4.54 |
//! | neighbor_backward | 7x9x23 | 2.90 mage-002 | 7.87 (6) | **2.02** (2) | 9.88 | 0.29 |
//! <!-- /mage:table -->

use crate::warp_in_grid;
use mage_common::device::*;

/// Transpose entries (edges) a group walks per step: the gathers each lane
/// has in flight.
pub const STEP: u32 = 8;

/// The `V` floats at `p[i..i + V]`: one 128-bit load for `V = 4` (`i` a
/// multiple of 4), one load each otherwise.
///
/// # Safety
/// As [`ld_nc4`] or [`ld_nc`] for each element.
#[inline(always)]
unsafe fn load<const V: usize>(p: *const f32, i: u32) -> [f32; V] {
    let mut v = [0f32; V];
    if V == 4 {
        let q = unsafe { ld_nc4(p, i) }.to_array();
        let mut k = 0;
        while k < V {
            v[k] = q[k];
            k += 1;
        }
    } else {
        let mut k = 0;
        while k < V {
            v[k] = unsafe { ld_nc(p, i + k as u32) };
            k += 1;
        }
    }
    v
}

/// Stores the `V` floats `v` at `p[i..i + V]`, as [`load`] reads them.
///
/// # Safety
/// As [`st4`] or [`st`] for each element.
#[inline(always)]
unsafe fn store<const V: usize>(p: *mut f32, i: u32, v: [f32; V]) {
    if V == 4 {
        unsafe { st4(p, i, F32x4::new(v[0], v[1 % V], v[2 % V], v[3 % V])) };
    } else {
        let mut k = 0;
        while k < V {
            unsafe { st(p, i + k as u32, v[k]) };
            k += 1;
        }
    }
}

/// The group size for rows of `width` floats in vectors of `V`: the
/// vectors rounded up to a power of two, at most 32.
#[inline(always)]
pub fn group_size(width: u32, v: u32) -> u32 {
    width.div_ceil(v).min(32).next_power_of_two()
}

/// The body of both entries; see the module doc. `V` is 4 (`width % 4 ==
/// 0`) or 1.
///
/// # Safety
/// The buffers as the op defines them, the transpose checked against the
/// graph; `width > 0`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn walk_sources<const V: usize>(
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
    let size = group_size(width, V as u32);
    let lane = lane_id();
    let (group, slot) = (lane / size, lane % size);
    let s = warp_in_grid() * (32 / size) + group;
    let node = s < n;
    let (start, deg) = if node {
        unsafe {
            let a = ld_nc_u32(t_rowptr, s);
            (a, ld_nc_u32(t_rowptr, s + 1) - a)
        }
    } else {
        (0, 0)
    };
    // The warp's longest list: every lane walks that many steps.
    let mut most = deg;
    let mut m = 1;
    while m < 32 {
        most = most.max(shuffle_xor(f32::from_bits(most), m).to_bits());
        m *= 2;
    }
    let mut c0 = 0;
    while c0 < width {
        let col = c0 + slot * V as u32;
        // Where `V = 4`, width % 4 == 0: a vector starting in the row ends in it.
        let in_row = col < width;
        let here = node && in_row;
        let xs: [f32; V] = if here { unsafe { load(x, s * width + col) } } else { [0.0; V] };
        let mut acc = [0f32; V];
        let mut k = 0;
        while k < most {
            let has = |u: u32| k + u < deg;
            // Every load unconditional, at an address that is valid where
            // its value is not used (entry 0: there is an edge, since
            // `most > 0`; the row's last vector): the sixteen transpose
            // loads issue together, then the sixteen gathers, two round
            // trips per step rather than one per edge.
            let (mut row, mut edge) = ([0u32; STEP as usize], [0u32; STEP as usize]);
            let mut u = 0;
            while u < STEP {
                let i = if has(u) { start + k + u } else { 0 };
                unsafe {
                    row[u as usize] = ld_nc_u32(t_rows, i);
                    edge[u as usize] = ld_nc_u32(t_edges, i);
                }
                u += 1;
            }
            let at = col.min(width - V as u32);
            let mut weight = [0f32; STEP as usize];
            let mut g = [[0f32; V]; STEP as usize];
            let mut u = 0;
            while u < STEP {
                unsafe {
                    weight[u as usize] = ld_nc(w, edge[u as usize]);
                    g[u as usize] = load(dy, row[u as usize] * width + at);
                }
                u += 1;
            }
            // Written out: LLVM does not unroll a loop holding shuffles,
            // and the arrays must stay in registers.
            let mut step = |u: usize| {
                let live = has(u as u32);
                let mut p = 0f32;
                let mut c = 0;
                while c < V {
                    if live {
                        acc[c] = fma(weight[u], g[u][c], acc[c]);
                    }
                    // Lanes past the row add zeros to the dot product.
                    p = fma(if in_row { g[u][c] } else { 0.0 }, xs[c], p);
                    c += 1;
                }
                let mut m = 1;
                while m < size {
                    p += shuffle_xor(p, m);
                    m *= 2;
                }
                if live && slot == 0 {
                    let e = edge[u];
                    unsafe { st(dw, e, if c0 == 0 { p } else { ld(dw, e) + p }) };
                }
            };
            step(0);
            step(1);
            step(2);
            step(3);
            step(4);
            step(5);
            step(6);
            step(7);
            k += STEP;
        }
        if here {
            unsafe { store(dx, s * width + col, acc) };
        }
        c0 += size * V as u32;
    }
}

mage_common::kernel! {
    /// Group `g` of warp `v` (groups of [`group_size`]`(width, 4)` lanes)
    /// writes row `s = v·(32 / size) + g` of dX and the dw of `s`'s
    /// out-edges; `width % 4 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_backward_sources4(x: *const f32, w: *const f32, dy: *const f32, t_rowptr: *const u32, t_rows: *const u32, t_edges: *const u32, dx: *mut f32, dw: *mut f32, n: u32, width: u32) {
        unsafe { walk_sources::<4>(x, w, dy, t_rowptr, t_rows, t_edges, dx, dw, n, width) }
    }
}

mage_common::kernel! {
    /// As [`neighbor_backward_sources4`], one float per lane: any width.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_backward_sources1(x: *const f32, w: *const f32, dy: *const f32, t_rowptr: *const u32, t_rows: *const u32, t_edges: *const u32, dx: *mut f32, dw: *mut f32, n: u32, width: u32) {
        unsafe { walk_sources::<1>(x, w, dy, t_rowptr, t_rows, t_edges, dx, dw, n, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::warp_launch;
    use mage_common::op::Stage;

    pub static STAGE: Stage = Stage {
        name: "mage-002",
        summary: "one launch over the transpose passed in: a group of lanes per source node, x held, its out-edges in order with 8 dY rows gathered at once, dX and dw in one pass",
        kernels: &[&neighbor_backward_sources4::KERNEL, &neighbor_backward_sources1::KERNEL],
        supports: |_| true,
        plan: |d| {
            let (n, width) = (d[0], d[1]);
            let quads = width.is_multiple_of(4);
            let kernel = if quads { &neighbor_backward_sources4::KERNEL } else { &neighbor_backward_sources1::KERNEL };
            let nodes_per_warp = 32 / group_size(width, if quads { 4 } else { 1 });
            let args = crate::backward::transpose_pass_args(n, width);
            warp_launch(kernel, n.div_ceil(nodes_per_warp), args).into()
        },
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
