//! `eps` as a kernel parameter: every stage of `layernorm` and of
//! `layernorm_backward` takes it (each plan passes the op's constant, 1e-5),
//! and a plan set to another value with `Plan::with_constant` matches the
//! f64 reference at that value, on the emulator, on shapes with tails and on
//! rows whose variance is near eps, where the value decides the output.

use mage_common::fixtures::Rng;
use mage_common::numeric::compare;
use mage_common::op::{HostBuf, Op, Stage, emulate_plan, fit_last_dim};
use mage_layernorm::{EPS, OP, STAGES, backward};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The eps values PyTorch models use (BERT's 1e-12, 1e-6, the default),
/// and large ones that dominate a row's variance.
const EPSILONS: [f32; 6] = [1e-12, 1e-6, 1e-5, 1e-3, 0.1, 1.0];

/// x normal(0, spread) (the third input normal(0, 1): beta or dy), gamma normal(1, 0.25).
fn inputs(rows: u32, width: u32, spread: f32, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    let x = r.normal_vec(n, 0.0, spread);
    let gamma = r.normal_vec(width as usize, 1.0, 0.25);
    let third = r.normal_vec(if n == 0 { 0 } else { n.max(width as usize) }, 0.0, 1.0);
    vec![HostBuf::F32(x), HostBuf::F32(gamma), HostBuf::F32(third)]
}

/// The forward's beta is `[width]`, the backward's dy `[rows, width]`.
fn inputs_for(op: &Op, rows: u32, width: u32, spread: f32, seed: u64) -> Vec<HostBuf> {
    let mut x = inputs(rows, width, spread, seed);
    if op.name == "layernorm" {
        x[2] = HostBuf::F32(x[2].as_f32()[..width as usize].to_vec());
    } else {
        x[2] = HostBuf::F32(x[2].as_f32()[..(rows * width) as usize].to_vec());
    }
    x
}

fn reference_at(op: &Op, dims: &[u32], inputs: &[HostBuf], eps: f32) -> mage_common::numeric::Reference {
    if op.name == "layernorm" { mage_layernorm::reference_at(dims, inputs, eps) } else { backward::reference_at(dims, inputs, eps) }
}

/// `stage` at `eps` on the dims nearest `[rows, width]` it supports.
fn check_at(op: &Op, stage: &Stage, rows: u32, width: u32, spread: f32, eps: f32, seed: u64) -> Result<(), String> {
    let d = fit_last_dim(stage, &[rows, width], 1024).unwrap_or_else(|| panic!("{} supports no width up to 1024", stage.name));
    let x = inputs_for(op, d[0], d[1], spread, seed);
    let plan = op.plan_for(stage, &d)?.with_constant("eps", eps)?;
    let out = emulate_plan(op, &plan, &d, &x)?;
    let cmp = compare(&out, &reference_at(op, &d, &x, eps), (op.tolerance)(&d, &x));
    if cmp.passed() { Ok(()) } else { Err(format!("{} {} eps {eps:e}: {}", op.name, stage.name, op.summarize(&cmp, &d))) }
}

fn both() -> Vec<(&'static Op, Vec<&'static Stage>)> {
    vec![(&OP, STAGES.to_vec()), (&backward::BACKWARD, backward::STAGES.to_vec())]
}

#[test]
fn every_plan_passes_the_ops_eps_to_every_kernel_that_takes_it() {
    for (op, stages) in both() {
        assert_eq!(op.constant("eps"), Some(EPS as f64), "{}", op.name);
        for stage in stages {
            for dims in [[5u32, 64], [3, 768], [2, 1000]] {
                let Ok(plan) = op.plan_for(stage, &dims) else { continue };
                assert!(plan.constant_params("eps") >= 1, "{} {}: no kernel takes eps", op.name, stage.name);
                for l in &plan.launches {
                    for (p, a) in l.kernel.params.iter().zip(&l.args) {
                        if p.name == "eps" {
                            assert_eq!(*a, mage_common::op::Arg::F32(EPS), "{} {} {}", op.name, stage.name, l.kernel.name);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn every_stage_matches_the_reference_at_any_eps() {
    let mut runner = TestRunner::new(Config { cases: 12, ..Config::default() });
    let case = (
        1u32..=9,
        prop_oneof![prop::sample::select(vec![1u32, 4, 255, 256, 257, 768]), 1u32..=600],
        prop::sample::select(EPSILONS.to_vec()),
        any::<u64>(),
    );
    runner
        .run(&case, |(rows, width, eps, seed)| {
            for (op, stages) in both() {
                for stage in stages {
                    // A spread of sqrt(eps): the variance and eps are alike, so a kernel that ignores the value fails.
                    check_at(op, stage, rows, width, eps.sqrt().max(1e-3), eps, seed).map_err(TestCaseError::fail)?;
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_kernel_left_at_the_ops_eps_fails_the_check_at_another() {
    for (op, stages) in both() {
        let stage = stages[0];
        let d = [4u32, 256];
        let x = inputs_for(op, d[0], d[1], 0.3, 7);
        let out = emulate_plan(op, &op.plan_for(stage, &d).unwrap(), &d, &x).unwrap();
        let cmp = compare(&out, &reference_at(op, &d, &x, 0.1), (op.tolerance)(&d, &x));
        assert!(!cmp.passed(), "{}: an output at eps 1e-5 passed the check at eps 0.1", op.name);
    }
}

#[test]
fn setting_a_constant_no_kernel_takes_is_an_error() {
    let plan = OP.plan_for(STAGES[0], &[2, 8]).unwrap();
    let e = plan.with_constant("momentum", 0.5).unwrap_err();
    assert!(e.contains("takes `momentum`"), "{e}");
}
