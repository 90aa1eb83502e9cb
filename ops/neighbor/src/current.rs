//! current: the dispatcher. mage-003 (quads, `width % 4 == 0`), else
//! mage-002, wherever the merge-path scratch fits; mage-001 otherwise.
//! Both merge-path stages are balanced on any degree distribution.

use mage_common::op::{Plan, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if crate::mage_003::supports(d) {
        &crate::mage_003::STAGE
    } else if crate::mage_002::supports(d) {
        &crate::mage_002::STAGE
    } else {
        &crate::mage_001::STAGE
    }
}

fn plan(d: &[u32]) -> Plan {
    (choose(d).plan)(d)
}

pub static STAGE: Stage = Stage {
    name: "current",
    summary: "dispatcher: mage-003, else mage-002 where the scratch fits, else mage-001",
    kernels: &[],
    supports: |_| true,
    plan,
};
