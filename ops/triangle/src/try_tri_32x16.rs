//! try-tri-32x16: the channel-last tensors read as a tiled GEMM per
//! channel, 32x16 (i, j) block tiles of 8 channels, 4x4 outputs per thread.
//!
//! What changed against mage-003: mage-003 reads every operand straight
//! from global memory (through L1), 8 loads per 64 multiply-adds, and has
//! no reuse between threads but what L1 happens to keep. Here a block of
//! 256 threads owns `O[32 i, 16 j, 8 ch]` and stages A's `[32, 16 k, 8]`
//! and B's `[16, 16 k, 8]` in shared memory by 4-byte `cp.async`, three
//! chunks in flight, transposed on the way to `[k][ch][row]` so that a
//! thread's four rows of one channel are one 128-bit shared load (see
//! [`channel_tiles`](crate::channel_tiles)). Per `k` a thread does 2 shared
//! loads and 16 multiply-adds; every global sector it reads (8 channels,
//! 32 bytes) is used whole. Any `n` and `c` (tails zero-filled, not
//! stored).
//!
//! Why this tile: at 128x32 it makes 128 blocks for the H200's 132 SMs,
//! each with 8 warps. More blocks would cost L2 traffic: the block tiles
//! read `4n³c·(1/32 + 1/16)` bytes from L2 in all, 25.2 MB at 128x32
//! (5.3 FLOP per byte), about 3.6 µs at an L2 bandwidth of ~7 TB/s,
//! overlapped with the arithmetic.
//!
//! Prediction (not yet measured on the GPU): per SM one block of 524,288
//! multiply-adds, 4096 cycles at the FP32 peak; ptxas's code spends about
//! 420 issue slots per chunk on 256 FFMA (copies ~100, shared loads 32),
//! so about 6,800 cycles, 3.4 µs at 1.98 GHz, plus ~0.7 µs to fill the
//! ring and store: 4-5 µs at 128x32 (mage-001 31.4 µs, PyTorch 17.7), about
//! 8 µs at 128x64 (256 blocks, two per SM). ptxas: 96 registers, 84 KiB of
//! shared memory (3 chunks of 28 KiB), no stack, no spills.

use crate::{ChannelTiles, TILES_32X16, channel_tiles_launch, triangle_tiles_32x16};

pub const SHAPE: ChannelTiles = TILES_32X16;

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-tri-32x16",
    summary: "channel-tiled GEMM: 32x16 (i, j) x 8-channel block tiles, cp.async ring transposed to rows in shared memory, 4x4 per thread",
    kernels: &[&triangle_tiles_32x16::KERNEL],
    supports: |_| true,
    plan: |d| channel_tiles_launch(&triangle_tiles_32x16::KERNEL, SHAPE, d),
};
