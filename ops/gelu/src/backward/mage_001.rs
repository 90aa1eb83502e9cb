//! gelu_backward mage-001: a thread per element for dx, a thread per
//! column for dbias, rows in order.
//!
//! Kernel body: [`crate::bias_gradient::columns`] (`elements` and
//! `columns`, shared with gelu_erf_backward mage-001; frozen history), of
//! which this module declares the entries `gelu_backward_elements` and
//! `gelu_backward_columns`; the element's arithmetic, [`gelu_grad_with`]
//! (as [`TanhGradient`]), in
//! [`element_gradient`](super::element_gradient), shared with mage-002
//! (its constants `A0` and `A1` in the crate root, shared with the forward
//! stages, and `W0` and `W1` in [`backward`](super)).
//!
//! The plain form, written to be obviously right. With `z = x + bias`,
//! `u = √(2/π)(z + 0.044715 z³)`, `σ = σ(2u) = (1 + tanh u)/2` and `w =
//! z·d(2u)/dz`, the gradient's two terms are `0.5(1 + t) = σ` and
//! `0.5·z·(1 − t²)·√(2/π)(1 + 3·0.044715 z²) = w·σ(1 − σ)`, so
//! `dx = dy·σ·(1 + w·(1 − σ))`. The first kernel gives each element a
//! thread (the flat grid of forward mage-001) and builds σ and 1 − σ from
//! one exponential of the negative half, no cancellation anywhere:
//!
//! ```text
//! s = z·fma(A1, z², A0)      = 2u·log2(e)
//! w = z·fma(W1, z², W0)      = 2√(2/π)·z·(1 + 3·0.044715 z²)
//! h = ex2.approx(−|s|/2)     = e^{−|u|}
//! q = h·h,  r = 1/(1 + q)    = e^{−2|u|}, the larger of σ and 1 − σ
//! z ≥ 0:  dx = dy·r·(1 + w·(q·r))              σ = r,   1 − σ = q·r
//! z < 0:  dx = ((dy·h)·h)·r·(1 + w·r)          σ = q·r, 1 − σ = r
//! ```
//!
//! On the negative side `dy` meets `h` one factor at a time, so `dx` stays
//! in FP32's normal range wherever the exact value is (`q` alone leaves it
//! at |s| > 126, near z = −10, where `dy·q` may still be far above 2^-126).
//! `w` is formed from z clamped to ±32: beyond |z| ≈ 13 `h` is 0, and the
//! clamp keeps `w` finite, so `w·0` is 0 and not NaN. The second kernel
//! gives each column a thread that adds the column's dx, as stored, row
//! after row: dbias is the same bits on every run, no floating-point
//! atomics, one fixed summation order.
//!
//! # Error analysis (u₂₄ = 2^-24 ≈ 6e-8)
//!
//! 1. `z = x + bias` rounded: the exact gradient moves by at most
//!    `u₂₄·|z·gelu''(z)|`, and `z·gelu'' = σ(1 − σ)·(w + z·w' + w²(1 − 2σ))`
//!    with `|z·w'| ≤ 3|w|` and `|w| ≤ 3·|2u|`: at most
//!    `7u₂₄·(1 + |2u|)(1 + |w|)·σ(1 − σ)`.
//! 2. `s` is five roundings from `2u·log2 e` (as in forward mage-001): `q`
//!    carries a relative error `5u₂₄·|2u|`, plus `ex2.approx` twice (2·2^-22)
//!    and the rounding of `h·h`: δq ≤ 6e-7 + 3e-7·|2u|.
//! 3. `r = 1/(1 + q)` moves by `σ(1 − σ)·δq` and two roundings; `q·r` by
//!    δq and three: σ is off by at most `2σ(1 − σ)·δq + 3u₂₄σ` (on the
//!    negative side σ ≤ 2σ(1 − σ)), `w·σ(1 − σ)` by `2δq` relative and
//!    four roundings of `w`.
//! 4. The products and the sum: six more roundings, relative to the terms.
//!
//! In all, `|dx − dy·gelu'(z)| ≤ |dy|·(6e-7·σ + 3.3e-6·(1 + |2u|)(1 + |w|)·σ(1 − σ))`
//! for finite z while `|dy| ≤ 2^116` (where `h` flushes, |s| > 252, the
//! exact `|dx|` is below `|dy|·2^-242`); results below 2^-126 are off by a
//! few 2^-150 at most. The op's tolerance is 1e-4 of the magnitude
//! `|dy|·(σ + (1 + |2u|)(σ(1 − σ) + |w|σ(1 − σ)))`: a margin of about 30.
//! dbias adds `γ_(rows+2)` of `Σ_r |dx|` (see [`reference`](super::reference)).
//! The GPU and the emulator differ only through `ex2.approx`.
//!
//! Not measured yet: it is the reference point later stages are judged
//! against.

use super::element_gradient::TanhGradient;
pub use super::element_gradient::{W_CLAMP, gelu_grad_with};
pub use crate::bias_gradient::columns::{COLUMN_THREADS, THREADS};
use crate::bias_gradient::columns::{columns, elements};

mage_common::kernel! {
    /// Thread `i` of the flat grid writes `dx[i]`.
    pub unsafe fn gelu_backward_elements(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, rows: u32, width: u32) {
        unsafe { elements::<TanhGradient>(x, bias, dy, dx, rows, width) }
    }
}

mage_common::kernel! {
    /// One thread per column: `dbias[c] = Σ_r dx[r, c]`, rows in order, from
    /// the dx the element kernel stored (written by that launch, read-only in this one).
    pub unsafe fn gelu_backward_columns(dx: *const f32, dbias: *mut f32, rows: u32, width: u32) {
        unsafe { columns(dx, dbias, rows, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "a thread per element for dx (σ and 1 − σ from one ex2.approx), a thread per column for dbias, rows in order",
    kernels: &[&gelu_backward_elements::KERNEL, &gelu_backward_columns::KERNEL],
    supports: |_| true,
    plan: |d| crate::bias_gradient::columns::plan(d, &gelu_backward_elements::KERNEL, &gelu_backward_columns::KERNEL),
};
