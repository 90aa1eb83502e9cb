//! current: the dispatcher, picking the stage measured fastest for the
//! shape (CUPTI kernel time on the H200, one session):
//!
//! | 64x64 output tiles | stage | measured |
//! |---|---|---|
//! | fewer than 32 | mage-001 | 256³: 7.44 µs (mage-006 13.47): 16 tiles leave most of the 132 SMs idle, 256 blocks of 16x16 do not |
//! | 32 or more | mage-006 | 512³ (64 tiles): 26.23 µs (mage-001 39.45); 1024³: 84.13 µs; 1000x1037x999: 130.08 µs |
//!
//! mage-006 takes any `m, n, k >= 1` (guarded, zero-filled tails), with its
//! `_v4` entry (16-byte `cp.async` of B, 128-bit stores of C) where `n` is a
//! multiple of 4 and its `_scalar` entry otherwise. The threshold lies
//! between the two measured points (16 and 64 tiles).

use mage_common::op::{Plan, Stage};

/// Below this many 64x64 output tiles, the 16x16 tiles of mage-001 fill the GPU better.
pub const MIN_TILES_FOR_MAGE_006: u32 = 32;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    if tiles < MIN_TILES_FOR_MAGE_006 { &crate::mage_001::STAGE } else { &crate::mage_006::STAGE }
}

fn plan(d: &[u32]) -> Plan {
    (choose(d).plan)(d)
}

pub static STAGE: Stage = Stage {
    name: "current",
    summary: "dispatcher: mage-001 below 32 output tiles of 64x64, else mage-006",
    kernels: &[],
    supports: |_| true,
    plan,
};
