//! The tanh form as a logistic function, `gelu(z) = z·σ(2u)`, with no
//! division: the arithmetic of [`mage_002`](crate::mage_002), where its
//! derivation and error analysis are, and of
//! [`mage_003`](crate::mage_003). Frozen with mage-002: a stage that
//! shares it computes the same bits.

use mage_common::device::fma;

/// `−2·log2(e)·√(2/π)`: `s = z·(B0 + B1·z²) = −2u·log2(e)`.
pub const B0: f32 = -crate::A0;
/// `B0 · 0.044715`.
pub const B1: f32 = -crate::A1;

/// `gelu(z) = z·σ(2u)` with `ex2` and `rsqrt` standing for `ex2.approx` and
/// `rsqrt.approx` (tests pass them perturbed to the edges of their contract).
#[inline(always)]
pub fn gelu_with(z: f32, ex2: impl Fn(f32) -> f32, rsqrt: impl Fn(f32) -> f32) -> f32 {
    let s = z * fma(B1, z * z, B0);
    let r = rsqrt(1.0 + ex2(s));
    z * (r * r)
}
