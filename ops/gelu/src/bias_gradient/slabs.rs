//! The kernel bodies of each GELU gradient op's mage-003: [`slabs`], a
//! block per chunk of four-row slabs writing dx from flat 128-bit quads at
//! any width and the chunk's partial dbias row (each slab's dx staged in
//! shared memory, each column summed by one thread, rows in order), then
//! [`totals`], each column's partials added in chunk order with every load
//! of a thread issued before its first add; the stages' entries call them
//! with their op's [`ElementGradient`] (see [`bias_gradient`](super)).
//!
//! A slab is four rows: `4·width` elements, exactly `width` quads of the
//! flat run, starting on a quad (its first row is a multiple of 4). Thread
//! `t` of a [`THREADS`]-thread block takes quads `t, t + THREADS, ...` of
//! the slab, [`BATCH`] at a time (the batch's loads of x and dy issued
//! before any is used), each a 16-byte load of x and of dy and a 16-byte
//! store of dx where the tensors are 16-byte aligned and the quad is whole
//! (a quad of the last slab past the last row, or any quad of misaligned
//! tensors, is scalar accesses, bounds-checked); the quad's column is
//! `4q mod width` by at most three subtractions (`4q < 4·width`), its four
//! biases scalar loads at columns wrapped at the width. The quad's dx also
//! goes to the slab's tile in shared memory, at its flat place. After a
//! barrier, thread `t` owns columns `t, t + THREADS, ...`: it adds the
//! slab's rows of each, in row order, onto the column's running sum (in
//! shared memory, a word each, touched by its owner only), and after the
//! chunk's last slab stores it to `partials[chunk][column]`.
//!
//! Every addition's order follows from the shape alone (rows in order
//! within a chunk, then chunks in order by [`totals`], each warp a
//! contiguous segment of chunks, the segments in order), so dbias is the
//! same bits on every run; no floating-point atomics.

use super::ElementGradient;
use mage_common::device::*;

/// Threads per block of the slab kernel.
pub const THREADS: u32 = 256;
/// Rows of a slab: its `4·width` elements are `width` whole quads.
pub const SLAB_ROWS: u32 = 4;
/// Quads a thread loads (of x and of dy) before it computes any.
pub const BATCH: u32 = 4;
/// The widest row the slab kernel takes: its shared memory, 20 bytes a
/// column (the tile and the running sums), stays under the 227 KB a block
/// may have on sm_90.
pub const MAX_WIDTH: u32 = 8192;
/// Blocks of the slab kernel the chunk rule aims at: one wave of four
/// blocks an SM on 132 SMs.
pub const TARGET_BLOCKS: u32 = 4 * 132;
/// Threads per block of the totals kernel: [`SEGMENTS`] warps.
pub const TOTALS_THREADS: u32 = 1024;
/// Columns of a totals block, one a lane.
pub const TOTALS_COLUMNS: u32 = 32;
/// The segments each column's chunks are cut into, a warp each.
pub const SEGMENTS: u32 = TOTALS_THREADS / 32;
/// Partials a thread of the totals kernel loads before it adds them.
pub const LOADS: u32 = 8;
/// Shared bytes of the totals kernel: a sum a thread.
pub const TOTALS_SHARED_BYTES: u32 = TOTALS_THREADS * 4;

/// Shared bytes of the slab kernel at `width`: the slab's tile (`4·width`
/// floats) and the running column sums (`width`).
pub fn shared_bytes(width: u32) -> u32 {
    20 * width
}

/// Slabs per chunk at `rows × width`: as few as keep the chunks to about
/// [`TARGET_BLOCKS`], at least one.
pub fn slabs_per_chunk(rows: u32, _width: u32) -> u32 {
    rows.div_ceil(SLAB_ROWS).div_ceil(TARGET_BLOCKS).max(1)
}

