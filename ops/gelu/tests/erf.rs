//! `gelu_erf`: every stage, and `current`, on the emulator against the f64
//! reference (z·Φ(z) from `numeric::erfc_f64`), and Φ's FP32 arithmetic
//! replayed on the host with `ex2.approx` pushed to the edges of its
//! contract, against f64, relative to Φ itself.

use mage_common::fixtures::Rng;
use mage_common::numeric::{EX2_APPROX_REL, compare, erfc_f64};
use mage_common::op::{HostBuf, Stage, check_current, check_stage, emulate, fit_last_dim};
use mage_gelu::erf::{ERF, STAGES, choose, gelu_erf_f64, mage_002, normal_cdf::normal_cdf_with};
use mage_gelu::gelu_f64;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

const EXTREMES: [f32; 16] = [0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 5.1, -5.1, 9.5, -9.5, 1e4, -1e4, 7e12, -7e12, 1e30, -1e30];

fn inputs(rows: u32, width: u32, spread: f32, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    let x = if spread == 0.0 {
        (0..n).map(|_| EXTREMES[r.below(EXTREMES.len() as u64) as usize]).collect()
    } else {
        r.normal_vec(n, 0.0, spread)
    };
    vec![HostBuf::F32(x), HostBuf::F32(r.normal_vec(width as usize, 0.0, 0.25))]
}

fn check(stage: &Stage, rows: u32, width: u32, spread: f32, seed: u64) -> Result<(), String> {
    let dims = fit_last_dim(stage, &[rows, width], 4096).ok_or_else(|| format!("{} supports no width near {width}", stage.name))?;
    check_stage(&ERF, stage, &dims, &inputs(dims[0], dims[1], spread, seed)).map(|_| ())
}

proptest! {
    #![proptest_config(Config { cases: 32, ..Config::default() })]

    /// Any shape (tails of the quads included), x normal with a spread up
    /// to 8 (z through both tails) or drawn from the extremes.
    #[test]
    fn every_stage_matches_the_reference(
        rows in 1u32..=16,
        width in prop_oneof![prop::sample::select(vec![1u32, 3, 4, 5, 33, 257, 768, 1001]), 1u32..=1100],
        spread in prop_oneof![0.01f32..8.0, Just(0.0)],
        seed in any::<u64>(),
    ) {
        for stage in STAGES {
            check(stage, rows, width, spread, seed).map_err(TestCaseError::fail)?;
        }
        check_current(&ERF, &[rows, width], &inputs(rows, width, spread, seed)).map_err(TestCaseError::fail)?;
    }
}

/// z swept densely over [-20, 20] (bias zero) on every stage, and the
/// saturated ends: y = z far right, y = -0 or a tiny negative far left.
#[test]
fn a_dense_sweep_of_z_on_every_stage() {
    let x: Vec<f32> = (0..8000).map(|i| -20.0 + 40.0 * i as f32 / 8000.0).chain(EXTREMES).collect();
    let inputs = vec![HostBuf::F32(x.clone()), HostBuf::F32(vec![0.0; x.len()])];
    let dims = [1, x.len() as u32];
    for stage in STAGES {
        check_stage(&ERF, stage, &dims, &inputs).unwrap();
        let out = emulate(&ERF, stage, &dims, &inputs).unwrap();
        for (z, y) in x.iter().zip(&out) {
            if *z >= 6.0 {
                assert_eq!(y, z, "{}: gelu_erf({z}) = {y}", stage.name);
            }
            if *z <= -14.0 {
                assert!(*y <= 0.0 && y.abs() < 1e-37, "{}: gelu_erf({z}) = {y}", stage.name);
            }
        }
    }
}

/// mage-002 where the width is a multiple of 4, else mage-003.
#[test]
fn current_dispatches_by_shape() {
    assert_eq!(choose(&[4096, 768]).name, "mage-002");
    assert_eq!(choose(&[1000, 1001]).name, "mage-003");
    assert!(!mage_002::supports(&[4, 257]));
}

/// Zeros fail, and so does the tanh form: the two functions differ by more
/// than the tolerance, which is why `gelu_erf` is an op of its own.
#[test]
fn zeros_and_the_tanh_form_fail() {
    let dims = [4, 768];
    let inputs = inputs(4, 768, 2.0, 11);
    let reference = (ERF.reference)(&dims, &inputs);
    let tol = (ERF.tolerance)(&dims, &inputs);
    assert!(!compare(&vec![0.0; 4 * 768], &reference, tol).passed());
    let (x, b) = (inputs[0].as_f32(), inputs[1].as_f32());
    let tanh: Vec<f32> = x.iter().enumerate().map(|(i, x)| gelu_f64(*x as f64 + b[i % 768] as f64) as f32).collect();
    assert!(!compare(&tanh, &reference, tol).passed(), "the tanh form passed as the exact GELU");
}

/// `ex2.approx` off by `f` (relative), flushing like the instruction.
fn ex2_off(f: f64) -> impl Fn(f32) -> f32 {
    move |s| {
        let r = ((s as f64).exp2() * (1.0 + f)) as f32;
        if r.is_subnormal() { 0.0 } else { r }
    }
}

/// Φ's FP32 arithmetic against f64 on z in [-18, 18] by steps of 1/2048,
/// wherever Φ is a normal FP32 number: within 6e-7 of Φ with `ex2` exact
/// and 1.1e-6 at the edges of its contract (the bound in `normal_cdf`'s
/// doc); the Gaussian factor within the same.
#[test]
fn normal_cdf_is_within_its_bound_of_f64() {
    for (f, bound) in [(0.0, 6e-7), (EX2_APPROX_REL, 1.1e-6), (-EX2_APPROX_REL, 1.1e-6)] {
        let (mut worst, mut at) = (0.0f64, 0.0f32);
        let (mut worst_gauss, mut gauss_at) = (0.0f64, 0.0f32);
        for i in -18 * 2048..=18 * 2048 {
            let z = i as f32 / 2048.0;
            let (phi, gauss) = normal_cdf_with(z, ex2_off(f));
            let want = 0.5 * erfc_f64(-(z as f64) * core::f64::consts::FRAC_1_SQRT_2);
            if want >= f32::MIN_POSITIVE as f64 {
                let e = (phi as f64 - want).abs() / want;
                if e > worst {
                    (worst, at) = (e, z);
                }
            }
            let want_gauss = (-(z as f64) * (z as f64) / 2.0).exp();
            if want_gauss >= f32::MIN_POSITIVE as f64 {
                let e = (gauss as f64 - want_gauss).abs() / want_gauss;
                if e > worst_gauss {
                    (worst_gauss, gauss_at) = (e, z);
                }
            }
        }
        assert!(worst <= bound, "ex2 off by {f:e}: Φ off by {worst:.3e} of itself at z = {at}");
        assert!(worst_gauss <= bound, "ex2 off by {f:e}: e^(-z²/2) off by {worst_gauss:.3e} at z = {gauss_at}");
    }
}

/// The reference itself at known points (CPython's `math.erfc`).
#[test]
fn the_reference_at_known_points() {
    assert_eq!(gelu_erf_f64(0.0), 0.0);
    assert!((gelu_erf_f64(1.0) - 0.8413447460685429).abs() < 1e-15);
    assert!((gelu_erf_f64(-3.0) - -3.0 * 0.0013498980316300957).abs() < 1e-17);
}
