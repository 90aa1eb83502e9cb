//! current: the dispatcher. It reads the graph, not a description of it:
//! the largest in-degree `D` comes from rowptr (copied to the host when the
//! graph lives on a device), and decides with the edge count.
//!
//! mage-004 (one warp per row) and mage-001 (one thread per output element)
//! are the fastest on small graphs without heavy rows, mage-004 ahead, and
//! both are as slow as their heaviest row everywhere else: a row of `D`
//! edges is `D` steps of one warp or of one thread. On the large uniform
//! graph mage-003 is the fastest. The merge-path stages are balanced on any
//! degree distribution, and mage-002 is the fastest of them where a row is
//! heavy. So:
//!
//! | graph | picks |
//! |---|---|
//! | up to 2^17 edges and `D` ≤ 64 | mage-004 (mage-001 where `width % 4 != 0`) |
//! | more edges, `D` ≤ 64, `width % 4 == 0` | mage-003 |
//! | anything else | mage-005 (mage-002 at widths not a multiple of 4, mage-001 where neither fits) |
//!
//! The measurements behind each line (CUPTI kernel time in µs, hot L2,
//! H200, from `results/candidates-1/sweep-neighbor.json`): uniform graphs
//! of 4096 and 65,536 rows have largest rows of a few dozen edges, the
//! power-law ones of thousands; try-rows is mage-004 under its name as a
//! candidate, try-red a candidate since removed (`docs/attempts.md`), and
//! the last column is what `current` picked when the sweep ran, before
//! mage-004.
//!
//! <!-- mage:table sweep results/candidates-1/sweep-neighbor.json stages=mage-001,mage-002,mage-003,try-rows,try-red -->
//! | shape | mage-001 | mage-002 | mage-003 | try-rows | try-red | current |
//! |---|---|---|---|---|---|---|
//! | 4096x64x65536 | 4.89 | 10.15 | 8.97 | **4.71** | 10.20 | mage-001 |
//! | 4096x64x65536 power-law | 923.12 | **18.72** | 19.75 | 1173 | 21.49 | mage-002 |
//! | 65536x64x1048576 | 51.48 | 56.39 | **43.28** | 57.25 | 53.31 | mage-003 |
//! | 65536x64x1048576 power-law | 16745 | **74.67** | 78.69 | 19148 | 94.74 | mage-002 |
//! | 7x9x23 | **1.34** | 4.89 | – | – | – | mage-001 |
//! <!-- /mage:table -->
//!
//! mage-005 (`try-split` when measured) against the merge-path stages, in
//! one later session (`results/candidates-2/sweep-neighbor.json`):
//!
//! <!-- mage:table sweep results/candidates-2/sweep-neighbor.json stages=mage-002,mage-003,try-split -->
//! | shape | mage-002 | mage-003 | try-split | current |
//! |---|---|---|---|---|
//! | 4096x64x65536 | 10.21 | 9.02 | **8.66** | mage-004 |
//! | 4096x64x65536 power-law | 18.13 | 19.12 | **13.36** | mage-002 |
//! | 65536x64x1048576 | 56.65 | **42.59** | 61.14 | mage-003 |
//! | 65536x64x1048576 power-law | 74.39 | 78.46 | **65.98** | mage-002 |
//! | 7x9x23 | **5.00** | – | – | mage-001 |
//! <!-- /mage:table -->

use crate::graph::max_degree;
use crate::{mage_001, mage_002, mage_003, mage_004, mage_005};
use mage_common::op::{Dispatcher, Readable, Stage};

/// Largest graph (edges) for which the row-walking stages were measured
/// fastest.
pub const MAX_EDGES_FOR_ROW_WALK: u32 = 1 << 17;

/// The largest row (edges) a graph may hold for the row-walking stages and
/// for mage-003's lane groups; heavier rows go to mage-002.
pub const MAX_DEGREE_FOR_ROW_WALK: u32 = 64;

/// The stage `current` runs for dims `[n, width, edges]` and this rowptr.
pub fn choose(d: &[u32], rowptr: &[u32]) -> &'static Stage {
    let light = max_degree(rowptr) <= MAX_DEGREE_FOR_ROW_WALK;
    if light && d[2] <= MAX_EDGES_FOR_ROW_WALK {
        if mage_004::supports(d) { &mage_004::STAGE } else { &mage_001::STAGE }
    } else if light && mage_003::supports(d) {
        &mage_003::STAGE
    } else if mage_005::supports(d) {
        &mage_005::STAGE
    } else if mage_002::supports(d) {
        &mage_002::STAGE
    } else {
        &mage_001::STAGE
    }
}

/// `current` for the registry: reads rowptr (input 2).
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "mage-004 on small graphs without heavy rows (mage-001 at widths not a multiple of 4), mage-003 on larger light ones, mage-005 where a row is heavy (mage-002 at widths not a multiple of 4)",
    reads: &[2],
    choose: |d, inputs: &Readable| choose(d, inputs.input(2).as_u32()),
};
