//! mage-002: merge-path partition, one warp per equal share of rows + edges,
//! split rows finished by a second kernel.
//!
//! Kernel body: this module (`neighbor_merge`); the partition and the
//! carries' fix-up kernel in [`crate::merge_path`] (shared with mage-003;
//! frozen: ptxas resources pinned by `tests/resources.rs`).
//!
//! What changed, and why it should help: mage-001 gives each row's threads
//! the whole row, so on a power-law graph one row's 14,000 dependent steps
//! set the time of the launch. Here the work is cut by amount, not by row
//! (Merrill & Garland's merge-based CSR SpMV):
//!
//! * **Partition.** Walk the merge of the row ends (`rowptr[1..=n]`) with
//!   the edge numbers `0..edges`: `n + edges` items, one per edge and one
//!   per row end (so empty rows cost work too and a run of empty rows
//!   cannot pile onto one worker). Warp `p` takes items
//!   `p·items .. (p + 1)·items`; where its share starts and ends on the
//!   merge path is found by a search over `rowptr` ([`merge_path`]: the
//!   32 lanes test 16 pivots of each of the two searches at once, so both
//!   ends cost ⌈log16 n⌉ steps of one load and one warp sum).
//! * **Work.** The warp walks its share row by row; lane `l` accumulates
//!   columns `l` and `l + 32` of a 64-column chunk (index and weight loads
//!   are warp-wide broadcasts, the gathers of `x` are coalesced along the
//!   source row). A row that ends inside the share is written to `out`; the
//!   partial sum of the row the share ends in (its carry) goes to scratch,
//!   with the row number. Every row end is in exactly one share, so every
//!   output element is written exactly once.
//! * **Fix-up.** A second kernel adds the carries: for each run of workers
//!   that carried into the same row, the first of the run sums the run's
//!   carries in worker order and adds them to `out`. The run's length
//!   comes from `rowptr` (worker `q` carries into row `r` exactly when
//!   `(q + 1)·items ≤ r + rowptr[r + 1]`), so the loop has no data-dependent
//!   exit. No atomics: the result is deterministic, and the GPU and the
//!   emulator agree bit for bit (every multiply-add is an explicit `fma`).
//!
//! Each warp does the same amount of work whatever the degree
//! distribution, so the power-law graph should run about as fast as the
//! uniform one. Shorter partial sums (at most `items` terms, then one term
//! per worker in the fix-up) also make the result more accurate than
//! mage-001's single long chain. The share size aims at about 32 warps per
//! SM on the H200, between 32 and 1024 items; it is a first guess, to be
//! tuned there.
//!
//! The row number of a carry is stored through the f32 scratch as the f32
//! with the same bits (`common` has no u32 store; a store moves bits, and
//! nothing computes with the value) and read back with `ld_nc_u32`.
//!
//! Measured: balanced on the power-law graphs, where it is the fastest
//! stage, and about twice mage-001's time on the small uniform graph. GPU
//! kernel time per call (CUPTI, both kernels) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-neighbor.json stage=mage-002 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x64x65536 | 10.15 | 17.73 |
//! | 4096x64x65536 power-law | 18.72 | 26.27 |
//! | 65536x64x1048576 | 56.39 | 64.75 |
//! | 65536x64x1048576 power-law | 74.67 | 81.09 |
//! | 7x9x23 | 4.89 | 11.36 |
//! <!-- /mage:table -->

use crate::merge_path::merge_path;
use crate::warp_in_grid;
use mage_common::device::*;

/// Columns a warp covers per pass over its share: two per lane.
pub const COLS: u32 = 64;

mage_common::kernel! {
    /// Warp `p` = `block·WARPS_PER_BLOCK + warp` walks items `p·items .. (p + 1)·items`
    /// of the merge path; writes finished rows to `out`, its carry to
    /// `carry[p, :]` and the carry's row to `carry_row[p]` (`n` for none).
    /// `items` must be positive.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_merge(
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
        let mut col = 0;
        while col < width {
            let (ca, cb) = (col + lane, col + 32 + lane);
            // Columns past the width load the last column (no branch in the
            // edge loop) and are not stored.
            let (la, lb) = (ca.min(width - 1), cb.min(width - 1));
            let mut e = e0;
            let mut r = r0;
            loop {
                // Rows r0..r1 end inside this share; row r1 is the carry.
                let end = if r < r1 { unsafe { ld_nc_u32(rowptr, r + 1) } } else { e1 };
                let (mut sa, mut sb) = (0.0, 0.0);
                while e < end {
                    unsafe {
                        let (wv, src) = (ld_nc(w, e), ld_nc_u32(indices, e) * width);
                        sa = fma(wv, ld_nc(x, src + la), sa);
                        sb = fma(wv, ld_nc(x, src + lb), sb);
                    }
                    e += 1;
                }
                let (dst, at) = if r < r1 { (out, r * width) } else { (carry, p * width) };
                unsafe {
                    if ca < width {
                        st(dst, at + ca, sa);
                    }
                    if cb < width {
                        st(dst, at + cb, sb);
                    }
                }
                if r == r1 {
                    break;
                }
                r += 1;
            }
            col += COLS;
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

    /// Items (rows + edges) per warp for these dims.
    pub fn items(d: &[u32]) -> u32 {
        crate::merge_path::merge_items(d)
    }

    pub fn supports(d: &[u32]) -> bool {
        crate::merge_path::merge_supports(d)
    }

    /// The two launches with `items` per warp (tests vary it to split rows
    /// across many warps).
    pub fn plan_with(d: &[u32], items: u32) -> Plan {
        crate::merge_path::merge_plan(d, items, &neighbor_merge::KERNEL)
    }

    pub fn plan(d: &[u32]) -> Plan {
        plan_with(d, items(d))
    }

    pub static STAGE: Stage = Stage {
        name: "mage-002",
        summary: "merge-path shares of rows + edges, one warp each, carries summed by a fix-up kernel",
        kernels: &[&neighbor_merge::KERNEL, &crate::merge_path::neighbor_fixup::KERNEL],
        supports,
        plan,
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
