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

/// Pass if `|out - ref| <= abs + rel·|ref| + of_magnitude·m` for every
/// element, where `m` is the element's magnitude in the [`Reference`]: for
/// a sum of products, `Σ |terms|` of that element, computed from the inputs
/// beside the reference. A bound scaled by `m` follows the data: inputs
/// scaled by `s` scale the allowance by `s²` (for a product of two), so the
/// same check holds at 1e-6 and at 1e15, and an output of zeros fails
/// wherever the reference is not zero.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
    /// Allowance per unit of the element's magnitude.
    #[serde(default)]
    pub of_magnitude: f64,
}

/// The smallest normal f32, `2^-126`: the allowance ops add for results
/// whose terms fall below FP32's normal range, where the GPU may flush
/// them to zero (`.ftz` instructions, tensor cores) and every bound
/// relative to the data stops holding.
pub const FLUSHED: f64 = f32::MIN_POSITIVE as f64;

impl Tolerance {
    /// `|out - ref| <= abs + rel·|ref|`.
    pub const fn new(abs: f64, rel: f64) -> Self {
        Tolerance { abs, rel, of_magnitude: 0.0 }
    }
    /// `|out - ref| <= abs + of_magnitude·m`, `m` the element's magnitude.
    pub const fn of_magnitude(abs: f64, of_magnitude: f64) -> Self {
        Tolerance { abs, rel: 0.0, of_magnitude }
    }
    /// What an element of reference `want` and magnitude `magnitude` may be off by.
    pub fn allowance(&self, want: f64, magnitude: f64) -> f64 {
        self.abs + self.rel * want.abs() + self.of_magnitude * magnitude
    }
    pub fn allows(&self, got: f32, want: f64, magnitude: f64) -> bool {
        got.is_finite() == want.is_finite() && (got as f64 - want).abs() <= self.allowance(want, magnitude)
    }
}

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "|out - ref| <= {:e}", self.abs)?;
        if self.rel != 0.0 || self.of_magnitude == 0.0 {
            write!(f, " + {:e}·|ref|", self.rel)?;
        }
        if self.of_magnitude != 0.0 {
            write!(f, " + {:e}·m", self.of_magnitude)?;
        }
        Ok(())
    }
}

/// An op's f64 reference for one call: each output element's value and,
/// for ops whose tolerance is scaled by it, its magnitude (for a sum of
/// products, `Σ |terms|`), computed in the same pass. `magnitudes` is
/// empty where the tolerance uses none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reference {
    pub values: Vec<f64>,
    pub magnitudes: Vec<f64>,
}

impl Reference {
    /// A reference without magnitudes.
    pub fn plain(values: Vec<f64>) -> Reference {
        Reference { values, magnitudes: vec![] }
    }
    pub fn len(&self) -> usize {
        self.values.len()
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    /// Element `i`'s magnitude (0 where there are none).
    pub fn magnitude(&self, i: usize) -> f64 {
        self.magnitudes.get(i).copied().unwrap_or(0.0)
    }
    /// The same magnitudes with other values: an independent output (an
    /// `expected.bin`) held to the bound of the same inputs.
    pub fn with_values(&self, values: Vec<f64>) -> Reference {
        assert_eq!(values.len(), self.values.len(), "the values and the reference differ in length");
        Reference { values, magnitudes: self.magnitudes.clone() }
    }
    /// Appends another block of rows (the reference split over threads).
    pub fn extend(&mut self, other: Reference) {
        self.values.extend(other.values);
        self.magnitudes.extend(other.magnitudes);
    }
    /// A refusal where an element's magnitude passes FP32's range: the
    /// exact result or a partial sum may not be representable, so no FP32
    /// kernel can be held to a bound there. `what` names the inputs.
    pub fn check_fp32_range(&self, what: &str, shape: &[usize]) -> Result<(), String> {
        self.check_fp32_range_with(what, |i| format!("{:?}", unravel(i, shape)))
    }

    /// [`Reference::check_fp32_range`] with each element named by
    /// `locate` (an op of several outputs names the output and its index).
    pub fn check_fp32_range_with(&self, what: &str, locate: impl Fn(usize) -> String) -> Result<(), String> {
        let limit = f32::MAX as f64;
        let over = self.values.iter().map(|v| v.abs()).chain(self.magnitudes.iter().copied()).position(|m| m > limit);
        match over {
            None => Ok(()),
            Some(j) => {
                let i = j % self.values.len().max(1);
                Err(format!(
                    "{what}: output {} sums terms of magnitude {:.3e}, beyond FP32's range ({limit:.3e}); scale the inputs down",
                    locate(i),
                    self.magnitude(i).max(self.values[i].abs())
                ))
            }
        }
    }
}

/// `erfc(x)` in f64, to about 1e-15 relative for any x (the references of
/// the exact GELU; Rust's `f64` has no `erf`). For `|x| < 2.5`, `1 − erf`
/// with erf from its series of positive terms, `erf(x) = 2/√π·e^{−x²}·Σ_n
/// 2^n x^{2n+1}/(1·3···(2n+1))`; beyond, the continued fraction `erfc(x) =
/// e^{−x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`, evaluated
/// from the bottom; `erfc(−x) = 2 − erfc(x)`.
pub fn erfc_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return 2.0 - erfc_f64(-x);
    }
    if x < 1.0 {
        return 1.0 - erf_series(x);
    }
    if x > 27.3 {
        return 0.0;
    }
    let mut f = x;
    for n in (1..=if x < 2.5 { 200 } else { 60 }).rev() {
        f = x + (n as f64 / 2.0) / f;
    }
    (-x * x).exp() / core::f64::consts::PI.sqrt() / f
}

