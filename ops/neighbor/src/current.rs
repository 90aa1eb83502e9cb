//! current: the dispatcher. It reads the graph, not a description of it:
//! the largest in-degree `D` comes from rowptr (copied to the host when the
//! graph lives on a device), and decides with the edge count.
//!
//! mage-001 (one thread per output element, each walking its row) is the
//! fastest on small graphs without heavy rows, and as slow as its heaviest
//! row everywhere else: a row of `D` edges is a chain of `D` dependent
//! loads (925 µs at D ≈ 14,000). The merge-path stages are balanced on any
//! degree distribution. So:
//!
//! | graph | picks |
//! |---|---|
//! | up to 2^17 edges and `D` ≤ 64 | mage-001 |
//! | more edges, `D` ≤ 64, `width % 4 == 0` | mage-003 |
//! | anything else | mage-002 (mage-001 where its scratch would not fit) |
//!
//! The measurements behind each line are in `results/` (`sweep-neighbor.json`
//! of the newest namespace): uniform graphs of 4096 and 65,536 rows have
//! largest rows of a few dozen edges, the power-law ones of thousands.

use crate::{mage_001, mage_002, mage_003, max_degree};
use mage_common::op::{Dispatcher, HostBuf, Stage};

/// Largest graph (edges) for which mage-001 was measured fastest.
pub const MAX_EDGES_FOR_MAGE_001: u32 = 1 << 17;

/// The largest row (edges) a graph may hold for the row-walking mage-001
/// and for mage-003's lane groups; heavier rows go to mage-002.
pub const MAX_DEGREE_FOR_ROW_WALK: u32 = 64;

/// The stage `current` runs for dims `[n, width, edges]` and this rowptr.
pub fn choose(d: &[u32], rowptr: &[u32]) -> &'static Stage {
    let light = max_degree(rowptr) <= MAX_DEGREE_FOR_ROW_WALK;
    if light && d[2] <= MAX_EDGES_FOR_MAGE_001 {
        &mage_001::STAGE
    } else if light && mage_003::supports(d) {
        &mage_003::STAGE
    } else if mage_002::supports(d) {
        &mage_002::STAGE
    } else {
        &mage_001::STAGE
    }
}

/// `current` for the registry: reads rowptr (input 2).
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "mage-001 on small graphs without heavy rows, mage-003 on larger light ones, mage-002 where a row is heavy",
    reads: &[2],
    choose: |d, inputs: &[HostBuf]| choose(d, inputs[2].as_u32()),
};
