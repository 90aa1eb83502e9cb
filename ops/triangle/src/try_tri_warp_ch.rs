//! try-tri-warp-ch: mage-004's tiles and choice with a warp per channel
//! instead of a channel per lane.
//!
//! What changed against mage-004: there lane `l` of a warp owns channel `l
//! % 8`, so one 128-bit shared load of a warp reads the rows of 8 channels
//! and little of it is shared between lanes: at 32x16 (4x4 per thread) a
//! `k` step costs a warp 5 shared wavefronts (A 1, B 4) for 16 FFMA
//! instructions; at 64x32 (8x8) 10 for 64. Eight warps then ask the shared
//! pipe for 40 wavefronts per `k` plus 12 for the `cp.async` writes,
//! against 32 cycles of FFMA issue: the pipe, not the FMA units, sets the
//! pace, and Nsight Compute's largest stall on mage-004 at 128x32 is the
//! wait for shared loads (short scoreboard). Here the 32 threads of a warp
//! own one channel's whole block tile (8 row groups × 4 column groups), a
//! thread's row quads `ti/(ri/4)` rows apart, so a load of A reads 32
//! consecutive floats of one channel row and a load of B 16, one wavefront
//! each: 2 per `k` step at 32x16, 4 at 64x32, with the same instructions
//! (see [`channel_tiles`](crate::channel_tiles)). The copies are mage-004's. A
//! warp now holds one channel, so the outputs go through shared memory
//! (two more barriers, no bank conflict) to leave as 32-byte sectors of 8
//! channels.
//!
//! The tiles: 32x16 with a four-deep ring (96 registers, 112 KiB of
//! shared memory); 64x32 with chunks of 4 `k` (ptxas gives the 8-`k`
//! chunks of mage-004 129 registers with this placement, which would allow
//! one block per SM: 123 here, two blocks; 72 KiB, the output staging's
//! size). No stack, no spills.
//!
//! Prediction (not yet measured on the GPU): at 128x32 the shared pipe
//! drops from 52 to 28 wavefronts per `k` per SM, under the 32 cycles of
//! FFMA issue, so the shared waits should shrink; the issue slots and the
//! one block of eight warps per SM stay, so about 8-10 µs (mage-004 12.47;
//! below 6.2 only if the shared waits were nearly all of the gap), about
//! 15 µs at 128x64. At 256x64 and 512x32 (64x32, two blocks per SM) 112
//! wavefronts per `k` per SM instead of 208 against 256 cycles of FFMA:
//! about 65-75 µs and 250-290 µs (the 64x32 tile in mage-004: 82.37 and
//! 319.89), paid for in part by a barrier every 4 `k`.
use crate::mage_004::{Entry, large_where_it_fills};
use crate::{TILES_32X16_WARP, TILES_64X32_WARP, channel_tiles_launch};
use crate::{triangle_tiles_32x16_warp, triangle_tiles_64x32_warp};

/// mage-004's choice: the 64x32 tile where its grid fills the SMs, else 32x16.
pub fn tiles(d: &[u32]) -> Entry {
    large_where_it_fills(d, (&triangle_tiles_64x32_warp::KERNEL, TILES_64X32_WARP), (&triangle_tiles_32x16_warp::KERNEL, TILES_32X16_WARP))
}

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-tri-warp-ch",
    summary: "mage-004 with a warp per channel: one shared wavefront per 128-bit load, outputs staged through shared memory",
    kernels: &[&triangle_tiles_32x16_warp::KERNEL, &triangle_tiles_64x32_warp::KERNEL],
    supports: |_| true,
    plan: |d| {
        let (kernel, shape) = tiles(d);
        channel_tiles_launch(kernel, shape, d)
    },
};
