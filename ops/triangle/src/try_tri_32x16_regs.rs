//! try-tri-32x16-regs: the 32x16 channel tiles of try-tri-auto's small
//! tile, with the copies to shared memory made through registers by
//! 128-bit loads instead of 4-byte `cp.async`.
//!
//! The tiles, as in try-tri-auto at 128x32: a block of 256 threads owns
//! `O[32 i, 16 j, 8 ch]` (128 blocks at 128x32 for the H200's 132 SMs),
//! reads A's `[32, 16 k, 8]` and B's `[16, 16 k, 8]` per chunk into shared
//! memory transposed to `[k][ch][row]`, and each thread does 16
//! multiply-adds per 2 shared 128-bit loads (see
//! [`channel_tiles`](crate::channel_tiles)). Every global sector it reads
//! (8 channels, 32 bytes) is used whole: 25.2 MB from L2 at 128x32.
//!
//! What changed against the `cp.async` ring: the transposing copies cost
//! `cp.async` one 4-byte copy per element plus a 64-bit address each
//! (ptxas: about 100 issue slots per chunk per thread, against 256 FFMA
//! and 32 shared loads, so the FFMA get ~60% of the issue slots). Here a
//! thread loads its 6 quads of the next chunk with `ld.global.nc.v4` into
//! registers before the multiply-adds of this one and stores them after,
//! 4 shared stores a quad: about 40 issue slots per chunk, so ~70% FFMA
//! (see [`channel_tiles_via_registers`](crate::channel_tiles_via_registers)).
//! The cost: only one chunk in flight (two buffers, 56 KiB), whose loads
//! must land within the multiply-adds of one chunk (~500 cycles at two
//! warps per scheduler), and 24 more registers. `c % 4 != 0` takes the
//! `_scalar` entry (four guarded 4-byte loads a quad).
//!
//! Prediction (not yet measured on the GPU): at 128x32 about 6,000 issue
//! cycles per SM, 3.0 µs, plus ~0.7 µs to start and store: about 4 µs
//! (try-tri-auto's `cp.async` tile there: 4-5 µs; mage-001 31.4, PyTorch
//! 17.7), about 7 µs at 128x64. If the loads do not hide behind one chunk,
//! it loses to the three-deep `cp.async` ring instead. ptxas: 72
//! registers (`_scalar` 80; the `cp.async` entry 96), 56 KiB of shared
//! memory, no stack, no spills.

use crate::{TILES_32X16_STAGED, channel_tiles_launch, triangle_tiles_32x16_staged_scalar, triangle_tiles_32x16_staged_v4};

/// Whether the `_v4` entry applies: channel quads start 16-byte aligned.
pub fn vector_entry(d: &[u32]) -> bool {
    d[1].is_multiple_of(4)
}

pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-tri-32x16-regs",
    summary: "channel-tiled GEMM, 32x16 (i, j) x 8-channel block tiles, staged through registers by 128-bit loads, two buffers, 4x4 per thread",
    kernels: &[&triangle_tiles_32x16_staged_v4::KERNEL, &triangle_tiles_32x16_staged_scalar::KERNEL],
    supports: |_| true,
    plan: |d| {
        let kernel = if vector_entry(d) { &triangle_tiles_32x16_staged_v4::KERNEL } else { &triangle_tiles_32x16_staged_scalar::KERNEL };
        channel_tiles_launch(kernel, TILES_32X16_STAGED, d)
    },
};
