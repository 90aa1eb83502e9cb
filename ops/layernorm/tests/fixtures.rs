//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`), on every stage that supports their dims.

#[test]
fn golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_layernorm::OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 3 * 4, "only {n} (case, stage) pairs ran");
}

/// The same for `layernorm_backward`: numpy's gradients from the chain rule
/// (`fixtures/golden/layernorm_backward.py`), on every gradient stage.
#[test]
fn backward_golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_layernorm::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 2 * 2, "only {n} (case, stage) pairs ran");
}
