//! try-tri-auto: the channel-last tensors read as a GEMM per channel
//! through shared memory, with the block tile chosen by shape: the
//! largest of 64x64, 64x32 and 32x16 whose grid still gives about one
//! block per SM.
//!
//! What changed against mage-003: mage-003 reads every operand straight
//! from global memory (through L1), 8 loads per 64 multiply-adds, with no
//! reuse between threads but what L1 happens to keep. Here a block owns
//! `O[ti i, tj j, 8 ch]` and stages A's `[ti, k chunk, 8]` and B's `[tj, k
//! chunk, 8]` in shared memory by 4-byte `cp.async`, three chunks in
//! flight, transposed on the way to `[k][ch][row]`, so that four rows of
//! one channel are one 128-bit shared load (see
//! [`channel_tiles`](crate::channel_tiles)). Every global sector a block
//! reads (8 channels, 32 bytes) is used whole. Any `n` and `c` (tails
//! zero-filled, not stored); every output summed as in every other stage.
//!
//! Why by shape: a bigger block tile reads less from L2 per multiply-add
//! (`4n³c·(1/ti + 1/tj)` bytes in all) and spends fewer issue slots on
//! copies, but makes fewer blocks. The plan takes the biggest tile whose
//! grid has [`FILL_BLOCKS`] blocks, else 32x16:
//!
//! | tile | threads, outputs each | FLOP per L2 byte | FFMA share of issue (ptxas code) | registers | shared |
//! |---|---|---|---|---|---|
//! | 32x16 | 256, 4x4 | 5.3 | ~60% (copies ~100 of ~420 slots a chunk) | 96 | 84 KiB |
//! | 64x32 | 256, 8x8 | 10.7 | ~78% | 127 | 78 KiB |
//! | 64x64 | 512, 8x8 | 16 | ~78% (copies 72 of ~650) | 111 | 102 KiB |
//!
//! At 128x32 the 32x16 tile makes 128 blocks for the H200's 132 SMs (8
//! warps each) and reads 25.2 MB from L2 (~3.6 µs at ~7 TB/s, overlapped
//! with the arithmetic); a block's 524,288 multiply-adds take 4096 cycles
//! at the FP32 peak, about 6,800 at the issue share above.
//!
//! Prediction, not yet measured on the GPU:
//!
//! | shape | tile | blocks | µs (mage-003 measured) |
//! |---|---|---|---|
//! | 64x8 | 32x16 | 8 | 3-5 (mage-001: 4.46) |
//! | 128x32 | 32x16 | 128 | 4-5 (mage-001: 31.45, PyTorch 17.7) |
//! | 128x64 | 32x16 | 256 | ~8 (36.46) |
//! | 256x32 | 64x32 | 128 | 21-24 (86.30) |
//! | 256x64 | 64x64 | 128 | ~41, 33 at the FP32 peak (148.52) |
//! | 512x32 | 64x64 | 256 | ~165, 132 at the peak in two waves |
//!
//! The 64x64 entry's 512 threads need at most 128 registers each (ptxas:
//! 111); `tests/resources.rs` checks that every launch fits an SM. No
//! stack, no spills.

use crate::{ChannelTiles, TILES_32X16, TILES_64X32, TILES_64X64, channel_tiles_launch};
use crate::{triangle_tiles_32x16, triangle_tiles_64x32, triangle_tiles_64x64};
use mage_common::Kernel;

/// Blocks from which a tile keeps every SM busy: about one per SM of the
/// H200's 132 (128x32 makes exactly 128 tiles of 32x16).
pub const FILL_BLOCKS: u32 = 128;

/// The largest tile whose grid has `FILL_BLOCKS` blocks, else the smallest.
pub fn tiles(d: &[u32]) -> (&'static Kernel, ChannelTiles) {
    let menu = [(&triangle_tiles_64x64::KERNEL, TILES_64X64), (&triangle_tiles_64x32::KERNEL, TILES_64X32)];
    menu.into_iter().find(|(_, s)| s.blocks(d[0], d[1]) >= FILL_BLOCKS).unwrap_or((&triangle_tiles_32x16::KERNEL, TILES_32X16))
}

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-tri-auto",
    summary: "channel-tiled GEMM, block tile by shape: 64x64 or 64x32 where its grid fills the SMs, else 32x16",
    kernels: &[&triangle_tiles_32x16::KERNEL, &triangle_tiles_64x32::KERNEL, &triangle_tiles_64x64::KERNEL],
    supports: |_| true,
    plan: |d| {
        let (kernel, shape) = tiles(d);
        channel_tiles_launch(kernel, shape, d)
    },
};
