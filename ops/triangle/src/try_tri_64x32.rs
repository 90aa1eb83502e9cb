//! try-tri-64x32: the channel-tiled GEMM of try-tri-auto with its 64x32
//! (i, j) block tile of 8 channels, 8x8 outputs per thread, at every shape.
//!
//! What changed against the 32x16 tile: each of the 256 threads owns 64
//! outputs of one channel instead of 16, so per `k` it does 64
//! multiply-adds for 4 shared 128-bit loads (16 for 2 there), and the
//! block's copies per multiply-add fall by two (96 rows of 8 channels per
//! `k` for 16,384 outputs, against 48 for 4,096). Chunks of 8 `k`, three
//! in flight, 78 KiB of shared memory, so two blocks share an SM.
//!
//! Why it should help: from 256x32 on, the shape has enough outputs for a
//! grid of these tiles to fill the GPU (128 blocks at 256x32, 512 at
//! 512x32), and then the larger tile halves the L2 traffic per
//! multiply-add (10.7 FLOP per byte: 101 MB at 256x32) and spends about
//! 78% of the issue slots on FFMA instead of 60%. At 128x32 it makes only
//! 32 blocks and should lose to the 32x16 tile.
//!
//! Prediction (not yet measured on the GPU): 256x32 about 21-24 µs
//! (mage-003 86.3), 256x64 about 45 µs (256 blocks, two per SM), 512x32
//! about 170 µs. ptxas: 127 registers (two blocks of 256 threads fit an
//! SM's 64K registers), no stack, no spills.

use crate::{ChannelTiles, TILES_64X32, channel_tiles_launch, triangle_tiles_64x32};

pub const SHAPE: ChannelTiles = TILES_64X32;

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-tri-64x32",
    summary: "channel-tiled GEMM: 64x32 (i, j) x 8-channel block tiles, cp.async ring transposed to rows in shared memory, 8x8 per thread",
    kernels: &[&triangle_tiles_64x32::KERNEL],
    supports: |_| true,
    plan: |d| channel_tiles_launch(&triangle_tiles_64x32::KERNEL, SHAPE, d),
};
