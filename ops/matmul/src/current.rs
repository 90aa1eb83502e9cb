//! current: the dispatcher, picking the stage measured fastest for the
//! shape (CUPTI kernel time on the H200, one session). mage-009 (3xTF32 on
//! the tensor cores) takes mage-007's shapes from k = 64: in one later
//! session it measured FASTER than mage-007 on kernel-time verdicts at
//! 4096³, 4096x4096x1024 and 1000x1037x999 (`results/mage-010`). The
//! history stages, in the session before it:
//!
//! | 64x64 output tiles | stage | measured |
//! |---|---|---|
//! | fewer than 32 | mage-001 | 256³: 7.44 µs (mage-006 13.47): 16 tiles leave most of the 132 SMs idle, 256 blocks of 16x16 do not |
//! | 32 or more, and fewer than 72 of 128x128 | mage-006 | 512³ (64 tiles): 26.23 µs (mage-001 39.45); 1024³: 84.16 µs (mage-007 104.12) |
//! | 72 or more of 128x128 | mage-007 | 1000x1037x999 (72): 113.24 µs (mage-006 129.44); 2048³: 381.0 (603.1); 4096³: 2999 (4608) |
//!
//! mage-006 takes any `m, n, k >= 1` (guarded, zero-filled tails), with its
//! `_v4` entry (16-byte `cp.async` of B, 128-bit stores of C) where `n` is a
//! multiple of 4 and its `_scalar` entry otherwise; so does mage-007. Each
//! threshold lies between two measured points: 16 and 64 tiles of 64x64,
//! and 64 and 72 tiles of 128x128 (the second of those with the scalar
//! entries of both stages, n = 1037).

use mage_common::op::{Dispatcher, Stage};

/// Below this many 64x64 output tiles, the 16x16 tiles of mage-001 fill the GPU better.
pub const MIN_TILES_FOR_MAGE_006: u32 = 32;

/// From this many 128x128 output tiles, mage-007's larger tiles fill the GPU.
pub const MIN_TILES_FOR_MAGE_007: u32 = 72;

/// Shortest contraction for the 3xTF32 mage-009: from here its worst-case
/// error bound is inside the op's FP32 tolerance for any input (below, only
/// the typical error is); it measured FASTER than mage-007 at every shape
/// where both were judged (`results/mage-010`, kernel-time verdicts).
pub const MIN_K_FOR_3XTF32: u32 = 64;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    let big_tiles = d[0].div_ceil(128) * d[1].div_ceil(128);
    if tiles < MIN_TILES_FOR_MAGE_006 {
        &crate::mage_001::STAGE
    } else if big_tiles < MIN_TILES_FOR_MAGE_007 {
        &crate::mage_006::STAGE
    } else if d[2] >= MIN_K_FOR_3XTF32 {
        &crate::mage_009::STAGE
    } else {
        &crate::mage_007::STAGE
    }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "mage-001 below 32 tiles of 64x64, mage-006 below 72 tiles of 128x128, else mage-009 (3xTF32) from k = 64 and mage-007 below",
    reads: &[],
    choose: |d, _| choose(d),
};
