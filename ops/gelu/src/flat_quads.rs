//! The kernel body of gelu's and gelu_erf's mage-003: bias + an
//! activation over the matrix taken as one flat run of `rows·width`
//! elements, 128-bit quads of that run whatever the width, the bias
//! column carried along incrementally; the stages' entries call
//! [`flat_quads`] with their op's [`Activation`]. The plan gives each quad
//! a thread (mage-002's grid); the body takes any grid, each thread
//! stepping over the quads, so a shorter grid is still right (the tests
//! run one) but not the plan: one resident wave striding over the quads,
//! try-gelu-stride in `docs/attempts.md`, lost 5-10% to a thread a quad
//! at three of four sweep shapes.
//!
//! Quad `q` is elements `4q..4q + 4` of the flat run: where `x` and `y`
//! are 16-byte aligned it is one `ld.global.nc.v4.f32` and one
//! `st.global.v4.f32`, even where it straddles two rows (the width need
//! not be a multiple of 4). Its four biases are four scalar loads (the
//! bias row is a few KB, read from L1), at columns `c, c + 1, ...` wrapped
//! at the width. A thread starts at quad `t` (its global index) with `c =
//! 4t mod width` and steps by the grid's thread count `T`, its column by
//! `4T mod width`: two integer divisions a thread, none an element. The
//! last `rows·width mod 4` elements are one scalar each, for the first
//! threads. Where `x` or `y` is not 16-byte aligned, every element is a
//! scalar access (`i mod width` each): slower, never wrong.

use mage_common::device::*;

/// Threads per block.
pub const THREADS: u32 = 256;

/// The activation of one element, `y = act(z)` with `z = x + bias` as the
/// kernel rounded it: the one thing the shared body leaves to the op.
pub trait Activation {
    /// `act(z)`, as the op's stages compute it on the GPU.
    fn y(z: f32) -> f32;
}

/// `c + 1`, wrapped at `width` (`c < width`).
#[inline(always)]
fn next(c: u32, width: u32) -> u32 {
    if c + 1 == width { 0 } else { c + 1 }
}

/// The biases of columns `c, c + 1, c + 2, c + 3`, each wrapped at `width`.
///
/// # Safety
/// `bias` holds `width` floats, `c < width`.
#[inline(always)]
unsafe fn bias_quad(bias: *const f32, c: u32, width: u32) -> F32x4 {
    let c1 = next(c, width);
    let c2 = next(c1, width);
    let c3 = next(c2, width);
    unsafe { F32x4::new(ld_nc(bias, c), ld_nc(bias, c1), ld_nc(bias, c2), ld_nc(bias, c3)) }
}

/// `y[i] = A::y(x[i] + bias[i mod width])` for every `i < rows·width`, a
/// grid of [`THREADS`]-thread blocks (any count) stepping over the flat
/// run's quads, then its scalar tail. One quad an iteration: a loop of two
/// (both loads issued before either is used) took the exact form's entry
/// from 32 registers to 40, six blocks an SM instead of eight, for a step
/// the plan's grid never takes.
///
/// # Safety
/// As the kernel: x and y hold `rows·width` floats, bias `width`.
#[inline(always)]
pub unsafe fn flat_quads<A: Activation>(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
    let n = rows * width;
    if n == 0 {
        return;
    }
    // SAFETY: n > 0, so width > 0 (drops the division-by-zero checks).
    unsafe { core::hint::assert_unchecked(width > 0) };
    let threads = grid_dim_x() * THREADS;
    let t = block_idx_x() * THREADS + thread_idx_x();
    let act = |z: F32x4| z.map(|z| A::y(z));
    if (x as usize | y as usize).is_multiple_of(16) {
        let quads = n / 4;
        let step = (4 * threads) % width;
        let wrap = |c: u32| if c >= width { c - width } else { c };
        let mut q = t;
        let mut c = (4 * t) % width;
        unsafe {
            while q < quads {
                let i0 = 4 * q;
                let z = ld_nc4(x, i0).zip(bias_quad(bias, c, width), |x, b| x + b);
                st4(y, i0, act(z));
                q += threads;
                c = wrap(c + step);
            }
            let i = 4 * quads + t;
            if i < n {
                st(y, i, A::y(ld_nc(x, i) + ld_nc(bias, i % width)));
            }
        }
    } else {
        let mut i = t;
        while i < n {
            unsafe { st(y, i, A::y(ld_nc(x, i) + ld_nc(bias, i % width))) };
            i += threads;
        }
    }
}

/// The blocks of a launch of [`flat_quads`] at `rows × width`: a thread a
/// quad (the scalar tail's threads among them).
pub fn blocks(rows: u32, width: u32) -> u32 {
    (rows * width).div_ceil(4).div_ceil(THREADS).max(1)
}

/// The plan of a stage over [`flat_quads`] (its entry `kernel`): one launch
/// of [`blocks`] blocks.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32], kernel: &'static mage_common::kernel::Kernel) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    mage_common::op::Launch {
        kernel,
        grid: Dim3::x(blocks(d[0], d[1])),
        block: Dim3::x(THREADS),
        shared_bytes: 0,
        cluster: Dim3::ONE,
        args: crate::args(d[0], d[1]),
    }
    .into()
}
