//! The kernel body of each GELU gradient op's mage-006: [`spread_tiles`],
//! mage-002's tiles (a block per column tile and chunk of rows writing dx
//! and the tile's partial dbias row) with another lane-to-column map where
//! the width is not a multiple of 4. There a lane takes the four columns
//! `tile·TILE + lane + 32j`, not four neighbours: each warp access is 128
//! contiguous bytes where mage-002's scalar path spans 512 bytes to use
//! 128. Where the width is a multiple of 4 it is mage-002's 16-byte path.
//! The chunks' partial rows are added by [`totals`]: mage-002's additions
//! in its order, with every load of a segment issued before its adds
//! (`column_total_batched`; mage-002's `column_total` loads a segment of
//! fewer than 8 chunks one after another). The plan is mage-002's
//! ([`super::tiles::plan`]).
//!
//! Each column's sum runs over the same rows in the same order as in
//! mage-002 (a warp's rows two at a time, the warps in order, the chunks in
//! order), so dbias is mage-002's bits at every width, as is dx.

use super::ElementGradient;
use super::tiles::{GROUPS, TILE};
use mage_common::device::column_sums::{TOTALS_COLUMNS, column_total_batched, group_total, publish_quads};
use mage_common::device::*;

/// The first of a lane's four columns and the step between them: `4·lane`
/// and 1 where the width is a multiple of 4, `lane` and 32 with `SCALAR`
/// (where it is not).
#[inline(always)]
const fn lane_columns<const SCALAR: bool>(tile: u32, lane: u32) -> (u32, u32) {
    if SCALAR { (tile * TILE + lane, 32) } else { (tile * TILE + 4 * lane, 1) }
}

/// x and dy at the lane's four columns from `c` (`step` apart) of the row
/// starting at `row`: one 16-byte access each (`step` 1, the width a
/// multiple of 4) or, with `SCALAR`, four scalar ones, those at or past
/// `width` skipped and left zero.
///
/// # Safety
/// As the kernel: `row` starts a row, `c < width` where `step` is 1.
#[inline(always)]
unsafe fn quad<const SCALAR: bool>(x: *const f32, dy: *const f32, row: u32, c: u32, step: u32, width: u32) -> (F32x4, F32x4) {
    unsafe {
        if SCALAR {
            let mut xv = [0.0; 4];
            let mut dv = [0.0; 4];
            for j in 0..4 {
                let cj = c + j * step;
                if cj < width {
                    xv[j as usize] = ld_nc(x, row + cj);
                    dv[j as usize] = ld_nc(dy, row + cj);
                }
            }
            (F32x4::new(xv[0], xv[1], xv[2], xv[3]), F32x4::new(dv[0], dv[1], dv[2], dv[3]))
        } else {
            (ld_nc4(x, row + c), ld_nc4(dy, row + c))
        }
    }
}

/// Stores the four values `g` of dx where [`quad`] loaded them.
///
/// # Safety
/// As [`quad`].
#[inline(always)]
unsafe fn store<const SCALAR: bool>(dx: *mut f32, row: u32, c: u32, step: u32, width: u32, g: F32x4) {
    unsafe {
        if SCALAR {
            let g = g.to_array();
            for j in 0..4 {
                let cj = c + j * step;
                if cj < width {
                    st(dx, row + cj, g[j as usize]);
                }
            }
        } else {
            st4(dx, row + c, g);
        }
    }
}

/// Block (tile, chunk) of [`super::tiles::THREADS`] threads: dx for
/// columns `tile·TILE ..` of rows `chunk·chunk_rows ..`, and the tile's
/// partial dbias over those rows into `partials[chunk][..]` (row stride
/// `⌈width/4⌉·4`, the columns past `width` zero). Each warp is one row of
/// the tile at a time, each lane four columns ([`lane_columns`]), the warps
/// taking rows `r, r + GROUPS, ...` of the chunk two at a time. Needs
/// [`super::tiles::SHARED_BYTES`] of shared memory.
///
/// # Safety
/// As the kernel: x, dy and dx hold `rows·width` floats, bias `width`,
/// partials `⌈rows/chunk_rows⌉·⌈width/4⌉·4`; `chunk_rows` a multiple of
/// [`GROUPS`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn spread_tiles<G: ElementGradient>(
    x: *const f32,
    bias: *const f32,
    dy: *const f32,
    dx: *mut f32,
    partials: *mut f32,
    rows: u32,
    width: u32,
    chunk_rows: u32,
) {
    // Two bodies, each with its own map: one with both would hold the
    // step in a register through the loop.
    unsafe {
        if width.is_multiple_of(4) {
            tiles_with::<G, false>(x, bias, dy, dx, partials, rows, width, chunk_rows)
        } else {
            tiles_with::<G, true>(x, bias, dy, dx, partials, rows, width, chunk_rows)
        }
    }
}

