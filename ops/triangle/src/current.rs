//! current: the dispatcher. The most-tiled stage that supports the shape
//! and still has at least [`MIN_THREADS`] threads: mage-003 (channel
//! quads, `c % 4 == 0`), else mage-002 (4×4 tile, one channel), else
//! mage-001 (one output per thread). Tiling trades threads for reuse; on a
//! small shape the tiled kernels would leave most SMs idle. The threshold
//! is a first guess, to be tuned on the H200.

use mage_common::op::{Plan, Stage};

/// About four warps on each of the H200's 132 SMs.
pub const MIN_THREADS: u32 = 132 * 128;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if crate::mage_003::supports(d) && crate::mage_003::threads(d) >= MIN_THREADS {
        &crate::mage_003::STAGE
    } else if crate::mage_002::threads(d) >= MIN_THREADS {
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
    summary: "dispatcher: mage-003, else mage-002, else mage-001, by support and thread count",
    kernels: &[],
    supports: |_| true,
    plan,
};
