//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`), on every stage that supports their dims.

#[test]
fn golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_neighbor::OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 3 * 2, "only {n} (case, stage) pairs ran");
}

/// The same for `neighbor_backward`: numpy's gradients from the chain rule
/// on the forward alone (`fixtures/golden/neighbor_backward.py`, which does
/// not read the transpose inputs), a uniform and a power-law case.
#[test]
fn backward_golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_neighbor::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 2 * 2, "only {n} (case, stage) pairs ran");
}
