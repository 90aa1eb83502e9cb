//! The arithmetic of one element of `gelu_backward`, `dy·gelu'(x + bias)`,
//! shared by every stage (the derivation and error bound are in
//! [`mage_001`](super::mage_001)'s doc). Frozen with mage-001: its bits are
//! the ones every later stage's dx must reproduce. [`TanhGradient`] is
//! this arithmetic as the shared kernel bodies of
//! [`bias_gradient`](crate::bias_gradient) take it.

use super::{W0, W1};
use crate::bias_gradient::ElementGradient;
use crate::{A0, A1};
use mage_common::device::{ex2_approx, fma};

/// `w` is formed from z clamped to ±this: past |z| ≈ 13 `ex2` is 0 already.
pub const W_CLAMP: f32 = 32.0;

/// `dy·gelu'(z)` with `ex2` standing for `ex2.approx` (the kernel passes
/// [`ex2_approx`]; tests pass it perturbed to the edge of its contract).
#[inline(always)]
pub fn gelu_grad_with(z: f32, dy: f32, ex2: impl Fn(f32) -> f32) -> f32 {
    let z2 = z * z;
    let s = z * fma(A1, z2, A0);
    let zc = z.clamp(-W_CLAMP, W_CLAMP);
    let w = zc * fma(W1, zc * zc, W0);
    let h = ex2(-0.5 * s.abs());
    let q = h * h;
    let r = 1.0 / (1.0 + q);
    if z >= 0.0 { dy * r * (1.0 + w * (q * r)) } else { (dy * h) * h * r * (1.0 + w * r) }
}

/// `gelu_backward`'s element for the shared kernel bodies:
/// [`gelu_grad_with`] over [`ex2_approx`].
pub struct TanhGradient;

impl ElementGradient for TanhGradient {
    #[inline(always)]
    fn grad(z: f32, dy: f32) -> f32 {
        gelu_grad_with(z, dy, ex2_approx)
    }
}