/// `erf(x)` in f64: the series of [`erfc_f64`] where `|x| < 2.5`, `1 −
/// erfc` beyond.
pub fn erf_f64(x: f64) -> f64 {
    if x.abs() < 2.5 { erf_series(x) } else { x.signum() * (1.0 - erfc_f64(x.abs())) }
}

fn erf_series(x: f64) -> f64 {
    let (x2, mut term, mut sum) = (x * x, x, x);
    for n in 1..200 {
        term *= 2.0 * x2 / (2 * n + 1) as f64;
        sum += term;
        if term.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    2.0 / core::f64::consts::PI.sqrt() * (-x2).exp() * sum
}

/// The unit roundoff of FP32 round-to-nearest, 2^-24.
pub const U: f64 = f32::EPSILON as f64 / 2.0;

/// `γ_n = n e / (1 - n e)` for an error of at most `e` per operation, with
/// `n e` capped at 1/2 (which only matters past n ≈ 2^23 at `e = u`).
pub fn gamma(n: u64, e: f64) -> f64 {
    let ne = (n as f64 * e).min(0.5);
    ne / (1.0 - ne)
}

/// The tolerance of an output that is a sum of at most `terms` products,
/// each formed and added in FP32 with one rounding per operation, in any
/// order: `|out - ref| <= terms·2^-126 + γ_(terms+2)·m`, `m = Σ |terms|`.
///
/// Why it is sound: a sum of `n` numbers in floating point, in any order
/// (a chain, a tree, partial sums added later), satisfies `|ŝ - s| <=
/// γ_(n-1) Σ |x_i|` (Higham, *Accuracy and Stability of Numerical
/// Algorithms*, §4.2), and forming each product by a rounded multiply (or
/// in the same rounding, by `fma`) adds one more `u` per term: `γ_n Σ |a_p
/// b_p|`. One more `u` covers an `expected.bin` rounded to f32, and the f64
/// reference's own error (`γ_n` at 2^-53) hides under the cap's slack. The
/// bound is the worst case over every rounding, for every input: nothing
/// in it depends on how the inputs were drawn. It stops holding only where
/// products fall below FP32's normal range (subnormal, or flushed to zero
/// by the GPU), which the `terms·2^-126` allows for, and where `m` passes
/// FP32's range ([`Reference::check_fp32_range`] refuses those inputs).
pub fn sum_of_products(terms: u64) -> Tolerance {
    Tolerance::of_magnitude(terms as f64 * FLUSHED, gamma(terms + 2, U))
}

/// How an output compares with its reference: the one check rule of
/// `run`, `sweep`, `gpu-check`, `expected.bin`, `evolve` and, through the
/// module's `mage.compare`, `compare`'s harness.
///
/// NaN outputs count as failures and in `nan_count`; the error statistics
/// are over the other elements, and are infinite (`null` in JSON) where an
/// error is infinite, where no element is left, or where the reference they
/// are relative to is zero and the error is not.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Comparison {
    pub elements: usize,
    /// Elements outside the tolerance (NaN counts).
    pub failures: usize,
    /// Outputs that are NaN (an unwritten element is: the poison).
    #[serde(default)]
    pub nan_count: usize,
    /// Largest `|out − ref|` over the outputs that are not NaN.
    pub max_abs_err: f64,
    /// ‖out − ref‖₂ / ‖ref‖₂ over the outputs that are not NaN (the
    /// Frobenius-relative error).
    pub rel_l2_err: f64,
    /// `max_abs_err` over the largest `|ref|` there: an error relative to
    /// the output's scale that a reference element near zero cannot blow up.
    #[serde(default)]
    pub max_rel_err: f64,
    /// The element with the largest error relative to its allowance:
    /// (index, got, want).
    pub worst: Option<(usize, f32, f64)>,
    /// That element's error over its allowance (1 at the edge of the
    /// tolerance; infinite for NaN).
    #[serde(default)]
    pub worst_ratio: f64,
    /// The first elements outside the tolerance, at most [`FIRST_FAILURES`]:
    /// (index, got, want).
    #[serde(default)]
    pub first_failures: Vec<(usize, f32, f64)>,
    pub tolerance: Tolerance,
}

