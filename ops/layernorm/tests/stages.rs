//! Every LayerNorm stage, and `current`, on the emulator against the f64
//! reference: |out - ref| <= 1e-4 + 1e-4·|ref| on every element.

use mage_common::fixtures::Rng;
use mage_common::op::{HostBuf, Stage, check_current, check_plan, check_stage, fit_last_dim};
use mage_layernorm::{OP, STAGES, current, mage_003};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// How a row's values are drawn.
#[derive(Clone, Copy, Debug)]
enum Dist {
    Normal(f32),
    Uniform(f32),
    /// Mean 1e3, spread 1e-2: defeats a variance from sum and sum of squares.
    LargeOffset,
    Constant(f32),
    /// Each row with its own offset and scale.
    Mixed,
}

fn inputs(rows: u32, width: u32, dist: Dist, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    let x: Vec<f32> = match dist {
        Dist::Normal(s) => r.normal_vec(n, 0.0, s),
        Dist::Uniform(h) => (0..n).map(|_| ((r.uniform() * 2.0 - 1.0) * h as f64) as f32).collect(),
        Dist::LargeOffset => r.normal_vec(n, 1e3, 1e-2),
        Dist::Constant(c) => vec![c; n],
        Dist::Mixed => (0..rows)
            .flat_map(|_| {
                let (mean, s) = ((r.normal() * 50.0) as f32, (10f64.powf(r.uniform() * 4.0 - 3.0)) as f32);
                r.normal_vec(width as usize, mean, s)
            })
            .collect(),
    };
    let gamma = r.normal_vec(width as usize, 1.0, 0.25);
    let beta = r.normal_vec(width as usize, 0.0, 0.25);
    vec![HostBuf::F32(x), HostBuf::F32(gamma), HostBuf::F32(beta)]
}

fn dist() -> impl Strategy<Value = Dist> {
    prop_oneof![
        (0.01f32..4.0).prop_map(Dist::Normal),
        (0.1f32..10.0).prop_map(Dist::Uniform),
        Just(Dist::LargeOffset),
        (-1e3f32..1e3).prop_map(Dist::Constant),
        Just(Dist::Mixed),
    ]
}

fn width() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(vec![1u32, 3, 4, 127, 128, 129, 256, 768, 1000, 1024, 1025, 2048, 4096]), 1u32..=4096,]
}

/// The nearest dims to `[rows, width]` that `stage` supports, changing
/// only the width (up to 4096). Every stage supports some such width
/// (mage-003 the multiples of 256), so finding none is a failure: no case
/// passes unchecked.
fn fit(stage: &Stage, rows: u32, width: u32) -> Result<Vec<u32>, String> {
    fit_last_dim(stage, &[rows, width], 4096).ok_or_else(|| format!("{} supports no width up to 4096 at {rows} rows", stage.name))
}

/// Checks `stage` at the nearest width it supports.
fn check(stage: &Stage, rows: u32, width: u32, dist: Dist, seed: u64) -> Result<(), String> {
    let dims = fit(stage, rows, width)?;
    check_stage(&OP, stage, &dims, &inputs(dims[0], dims[1], dist, seed)).map(|_| ())
}

proptest! {
    #![proptest_config(Config { cases: 48, ..Config::default() })]

    #[test]
    fn every_stage_matches_the_reference(rows in 1u32..=64, width in width(), dist in dist(), seed in any::<u64>()) {
        for stage in STAGES {
            check(stage, rows, width, dist, seed).map_err(TestCaseError::fail)?;
        }
        check_current(&OP, &[rows, width], &inputs(rows, width, dist, seed)).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn named_widths_on_every_stage() {
    for stage in STAGES {
        for width in [1, 3, 127, 128, 129, 768, 1000] {
            check(stage, 5, width, Dist::Normal(0.25), 20260910 + width as u64).unwrap();
        }
    }
}

#[test]
fn a_large_mean_with_a_small_spread_normalises_correctly() {
    for stage in STAGES {
        for width in [256, 768, 1024, 4096] {
            check(stage, 8, width, Dist::LargeOffset, 7).unwrap();
        }
    }
}

#[test]
fn constant_rows_give_exactly_beta() {
    for stage in STAGES {
        for width in [1, 4, 768, 1000, 2048] {
            let dims = fit(stage, 3, width).unwrap();
            let inputs = inputs(dims[0], dims[1], Dist::Constant(1234.5), 3);
            let out = mage_common::op::emulate(&OP, stage, &dims, &inputs).unwrap();
            let beta = inputs[2].as_f32();
            for (i, v) in out.iter().enumerate() {
                assert_eq!(v.to_bits(), beta[i % dims[1] as usize].to_bits(), "{} at {dims:?}, element {i}: {v}", stage.name);
            }
        }
    }
}

/// Rows wider than the property tests draw, up to the 8192 some stages cover.
#[test]
fn rows_up_to_8192_on_the_stages_that_take_them() {
    for stage in STAGES {
        for width in [4100, 6000, 8188, 8192] {
            if (stage.supports)(&[3, width]) {
                for (seed, dist) in [Dist::Mixed, Dist::LargeOffset].into_iter().enumerate() {
                    check_stage(&OP, stage, &[3, width], &inputs(3, width, dist, seed as u64)).unwrap();
                }
            }
        }
    }
}

/// mage-003 splits a row between two warps in whole 32-lane steps. Its
/// `supports` keeps it to widths where that is sound; with the guard
/// removed, the property test must find the defect.
#[test]
fn property_tests_find_the_mage_003_defect_without_its_guard() {
    let mut runner = TestRunner::new(Config { cases: 64, failure_persistence: None, ..Config::default() });
    let result = runner.run(&(1u32..=8, (1u32..=1024).prop_map(|q| q * 4), any::<u64>()), |(rows, width, seed)| {
        let dims = [rows, width];
        check_plan(&OP, &mage_003::plan(&dims), &dims, &inputs(rows, width, Dist::Normal(0.25), seed))
            .map(|_| ())
            .map_err(TestCaseError::fail)
    });
    let err = result.expect_err("without its guard mage-003 must fail somewhere");
    let text = err.to_string();
    assert!(text.contains("outside"), "{text}");

    // The case the history records: width 128, each half 16 quads.
    let dims = [4, 128];
    let err = check_plan(&OP, &mage_003::plan(&dims), &dims, &inputs(4, 128, Dist::Normal(0.25), 1)).unwrap_err();
    assert!(err.contains("elements outside"), "{err}");
    assert!(!mage_003::supports(&dims));
}

#[test]
fn current_dispatches_by_shape() {
    let pick = |d: [u32; 2]| current::choose(&d).name;
    assert_eq!(pick([4096, 768]), "mage-009");
    assert_eq!(pick([4097, 768]), "mage-002");
    assert_eq!(pick([8192, 768]), "mage-002");
    assert_eq!(pick([8, 1024]), "mage-009");
    assert_eq!(pick([8, 1028]), "mage-010");
    assert_eq!(pick([1024, 2048]), "mage-010");
    assert_eq!(pick([8, 2052]), "mage-010");
    assert_eq!(pick([4096, 4096]), "mage-010");
    assert_eq!(pick([16384, 4096]), "mage-010");
    assert_eq!(pick([8, 8192]), "mage-010");
    assert_eq!(pick([8, 8196]), "mage-001");
    assert_eq!(pick([8, 1001]), "mage-001");
    assert_eq!(pick([8, 4098]), "mage-001");
}