/// Loads the quad of x and dy at flat `i`, `left` elements of the run
/// from it: 16-byte accesses where `vector`, else one scalar an element
/// while `left` lasts (the rest zero).
///
/// # Safety
/// As the kernel: `i + min(left, 4)` within the run.
#[inline(always)]
unsafe fn load(x: *const f32, dy: *const f32, i: u32, left: u32, vector: bool) -> (F32x4, F32x4) {
    unsafe {
        if vector {
            (ld_nc4(x, i), ld_nc4(dy, i))
        } else {
            let mut xv = [0.0; 4];
            let mut dv = [0.0; 4];
            for j in 0..4 {
                if j < left {
                    xv[j as usize] = ld_nc(x, i + j);
                    dv[j as usize] = ld_nc(dy, i + j);
                }
            }
            (F32x4::new(xv[0], xv[1], xv[2], xv[3]), F32x4::new(dv[0], dv[1], dv[2], dv[3]))
        }
    }
}

/// Stores the quad `g` of dx at `i`, as [`load`] loaded it.
///
/// # Safety
/// As [`load`].
#[inline(always)]
unsafe fn store(dx: *mut f32, i: u32, left: u32, vector: bool, g: F32x4) {
    unsafe {
        if vector {
            st4(dx, i, g);
        } else {
            let g = g.to_array();
            for j in 0..4 {
                if j < left {
                    st(dx, i + j, g[j as usize]);
                }
            }
        }
    }
}

/// The biases of the four columns from `c` on, each wrapped at `width`.
///
/// # Safety
/// `bias` holds `width` floats, `c < width`.
#[inline(always)]
unsafe fn bias_quad(bias: *const f32, c: u32, width: u32) -> F32x4 {
    let next = |c: u32| if c + 1 == width { 0 } else { c + 1 };
    let (c1, c2, c3) = (next(c), next(next(c)), next(next(next(c))));
    unsafe { F32x4::new(ld_nc(bias, c), ld_nc(bias, c1), ld_nc(bias, c2), ld_nc(bias, c3)) }
}

/// Block `chunk` of [`THREADS`] threads: dx for the rows of slabs
/// `chunk·per ..` (`per` slabs of [`SLAB_ROWS`] rows, fewer in the last
/// chunk), and their partial dbias into `partials[chunk][..]` (row stride
/// `width`). Needs [`shared_bytes`]`(width)` of shared memory.
///
/// # Safety
/// As the kernel: x, dy and dx hold `rows·width` floats, bias `width`,
/// partials `⌈⌈rows/4⌉/per⌉·width`; `width <= MAX_WIDTH`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn slabs<G: ElementGradient>(
    x: *const f32,
    bias: *const f32,
    dy: *const f32,
    dx: *mut f32,
    partials: *mut f32,
    rows: u32,
    width: u32,
    per: u32,
) {
    let t = thread_idx_x();
    let chunk = block_idx_x();
    let first = chunk * per;
    let end = rows.div_ceil(SLAB_ROWS).min(first + per);
    let aligned = (x as usize | dy as usize | dx as usize).is_multiple_of(16);
    let sums = 16 * width;
    let mut s = first;
    while s < end {
        let r0 = SLAB_ROWS * s;
        let slab_rows = (rows - r0).min(SLAB_ROWS);
        let (base, valid) = (r0 * width, slab_rows * width);
        let quads = valid.div_ceil(4);
        let mut q = t;
        while q < quads {
            let mut xs = [F32x4::ZERO; BATCH as usize];
            let mut ds = [F32x4::ZERO; BATCH as usize];
            for j in 0..BATCH {
                let e = 4 * (q + j * THREADS);
                if e < valid {
                    let left = valid - e;
                    (xs[j as usize], ds[j as usize]) = unsafe { load(x, dy, base + e, left, aligned && left >= 4) };
                }
            }
            for j in 0..BATCH {
                let e = 4 * (q + j * THREADS);
                if e < valid {
                    let left = valid - e;
                    let mut c = e;
                    for _ in 1..SLAB_ROWS {
                        if c >= width {
                            c -= width;
                        }
                    }
                    let b = unsafe { bias_quad(bias, c, width) };
                    let g = xs[j as usize].zip3(b, ds[j as usize], |x, b, d| G::grad(x + b, d));
                    unsafe { store(dx, base + e, left, aligned && left >= 4, g) };
                    smem_st4(4 * e, g);
                }
            }
            q += BATCH * THREADS;
        }
        sync_threads();
        let mut c = t;
        while c < width {
            let mut sum = if s == first { 0.0 } else { smem_ld(sums + 4 * c) };
            for r in 0..slab_rows {
                sum += smem_ld(4 * (r * width + c));
            }
            if s + 1 == end {
                unsafe { st(partials, chunk * width + c, sum) };
            } else {
                smem_st(sums + 4 * c, sum);
            }
            c += THREADS;
        }
        s += 1;
        if s < end {
            // The next slab's quads overwrite the tile.
            sync_threads();
        }
    }
}

