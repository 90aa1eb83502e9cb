//! mage-005: the 32x16 tile with a warp per channel and `k` split over two
//! groups of 256 threads.
//!
//! Kernel body: [`crate::channel_tiles`] (entry `triangle_tiles_32x16_split`;
//! the body is shared with mage-004; frozen: its ptxas
//! resources are pinned by `tests/resources.rs`, its bits by
//! `tests/stages.rs`).
//!
//! What changed against the warp-per-channel 32x16 tile (a candidate that
//! lost, `docs/attempts.md`): at 128x32 its 128
//! blocks give each SM one block of eight warps, two per scheduler, and
//! every wait (a shared load, a barrier, the first chunk) stalls half of a
//! scheduler's warps; Nsight Compute saw 12.5% achieved occupancy on
//! mage-004 there. The shape has no more outputs to give more threads 4x4
//! tiles, so here the block has 512 threads in two groups that share the
//! ring: group `s` multiplies `kk` in `8s..8s + 8` of every 16-`k` chunk
//! (one `k` step: two 128-bit shared loads, one wavefront each, 16 FFMA),
//! and at the end both write their sums to shared memory and the block
//! adds group 0's and group 1's and stores. Sixteen warps per SM at
//! 128x32, with the same shared wavefronts and FFMA per SM as
//! try-tri-warp-ch; each thread issues half the copies (12 a chunk).
//!
//! The sum is another order (the two halves of every chunk apart, then one
//! addition), so the bits differ from the other stages'; the error bound
//! is that of `n/2 + 1` terms, inside the op's tolerance, and small
//! integers stay exact (`OTHER_ORDER`, `tests/stages.rs`).
//!
//! Prediction: at 128x32 four warps per
//! scheduler hide the shared and barrier waits that two could not: about
//! 5-7 µs (mage-004 12.47, PyTorch 17.7). At 128x64, 256 blocks of one per
//! SM in two waves, about 10-13 µs (mage-004 21.82). Not meant for the
//! large shapes, where the 32x16 tile reads twice the L2 bytes of 64x32.
//! ptxas: 72 registers (512 threads need at most 128), 112 KiB of shared
//! memory (a four-deep ring of 16-`k` chunks), no stack, no spills.
//!
//! Measured (as `try-tri-split-k`, in one session with mage-004): faster
//! than mage-004 at 128x32 and 128x64, short of the prediction; slower from
//! 256x32, where the 32x16 tile reads twice the bytes. GPU kernel time per
//! call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-2/sweep-triangle.json stage=try-tri-split-k -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 64x8 | 5.91 | 11.07 |
//! | 128x32 | 11.49 | 16.88 |
//! | 256x32 | 78.89 | 84.29 |
//! | 128x64 | 21.56 | 26.37 |
//! | 256x64 | 160.64 | 166.86 |
//! | 512x32 | 642.10 | 651.70 |
//! | 7x5 | 2.31 | 8.51 |
//! <!-- /mage:table -->

use crate::channel_tiles::{TILES_32X16_SPLIT, channel_tiles_launch, triangle_tiles_32x16_split};

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-005",
    summary: "32x16 channel tiles, a warp per channel, each chunk's k split over two groups of 256 threads whose sums add at the end",
    kernels: &[&triangle_tiles_32x16_split::KERNEL],
    supports: |_| true,
    plan: |d| channel_tiles_launch(&triangle_tiles_32x16_split::KERNEL, TILES_32X16_SPLIT, d),
};
