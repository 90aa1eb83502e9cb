//! current: the dispatcher, picking the stage measured fastest (CUPTI kernel
//! time on the H200, one session), and never one that collapses on skewed
//! degrees:
//!
//! | graph (n x width x edges x skew) | mage-001 | mage-002 | mage-003 | picks |
//! |---|---|---|---|---|
//! | 4096x64x65536, uniform | **4.94** | 10.10 | 9.04 | mage-001 |
//! | 4096x64x65536, power-law 1.2 | 925.02 | **18.15** | 19.15 | mage-002 |
//! | 65536x64x1048576, uniform | 50.94 | 55.86 | **42.62** | mage-003 |
//! | 65536x64x1048576, power-law 1.2 | 16589.6 | **73.11** | 77.37 | mage-002 |
//!
//! mage-001 (one thread per output element, each walking its row) is the
//! fastest on small uniform graphs and thousands of times slower where one
//! row holds 14,000 edges, so it is chosen only when the dims say the
//! degrees are uniform (`skew` 0) and the graph is small (up to 2^17
//! edges). A graph whose degrees are unknown should be described with a
//! nonzero skew: the merge-path stages are balanced on any distribution.

use mage_common::op::{Plan, Stage};

/// Largest uniform graph (edges) for which mage-001 was measured fastest.
pub const MAX_EDGES_FOR_MAGE_001: u32 = 1 << 17;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let (edges, skew) = (d[2], d[3]);
    let merge = if skew == 0 && crate::mage_003::supports(d) { &crate::mage_003::STAGE } else { &crate::mage_002::STAGE };
    if (skew == 0 && edges <= MAX_EDGES_FOR_MAGE_001) || !(merge.supports)(d) { &crate::mage_001::STAGE } else { merge }
}

fn plan(d: &[u32]) -> Plan {
    (choose(d).plan)(d)
}

pub static STAGE: Stage = Stage {
    name: "current",
    summary: "dispatcher: mage-001 on small uniform graphs, mage-003 on large uniform ones, mage-002 on skewed ones",
    kernels: &[],
    supports: |_| true,
    plan,
};