/// dbias: column `block_idx_x()·TOTALS_COLUMNS + lane` of `chunks`
/// partial rows (`partials[k·width + column]`) added in chunk order. Warp
/// `w` of [`TOTALS_THREADS`] adds the chunks of segment `w`
/// (`⌈chunks/SEGMENTS⌉` each), [`LOADS`] loads issued before their adds
/// (a load past the segment predicated off, its add skipped); warp 0 then
/// adds the segments in order. Needs [`TOTALS_SHARED_BYTES`].
///
/// # Safety
/// As the kernel: partials holds `chunks·width` floats, written before
/// this launch; dbias `width`.
#[inline(always)]
pub unsafe fn totals(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
    let (lane, w) = (thread_idx_x() % 32, thread_idx_x() / 32);
    let column = block_idx_x() * TOTALS_COLUMNS + lane;
    let each = chunks.div_ceil(SEGMENTS);
    let (start, end) = ((w * each).min(chunks), ((w + 1) * each).min(chunks));
    let mut s = 0.0;
    if column < width {
        let mut k = start;
        while k < end {
            let mut v = [0.0; LOADS as usize];
            for j in 0..LOADS {
                if k + j < end {
                    v[j as usize] = unsafe { ld_nc(partials, (k + j) * width + column) };
                }
            }
            for j in 0..LOADS {
                if k + j < end {
                    s += v[j as usize];
                }
            }
            k += LOADS;
        }
    }
    smem_st(4 * (w * 32 + lane), s);
    sync_threads();
    if w == 0 && column < width {
        let mut total = s;
        for v in 1..SEGMENTS {
            total += smem_ld(4 * (v * 32 + lane));
        }
        unsafe { st(dbias, column, total) };
    }
}

/// Every shape whose width the slab kernel's shared memory holds.
pub fn supports(d: &[u32]) -> bool {
    d[1] <= MAX_WIDTH
}

/// The plan of a stage over [`slabs`] and [`totals`] (its entries
/// `slabs_kernel` and `totals_kernel`): a block per chunk of slabs, then
/// the chunks' partial dbias rows added in order into dbias.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(
    d: &[u32],
    slabs_kernel: &'static mage_common::kernel::Kernel,
    totals_kernel: &'static mage_common::kernel::Kernel,
) -> mage_common::op::Plan {
    use super::Block;
    use mage_common::kernel::Dim3;
    let (rows, width) = (d[0], d[1]);
    let per = slabs_per_chunk(rows, width);
    let chunks = rows.div_ceil(SLAB_ROWS).div_ceil(per);
    super::chunked_plan(
        d,
        (slabs_kernel, Dim3::x(chunks), Block { threads: THREADS, shared_bytes: shared_bytes(width) }),
        per,
        chunks,
        chunks * width,
        (totals_kernel, Block { threads: TOTALS_THREADS, shared_bytes: TOTALS_SHARED_BYTES }),
        TOTALS_COLUMNS,
    )
}
