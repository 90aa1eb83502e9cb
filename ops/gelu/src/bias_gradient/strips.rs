//! The kernel body of each GELU gradient op's mage-004: [`strips`], one
//! launch in all. A block owns a strip of [`STRIP`] columns over every row:
//! it writes their dx and adds their dbias itself, so no partials go to
//! scratch and no second kernel adds them; the stages' entries call it
//! with their op's [`ElementGradient`] (see [`bias_gradient`](super)).
//!
//! Lane `l` of warp `w` takes column `strip·STRIP + l % STRIP` and rows
//! `w·4 + l / STRIP + 64·i`, [`BATCH`] rows at a time with all their loads
//! of x and dy issued before any is used; its sum of dx runs in row order.
//! The four lanes of a column in a warp are added by two butterfly steps
//! (the same bits in every lane), the warps' sums in warp order through
//! shared memory. Every addition's order follows from the shape alone, so
//! dbias is the same bits on every run; no floating-point atomics. dx is
//! the element's gradient of `x + bias`, as every stage rounds it.

use super::ElementGradient;
use mage_common::device::*;

/// Columns of a strip: eight lanes of a warp side by side, 32 bytes of a row.
pub const STRIP: u32 = 8;
/// Threads per block: 16 warps, each four rows of the strip at a time.
pub const THREADS: u32 = 512;
/// Rows the block covers at once.
pub const ROWS_AT_ONCE: u32 = THREADS / STRIP;
/// Rows a thread loads (x and dy) before it computes any.
pub const BATCH: u32 = 8;
/// Shared bytes: each warp's sum of each of the strip's columns.
pub const SHARED_BYTES: u32 = (THREADS / 32) * STRIP * 4;

/// Block `strip` of [`THREADS`] threads: dx of columns `strip·STRIP ..` of
/// every row and their dbias. Needs [`SHARED_BYTES`] of shared memory.
///
/// # Safety
/// As the kernel: x, dy and dx hold `rows·width` floats, bias and dbias
/// `width`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn strips<G: ElementGradient>(
    x: *const f32,
    bias: *const f32,
    dy: *const f32,
    dx: *mut f32,
    dbias: *mut f32,
    rows: u32,
    width: u32,
) {
    let t = thread_idx_x();
    let (lane, warp) = (t % 32, t / 32);
    let col = lane % STRIP;
    let c = block_idx_x() * STRIP + col;
    let first = warp * (32 / STRIP) + lane / STRIP;
    let mut acc = 0.0f32;
    if c < width {
        let b = unsafe { ld_nc(bias, c) };
        let mut r = first;
        while r < rows {
            let mut xv = [0.0f32; BATCH as usize];
            let mut dv = [0.0f32; BATCH as usize];
            for j in 0..BATCH {
                let rj = r + j * ROWS_AT_ONCE;
                if rj < rows {
                    unsafe {
                        xv[j as usize] = ld_nc(x, rj * width + c);
                        dv[j as usize] = ld_nc(dy, rj * width + c);
                    }
                }
            }
            for j in 0..BATCH {
                let rj = r + j * ROWS_AT_ONCE;
                if rj < rows {
                    let g = G::grad(xv[j as usize] + b, dv[j as usize]);
                    unsafe { st(dx, rj * width + c, g) };
                    acc += g;
                }
            }
            r += BATCH * ROWS_AT_ONCE;
        }
    }
    // The four lanes of the column in this warp (rows first, first + 1, ...).
    acc += shuffle_xor(acc, STRIP);
    acc += shuffle_xor(acc, 2 * STRIP);
    if lane < STRIP {
        smem_st(4 * (warp * STRIP + col), acc);
    }
    sync_threads();
    if t < STRIP && c < width {
        let mut total = smem_ld(4 * col);
        for w in 1..THREADS / 32 {
            total += smem_ld(4 * (w * STRIP + col));
        }
        unsafe { st(dbias, c, total) };
    }
}

/// The plan of a stage over [`strips`] (its entry `kernel`): one launch, a
/// block per strip of columns.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32], kernel: &'static mage_common::kernel::Kernel) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    let (rows, width) = (d[0], d[1]);
    Plan {
        launches: vec![Launch {
            kernel,
            grid: Dim3::x(width.div_ceil(STRIP)),
            block: Dim3::x(THREADS),
            shared_bytes: SHARED_BYTES,
            cluster: Dim3::ONE,
            args: vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output(0), Arg::Output(1), Arg::U32(rows), Arg::U32(width)],
        }],
        scratch: vec![],
    }
}
