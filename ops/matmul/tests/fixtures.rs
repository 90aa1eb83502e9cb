//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`): every stage under the FP32 contract (mage-009
//! included) that supports their dims under the op's tolerance, and every
//! TF32 stage under its own.

use mage_common::fixtures::{check_golden_cases, committed_cases, read_case};
use mage_common::numeric::compare;
use mage_common::op::emulate;
use mage_matmul::{FP32_OP, FP32_STAGES, OP, TF32_STAGES, tf32_tolerance};

#[test]
fn golden_cases() {
    let n = check_golden_cases(&FP32_OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 3 * FP32_STAGES.len(), "only {n} (case, stage) pairs ran");
}

#[test]
fn golden_cases_on_the_tf32_stages() {
    let cases = committed_cases(&OP);
    assert!(cases.len() >= 3, "only {} cases", cases.len());
    for dir in cases {
        let case = read_case(&dir, &OP).unwrap();
        let expected: Vec<f64> = case.expected.as_ref().unwrap().iter().map(|v| *v as f64).collect();
        let dims = &case.spec.dims;
        for stage in TF32_STAGES {
            let out = emulate(&OP, stage, dims, &case.inputs).unwrap();
            let cmp = compare(&out, &expected, tf32_tolerance(dims, &case.inputs));
            assert!(cmp.passed(), "{} on {}: {}", stage.name, dir.display(), cmp.summary(dims));
        }
    }
}