/// How many failing elements a [`Comparison`] lists.
pub const FIRST_FAILURES: usize = 5;

impl Comparison {
    pub fn passed(&self) -> bool {
        self.failures == 0 && self.elements > 0
    }

    /// One line for a failure message or a report, for an output of this
    /// shape (outermost first).
    pub fn summary(&self, shape: &[usize]) -> String {
        self.summary_with(|i| format!("{:?}", unravel(i, shape)))
    }

    /// [`Comparison::summary`] with each flat index written by `locate`.
    pub fn summary_with(&self, locate: impl Fn(usize) -> String) -> String {
        let worst = match self.worst {
            Some((i, got, want)) => format!("; worst element {} (flat {i}): got {got:e}, want {want:e}", locate(i)),
            None => String::new(),
        };
        let nan = if self.nan_count > 0 { format!(", {} NaN", self.nan_count) } else { String::new() };
        format!(
            "{} of {} elements outside {}; max abs err {:.3e}, rel L2 err {:.3e}{nan}{worst}",
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
pub fn compare(out: &[f32], reference: &Reference, tol: Tolerance) -> Comparison {
    assert_eq!(out.len(), reference.len(), "output and reference lengths differ");
    assert!(
        reference.magnitudes.is_empty() || reference.magnitudes.len() == reference.len(),
        "a reference has a magnitude for every element or none"
    );
    let (mut failures, mut nan_count, mut err2, mut ref2, mut ref_max) = (0usize, 0usize, 0f64, 0f64, 0f64);
    let mut max_abs: Option<f64> = None;
    let mut worst: Option<(usize, f32, f64)> = None;
    let mut first_failures = vec![];
    let mut worst_ratio = -1.0f64;
    for (i, (&got, &want)) in out.iter().zip(&reference.values).enumerate() {
        let magnitude = reference.magnitude(i);
        let err = (got as f64 - want).abs();
        let allowance = tol.allowance(want, magnitude);
        let ratio = if got.is_nan() || !err.is_finite() {
            f64::INFINITY
        } else if allowance > 0.0 {
            err / allowance
        } else if err == 0.0 {
            0.0
        } else {
            f64::MAX
        };
        if !tol.allows(got, want, magnitude) {
            failures += 1;
            if first_failures.len() < FIRST_FAILURES {
                first_failures.push((i, got, want));
            }
        }
        if ratio > worst_ratio {
            worst_ratio = ratio;
            worst = Some((i, got, want));
        }
        if got.is_nan() {
            nan_count += 1;
            continue;
        }
        let err = if err.is_nan() { f64::INFINITY } else { err };
        max_abs = Some(max_abs.map_or(err, |m| m.max(err)));
        err2 += err * err;
        ref2 += want * want;
        ref_max = ref_max.max(want.abs());
    }
    let relative = |num: f64, den: f64| {
        if den > 0.0 {
            num / den
        } else if num == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    };
    let max_abs_err = max_abs.unwrap_or(f64::INFINITY);
    Comparison {
        elements: out.len(),
        failures,
        nan_count,
        max_abs_err,
        rel_l2_err: relative(err2.sqrt(), ref2.sqrt()),
        max_rel_err: if max_abs.is_some() { relative(max_abs_err, ref_max) } else { f64::INFINITY },
        worst,
        worst_ratio: worst_ratio.max(0.0),
        first_failures,
        tolerance: tol,
    }
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
        let c = compare(&[1.0, f32::NAN], &Reference::plain(vec![1.0, 0.0]), tol);
        assert_eq!(c.failures, 1);
        assert_eq!(c.worst.unwrap().0, 1);
        assert!(!c.passed());
    }

    #[test]
    fn tolerance_scales_with_reference() {
        let tol = Tolerance::new(1e-4, 1e-4);
        assert!(tol.allows(1000.05, 1000.0, 0.0));
        assert!(!tol.allows(1000.2, 1000.0, 0.0));
        assert!(tol.allows(0.0, 5e-5, 0.0));
    }

    #[test]
    fn an_empty_output_does_not_pass() {
        assert!(!compare(&[], &Reference::default(), Tolerance::new(1.0, 1.0)).passed());
    }

    #[test]
    fn a_magnitude_bound_scales_with_the_data_and_fails_zeros() {
        let tol = Tolerance::of_magnitude(0.0, 1e-6);
        for scale in [1e-6, 1.0, 1e15] {
            let reference = Reference { values: vec![3.0 * scale, -2.0 * scale], magnitudes: vec![5.0 * scale, 4.0 * scale] };
            let close = [(3.0 * scale * (1.0 + 1e-7)) as f32, (-2.0 * scale) as f32];
            assert!(compare(&close, &reference, tol).passed(), "{scale}");
            assert_eq!(compare(&[0.0, 0.0], &reference, tol).failures, 2, "{scale}");
        }
        // A zero magnitude allows nothing: exact zeros pass, anything else fails.
        let exact = Reference { values: vec![0.0], magnitudes: vec![0.0] };
        assert!(compare(&[0.0], &exact, tol).passed());
        assert!(!compare(&[1e-30], &exact, tol).passed());
    }

    #[test]
    fn nan_is_counted_and_left_out_of_the_statistics() {
        let reference = Reference::plain(vec![0.0, 1.0, 2.0]);
        let c = compare(&[f32::NAN, 1.0, f32::INFINITY], &reference, Tolerance::new(1e-4, 1e-4));
        assert_eq!((c.failures, c.nan_count), (2, 1));
        assert_eq!(c.max_abs_err, f64::INFINITY);
        assert_eq!(c.first_failures.iter().map(|f| f.0).collect::<Vec<_>>(), vec![0, 2]);
        let all_nan = compare(&[f32::NAN, f32::NAN], &Reference::plain(vec![1.0, 2.0]), Tolerance::new(1e-4, 1e-4));
        assert_eq!((all_nan.nan_count, all_nan.max_abs_err), (2, f64::INFINITY));
        let fine = compare(&[1.0, 2.5, -3.0], &Reference::plain(vec![1.0, 2.0, -3.0]), Tolerance::new(1.0, 0.0));
        assert_eq!((fine.max_abs_err, fine.max_rel_err), (0.5, 0.5 / 3.0));
        assert!((fine.rel_l2_err - 0.5 / 14f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn errors_relative_to_a_zero_reference_are_infinite_unless_zero() {
        let zero = Reference::plain(vec![0.0; 10]);
        let c = compare(&[1.0; 10], &zero, Tolerance::new(1e-4, 1e-4));
        assert_eq!((c.rel_l2_err, c.max_rel_err), (f64::INFINITY, f64::INFINITY));
        assert_eq!(c.first_failures.len(), FIRST_FAILURES);
        let exact = compare(&[0.0; 10], &zero, Tolerance::new(0.0, 0.0));
        assert_eq!((exact.rel_l2_err, exact.max_rel_err, exact.failures), (0.0, 0.0, 0));
    }

    /// Against CPython's `math.erf` and `math.erfc` (to the last digit
    /// printed there), across both branches and the tail.
    #[test]
    fn erf_and_erfc_match_known_values() {
        let known = [
            (1e-3, 0.0011283787909692365, 0.9988716212090307),
            (0.5, 0.5204998778130465, 0.4795001221869535),
            (1.0, 0.8427007929497149, 0.15729920705028513),
            (2.0, 0.9953222650189527, 0.004677734981047265),
            (2.5, 0.999593047982555, 0.0004069520174449589),
            (3.0, 0.9999779095030014, 2.2090496998585438e-05),
            (4.0, 0.9999999845827421, 1.541725790028002e-08),
            (5.0, 0.9999999999984626, 1.5374597944280351e-12),
            (7.0, 1.0, 4.183825607779414e-23),
            (10.0, 1.0, 2.088487583762545e-45),
        ];
        for (x, erf, erfc) in known {
            assert!((erf_f64(x) - erf).abs() <= 4e-16, "erf({x}) = {} not {erf}", erf_f64(x));
            assert!((erf_f64(-x) + erf).abs() <= 4e-16, "erf(-{x})");
            assert!(((erfc_f64(x) - erfc) / erfc).abs() <= 1e-14, "erfc({x}) = {} not {erfc}", erfc_f64(x));
            assert!((erfc_f64(-x) - (2.0 - erfc)).abs() <= 4e-16, "erfc(-{x})");
        }
        assert_eq!((erf_f64(0.0), erfc_f64(0.0), erfc_f64(30.0)), (0.0, 1.0, 0.0));
        assert!(erfc_f64(f64::NAN).is_nan());
    }

    #[test]
    fn a_magnitude_beyond_fp32_is_a_range_error() {
        let r = Reference { values: vec![1.0, 2.0], magnitudes: vec![1.0, 1e39] };
        let e = r.check_fp32_range("case c", &[2]).unwrap_err();
        assert!(e.contains("output [1]") && e.contains("beyond FP32's range"), "{e}");
        assert!(Reference { values: vec![1.0], magnitudes: vec![3e38] }.check_fp32_range("c", &[1]).is_ok());
        let named = r.check_fp32_range_with("case c", |i| format!("dbeta [{i}]")).unwrap_err();
        assert!(named.contains("output dbeta [1] "), "{named}");
    }
}
