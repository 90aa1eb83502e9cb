//! current: the dispatcher, picking the stage measured fastest (CUPTI kernel
//! time on the H200, hot L2, one sweep; `try-tri-auto` is mage-004 as it was
//! measured, with a 64x64 tile at 256x64 and 512x32 where mage-004 now
//! takes the 64x32 tile of `try-tri-64x32`):
//!
//! <!-- mage:table sweep results/candidates-1/sweep-triangle.json stages=mage-001,mage-003,try-tri-auto,try-tri-64x32,try-tri-32x16-regs -->
//! | shape | mage-001 | mage-003 | try-tri-auto | try-tri-64x32 | try-tri-32x16-regs | current |
//! |---|---|---|---|---|---|---|
//! | 64x8 | **4.44** | 19.93 | 6.01 | 12.51 | 6.40 | mage-001 |
//! | 128x32 | 31.69 | 35.89 | **12.47** | 23.62 | 12.82 | mage-001 |
//! | 256x32 | 250.69 | 86.71 | 47.01 | **46.92** | 75.68 | mage-003 |
//! | 128x64 | 66.18 | 36.55 | 21.82 | 23.76 | **21.15** | mage-003 |
//! | 256x64 | 549.63 | 152.36 | 90.22 | **82.37** | 151.33 | mage-003 |
//! | 512x32 | 2083 | 625.83 | 337.87 | **319.89** | 595.96 | mage-003 |
//! | 7x5 | **1.45** | – | 2.05 | 2.77 | 2.05 | mage-001 |
//! <!-- /mage:table -->
//!
//! (The `current` column is the dispatcher of that sweep.) mage-001, one
//! output per thread, below [`MIN_OUTPUTS_FOR_TILES`] outputs: there
//! mage-004's blocks are too few to fill the GPU and its chunk pipeline
//! too short to pay for its start. mage-004 at every larger shape; at
//! 128x64 the register-staged 32x16 tile of `try-tri-32x16-regs` was a few
//! percent faster than mage-004's `cp.async` one, and it lost by far at
//! the larger shapes, so it was not kept (see `docs/attempts.md`).
//! mage-005 (`try-tri-split-k` when measured) against mage-004 in a later
//! session (`results/candidates-2/sweep-triangle.json`): it splits `k` over
//! twice the warps where the grid is too small to fill the SMs, and is
//! taken below [`MIN_OUTPUTS_FOR_WHOLE_K`]:
//!
//! <!-- mage:table sweep results/candidates-2/sweep-triangle.json stages=mage-004,try-tri-split-k -->
//! | shape | mage-004 | try-tri-split-k | current |
//! |---|---|---|---|
//! | 64x8 | 6.06 | **5.91** | mage-001 |
//! | 128x32 | 12.40 | **11.49** | mage-004 |
//! | 256x32 | **46.73** | 78.89 | mage-004 |
//! | 128x64 | 21.98 | **21.56** | mage-004 |
//! | 256x64 | **82.76** | 160.64 | mage-004 |
//! | 512x32 | **321.56** | 642.10 | mage-004 |
//! | 7x5 | **2.08** | 2.31 | mage-001 |
//! <!-- /mage:table -->
//!
//! mage-002 and mage-003 are never the fastest measured and stay as
//! history.

use mage_common::op::{Dispatcher, Stage};

/// Outputs (n²c) from which mage-004 is taken: mage-001 was faster at 2^15
/// (64x8) and slower at 2^19 (128x32); nothing between was measured, so
/// the threshold sits halfway on a log scale.
pub const MIN_OUTPUTS_FOR_TILES: u64 = 1 << 17;

/// Outputs (n²c) from which each block keeps its whole `k` (mage-004):
/// below, mage-005's split of `k` over twice the warps was faster at 2^19
/// (128x32) and at 2^20 (128x64), and slower from 2^21 (256x32)
/// (`results/candidates-2/sweep-triangle.json`).
pub const MIN_OUTPUTS_FOR_WHOLE_K: u64 = 1 << 21;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let outputs = d[0] as u64 * d[0] as u64 * d[1] as u64;
    if outputs < MIN_OUTPUTS_FOR_TILES {
        &crate::mage_001::STAGE
    } else if outputs < MIN_OUTPUTS_FOR_WHOLE_K {
        &crate::mage_005::STAGE
    } else {
        &crate::mage_004::STAGE
    }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher =
    Dispatcher { summary: "mage-001 below 2^17 outputs, mage-005 below 2^21, else mage-004", reads: &[], choose: |d, _| choose(d) };
