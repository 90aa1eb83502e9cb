//! The kernel bodies of each GELU gradient op's mage-001: a thread per
//! element for dx ([`elements`]), a thread per column for dbias
//! ([`columns`]), rows in order; the stages' entries call them with their
//! op's [`ElementGradient`] (see [`bias_gradient`](super)).
//!
//! The column kernel adds the column's dx, as stored by the element
//! kernel, row after row: dbias is the same bits on every run, no
//! floating-point atomics, one fixed summation order.

use super::ElementGradient;
use mage_common::device::*;

/// Threads per block of the element kernel.
pub const THREADS: u32 = 256;
/// Threads per block of the column kernel.
pub const COLUMN_THREADS: u32 = 128;

/// Thread `i` of the flat grid of [`THREADS`]-thread blocks writes `dx[i]
/// = G::grad(x[i] + bias[i % width], dy[i])`.
///
/// # Safety
/// As the kernel: x, dy and dx hold `rows·width` floats, bias `width`.
#[inline(always)]
pub unsafe fn elements<G: ElementGradient>(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, rows: u32, width: u32) {
    let i = block_idx_x() * THREADS + thread_idx_x();
    if i < rows * width {
        unsafe {
            // SAFETY: i < rows·width, so width > 0 (drops the division-by-zero check).
            core::hint::assert_unchecked(width > 0);
            let z = ld_nc(x, i) + ld_nc(bias, i % width);
            st(dx, i, G::grad(z, ld_nc(dy, i)));
        }
    }
}

/// One thread per column, blocks of [`COLUMN_THREADS`]: `dbias[c] = Σ_r
/// dx[r, c]`, rows in order, from the dx the element kernel stored
/// (written by that launch, read-only in this one).
///
/// # Safety
/// As the kernel: dx holds `rows·width` floats, dbias `width`.
#[inline(always)]
pub unsafe fn columns(dx: *const f32, dbias: *mut f32, rows: u32, width: u32) {
    let c = block_idx_x() * COLUMN_THREADS + thread_idx_x();
    if c < width {
        unsafe {
            let mut sum = 0.0;
            let mut r = 0;
            while r < rows {
                sum += ld_nc(dx, r * width + c);
                r += 1;
            }
            st(dbias, c, sum);
        }
    }
}
