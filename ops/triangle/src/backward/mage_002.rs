//! triangle_backward mage-002: both gradients as channel-tiled GEMMs
//! through shared memory, in one launch, block tile by shape.
//!
//! Kernel body: [`crate::channel_tiles`] (entries
//! `triangle_backward_tiles_32x16` and `triangle_backward_tiles_64x32`:
//! [`gradient_tiles`](crate::channel_tiles::gradient_tiles) over
//! [`contract`](crate::channel_tiles::contract), the body of forward
//! mage-004 and mage-005; frozen: its ptxas resources are pinned by
//! `tests/resources.rs`, its bits by `tests/backward.rs`).
//!
//! What changed against mage-001: mage-001 gives each output element a
//! thread that reads its `n` pairs of operands straight from global
//! memory, two loads per multiply-add, in two launches. Per channel the
//! gradients are GEMMs, `dA_c = dO_c·B_c` and `dB_c = dO_cᵀ·A_c`, the
//! forward's `A_c·B_cᵀ` with other operands: here each is forward
//! mage-004's channel tile, a block owning a `ti × tj` tile of outputs for
//! 8 channels, A's and B's places taken by `P` and `Q` staged through a
//! three-deep `cp.async` ring in shared memory (transposed to `[k][ch][row]`
//! on the way), `ri × rj` outputs per thread in registers. For dA, `P = dO`
//! (row `i`, contracted `j`) and `Q = B` read by columns (row `k`,
//! contracted `j`, its first index); for dB, `P = dO` by columns (row `j`,
//! contracted `i`) and `Q = A` by columns. Reading a tensor by columns
//! only swaps the two strides of the copies: a warp's copies are still 8
//! channels (one 32-byte sector) of 4 rows, so every sector is used whole.
//! Both gradients are one grid (block `(2g + w)·tiles + ij`: channel group
//! `g`, gradient `w`, tile `ij`), so that the two share dO's channel group
//! in L2 and a shape has twice the forward's blocks to fill the SMs. Any
//! `n` and `c` (tails zero-filled, not stored); every element sums its
//! terms in the order of mage-001 (`j` or `i` = 0, 1, ..., one `fma` each),
//! so the two stages agree bit for bit.
//!
//! The tile by shape, forward mage-004's rule counted over both gradients:
//! 64x32 (8x8 outputs a thread, 4·n³c·(1/64 + 1/32) bytes from L2 a
//! gradient) where the grid has [`FILL_BLOCKS`] blocks, else 32x16 (4x4, twice
//! the L2 bytes per multiply-add, but four times the blocks).
//!
//! Prediction, from the rates the forward's tiles reached on the H200
//! (CUPTI kernel time, hot L2, `results/candidates-1` and `candidates-2`).
//! The gradients are `2·n³·c` multiply-adds; at 128x32 the grid is 256
//! blocks of 32x16 with `k` = 128, the very grid of forward mage-004 at
//! 128x64 (21.98 µs, 6.1 T multiply-adds/s); at 256x32 256 blocks of 64x32
//! with `k` = 256, forward 256x64's (82.76 µs, 13.0 T/s); at 256x64 and
//! 512x32 twice forward 256x64's and 512x32's work in twice their blocks
//! (forward 512x32: 321.56 µs, 13.4 T/s); at 128x64 128 blocks of 64x32,
//! `k` = 128, one block to an SM as forward 128x32 had on the 64x32 tile
//! (23.62 µs); at 64x8 and 7x5 twice the forward's blocks of 32x16, each
//! the forward's work (6.06 and 2.08 µs). Bytes stay far from the limits:
//! A, B and dO read and dA, dB written are `20·n²c` bytes (at 4 TB/s,
//! were none of it in L2: 2.6 µs at 128x32, 10.5 at 256x32, 21 at 256x64,
//! 42 at 512x32), and the tiles read `2·4n³c·(1/ti +
//! 1/tj)` bytes from L2 (50 MB at 128x32, 5 µs at 10 TB/s; 1.6 GB at
//! 512x32, 161 µs against 640 of multiply-adds). ptxas: 95 registers
//! (32x16) and 128 (64x32), 84 and 78 KiB of shared memory: two blocks of
//! 256 threads an SM (16 warps), 264 blocks in flight; one launch against
//! mage-001's two.
//!
//! | shape | tile, blocks | waves of 264 | multiply-adds | predicted µs | mage-001 µs | best PyTorch µs |
//! |---|---|---|---|---|---|---|
//! | 64x8 | 32x16, 16 | 0.06 | 4.2 M | 6 | 7.58 | 13.11 |
//! | 128x32 | 32x16, 256 | 0.97 | 134 M | 22 | 65.10 | 35.19 |
//! | 256x32 | 64x32, 256 | 0.97 | 1.07 G | 83 | 493.92 | 119.59 |
//! | 128x64 | 64x32, 128 | 0.48 | 268 M | 24 | 130.13 | 53.67 |
//! | 256x64 | 64x32, 512 | 1.94 | 2.15 G | 165 | 1094.59 | 223.69 |
//! | 512x32 | 64x32, 1024 | 3.88 | 8.59 G | 640 | 4099.97 | 663.32 |
//! | 7x5 | 32x16, 2 | 0.01 | 3.4 k | 2.1 | 3.36 | 8.94 |
//!
//! (mage-001 and PyTorch: `results/backward-1/comparison.md`, CUPTI kernel
//! time, hot L2; PyTorch's best of eager and `torch.compile`.) Faster than
//! PyTorch everywhere by the prediction, by the least at 512x32 (4%),
//! where the forward's tile already runs at PyTorch's rate.
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=triangle_backward -->
//! | op | workload | Mage current | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|
//! | triangle_backward | 128x32 | **22.05** mage-002 | 35.44 (6) | 35.56 (6) | 8.66 | 2.54 |
//! | triangle_backward | 64x8 | **5.79** mage-002 | 13.12 (6) | 13.10 (6) | 8.84 | 0.66 |
//! | triangle_backward | 256x32 | **81.81** mage-002 | 119.69 (6) | 119.80 (6) | 42.24 | 1.94 |
//! | triangle_backward | 128x64 | **26.81** mage-002 | 54.04 (6) | 53.61 (6) | 10.56 | 2.54 |
//! | triangle_backward | 256x64 | **164.31** mage-002 | 222.51 (6) | 222.47 (6) | 84.47 | 1.95 |
//! | triangle_backward | 512x32 | **638.67** mage-002 | 659.60 (6) | 660.50 (6) | 337.89 | 1.89 |
//! | triangle_backward | 7x5 | **2.25** mage-002 | 8.42 (6) | 8.42 (6) | 7.43 | 0.30 |
//! <!-- /mage:table -->

