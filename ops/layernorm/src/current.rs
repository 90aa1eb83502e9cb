//! current: the dispatcher, picking for each shape the stage measured
//! fastest there (GPU kernel time per call from CUPTI on the H200, hot L2,
//! every stage in one session):
//!
//! | widths | rows | stage |
//! |---|---|---|
//! | not a multiple of 4 | any | mage-001 (scalar, the only stage that takes them) |
//! | up to 1024 | up to 4096 | mage-009 |
//! | up to 1024 | more | mage-002 |
//! | 1028 to 8192 | any | mage-010 |
//! | wider | any | mage-001 |
//!
//! mage-009 gives a row of 768 to two warps holding three quads a lane, so
//! 4096 rows are one wave of full occupancy; at twice the rows it needs two
//! waves, and mage-002, which holds nothing and stays in one wave, is
//! faster. From 1028 to 8192 mage-010's block per row, four quads loaded
//! per thread before any is used, is the fastest at every measured shape,
//! well ahead of mage-001 on rows of 4096. Past 8192 only the scalar
//! mage-001 and the warp-per-row mage-002 remain, and on rows of 4096, the
//! widest measured, mage-001 was the faster of the two. The sweep below is the one the
//! table rests on; its last column is what this dispatcher picked when it
//! ran, before mage-009 and mage-010 were stages (they ran as the
//! candidates try-ln-pair and try-ln-held4):
//!
//! <!-- mage:table sweep results/candidates-1/sweep-layernorm.json stages=mage-001,mage-002,mage-007,mage-008,try-ln-held4,try-ln-pair -->
//! | shape | mage-001 | mage-002 | mage-007 | mage-008 | try-ln-held4 | try-ln-pair | current |
//! |---|---|---|---|---|---|---|---|
//! | 4096x768 | 18.32 | 6.93 | 5.69 | 14.17 | 7.05 | **5.26** | mage-007 |
//! | 8192x768 | 38.51 | **11.94** | 13.87 | 27.89 | 16.39 | 13.77 | mage-002 |
//! | 1024x2048 | 7.93 | 7.50 | – | 5.46 | **4.01** | – | mage-008 |
//! | 4096x4096 | 52.00 | 73.31 | – | 53.19 | **35.36** | – | mage-001 |
//! | 16384x4096 | 176.78 | 263.83 | – | 200.13 | **132.04** | – | mage-001 |
//! <!-- /mage:table -->

use mage_common::op::{Dispatcher, Stage};

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let (rows, width) = (d[0], d[1]);
    if width % 4 != 0 {
        &crate::mage_001::STAGE
    } else if width <= 1024 {
        if rows <= 4096 { &crate::mage_009::STAGE } else { &crate::mage_002::STAGE }
    } else if width <= 8192 {
        &crate::mage_010::STAGE
    } else {
        &crate::mage_001::STAGE
    }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "mage-009 up to width 1024 and 4096 rows, mage-002 for more rows, mage-010 from width 1028 to 8192, mage-001 otherwise (and where width % 4 != 0)",
    reads: &[],
    choose: |d, _| choose(d),
};
