//! current: the dispatcher, picking for each shape the stage measured
//! fastest there (CUPTI kernel time on the H200, same session, see the
//! README's sweep table):
//!
//! | widths | rows | stage | measured |
//! |---|---|---|---|
//! | not a multiple of 4 | any | mage-001 (scalar) | 4096x1001: 20.6 µs |
//! | up to 1024 | up to 4096 | mage-007 | 4096x768: 5.61 µs (mage-006 6.85, mage-002 6.93) |
//! | up to 1024 | more | mage-002 | 8192x768: 11.96 µs (mage-007 13.75, mage-006 15.14) |
//! | 1028 to 2048 | any | mage-008 | 1024x2048: 5.45 µs (mage-003 6.88) |
//! | wider | any | mage-001 | 4096x4096: 51.96 µs (mage-008 53.26, mage-003 54.84); 16384x4096: 176.5 µs (mage-008 200.2) |
//!
//! mage-007 holds 24 to 32 floats per lane (56 to 76 registers), so beyond
//! one wave of blocks the 32-register mage-002 hides latency better. On wide
//! rows the scalar mage-001, with many independent loads in flight per
//! thread, beats the kernels that hold two quads per thread.

use mage_common::op::{Dispatcher, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let (rows, width) = (d[0], d[1]);
    if width % 4 != 0 {
        &crate::mage_001::STAGE
    } else if width <= 1024 {
        if rows <= 4096 { &crate::mage_007::STAGE } else { &crate::mage_002::STAGE }
    } else if width <= 2048 {
        &crate::mage_008::STAGE
    } else {
        &crate::mage_001::STAGE
    }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher { summary: "the stage measured fastest for the shape", reads: &[], choose: |d, _| choose(d) };