use crate::channel_tiles::{ChannelTiles, TILES_32X16, TILES_64X32, gradient_tiles_launch};
use crate::channel_tiles::{triangle_backward_tiles_32x16, triangle_backward_tiles_64x32};
use mage_common::Kernel;

/// Blocks (of both gradients) from which the 64x32 tile keeps every SM
/// busy: about one per SM of the H200's 132, the rule of forward mage-004.
pub const FILL_BLOCKS: u32 = 128;

/// A kernel entry and its tile.
pub type Entry = (&'static Kernel, ChannelTiles);

/// The 64x32 tile where the grid of both gradients has [`FILL_BLOCKS`]
/// blocks, else 32x16.
pub fn tiles(d: &[u32]) -> Entry {
    if 2 * TILES_64X32.blocks(d[0], d[1]) >= FILL_BLOCKS {
        (&triangle_backward_tiles_64x32::KERNEL, TILES_64X32)
    } else {
        (&triangle_backward_tiles_32x16::KERNEL, TILES_32X16)
    }
}

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "dA and dB as channel-tiled GEMMs through a cp.async ring in one launch, block tile by shape: 64x32 where the grid fills the SMs, else 32x16",
    kernels: &[&triangle_backward_tiles_32x16::KERNEL, &triangle_backward_tiles_64x32::KERNEL],
    supports: |_| true,
    plan: |d| {
        let (kernel, shape) = tiles(d);
        gradient_tiles_launch(kernel, shape, d)
    },
};
