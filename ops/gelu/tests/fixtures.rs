//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`), on every stage that supports their dims.

#[test]
fn golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 2 * mage_gelu::STAGES.len(), "only {n} (case, stage) pairs ran");
}

/// The same for `gelu_backward`: numpy's gradients from the chain rule
/// (`fixtures/golden/gelu_backward.py`), on every gradient stage.
#[test]
fn backward_golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_gelu::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 2 * mage_gelu::backward::STAGES.len(), "only {n} (case, stage) pairs ran");
}

/// The same for `gelu_erf_backward`: numpy's gradients from `math.erf`
/// (`fixtures/golden/gelu_erf_backward.py`), on every gradient stage.
#[test]
fn erf_backward_golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_gelu::ERF_BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 2 * mage_gelu::erf_backward::STAGES.len(), "only {n} (case, stage) pairs ran");
}
