//! mage-004: the channel-last tensors read as a GEMM per channel through
//! shared memory, with the block tile chosen by shape: 64x32 where its
//! grid still gives about one block per SM, else 32x16.
//!
//! Kernel body: [`crate::channel_tiles`] (entries `triangle_tiles_32x16` and
//! `triangle_tiles_64x32`; the body is shared with mage-005; frozen: its
//! ptxas resources are pinned by `tests/resources.rs`, its bits by
//! `tests/stages.rs`).
//!
//! What changed against mage-003: mage-003 reads every operand straight
//! from global memory (through L1), 8 loads per 64 multiply-adds, with no
//! reuse between threads but what L1 happens to keep. Here a block owns
//! `O[ti i, tj j, 8 ch]` and stages A's `[ti, k chunk, 8]` and B's `[tj, k
//! chunk, 8]` in shared memory by 4-byte `cp.async`, three chunks in
//! flight, transposed on the way to `[k][ch][row]`, so that four rows of
//! one channel are one 128-bit shared load (see
//! [`channel_tiles`](crate::channel_tiles::channel_tiles)). Every global sector a block
//! reads (8 channels, 32 bytes) is used whole. Any `n` and `c` (tails
//! zero-filled, not stored); every output summed as in every other stage.
//!
//! Why by shape: a bigger block tile reads less from L2 per multiply-add
//! (`4n³c·(1/ti + 1/tj)` bytes in all) and spends fewer issue slots on
//! copies, but makes fewer blocks. The plan takes the 64x32 tile where its
//! grid has [`FILL_BLOCKS`] blocks, else 32x16:
//!
//! | tile | threads, outputs each | FLOP per L2 byte | FFMA share of issue (ptxas code) | registers | shared |
//! |---|---|---|---|---|---|
//! | 32x16 | 256, 4x4 | 5.3 | ~60% (copies ~100 of ~420 slots a chunk) | 96 | 84 KiB |
//! | 64x32 | 256, 8x8 | 10.7 | ~78% | 127 | 78 KiB |
//!
//! The prediction, made with a 64x64 tile (512 threads, 8x8 each) in the
//! menu above the 64x32 one and taken where its grid filled the SMs: at
//! 128x32 the 32x16 tile makes 128 blocks for the H200's 132 SMs and
//! reads 25.2 MB from L2, and a block's 524,288 multiply-adds take 4096
//! cycles at the FP32 peak, about 6,800 at the issue share above, so 4-5
//! µs there; 21-24 µs at 256x32 (64x32), about 41 µs at 256x64 and 165
//! µs at 512x32 (64x64), about 8 µs at 128x64 (32x16).
//!
//! Measured (CUPTI kernel time on the H200, hot L2, one sweep; the table
//! is this stage with the prediction's menu, so the 64x64 tile at 256x64
//! and 512x32): from 128x32 up it is the fastest of the stages before it
//! at every shape, about twice as fast as the better of mage-001 and
//! mage-003 (more at 128x32), but everywhere it took two to three times
//! the predicted time. At the two smallest shapes mage-001's one output
//! per thread stays faster. The 64x32 tile on its own beat the 64x64 tile
//! at 256x64 and 512x32, so the menu here has no 64x64 tile; at 128x32 and
//! 128x64 the 32x16 tile beat the 64x32 one, as planned (those runs are in
//! `docs/attempts.md`). Nsight Compute at 128x32 shows why it is slow
//! there: one block of eight warps per SM, waiting mostly on
//! shared-memory results (short scoreboard), then on global data and the
//! LSU queue.
//!
//! <!-- mage:table stage results/candidates-1/sweep-triangle.json stage=try-tri-auto -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 64x8 | 6.01 | 12.64 |
//! | 128x32 | 12.47 | 19.38 |
//! | 256x32 | 47.01 | 54.30 |
//! | 128x64 | 21.82 | 28.66 |
//! | 256x64 | 90.22 | 97.22 |
//! | 512x32 | 337.87 | 347.31 |
//! | 7x5 | 2.05 | 8.37 |
//! <!-- /mage:table -->
//!
//! ptxas: 96 registers (32x16) and 127 (64x32): two blocks of 256
//! threads fit an SM's registers (`tests/resources.rs` checks every
//! launch); no stack, no spills.

use crate::channel_tiles::{ChannelTiles, TILES_32X16, TILES_64X32, channel_tiles_launch};
use crate::channel_tiles::{triangle_tiles_32x16, triangle_tiles_64x32};
use mage_common::Kernel;

/// Blocks from which a tile keeps every SM busy: about one per SM of the
/// H200's 132 (128x32 makes exactly 128 tiles of 32x16, 256x32 128 of 64x32).
pub const FILL_BLOCKS: u32 = 128;

/// A kernel entry and its tile.
pub type Entry = (&'static Kernel, ChannelTiles);

/// `large` where its grid has `FILL_BLOCKS` blocks, else `small`.
pub fn large_where_it_fills(d: &[u32], large: Entry, small: Entry) -> Entry {
    if large.1.blocks(d[0], d[1]) >= FILL_BLOCKS { large } else { small }
}

/// The 64x32 tile where its grid has `FILL_BLOCKS` blocks, else 32x16.
pub fn tiles(d: &[u32]) -> Entry {
    large_where_it_fills(d, (&triangle_tiles_64x32::KERNEL, TILES_64X32), (&triangle_tiles_32x16::KERNEL, TILES_32X16))
}

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-004",
    summary: "channel-tiled GEMM through a cp.async ring, block tile by shape: 64x32 where its grid fills the SMs, else 32x16",
    kernels: &[&triangle_tiles_32x16::KERNEL, &triangle_tiles_64x32::KERNEL],
    supports: |_| true,
    plan: |d| {
        let (kernel, shape) = tiles(d);
        channel_tiles_launch(kernel, shape, d)
    },
};
