//! current: the dispatcher. mage-002 (quads, no division) wherever the
//! width is a multiple of 4; the scalar mage-001 for everything else.

use mage_common::op::{Plan, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if crate::mage_002::supports(d) { &crate::mage_002::STAGE } else { &crate::mage_001::STAGE }
}

fn plan(d: &[u32]) -> Plan {
    (choose(d).plan)(d)
}

pub static STAGE: Stage =
    Stage { name: "current", summary: "dispatcher: mage-002 where width % 4 == 0, else mage-001", kernels: &[], supports: |_| true, plan };
