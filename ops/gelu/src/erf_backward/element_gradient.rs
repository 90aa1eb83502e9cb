//! The arithmetic of one element of `gelu_erf_backward`, `dy·gelu'(x +
//! bias)` with `gelu'(z) = Φ(z) + z·φ(z)`, shared by mage-001 and mage-002
//! (the derivation is in [`mage_001`](super::mage_001)'s doc, the error
//! bound below). Frozen with mage-001: its bits are the ones every later
//! stage's dx must reproduce.
//! [`ErfGradient`] is this arithmetic as the shared kernel bodies of
//! [`bias_gradient`](crate::bias_gradient) take it.
//!
//! The exponents come from [`normal_cdf::exponents`], the exact GELU's own
//! (`erfc(t) = u·2^p·2^q`, `e^{−z²/2} = 2^p·2^gauss_q`, the large part `p`
//! shared and rounded, its rounding error carried in `q` and `gauss_q`).
//! Both terms of the gradient carry the factor `2^p`: on the negative side
//! it is taken as `h = 2^{p/2}` twice (`p/2` is exact), met by `dy` one
//! factor at a time, the bracket `(Φ + z·φ)/2^p` between them. Every
//! product on the way is at least the result in size (`h ≤ 1`, and
//! `|bracket|·h = |Φ + zφ|·e^{z²/4} < 1/2` for z < 0), so no intermediate
//! leaves FP32's normal range where dx does not, and dx stays normal
//! wherever the exact value is while `|dy| < 2^123`: `h` flushes only where
//! `p < −252`, where the exact `|dx|` is below `|dy|·2^-249`.
//!
//! # Error against f64 (u₂₄ = 2^-24 ≈ 6e-8)
//!
//! For the FP32 value of z, against the f64 `dy·(Φ(z) + z·φ(z))` of the
//! same z, measured on the host over z in [−20, 20] by steps of 1/2048
//! (and the extremes), `dy` of 1 and 2^100, `ex2` exact and at either
//! edge of `ex2.approx`'s 2^-22 (`tests/erf_backward.rs`,
//! `the_element_error_is_within_its_stated_bound`):
//!
//! ```text
//! |dx − dy·gelu'(z)| ≤ ELEMENT_ERROR·|dy|·(Φ(z) + |z|·φ(z))
//! ```
//!
//! with [`ELEMENT_ERROR`] = 1.1e-6 (measured: 1.04e-6 at z = −5.79 with
//! `ex2` at the high edge of its contract, 3.3e-7 at z = −11.03 with it
//! exact), plus 2^-126 where dx leaves FP32's normal range. Relative to
//! the terms' sizes, it holds where the two terms cancel (z ≈ −0.7518,
//! gelu's minimum) and deep in the negative tail. Where it comes from: Φ's `u·2^q` within 1.1e-6 of
//! itself (the fit, the polynomial, `ex2(q)`; [`normal_cdf`]'s doc), the
//! Gaussian's `2^gauss_q` within 2^-22 and a rounding, `h·h` two more
//! `ex2.approx` errors and a rounding, and a few roundings of the products
//! and the sum. The op's tolerance adds what `z = x + bias` rounded costs
//! (`u₂₄·|z·gelu''(z)|`, in the magnitudes of
//! [`reference`](fn@super::reference)).

use crate::bias_gradient::ElementGradient;
use crate::erf::normal_cdf::{self, Exponents};
use mage_common::device::{ex2_approx, fma};

/// `1/√(2π)`: `φ(z) = e^{−z²/2}/√(2π)`.
pub const FRAC_1_SQRT_2PI: f32 = 0.398_942_280_401_432_7;

/// The stated bound of [`gelu_erf_grad_with`] against f64, relative to
/// `|dy|·(Φ(z) + |z|·φ(z))` (the module doc).
pub const ELEMENT_ERROR: f64 = 1.1e-6;

/// `dy·gelu'(z)`, `gelu'(z) = Φ(z) + z·φ(z)`, with `ex2` standing for
/// `ex2.approx` (the kernels pass
/// [`ex2_approx`]; tests pass it perturbed
/// to the edges of its contract).
///
/// ```text
/// h = ex2(p/2)                      = 2^{p/2} ≈ e^{−z²/4}
/// c = 0.5·u·ex2(q)                  = erfc(|z|/√2)/(2·2^p)
/// d = (zc·(1/√(2π)))·ex2(gauss_q)   = z·φ(z)/2^p
/// z ≥ 0:  dx = dy·fma(d, h·h, fma(−c, h·h, 1))     Φ = 1 − c·2^p
/// z < 0:  dx = ((dy·h)·(c + d))·h                   Φ = c·2^p
/// ```
#[inline(always)]
pub fn gelu_erf_grad_with(z: f32, dy: f32, ex2: impl Fn(f32) -> f32) -> f32 {
    let Exponents { zc, u, p, q, gauss_q } = normal_cdf::exponents(z);
    let h = ex2(0.5 * p);
    let c = 0.5 * u * ex2(q);
    let d = (zc * FRAC_1_SQRT_2PI) * ex2(gauss_q);
    if z >= 0.0 {
        let big = h * h;
        dy * fma(d, big, fma(-c, big, 1.0))
    } else {
        ((dy * h) * (c + d)) * h
    }
}

/// `gelu_erf_backward`'s element for the shared kernel bodies of
/// [`bias_gradient`](crate::bias_gradient): [`gelu_erf_grad_with`] over
/// [`ex2_approx`].
pub struct ErfGradient;

impl ElementGradient for ErfGradient {
    #[inline(always)]
    fn grad(z: f32, dy: f32) -> f32 {
        gelu_erf_grad_with(z, dy, ex2_approx)
    }
}
