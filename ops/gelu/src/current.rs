//! current: the dispatcher. mage-002 (quads, no division) wherever the
//! width is a multiple of 4; the scalar mage-001 for everything else.

use mage_common::op::{Dispatcher, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if crate::mage_002::supports(d) { &crate::mage_002::STAGE } else { &crate::mage_001::STAGE }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher =
    Dispatcher { summary: "mage-002 where width % 4 == 0, else mage-001", reads: &[], choose: |d, _| choose(d) };
