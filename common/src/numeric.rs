//! Comparing outputs with f64 references, and the numerical contract
//! between the emulator and the PTX.
//!
//! # The contract
//!
//! The same kernel source computes on two machines. Where they may differ,
//! and by how much:
//!
//! | operation | on the GPU (PTX) | on the emulator (host) | bound on the difference |
//! |---|---|---|---|
//! | `a * b + c` written plainly | `mul.rn.f32` then `add.rn.f32`: rustc sets no contraction flag, and the `.rn` suffix forbids ptxas to fuse | two roundings | identical bits (`tests/contract.rs` reads the PTX; `gpu-check` compares on the GPU) |
//! | [`fma`](crate::device::fma) | `fma.rn.f32` | `f32::mul_add` (one rounding) | identical bits |
//! | [`sqrt`](crate::device::sqrt), `/` | `sqrt.rn.f32`, `div.rn.f32` | IEEE `sqrt`, `/` | identical bits |
//! | [`rsqrt_approx`](crate::device::rsqrt_approx) | `rsqrt.approx.f32` | `1/sqrt` in f64, rounded | relative [`RSQRT_APPROX_REL`] |
//! | [`tanh_approx`](crate::device::tanh_approx) | `tanh.approx.f32` | `tanh` in f64, rounded | relative [`TANH_APPROX_REL`] |
//! | [`ex2_approx`](crate::device::ex2_approx) | `ex2.approx.ftz.f32` | `exp2` in f64, rounded, subnormals flushed | relative [`EX2_APPROX_REL`] |
//! | warp and block reductions | order fixed by the kernel | same order | identical |
//!
//! The bounds on the approximate instructions are those the PTX ISA states
//! (`rsqrt.approx.f32` 2^-22.9, `ex2.approx.f32` 2^-22 over the full range,
//! `tanh.approx.f32` 2^-10.987), rounded up. The GPU self-check
//! (`cargo xtask gpu-check`) measures each instruction against the host
//! function on a spread of inputs and checks the bound, then runs every
//! stage on both machines and checks that outputs differ by at most
//! [`differential_bound`].

/// Relative error bound of `rsqrt.approx.f32` against the exact value.
pub const RSQRT_APPROX_REL: f64 = 1.5e-7; // 2^-22.9 = 1.27e-7
/// Relative error bound of `tanh.approx.f32` (2^-10.987 = 4.9e-4).
pub const TANH_APPROX_REL: f64 = 5.0e-4;
/// Relative error bound of `ex2.approx.ftz.f32` (2^-22 = 2.4e-7) for normal results.
pub const EX2_APPROX_REL: f64 = 2.5e-7;
/// A contracted multiply-add differs from the two-rounding form by at most
/// one rounding of the product. Today's toolchain contracts nothing; the
/// differential bound keeps this margin so a toolchain that starts to
/// contract is reported by the contract test, not by every stage.
pub const CONTRACTION_ULP: f64 = f32::EPSILON as f64 / 2.0;

/// Pass if `|out - ref| <= abs + rel * |ref|` for every element.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
}

impl Tolerance {
    pub const fn new(abs: f64, rel: f64) -> Self {
        Tolerance { abs, rel }
    }
    pub fn allows(&self, got: f32, want: f64) -> bool {
        got.is_finite() == want.is_finite() && (got as f64 - want).abs() <= self.abs + self.rel * want.abs()
    }
}

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "|out - ref| <= {:e} + {:e}·|ref|", self.abs, self.rel)
    }
}

/// How an output compares with its reference.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Comparison {
    pub elements: usize,
    /// Elements outside the tolerance (NaN counts).
    pub failures: usize,
    pub max_abs_err: f64,
    /// ‖out − ref‖₂ / ‖ref‖₂.
    pub rel_l2_err: f64,
    /// The element with the largest error relative to its allowance:
    /// (index, got, want).
    pub worst: Option<(usize, f32, f64)>,
    pub tolerance: Tolerance,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.failures == 0 && self.elements > 0
    }

    /// One line for a failure message or a report, for an output of this
    /// shape (outermost first).
    pub fn summary(&self, shape: &[usize]) -> String {
        let worst = match self.worst {
            Some((i, got, want)) => format!("; worst element {:?} (flat {i}): got {got:e}, want {want:e}", unravel(i, shape)),
            None => String::new(),
        };
        format!(
            "{} of {} elements outside {}; max abs err {:.3e}, rel L2 err {:.3e}{worst}",
            self.failures, self.elements, self.tolerance, self.max_abs_err, self.rel_l2_err
        )
    }
}

