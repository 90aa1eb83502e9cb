//! gelu_erf_backward mage-006: mage-002 with a lane's four columns 32 apart
//! where the width is not a multiple of 4, and every load of a totals
//! segment issued together.
//!
//! Kernel body: [`crate::bias_gradient::spread_tiles`] (`spread_tiles` and
//! `totals`, shared with gelu_backward mage-006), of which this module
//! declares the entries `gelu_erf_backward_spread_tiles` and
//! `gelu_erf_backward_spread_totals`. The element's arithmetic (as
//! [`ErfGradient`]) is in [`element_gradient`](super::element_gradient).
//!
//! What changed: gelu_backward mage-006's lane-to-column map on the exact
//! form's element. At a width that is not a multiple of 4, mage-002's lane
//! takes four neighbouring columns by four scalar accesses, so each warp
//! access spans 512 bytes to use 128: at 1000x1001 its tiles kernel moved
//! 27.9 MB through L2 for 12 MB of x, dy and dx (`results/nsight-3`), and
//! it took 7.52 µs against 7.43 at 512x3072, whose 18.9 MB take the
//! 16-byte path (`results/backward-11`). Here a lane takes columns `lane +
//! 32j` of the tile instead: each warp access is 128 contiguous bytes. The
//! grid, the chunk rule, the rows a warp takes and their order and the
//! warps' combine are mage-002's. The totals make mage-002's additions in
//! its order, with a warp's whole segment of partials loaded before it adds
//! them: mage-002's loads a segment of fewer than 8 chunks (4 at 125
//! chunks) one after another, a round trip each. So dx and dbias are
//! mage-002's bits at every width; at widths that are a multiple of 4 the
//! tiles kernel is mage-002's 16-byte path.
//!
//! ptxas (13.0.88, sm_90): 56 registers in the tiles entry (four
//! 256-thread blocks an SM, as mage-002's), no stack.
//!
//! Prediction (H200, hot L2): at 1000x1001 the tiles kernel's L2 traffic
//! falls toward the 12 MB it needs and its time toward the 16-byte path's
//! rate; the totals as mage-003's batched ones (1.69 µs against mage-002's
//! 2.16, `results/backward-7`): about 5 µs against mage-002's 7.52 and
//! torch.compile's 6.74 (`results/backward-11`). At widths that are a
//! multiple of 4 only the totals change.
//!
//! Measured (`results/backward-12`, CUPTI kernel time, hot L2, medians):
//! 6.49 µs at 1000x1001 against mage-002's 7.54, judged FASTER (0.864), and
//! under torch.compile's 6.71 in the same session; 11.59 against 13.01 at
//! 4096x768 (FASTER, 0.905); SAME at 16384x4096 (201.57 against 202.84,
//! 0.992) and 512x3072 (7.42 against 7.35, 1.013). At 1000x1001 the tiles
//! kernel moves 21.5 MB through L2 (mage-002's 27.9; Nsight Compute,
//! `results/backward-12/nsight`). `current` takes mage-006 where either
//! change applies (see `choose`).

use super::element_gradient::ErfGradient;
use crate::bias_gradient::spread_tiles::{spread_tiles, totals};
pub use crate::bias_gradient::tiles::{GROUPS, SHARED_BYTES, TARGET_BLOCKS, THREADS, TILE, chunk_rows};

mage_common::kernel! {
    /// Block (tile, chunk): dx for columns `tile·TILE ..` of rows
    /// `chunk·chunk_rows ..` (a lane's columns 32 apart where the width is
    /// not a multiple of 4), and the tile's partial dbias over those rows
    /// into `partials[chunk][..]`. Needs [`SHARED_BYTES`] of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_erf_backward_spread_tiles(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32) {
        unsafe { spread_tiles::<ErfGradient>(x, bias, dy, dx, partials, rows, width, chunk_rows) }
    }
}

mage_common::kernel! {
    /// dbias: each column's partials added over the chunks (mage-002's
    /// additions, a segment's loads issued together). Needs `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn gelu_erf_backward_spread_totals(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
        unsafe { totals(partials, dbias, chunks, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-006",
    summary: "mage-002 with a lane's four columns 32 apart where the width is not a multiple of 4 (each warp access 128 contiguous bytes) and every load of a totals segment issued together; mage-002's bits",
    kernels: &[&gelu_erf_backward_spread_tiles::KERNEL, &gelu_erf_backward_spread_totals::KERNEL],
    supports: |_| true,
    plan: |d| crate::bias_gradient::tiles::plan(d, &gelu_erf_backward_spread_tiles::KERNEL, &gelu_erf_backward_spread_totals::KERNEL),
};
