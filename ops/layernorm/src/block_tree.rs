//! The kernel body forward mage-001 and layernorm_backward mage-001 share:
//! a 256-thread block per row, partial sums meeting in shared memory
//! through a tree of barriers, and the row's statistics in two passes over
//! the row shifted by its first element. Frozen history: forward mage-001's
//! PTX is pinned by the resource snapshot and was identical when this
//! moved here.

use mage_common::device::*;

/// Threads of the block that holds a row.
pub const THREADS: u32 = 256;

/// Sum of `v` over the block, returned to every thread. Uses shared words
/// `0..THREADS`.
#[inline(always)]
pub fn block_sum(v: f32) -> f32 {
    let t = thread_idx_x();
    smem_st(t * 4, v);
    sync_threads();
    let mut s = THREADS / 2;
    while s > 0 {
        if t < s {
            smem_st(t * 4, smem_ld(t * 4) + smem_ld((t + s) * 4));
        }
        sync_threads();
        s /= 2;
    }
    let total = smem_ld(0);
    // Everyone reads the total before the words are reused.
    sync_threads();
    total
}

/// The statistics of the row at `x[base..base + width]`, every thread of
/// the block taking part: `(shift, centre, rstd)`, the mean being `shift +
/// centre` (the first element, and the mean of the shifted row refined by
/// its mean deviation: corrected two-pass), `rstd = 1/sqrt(var + eps)`.
///
/// # Safety
/// `x[base..base + width]` must be readable.
#[inline(always)]
pub unsafe fn row_statistics(x: *const f32, base: u32, width: u32, eps: f32) -> (f32, f32, f32) {
    let t = thread_idx_x();
    let n = width as f32;
    unsafe {
        let shift = ld_nc(x, base);
        let mut s = 0.0;
        let mut c = t;
        while c < width {
            s += ld_nc(x, base + c) - shift;
            c += THREADS;
        }
        let mean0 = block_sum(s) / n;
        let (mut sd, mut sd2) = (0.0, 0.0);
        c = t;
        while c < width {
            let d = ld_nc(x, base + c) - shift - mean0;
            sd += d;
            sd2 += d * d;
            c += THREADS;
        }
        let (sd, sd2) = (block_sum(sd), block_sum(sd2));
        let centre = mean0 + sd / n;
        let var = ((sd2 - sd * sd / n) / n).max(0.0);
        (shift, centre, 1.0 / sqrt(var + eps))
    }
}
