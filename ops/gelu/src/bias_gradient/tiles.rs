//! The kernel bodies of each GELU gradient op's mage-002: [`tiles`], a
//! block per column tile and chunk of rows writing dx and the tile's
//! partial dbias row over the chunk (sums in registers, the warps' sums
//! added in warp order through shared memory), then [`totals`], each
//! column's partials added in chunk order
//! (`mage_common::device::column_sums`); the stages' entries call them
//! with their op's [`ElementGradient`] (see [`bias_gradient`](super)).
//! The chunk rule is [`chunk_rows`]; the stages' docs say why.

use super::ElementGradient;
use mage_common::device::column_sums::{TOTALS_COLUMNS, column_total, group_total, publish_quads};
use mage_common::device::*;

/// Threads per block of the tile kernel.
pub const THREADS: u32 = 256;
/// Rows of a tile one block works on at once: a warp each.
pub const GROUPS: u32 = THREADS / 32;
/// Columns of a tile: four a lane.
pub const TILE: u32 = 4 * 32;
/// Shared bytes of the tile kernel: every thread's quad of sums.
pub const SHARED_BYTES: u32 = THREADS * 16;
/// Blocks of the tile kernel the chunk rule aims at: two waves of four
/// blocks an SM on 132 SMs.
pub const TARGET_BLOCKS: u32 = 2 * 4 * 132;

/// Rows per chunk at `rows × width`: a multiple of [`GROUPS`], at least
/// one row a warp, so that tiles × chunks is about [`TARGET_BLOCKS`].
pub fn chunk_rows(rows: u32, width: u32) -> u32 {
    let tiles = width.div_ceil(TILE) as u64;
    let per = (rows as u64 * tiles).div_ceil(TARGET_BLOCKS as u64) as u32;
    per.div_ceil(GROUPS).max(1) * GROUPS
}

/// Loads the quads of x and dy at `i` (columns `c..c + 4`): 16-byte
/// accesses (`width` a multiple of 4) or, with `scalar`, four scalar ones,
/// those at or past `width` skipped and left zero.
///
/// # Safety
/// As the kernel: `i` is in the row, `c < width`.
#[inline(always)]
unsafe fn quad(x: *const f32, dy: *const f32, i: u32, c: u32, width: u32, scalar: bool) -> (F32x4, F32x4) {
    unsafe {
        if scalar {
            let mut xv = [0.0; 4];
            let mut dv = [0.0; 4];
            for j in 0..4 {
                if c + j < width {
                    xv[j as usize] = ld_nc(x, i + j);
                    dv[j as usize] = ld_nc(dy, i + j);
                }
            }
            (F32x4::new(xv[0], xv[1], xv[2], xv[3]), F32x4::new(dv[0], dv[1], dv[2], dv[3]))
        } else {
            (ld_nc4(x, i), ld_nc4(dy, i))
        }
    }
}

/// Stores the quad `g` of dx at `i`, as [`quad`] loaded it.
///
/// # Safety
/// As [`quad`].
#[inline(always)]
unsafe fn store(dx: *mut f32, i: u32, c: u32, width: u32, scalar: bool, g: F32x4) {
    unsafe {
        if scalar {
            let g = g.to_array();
            for j in 0..4 {
                if c + j < width {
                    st(dx, i + j, g[j as usize]);
                }
            }
        } else {
            st4(dx, i, g);
        }
    }
}

