//! Φ(z), the standard normal distribution function, in FP32 on the GPU:
//! the kernel body of the exact GELU's stages ([`super::mage_001`],
//! [`super::mage_002`]), and through [`exponents`] the exponents of its
//! gradient's ([`crate::erf_backward::element_gradient`]). nvptx has no
//! libm, so `erfc` comes from a fit:
//!
//! ```text
//! erfc(t) = u·exp(−t² + P(u)),   u = 1/(1 + t/2),   t = |z|/√2
//! ```
//!
//! with `P` the degree-9 polynomial of the classic Chebyshev fit
//! (Numerical Recipes' `erfcc`), whose relative error is below 1.05e-7 for
//! every t ≥ 0 (checked against f64 in `tests/erf.rs`). Then `Φ(z) = erfc(t)/2`
//! for z < 0 and `1 − erfc(t)/2` for z ≥ 0: the negative tail is a product
//! of positive numbers, with no cancellation, so Φ keeps its relative
//! accuracy down to FP32's smallest normal numbers.
//!
//! The exponent is where FP32 would lose it: `t² = z²/2` reaches 85 before
//! Φ leaves FP32's range, and one rounding there is 4e-6 of the result.
//! So `z²` is kept as `s + e` (`e = fma(z, z, −s)`, exact), halved exactly,
//! and `2^{(−t² + P)·log2 e}` taken as `ex2(p)·ex2(q)`: `p` the rounded
//! product `a·log2 e` of the large part `a = −s/2`, `q` everything small
//! (the product's own rounding error from an FMA, `a` times the part of
//! log2 e a float misses, and `(P − e/2)·log2 e`).
//!
//! # Error (u₂₄ = 2^-24 ≈ 6e-8)
//!
//! The fit 1.05e-7; `P(u)` in Horner form, |P| ≤ 1.3 with terms of a
//! similar size: a few u₂₄ of the exponent; `q`: 2u₂₄·|q| with |q| ≤ 2;
//! `u` rounded twice (its error is damped by the fit's smoothness: `u`'s
//! relative error δ moves erfc by δ·|1 + u·P'(u)| ≤ 2δ); the products:
//! 3u₂₄. With `ex2` exact, a dense sweep of z in [−18, 18] in FP32 gave at
//! most 5.2e-7 relative error of Φ (at z = −12.4; `tests/erf.rs` replays
//! the same arithmetic). `ex2.approx` adds up to 2^-22 per call: Φ is
//! within 1.1e-6 of its value relative to itself, for every FP32 z whose
//! Φ is a normal FP32 number. `1 − erfc/2` on the positive side is
//! within 0.6e-6 absolute, so relative to Φ ≥ 1/2 as well.

use mage_common::device::fma;

/// The fit's coefficients, `P(u) = C[0] + u·(C[1] + u·(C[2] + ...))`.
pub const C: [f32; 10] = [
    -1.265_512_2,
    1.000_023_7,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_204,
    1.488_515_9,
    -0.822_152_2,
    0.170_872_77,
];
/// `log2 e` as a float, and what the float misses of it.
pub const LOG2_E: f32 = core::f64::consts::LOG2_E as f32;
pub const LOG2_E_LO: f32 = (core::f64::consts::LOG2_E - LOG2_E as f64) as f32;
/// Where [`normal_cdf_with`] clamps z: `e^{−200}` is far below FP32's range.
pub const CLAMP: f32 = 20.0;
/// `1/√2`.
pub const FRAC_1_SQRT_2: f32 = core::f64::consts::FRAC_1_SQRT_2 as f32;

/// The exponents of `erfc(|z|/√2)` and of the Gaussian `e^{−z²/2}`,
/// before any exponential is taken: `erfc(t) = u·2^p·2^q` and `e^{−z²/2} =
/// 2^p·2^gauss_q`, `p` the rounded large part both share and `q`,
/// `gauss_q` everything small (module doc). [`normal_cdf_with`] takes the
/// exponentials of these; the exact GELU's gradient
/// ([`crate::erf_backward::element_gradient`]) takes them its own way.
#[derive(Clone, Copy, Debug)]
pub struct Exponents {
    /// z clamped to ±[`CLAMP`].
    pub zc: f32,
    /// The fit's variable, `1/(1 + t/2)`.
    pub u: f32,
    /// `−z²/2·log2 e`, rounded: the large part.
    pub p: f32,
    /// The rest of erfc's exponent (`−t² + P(u)` in base 2, less `p`).
    pub q: f32,
    /// The rest of the Gaussian's exponent (`−z²/2` in base 2, less `p`).
    pub gauss_q: f32,
}

/// [`Exponents`] of `z`, for any finite z (clamped to ±[`CLAMP`] first).
#[inline(always)]
pub fn exponents(z: f32) -> Exponents {
    // Beyond ±20, Φ is 0 or 1 and the Gaussian 0 in FP32; the clamp keeps
    // `z²` finite (no ∞ − ∞ in the FMA below) for any finite z.
    let zc = z.max(-CLAMP).min(CLAMP);
    let t = zc.abs() * FRAC_1_SQRT_2;
    let u = 1.0 / (1.0 + 0.5 * t);
    let mut poly = C[9];
    poly = fma(poly, u, C[8]);
    poly = fma(poly, u, C[7]);
    poly = fma(poly, u, C[6]);
    poly = fma(poly, u, C[5]);
    poly = fma(poly, u, C[4]);
    poly = fma(poly, u, C[3]);
    poly = fma(poly, u, C[2]);
    poly = fma(poly, u, C[1]);
    poly = fma(poly, u, C[0]);
    // −t² = a − e/2 exactly, a = −z²/2 rounded.
    let s = zc * zc;
    let e = fma(zc, zc, -s);
    let a = -0.5 * s;
    let p = a * LOG2_E;
    let p_err = fma(a, LOG2_E, -p);
    let gauss_q = p_err + a * LOG2_E_LO - 0.5 * e * LOG2_E;
    let q = p_err + fma(a, LOG2_E_LO, fma(-0.5, e, poly) * LOG2_E);
    Exponents { zc, u, p, q, gauss_q }
}

/// `(Φ(z), e^{−z²/2})`, with `ex2` standing for `ex2.approx` (the kernels
/// pass [`ex2_approx`](mage_common::device::ex2_approx); tests pass it
/// perturbed to the edges of its contract). The second value is the
/// Gaussian's `√(2π)·φ(z)`, for the gradient.
#[inline(always)]
pub fn normal_cdf_with(z: f32, ex2: impl Fn(f32) -> f32) -> (f32, f32) {
    let Exponents { u, p, q, gauss_q, .. } = exponents(z);
    let gauss_tail = ex2(gauss_q);
    let big = ex2(p);
    let erfc = u * big * ex2(q);
    let phi = if z >= 0.0 { 1.0 - 0.5 * erfc } else { 0.5 * erfc };
    (phi, big * gauss_tail)
}
