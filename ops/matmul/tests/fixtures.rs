//! The committed golden cases under fixtures/ (expected outputs from numpy,
//! `fixtures/expected.py`): every stage that supports their dims, under the
//! op's tolerance, or the TF32 stage under its own.

use mage_matmul::{OP, STAGES};

#[test]
fn golden_cases() {
    let n = mage_common::fixtures::check_golden_cases(&OP).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 4 * STAGES.len(), "only {n} (case, stage) pairs ran");
    // 33x70x301 is where mage-011 splits K (5 slices of 64), with A's and
    // B's rows padded and C's columns cut by the totals.
    assert_eq!(mage_matmul::mage_011::slices(&[33, 70, 301]), 5);
}

/// The same for the transposed products, `matmul_nt` (A·Bᵀ) and `matmul_tn`
/// (Aᵀ·B): numpy's products of the transposed operands
/// (`fixtures/golden/matmul_nt.py`, `matmul_tn.py`), two cases each, and
/// a third of each where `matmul_tn` mage-005 and mage-006 and `matmul_nt`
/// mage-003 split K.
#[test]
fn transposed_golden_cases() {
    for op in [&mage_matmul::NT, &mage_matmul::TN] {
        let n = mage_common::fixtures::check_golden_cases(op).unwrap_or_else(|e| panic!("{e}"));
        assert!(n >= 2 * op.stages.len(), "{}: only {n} (case, stage) pairs ran", op.name);
    }
    // matmul_tn-33x70x301: mage-005 splits it as mage-011 splits matmul's
    // case of the same dims (5 slices of 64), A's transpose and B padded,
    // C's columns cut by the totals.
    assert_eq!(mage_matmul::tn::mage_005::slices(&[33, 70, 301]), 5);
    // mage-006 splits it too, one cluster of 5 slices of 64 (its rule at
    // 64 rows), A and B read in place by its scalar entry.
    assert_eq!(mage_matmul::tn::mage_006::slices(&[33, 70, 301]), 5);
    // matmul_nt-33x70x301: mage-003 splits it the same way, A and B padded
    // to k4 = 304, the partials 33 x 70 (C is never padded).
    assert_eq!(mage_matmul::nt::mage_003::slices(&[33, 70, 301]), 5);
}
