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

/// The plan of a stage over [`elements`] and [`columns`] (its entries
/// `elements_kernel` and `columns_kernel`): a thread per element for dx,
/// then a thread per column adding dx's rows in order into dbias.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(
    d: &[u32],
    elements_kernel: &'static mage_common::kernel::Kernel,
    columns_kernel: &'static mage_common::kernel::Kernel,
) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    let (rows, width) = (d[0], d[1]);
    Plan {
        launches: vec![
            Launch {
                kernel: elements_kernel,
                grid: Dim3::x((rows * width).div_ceil(THREADS)),
                block: Dim3::x(THREADS),
                shared_bytes: 0,
                cluster: Dim3::ONE,
                args: vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output(0), Arg::U32(rows), Arg::U32(width)],
            },
            Launch {
                kernel: columns_kernel,
                grid: Dim3::x(width.div_ceil(COLUMN_THREADS)),
                block: Dim3::x(COLUMN_THREADS),
                shared_bytes: 0,
                cluster: Dim3::ONE,
                args: vec![Arg::Output(0), Arg::Output(1), Arg::U32(rows), Arg::U32(width)],
            },
        ],
        scratch: vec![],
    }
}
