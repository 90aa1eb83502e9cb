//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`): every stage that supports their dims, under the
//! op's tolerance, or the TF32 stage under its own.

use mage_matmul::{OP, STAGES};

#[test]
fn golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 3 * STAGES.len(), "only {n} (case, stage) pairs ran");
}
