//! A `[k, m]` transposed into scratch `[m, k]` (or `[m, k4]`, rows padded
//! with zeros to a multiple of 4 floats) by a launch of its own: the first
//! launch of matmul_tn mage-002 (whose module doc says why and how) and of
//! mage-005 (padded, for its 16-byte product). The
//! stages own their entries; this module holds the body and its geometry.

use mage_common::device::*;

/// The transpose's tile: 32x32 floats, 256 threads (8 rows of 32, 4 elements each).
pub const TRANSPOSE_TILE: u32 = 32;
pub const TRANSPOSE_THREADS: u32 = 256;
/// One tile in shared memory, rows of 33 floats.
pub const TRANSPOSE_SHARED_BYTES: u32 = TRANSPOSE_TILE * (TRANSPOSE_TILE + 1) * 4;

/// `dst` (`cols` x `dst_cols`, `dst_cols >= rows`) = the transpose of `src`
/// (`rows` x `cols`), both row-major, zeros in `dst`'s columns `rows..
/// dst_cols`; block `b` takes tile `(b / tiles_c, b % tiles_c)` of `src`
/// (`tiles_c = ⌈cols / 32⌉`), so the padding must lie in the last tile
/// row: `dst_cols <= ⌈rows / 32⌉·32`.
///
/// # Safety
/// `src` holds `rows·cols` floats, `dst` `cols·dst_cols`;
/// [`TRANSPOSE_SHARED_BYTES`] of shared memory, [`TRANSPOSE_THREADS`]
/// threads, `⌈rows / 32⌉·⌈cols / 32⌉` blocks.
#[inline(always)]
pub(crate) unsafe fn transpose(src: *const f32, dst: *mut f32, rows: u32, cols: u32, dst_cols: u32) {
    const T: u32 = TRANSPOSE_TILE;
    let t = thread_idx_x();
    let (tx, ty) = (t % T, t / T);
    // At least 1 (cols >= 1), said so the division needs no zero check.
    let tiles_c = cols.div_ceil(T).max(1);
    let (r0, c0) = (block_idx_x() / tiles_c * T, block_idx_x() % tiles_c * T);
    // Tile element (i, j) = src[r0 + i, c0 + j] at shared float i * 33 + j.
    for i in 0..T / 8 {
        let (r, c) = (r0 + ty + 8 * i, c0 + tx);
        if r < rows && c < cols {
            smem_st(((ty + 8 * i) * (T + 1) + tx) * 4, unsafe { ld_nc(src, r * cols + c) });
        }
    }
    sync_threads();
    // dst[c0 + i, r0 + j] = tile element (j, i): written where it was read,
    // and as zero in the padding (never read from the tile).
    for i in 0..T / 8 {
        let (r, c) = (c0 + ty + 8 * i, r0 + tx);
        if r < cols && c < dst_cols {
            let x = if c < rows { smem_ld((tx * (T + 1) + ty + 8 * i) * 4) } else { 0.0 };
            unsafe { st(dst, r * dst_cols + c, x) };
        }
    }
}
