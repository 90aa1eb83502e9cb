//! Column sums that are the same bits on every run, without floating-point
//! atomics: a first pass in which each block adds its columns over a chunk
//! of rows and writes one partial row to a scratch `[chunks, stride]`, then
//! a second, short pass that adds each column's partials over the chunks.
//!
//! * [`publish_quads`] and [`group_total`]: a block whose `groups` groups
//!   of threads each summed quads of columns over their own rows adds the
//!   groups, in group order, into one partial quad per column quad (one
//!   barrier between the two, the sums spread over the block's threads).
//! * [`column_total`]: the body of a totals kernel: a block of
//!   [`TOTALS_THREADS`] threads adds [`TOTALS_COLUMNS`] columns' partials,
//!   each warp a contiguous segment of the chunks in chunk order, then the
//!   segments in segment order; [`column_total_batched`] makes the same
//!   additions in the same order with every load of a segment issued
//!   before its adds (a batch at a time, the last one predicated), where
//!   `column_total` loads a segment's remainder one after another.
//!
//! Every grouping is fixed by the shape alone (the plan's chunk count and
//! the block sizes here), so the order of every addition is too.

use super::*;

/// Threads of a block running [`column_total`].
pub const TOTALS_THREADS: u32 = 1024;
/// Warps of such a block: the segments each column's chunks are cut into
/// (32, so that a thread loads a few partials at the chunk counts met, a
/// round trip to L2 or two, and not a long chain).
pub const TOTALS_WARPS: u32 = TOTALS_THREADS / 32;
/// Columns one such block totals (one a lane).
pub const TOTALS_COLUMNS: u32 = 32;
/// Shared bytes a block running [`column_total`] needs.
pub const TOTALS_SHARED_BYTES: u32 = TOTALS_THREADS * 4;
/// Partials a thread of [`column_total`] loads before it adds them.
const BATCH: u32 = 8;

/// Publishes the `N` quads of column sums `sums` a thread holds, thread
/// `lane` of group `group` of a block whose `groups` groups of `lanes`
/// threads each summed the same columns over their own rows: quad `j` to
/// the shared bytes at `offset + 16·((j·groups + group)·lanes + lane)`
/// (`offset` 16-byte aligned; `16·N·groups·lanes` bytes in all). A barrier
/// must follow before [`group_total`] reads them.
#[inline(always)]
pub fn publish_quads<const N: usize>(offset: u32, sums: &[F32x4; N], group: u32, lane: u32, lanes: u32, groups: u32) {
    for (j, q) in sums.iter().enumerate() {
        smem_st4(offset + 16 * ((j as u32 * groups + group) * lanes + lane), *q);
    }
}

/// The block's sum of published quad `o = j·lanes + lane` (quad `j` of
/// lane `lane`, see [`publish_quads`]): the groups' quads added in group
/// order, `g = 0, 1, ...`. Any thread may add any `o`, so a block spreads
/// the `N·lanes` sums over all its threads.
#[inline(always)]
pub fn group_total(offset: u32, o: u32, lanes: u32, groups: u32) -> F32x4 {
    let (j, lane) = (o / lanes, o % lanes);
    let mut sum = smem_ld4(offset + 16 * (j * groups * lanes + lane));
    for g in 1..groups {
        sum = sum.zip(smem_ld4(offset + 16 * ((j * groups + g) * lanes + lane)), |a, b| a + b);
    }
    sum
}

/// The total over `chunks` partial rows (`partials[k·stride + column]`)
/// of column `block_idx_x()·TOTALS_COLUMNS + lane`, valid in warp 0 (the
/// other warps return zero, as does a column at or past `columns`). Warp
/// `w` adds the chunks of segment `w` (`⌈chunks / TOTALS_WARPS⌉` each) in
/// chunk order, loading [`BATCH`] before adding them; warp 0 then adds the
/// segments in order. Every thread of the block calls it (one barrier),
/// with [`TOTALS_SHARED_BYTES`] of shared memory.
///
/// # Safety
/// `partials` holds `chunks·stride` floats, written before this launch;
/// `columns <= stride`.
#[inline(always)]
pub unsafe fn column_total(partials: *const f32, chunks: u32, stride: u32, columns: u32) -> f32 {
    let (lane, w) = (thread_idx_x() % 32, thread_idx_x() / 32);
    let column = block_idx_x() * TOTALS_COLUMNS + lane;
    let per = chunks.div_ceil(TOTALS_WARPS);
    let (start, end) = ((w * per).min(chunks), ((w + 1) * per).min(chunks));
    let mut s = 0.0;
    if column < columns {
        let mut k = start;
        while k + BATCH <= end {
            let mut v = [0.0; BATCH as usize];
            for (j, v) in v.iter_mut().enumerate() {
                *v = unsafe { ld_nc(partials, (k + j as u32) * stride + column) };
            }
            for v in v {
                s += v;
            }
            k += BATCH;
        }
        while k < end {
            s += unsafe { ld_nc(partials, k * stride + column) };
            k += 1;
        }
    }
    smem_st(4 * (w * 32 + lane), s);
    sync_threads();
    let mut total = 0.0;
    if w == 0 {
        total = s;
        for v in 1..TOTALS_WARPS {
            total += smem_ld(4 * (v * 32 + lane));
        }
    }
    total
}

/// [`column_total`]'s additions in its order (the same segments, each in
/// chunk order from `0.0`, then the segments in order, in warp 0), with
/// every partial of a segment loaded [`BATCH`] at a time and a short last
/// batch predicated: a segment of fewer than [`BATCH`] chunks is one round
/// trip to L2, not a chain of them. The same bits as [`column_total`].
///
/// # Safety
/// As [`column_total`].
#[inline(always)]
pub unsafe fn column_total_batched(partials: *const f32, chunks: u32, stride: u32, columns: u32) -> f32 {
    let (lane, w) = (thread_idx_x() % 32, thread_idx_x() / 32);
    let column = block_idx_x() * TOTALS_COLUMNS + lane;
    let per = chunks.div_ceil(TOTALS_WARPS);
    let (start, end) = ((w * per).min(chunks), ((w + 1) * per).min(chunks));
    let mut s = 0.0;
    if column < columns {
        let mut k = start;
        while k < end {
            let mut v = [0.0; BATCH as usize];
            for (j, v) in v.iter_mut().enumerate() {
                if k + (j as u32) < end {
                    *v = unsafe { ld_nc(partials, (k + j as u32) * stride + column) };
                }
            }
            for (j, v) in v.iter().enumerate() {
                if k + (j as u32) < end {
                    s += *v;
                }
            }
            k += BATCH;
        }
    }
    smem_st(4 * (w * 32 + lane), s);
    sync_threads();
    let mut total = 0.0;
    if w == 0 {
        total = s;
        for v in 1..TOTALS_WARPS {
            total += smem_ld(4 * (v * 32 + lane));
        }
    }
    total
}