/// [`spread_tiles`] with the map of [`lane_columns`]`::<SCALAR>`.
///
/// # Safety
/// As [`spread_tiles`]; `SCALAR` where the width is not a multiple of 4.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tiles_with<G: ElementGradient, const SCALAR: bool>(
    x: *const f32,
    bias: *const f32,
    dy: *const f32,
    dx: *mut f32,
    partials: *mut f32,
    rows: u32,
    width: u32,
    chunk_rows: u32,
) {
    let (lane, group) = (thread_idx_x() % 32, thread_idx_x() / 32);
    let (c, step) = lane_columns::<SCALAR>(block_idx_x(), lane);
    let k = block_idx_y();
    let stride = width.div_ceil(4) * 4;
    let end = rows.min((k + 1) * chunk_rows);
    let mut acc = F32x4::ZERO;
    if c < width {
        unsafe {
            let b = if SCALAR {
                let mut v = [0.0; 4];
                for j in 0..4 {
                    if c + j * step < width {
                        v[j as usize] = ld_nc(bias, c + j * step);
                    }
                }
                F32x4::new(v[0], v[1], v[2], v[3])
            } else {
                ld_nc4(bias, c)
            };
            let grad = |xv: F32x4, dv: F32x4| xv.zip3(b, dv, |x, b, d| G::grad(x + b, d));
            let mut r = k * chunk_rows + group;
            while r + GROUPS < end {
                let (i0, i1) = (r * width, (r + GROUPS) * width);
                let (x0, d0) = quad::<SCALAR>(x, dy, i0, c, step, width);
                let (x1, d1) = quad::<SCALAR>(x, dy, i1, c, step, width);
                let (g0, g1) = (grad(x0, d0), grad(x1, d1));
                store::<SCALAR>(dx, i0, c, step, width, g0);
                store::<SCALAR>(dx, i1, c, step, width, g1);
                acc = acc.zip(g0, |a, g| a + g).zip(g1, |a, g| a + g);
                r += 2 * GROUPS;
            }
            if r < end {
                let i0 = r * width;
                let (x0, d0) = quad::<SCALAR>(x, dy, i0, c, step, width);
                let g0 = grad(x0, d0);
                store::<SCALAR>(dx, i0, c, step, width, g0);
                acc = acc.zip(g0, |a, g| a + g);
            }
        }
    }
    // Columns past `width` summed zeros: the pad.
    publish_quads(0, &[acc], group, lane, 32, GROUPS);
    sync_threads();
    if group == 0 {
        let total = group_total(0, lane, 32, GROUPS);
        if !SCALAR {
            if c < stride {
                unsafe { st4(partials, k * stride + c, total) };
            }
        } else {
            let total = total.to_array();
            for j in 0..4 {
                let cj = c + j * step;
                if cj < stride {
                    unsafe { st(partials, k * stride + cj, total[j as usize]) };
                }
            }
        }
    }
}

/// dbias: each column's partials added over the chunks, as mage-002's
/// totals add them, every load of a warp's segment issued before its adds
/// (`column_total_batched`), a block of `TOTALS_THREADS` a strip of
/// `TOTALS_COLUMNS` columns. Needs `TOTALS_SHARED_BYTES` of shared memory.
///
/// # Safety
/// As the kernel: partials holds `chunks·⌈width/4⌉·4` floats, dbias `width`.
#[inline(always)]
pub unsafe fn totals(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
    let stride = width.div_ceil(4) * 4;
    let total = unsafe { column_total_batched(partials, chunks, stride, width) };
    let c = block_idx_x() * TOTALS_COLUMNS + thread_idx_x();
    if thread_idx_x() < 32 && c < width {
        unsafe { st(dbias, c, total) };
    }
}

/// Whether either change of [`spread_tiles`] and its [`totals`] over
/// mage-002's applies at `d = [rows, width]`: a width not a multiple of 4
/// (the lanes spread), or more than `TOTALS_WARPS` chunks (a totals segment
/// of two or more, its loads batched). Elsewhere the kernels do what
/// mage-002's do.
#[cfg(not(target_arch = "nvptx64"))]
pub fn changes_apply(d: &[u32]) -> bool {
    use mage_common::device::column_sums::TOTALS_WARPS;
    let (rows, width) = (d[0], d[1]);
    let chunks = rows.div_ceil(super::tiles::chunk_rows(rows, width));
    !width.is_multiple_of(4) || chunks > TOTALS_WARPS
}
