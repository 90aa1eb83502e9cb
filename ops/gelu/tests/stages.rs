//! Every GELU stage, and `current`, on the emulator against the f64
//! reference: |out - ref| <= 1e-4 + 1e-4·|ref| on every element. The
//! emulator computes `ex2.approx` and `rsqrt.approx` exactly, so the
//! contract tests at the end replay each stage's arithmetic on the host with
//! those instructions pushed to the edges of their error bounds.

use mage_common::fixtures::Rng;
use mage_common::numeric::{EX2_APPROX_REL, RSQRT_APPROX_REL, TANH_APPROX_REL};
use mage_common::op::{HostBuf, Stage, check_current, check_stage, emulate, fit_last_dim};
use mage_gelu::{OP, STAGES, current, gelu_f64, mage_001, mage_002};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

/// How x is drawn (the bias is always normal(0, 0.25)).
#[derive(Clone, Copy, Debug)]
enum Dist {
    Normal(f32),
    /// Uniform in ±h: covers the saturated tails of tanh.
    Uniform(f32),
    /// A mix of huge, tiny, zero and ordinary values.
    Extreme,
}

const EXTREMES: [f32; 16] = [0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 5.1, -5.1, 9.5, -9.5, 1e4, -1e4, 7e12, -7e12, 1e30, -1e30];

fn inputs(rows: u32, width: u32, dist: Dist, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    let x: Vec<f32> = match dist {
        Dist::Normal(s) => r.normal_vec(n, 0.0, s),
        Dist::Uniform(h) => (0..n).map(|_| ((r.uniform() * 2.0 - 1.0) * h as f64) as f32).collect(),
        Dist::Extreme => (0..n).map(|_| EXTREMES[r.below(EXTREMES.len() as u64) as usize]).collect(),
    };
    vec![HostBuf::F32(x), HostBuf::F32(r.normal_vec(width as usize, 0.0, 0.25))]
}

fn dist() -> impl Strategy<Value = Dist> {
    prop_oneof![(0.01f32..4.0).prop_map(Dist::Normal), (0.1f32..20.0).prop_map(Dist::Uniform), Just(Dist::Extreme)]
}

fn width() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(vec![1u32, 2, 3, 4, 5, 31, 32, 33, 127, 128, 257, 768, 1001]), 1u32..=1100]
}

/// The nearest dims to `[rows, width]` that `stage` supports, changing
/// only the width (up to `max`). Every stage supports some such width
/// (mage-002 the multiples of 4), so finding none is a failure: no case
/// passes unchecked.
fn fit(stage: &Stage, rows: u32, width: u32, max: u32) -> Result<Vec<u32>, String> {
    fit_last_dim(stage, &[rows, width], max).ok_or_else(|| format!("{} supports no width up to {max} at {rows} rows", stage.name))
}

/// Checks `stage` at the nearest width it supports.
fn check(stage: &Stage, rows: u32, width: u32, dist: Dist, seed: u64) -> Result<(), String> {
    let dims = fit(stage, rows, width, 4096)?;
    check_stage(&OP, stage, &dims, &inputs(dims[0], dims[1], dist, seed)).map(|_| ())
}

