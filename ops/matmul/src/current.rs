//! current: the dispatcher. Every shape runs mage-006, the newest stage; it
//! handles any `m, n, k >= 1` (guarded, zero-filled tails), with its `_v4`
//! entry (16-byte `cp.async` of B, 128-bit stores of C) where `n` is a
//! multiple of 4 and its `_scalar` entry otherwise. Should a later stage
//! restrict its shapes, the fallbacks are mage-003, then mage-002, then
//! mage-001, in that order (each newer than the next, and all of them
//! cover every shape today). No measurement backs a different choice for
//! small or skinny shapes yet.

use mage_common::op::{Plan, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    [&crate::mage_006::STAGE, &crate::mage_003::STAGE, &crate::mage_002::STAGE]
        .into_iter()
        .find(|s| (s.supports)(d))
        .unwrap_or(&crate::mage_001::STAGE)
}

fn plan(d: &[u32]) -> Plan {
    (choose(d).plan)(d)
}

pub static STAGE: Stage = Stage {
    name: "current",
    summary: "dispatcher: mage-006 (its v4 entry where n % 4 == 0), else mage-003, else mage-002, else mage-001",
    kernels: &[],
    supports: |_| true,
    plan,
};
