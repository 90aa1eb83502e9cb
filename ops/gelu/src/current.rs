//! current: the dispatcher. mage-002 (quads, no division) wherever the
//! width is a multiple of 4; mage-003 (flat quads over the whole tensor)
//! everywhere else, judged FASTER than mage-001, which held those widths
//! before (`results/backward-7`, CUPTI kernel time, hot L2):
//!
//! <!-- mage:table verdicts results/backward-7/comparison.json a=mage-003 ops=gelu -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | gelu | 1000x1001 | hot | kernel time | rust mage-003 | rust mage-001 | 0.727 [0.727, 0.736] | FASTER |
//! <!-- /mage:table -->

use mage_common::op::{Dispatcher, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if crate::mage_002::supports(d) { &crate::mage_002::STAGE } else { &crate::mage_003::STAGE }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher =
    Dispatcher { summary: "mage-002 where width % 4 == 0, else mage-003", reads: &[], choose: |d, _| choose(d) };