/// Flat index `i` of a row-major shape as one index per axis.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &extent) in index.iter_mut().zip(shape).rev() {
        *slot = i % extent.max(1);
        i /= extent.max(1);
    }
    index
}

/// Compares `out` with `reference` under `tol`.
pub fn compare(out: &[f32], reference: &[f64], tol: Tolerance) -> Comparison {
    assert_eq!(out.len(), reference.len(), "output and reference lengths differ");
    let (mut failures, mut max_abs, mut err2, mut ref2) = (0usize, 0f64, 0f64, 0f64);
    let mut worst: Option<(usize, f32, f64)> = None;
    let mut worst_ratio = -1.0f64;
    for (i, (&got, &want)) in out.iter().zip(reference).enumerate() {
        let err = (got as f64 - want).abs();
        let ratio = if got.is_nan() || !err.is_finite() { f64::INFINITY } else { err / (tol.abs + tol.rel * want.abs()) };
        if !tol.allows(got, want) {
            failures += 1;
        }
        if ratio > worst_ratio {
            worst_ratio = ratio;
            worst = Some((i, got, want));
        }
        max_abs = if err.is_nan() { f64::INFINITY } else { max_abs.max(err) };
        err2 += if err.is_finite() { err * err } else { f64::INFINITY };
        ref2 += want * want;
    }
    let rel_l2_err = if ref2 > 0.0 { (err2 / ref2).sqrt() } else { err2.sqrt() };
    Comparison { elements: out.len(), failures, max_abs_err: max_abs, rel_l2_err, worst, tolerance: tol }
}

/// How many elements of `a` and `b` differ in their bits: the check for
/// kernels that must compute exactly what another does (no tolerance, and
/// `-0.0` differs from `0.0`).
pub fn bits_differing(a: &[f32], b: &[f32]) -> usize {
    assert_eq!(a.len(), b.len(), "the outputs' lengths differ");
    a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits()).count()
}

/// How far the GPU and emulator outputs of one stage may be apart, for a
/// result that needed `terms` multiply-adds per element and whose kernel
/// uses `rsqrt.approx` at most once per element: contraction could move each
/// partial sum by one rounding of its product, the approximate reciprocal
/// square root moves the result by its bound.
pub fn differential_bound(terms: u64, magnitude: f64) -> f64 {
    (terms as f64 * CONTRACTION_ULP * 2.0 + RSQRT_APPROX_REL) * magnitude.max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_index_unravels_row_major() {
        assert_eq!(unravel(0, &[4, 128]), vec![0, 0]);
        assert_eq!(unravel(130, &[4, 128]), vec![1, 2]);
        assert_eq!(unravel(84 + 2 * 12 + 3, &[2, 7, 12]), vec![1, 2, 3]);
        assert_eq!(unravel(5, &[6]), vec![5]);
    }

    #[test]
    fn nan_and_unwritten_poison_fail() {
        let tol = Tolerance::new(1e-4, 1e-4);
        let c = compare(&[1.0, f32::NAN], &[1.0, 0.0], tol);
        assert_eq!(c.failures, 1);
        assert_eq!(c.worst.unwrap().0, 1);
        assert!(!c.passed());
    }

    #[test]
    fn tolerance_scales_with_reference() {
        let tol = Tolerance::new(1e-4, 1e-4);
        assert!(tol.allows(1000.05, 1000.0));
        assert!(!tol.allows(1000.2, 1000.0));
        assert!(tol.allows(0.0, 5e-5));
    }

    #[test]
    fn an_empty_output_does_not_pass() {
        assert!(!compare(&[], &[], Tolerance::new(1.0, 1.0)).passed());
    }
}
