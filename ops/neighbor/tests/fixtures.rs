//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`), on every stage that supports their dims.

#[test]
fn golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&mage_neighbor::OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 3 * 2, "only {n} (case, stage) pairs ran");
}
