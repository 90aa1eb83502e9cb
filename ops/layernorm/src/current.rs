//! current: the dispatcher. For each shape, the newest stage that supports it:
//! mage-006 for widths up to 1024 that are multiples of 4, the two-warp
//! mage-003 for wider rows it can share (multiples of 256 up to 4096), the
//! warp-per-row mage-002 for other multiples of 4, and the scalar mage-001
//! for everything else.

use mage_common::op::{Plan, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if crate::mage_006::supports(d) {
        &crate::mage_006::STAGE
    } else if crate::mage_003::supports(d) {
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
    summary: "dispatcher: mage-006, else mage-003, else mage-002, else mage-001",
    kernels: &[],
    supports: |_| true,
    plan,
};