/// Block (tile, chunk) of [`THREADS`] threads: dx for columns `tile·TILE
/// ..` of rows `chunk·chunk_rows ..`, and the tile's partial dbias over
/// those rows into `partials[chunk][..]` (row stride `⌈width/4⌉·4`, the
/// columns past `width` zero). Each warp is one row of the tile at a time,
/// each lane four columns, the warps taking rows `r, r + GROUPS, ...` of
/// the chunk two at a time. Needs [`SHARED_BYTES`] of shared memory.
///
/// # Safety
/// As the kernel: x, dy and dx hold `rows·width` floats, bias `width`,
/// partials `⌈rows/chunk_rows⌉·⌈width/4⌉·4`; `chunk_rows` a multiple of
/// [`GROUPS`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn tiles<G: ElementGradient>(
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
    let c = block_idx_x() * TILE + 4 * lane;
    let k = block_idx_y();
    let stride = width.div_ceil(4) * 4;
    let scalar = !width.is_multiple_of(4);
    let end = rows.min((k + 1) * chunk_rows);
    let mut acc = F32x4::ZERO;
    if c < width {
        unsafe {
            let b = if scalar {
                let mut v = [0.0; 4];
                for j in 0..4 {
                    if c + j < width {
                        v[j as usize] = ld_nc(bias, c + j);
                    }
                }
                F32x4::new(v[0], v[1], v[2], v[3])
            } else {
                ld_nc4(bias, c)
            };
            let grad = |xv: F32x4, dv: F32x4| xv.zip3(b, dv, |x, b, d| G::grad(x + b, d));
            let mut r = k * chunk_rows + group;
            while r + GROUPS < end {
                let (i0, i1) = (r * width + c, (r + GROUPS) * width + c);
                let (x0, d0) = quad(x, dy, i0, c, width, scalar);
                let (x1, d1) = quad(x, dy, i1, c, width, scalar);
                let (g0, g1) = (grad(x0, d0), grad(x1, d1));
                store(dx, i0, c, width, scalar, g0);
                store(dx, i1, c, width, scalar, g1);
                acc = acc.zip(g0, |a, g| a + g).zip(g1, |a, g| a + g);
                r += 2 * GROUPS;
            }
            if r < end {
                let i0 = r * width + c;
                let (x0, d0) = quad(x, dy, i0, c, width, scalar);
                let g0 = grad(x0, d0);
                store(dx, i0, c, width, scalar, g0);
                acc = acc.zip(g0, |a, g| a + g);
            }
        }
    }
    // Columns past `width` (in a scalar quad) summed zeros: the pad.
    publish_quads(0, &[acc], group, lane, 32, GROUPS);
    sync_threads();
    if group == 0 && c < stride {
        unsafe { st4(partials, k * stride + c, group_total(0, lane, 32, GROUPS)) };
    }
}

/// dbias: each column's partials added over the chunks (see
/// `column_total`), a block of `TOTALS_THREADS` a strip of
/// `TOTALS_COLUMNS` columns. Needs `TOTALS_SHARED_BYTES` of shared memory.
///
/// # Safety
/// As the kernel: partials holds `chunks·⌈width/4⌉·4` floats, dbias `width`.
#[inline(always)]
pub unsafe fn totals(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
    let stride = width.div_ceil(4) * 4;
    let total = unsafe { column_total(partials, chunks, stride, width) };
    let c = block_idx_x() * TOTALS_COLUMNS + thread_idx_x();
    if thread_idx_x() < 32 && c < width {
        unsafe { st(dbias, c, total) };
    }
}

/// The plan of a stage over [`tiles`] and [`totals`] (its entries
/// `tiles_kernel` and `totals_kernel`): a block per tile and chunk of
/// rows, then the chunks' partial dbias rows added in order into dbias.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(
    d: &[u32],
    tiles_kernel: &'static mage_common::kernel::Kernel,
    totals_kernel: &'static mage_common::kernel::Kernel,
) -> mage_common::op::Plan {
    use super::Block;
    use mage_common::device::column_sums::{TOTALS_SHARED_BYTES, TOTALS_THREADS};
    use mage_common::kernel::Dim3;
    let (rows, width) = (d[0], d[1]);
    let per = chunk_rows(rows, width);
    let chunks = rows.div_ceil(per);
    let stride = width.div_ceil(4) * 4;
    super::chunked_plan(
        d,
        (tiles_kernel, Dim3 { x: width.div_ceil(TILE), y: chunks, z: 1 }, Block { threads: THREADS, shared_bytes: SHARED_BYTES }),
        per,
        chunks,
        chunks * stride,
        (totals_kernel, Block { threads: TOTALS_THREADS, shared_bytes: TOTALS_SHARED_BYTES }),
        TOTALS_COLUMNS,
    )
}
