//! gelu_erf_backward mage-001: a thread per element for dx, a thread per
//! column for dbias, rows in order.
//!
//! Kernel body: [`crate::bias_gradient::columns`] (`elements` and
//! `columns`, shared with gelu_backward mage-001; frozen history), of
//! which this module declares the entries `gelu_erf_backward_elements` and
//! `gelu_erf_backward_columns`; the element's arithmetic,
//! [`gelu_erf_grad_with`] (as
//! [`ErfGradient`]), in
//! [`element_gradient`](super::element_gradient), shared with mage-002
//! (its exponents from [`normal_cdf::exponents`](crate::erf::normal_cdf::exponents),
//! the forward stages' Φ).
//!
//! The plain form, written to be obviously right, in the shape of
//! gelu_backward's mage-001. With `z = x + bias`, `gelu(z) = z·Φ(z)`, so
//! `gelu'(z) = Φ(z) + z·φ(z)` and `dx = dy·gelu'(z)`. The first kernel
//! gives each element a thread (the flat grid of gelu_erf mage-001) and
//! computes both terms from one set of exponents: `erfc(|z|/√2) =
//! u·2^p·2^q` (Φ's fit) and `e^{−z²/2} = √(2π)·φ(z) = 2^p·2^gauss_q`, the
//! large part `2^p` common to both. On the positive side `Φ = 1 −
//! erfc/2`, `z·φ ≥ 0` and the sum has no cancellation; on the negative
//! side `Φ = erfc/2` and `z·φ < 0`, both carried by `2^p`, which is taken
//! last as `2^{p/2}` twice, `dy` meeting it one factor at a time: dx stays
//! in FP32's normal range wherever the exact value is (for `|dy| <
//! 2^123`). The two terms cancel at gelu's minimum (z ≈ −0.7518); the
//! error is relative to their sizes, which the tolerance's magnitudes are
//! built from. The arithmetic and its error against f64 (within 1.1e-6 of
//! `|dy|·(Φ + |z|φ)`) are in [`element_gradient`](super::element_gradient).
//! The second kernel gives each column a thread that adds the column's dx,
//! as stored, row after row: dbias is the same bits on every run, no
//! floating-point atomics, one fixed summation order.
//!
//! The reference point later stages are judged against: 155.89 µs at
//! 4096x768 (`results/backward-5`, CUPTI kernel time, hot L2), the
//! column pass's 768 threads walking 4096 rows each.

use super::element_gradient::ErfGradient;
pub use super::element_gradient::gelu_erf_grad_with;
pub use crate::bias_gradient::columns::{COLUMN_THREADS, THREADS};
use crate::bias_gradient::columns::{columns, elements};

mage_common::kernel! {
    /// Thread `i` of the flat grid writes `dx[i]`.
    pub unsafe fn gelu_erf_backward_elements(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, rows: u32, width: u32) {
        unsafe { elements::<ErfGradient>(x, bias, dy, dx, rows, width) }
    }
}

mage_common::kernel! {
    /// One thread per column: `dbias[c] = Σ_r dx[r, c]`, rows in order, from
    /// the dx the element kernel stored (written by that launch, read-only in this one).
    pub unsafe fn gelu_erf_backward_columns(dx: *const f32, dbias: *mut f32, rows: u32, width: u32) {
        unsafe { columns(dx, dbias, rows, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "a thread per element for dx (Φ and φ from one set of two-part exponents), a thread per column for dbias, rows in order",
    kernels: &[&gelu_erf_backward_elements::KERNEL, &gelu_erf_backward_columns::KERNEL],
    supports: |_| true,
    plan: |d| crate::bias_gradient::columns::plan(d, &gelu_erf_backward_elements::KERNEL, &gelu_erf_backward_columns::KERNEL),
};
