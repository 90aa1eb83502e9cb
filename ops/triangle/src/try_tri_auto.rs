//! try-tri-auto: the channel-tiled GEMM with its block tile chosen by
//! shape: the largest of 64x64, 64x32 and 32x16 whose grid still gives
//! about one block per SM.
//!
//! What changed against the fixed tiles: a bigger block tile reads less
//! from L2 per multiply-add (`4n³c·(1/ti + 1/tj)` bytes in all) and spends
//! fewer issue slots on copies, but makes fewer blocks; the plan takes the
//! biggest tile whose grid has [`FILL_BLOCKS`] blocks, else 32x16. The
//! 64x64 tile (512 threads, 8x8 outputs each, 102 KiB of shared memory in
//! three chunks of 8 `k`) exists only here: 16 FLOP per L2 byte, 134 MB
//! at 256x64 and 537 MB at 512x32, where 64x32 would read 201 and 805 MB.
//!
//! | shape | tile | blocks | prediction (µs) |
//! |---|---|---|---|
//! | 64x8 | 32x16 | 8 | 4-5 (8 SMs busy) |
//! | 128x32 | 32x16 | 128 | 4-5 |
//! | 128x64 | 32x16 | 256 | ~8 |
//! | 256x32 | 64x32 | 128 | 21-24 |
//! | 256x64 | 64x64 | 128 | ~41 (33 at the FP32 peak) |
//! | 512x32 | 64x64 | 256 | ~165 (132 at the peak, two waves) |
//!
//! Not yet measured on the GPU. ptxas: 64x64 entry 111 registers × 512
//! threads (one block per SM; the resource test checks it fits), no
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
