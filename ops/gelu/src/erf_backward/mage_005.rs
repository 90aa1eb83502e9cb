//! gelu_erf_backward mage-005: one launch. A column tile's eight chunks of rows
//! are one thread-block cluster, and their partial dbias rows are added
//! through distributed shared memory.
//!
//! Kernel body: [`crate::bias_gradient::clusters`] (`chunks_in_cluster`,
//! shared with gelu_backward mage-005), of which this module declares
//! the entry `gelu_erf_backward_clusters`. The element's arithmetic (as
//! [`ErfGradient`]) is in [`element_gradient`](super::element_gradient),
//! shared with the earlier stages.
//!
//! What changed: gelu_backward mage-005's structure on the exact form's
//! element. mage-002 writes each chunk's partial dbias row to scratch and
//! adds the partials in a second launch, 7.61 µs at 1000x1001 against
//! torch.compile's 6.80 (`results/backward-10`). Its odd width also takes
//! the scalar path of four columns a lane, each warp load spanning 512
//! bytes to use 128. mage-004 had one launch but strips of eight columns,
//! and it lost (9.14 µs, the same session).
//! Here:
//! - the grid is 64-column tiles × eight chunks, each tile's chunks one
//!   cluster of eight 512-thread blocks;
//! - a lane owns two columns 32 apart, so every warp load is 128 contiguous
//!   bytes at any width;
//! - each warp takes every 16th row of its chunk, four rows at a time with
//!   their 16 loads issued together;
//! - the warps' sums are added in warp order through shared memory into
//!   the block's partial row;
//! - after the cluster barrier, block `r` adds columns `8r .. 8r + 8` of the
//!   tile over the eight partial rows in rank order, and stores dbias.
//!
//! Every grouping follows from the shape, so dbias is the same bits on
//! every run, with no atomics and no scratch. dx is mage-002's bits.
//!
//! ptxas (13.0.88, sm_90): 48 registers, no stack, 4352 bytes of shared
//! memory.
//!
//! Prediction (H200, hot L2): at 1000x1001, 16 tiles × 8 = 128 blocks, one
//! an SM, each 16 warps with 16 loads in flight (32 KB an SM) and two
//! batches a warp, so the 12 MB pass is about two L2 round trips, plus the
//! two cluster barriers and the launch, the exact form's longer element
//! hidden under the loads. About 5.5 µs against mage-002's 7.61 and
//! torch.compile's 6.80. Tall shapes give each warp many batches (4096x768:
//! 96 blocks, 32 rows a warp), where mage-002's 1056 blocks keep more bytes
//! in flight: a stage for short shapes.
//!
//! Measured (`results/backward-11`, CUPTI kernel time, hot L2, medians):
//! 14.37 µs at 1000x1001 against mage-002's 7.52, judged SLOWER (1.915);
//! 27.35 against 13.00 at 4096x768 (2.106) and 15.33 against 7.43 at
//! 512x3072 (2.039). The prediction was wrong by 2.6x, as gelu_backward
//! mage-005's. `current` keeps mage-002 (`docs/attempts.md`).

use super::element_gradient::ErfGradient;
use crate::bias_gradient::clusters::chunks_in_cluster;
pub use crate::bias_gradient::clusters::{BATCH, CLUSTER, SHARED_BYTES, THREADS, TILE, WARPS, chunk_rows};

mage_common::kernel! {
    /// Block (tile, chunk) of a cluster of the tile's chunks: dx of
    /// columns `tile·TILE ..` of the chunk's rows, then its share of the
    /// tile's dbias over the cluster. Needs [`SHARED_BYTES`] of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_erf_backward_clusters(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, dbias: *mut f32, rows: u32, width: u32, chunk_rows: u32) {
        unsafe { chunks_in_cluster::<ErfGradient>(x, bias, dy, dx, dbias, rows, width, chunk_rows) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-005",
    summary: "one launch: a 64-column tile's eight chunks of rows one thread-block cluster (warp loads of 128 contiguous bytes), their partial dbias rows added in chunk order through distributed shared memory",
    kernels: &[&gelu_erf_backward_clusters::KERNEL],
    supports: |_| true,
    plan: |d| crate::bias_gradient::clusters::plan(d, &gelu_erf_backward_clusters::KERNEL),
};