proptest! {
    #![proptest_config(Config { cases: 48, ..Config::default() })]

    #[test]
    fn every_stage_matches_the_reference(
        rows in prop_oneof![Just(1u32), 1u32..=24],
        width in width(),
        dist in dist(),
        seed in any::<u64>(),
    ) {
        for stage in STAGES {
            check(stage, rows, width, dist, seed).map_err(TestCaseError::fail)?;
        }
        check_current(&OP, &[rows, width], &inputs(rows, width, dist, seed)).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn named_shapes_on_every_stage() {
    for stage in STAGES {
        for (rows, width) in [(3, 257), (1, 1), (1, 4), (7, 3), (5, 768), (2, 1001)] {
            check(stage, rows, width, Dist::Normal(0.25), 20260910 + width as u64).unwrap();
            check(stage, rows, width, Dist::Uniform(12.0), 7 + width as u64).unwrap();
        }
    }
}

/// z swept densely over [-20, 20] (bias zero) and the extremes, exactly.
#[test]
fn a_dense_sweep_of_z_on_every_stage() {
    let mut x: Vec<f32> = (0..8000).map(|i| -20.0 + 40.0 * i as f32 / 8000.0).collect();
    x.extend(EXTREMES);
    let width = x.len() as u32;
    for stage in STAGES {
        let dims = fit(stage, 1, width, 9000).unwrap();
        let mut xs = x.clone();
        xs.resize(dims[1] as usize, 0.5);
        let inputs = vec![HostBuf::F32(xs), HostBuf::F32(vec![0.0; dims[1] as usize])];
        check_stage(&OP, stage, &dims, &inputs).unwrap();
        let out = emulate(&OP, stage, &dims, &inputs).unwrap();
        // The saturated ends: y = z far right, y = -0 (or a tiny negative) far left.
        for (z, y) in inputs[0].as_f32().iter().zip(&out) {
            if *z >= 10.0 {
                assert!((y - z).abs() <= 4e-7 * z, "{}: gelu({z}) = {y}", stage.name);
            }
            if *z <= -10.0 {
                assert!(*y <= 0.0 && y.abs() < 1e-30, "{}: gelu({z}) = {y}", stage.name);
            }
        }
    }
}

/// `current` takes mage-002 where the width is a multiple of 4, mage-003
/// elsewhere.
#[test]
fn current_dispatches_by_shape() {
    let pick = |d: [u32; 2]| current::choose(&d).name;
    assert_eq!(pick([4096, 768]), "mage-002");
    assert_eq!(pick([4096, 3072]), "mage-002");
    assert_eq!(pick([1000, 1001]), "mage-003");
    assert_eq!(pick([3, 257]), "mage-003");
    assert!(!mage_002::supports(&[4, 257]));
}

// ------------------------------------------------- the approximation contract

/// `ex2.approx` off by `f` (relative), rounded to f32 like the instruction.
fn ex2_off(f: f64) -> impl Fn(f32) -> f32 {
    move |s| {
        let r = ((s as f64).exp2() * (1.0 + f)) as f32;
        if r.is_subnormal() { 0.0 } else { r }
    }
}

fn rsqrt_off(f: f64) -> impl Fn(f32) -> f32 {
    move |d| ((1.0 / (d as f64).sqrt()) * (1.0 + f)) as f32
}

/// z in [-30, 30] with steps of 1/1024 (every f32 there a GELU might see
/// from normal inputs, and the tails), plus the extremes.
fn z_grid() -> impl Iterator<Item = f32> {
    (-30 * 1024..=30 * 1024).map(|i| i as f32 / 1024.0).chain(EXTREMES)
}

/// Largest error of `f` against the f64 formula, in units of the op's allowance.
fn worst_ratio(f: impl Fn(f32) -> f32) -> (f64, f32) {
    let tol = (OP.tolerance)(&[1, 1], &OP.generate(&[1, 1], 1));
    z_grid()
        .map(|z| {
            let want = gelu_f64(z as f64);
            let got = f(z) as f64;
            ((got - want).abs() / tol.allowance(want, (z as f64).abs()), z)
        })
        .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a })
}

#[test]
fn mage_001_meets_the_tolerance_with_ex2_at_the_edges_of_its_contract() {
    for f in [-EX2_APPROX_REL, 0.0, EX2_APPROX_REL] {
        let (ratio, z) = worst_ratio(|z| mage_001::gelu_with(z, ex2_off(f)));
        // The doc's bound: 4.2e-7·|z| + 1.2e-7·|y|, i.e. under 1/40 of the allowance.
        assert!(ratio < 1.0 / 40.0, "ex2 off by {f:e}: worst z = {z}, {ratio:.3} of the allowance");
    }
}

#[test]
fn mage_002_meets_the_tolerance_with_ex2_and_rsqrt_at_the_edges_of_their_contract() {
    for f in [-EX2_APPROX_REL, 0.0, EX2_APPROX_REL] {
        for g in [-RSQRT_APPROX_REL, 0.0, RSQRT_APPROX_REL] {
            let (ratio, z) = worst_ratio(|z| mage_002::gelu_with(z, ex2_off(f), rsqrt_off(g)));
            assert!(ratio < 1.0 / 80.0, "ex2 off by {f:e}, rsqrt by {g:e}: worst z = {z}, {ratio:.3} of the allowance");
        }
    }
}

/// The negative control: the same formula on `tanh.approx` at the edge of
/// its contract breaks the tolerance, which is why no stage uses it.
#[test]
fn tanh_approx_at_the_edge_of_its_contract_would_break_the_tolerance() {
    let k0 = mage_gelu::SQRT_2_OVER_PI as f32;
    let k1 = (mage_gelu::SQRT_2_OVER_PI * mage_gelu::CUBIC) as f32;
    for f in [-TANH_APPROX_REL, TANH_APPROX_REL] {
        let (ratio, z) = worst_ratio(|z| {
            let u = z * mage_common::device::fma(k1, z * z, k0);
            let t = (((u as f64).tanh()) * (1.0 + f)).clamp(-1.0, 1.0) as f32;
            0.5 * z * (1.0 + t)
        });
        assert!(ratio > 1.0, "tanh off by {f:e}: worst z = {z}, only {ratio:.3} of the allowance");
    }
}
