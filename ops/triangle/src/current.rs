//! current: the dispatcher, picking the stage measured fastest (CUPTI kernel
//! time on the H200, one session):
//!
//! | shape | outputs n²c | mage-001 | mage-002 | mage-003 | picks |
//! |---|---|---|---|---|---|
//! | 64x8 | 32 Ki | **4.46** | 24.38 | 19.48 | mage-001 |
//! | 128x32 | 512 Ki | **31.45** | 49.32 | 35.80 | mage-001 |
//! | 128x64 | 1 Mi | 65.35 | 51.03 | **36.46** | mage-003 |
//! | 256x32 | 2 Mi | 247.06 | 107.75 | **86.30** | mage-003 |
//! | 256x64 | 4 Mi | 541.66 | 420.77 | **148.52** | mage-003 |
//!
//! mage-003 (4×4 outputs × 4 channels per thread) once there are at least
//! 2^20 outputs and `c % 4 == 0`; below that its 16x fewer threads leave the
//! GPU underfilled and one output per thread wins. mage-002 is never the
//! fastest measured and stays as history.

use mage_common::op::{Dispatcher, Stage};

/// Outputs (n²c) from which mage-003's register tiles pay (measured at 2^19 and 2^20).
pub const MIN_OUTPUTS_FOR_TILES: u64 = 1 << 20;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let outputs = d[0] as u64 * d[0] as u64 * d[1] as u64;
    if crate::mage_003::supports(d) && outputs >= MIN_OUTPUTS_FOR_TILES { &crate::mage_003::STAGE } else { &crate::mage_001::STAGE }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher =
    Dispatcher { summary: "mage-003 from 2^20 outputs (c % 4 == 0), else mage-001", reads: &[], choose: |d, _| choose(d) };
