//! matmul_tn's dispatcher: split-K (mage-004) where its slice rule cuts k
//! in two or more, k is at least 512 and the output has fewer than two
//! waves of 64x64 tiles (264 on 132 SMs); elsewhere matmul's rule, the
//! 3xTF32 product (mage-002) from k = 64 and 32 tiles of 64x64, mage-001
//! below either.
//!
//! Measured (`results/backward-5`, one H200, CUPTI kernel time, hot L2,
//! A-B-B-A verdicts on kernel time): mage-004 against the stage the old
//! rule ran was FASTER at 512³ (10.31 µs against mage-002's 17.99, 0.574),
//! 768x768x4096 (105.74 against 124.51, 0.850), 64x64x4096 (9.42 against
//! mage-001's 100.24, 0.096), 128x128x65536 (46.52 against 2686.86, 0.017)
//! and 64x128x65536 (27.30 against 2673.02, 0.010); SLOWER at 256³ (8.72
//! against mage-001's 7.91: k = 256, below the 512 here), 1000x1037x999
//! (86.54 against mage-002's 74.89: 272 tiles, past two waves, where
//! mage-002's 128-row tiles win), and with one slice (mage-003's
//! product) at 1024³ (1.116×), 2048³ and 4096³ (1.55×). Of the two
//! one-launch 3xTF32 stages mage-002 stays: mage-003 was 1.134× mage-002
//! at 1024³.
//!
//! mage-005 (split-K over the transposed product: mage-002's transpose,
//! then matmul mage-011's split) is not taken yet: its module doc
//! predicts about 290 and 305-310 µs at the MLP's weight-gradient shapes
//! (768, 3072, 4096) and (3072, 768, 4096), where this rule runs
//! mage-002 (358.64 and 373.47), and about 55 at 1000x1037x999 (mage-002
//! 74.89). Measured: pending a GPU verdict.

use mage_common::op::{Dispatcher, Stage};

/// Below this many 64x64 output tiles, mage-001's 16x16 tiles fill the GPU better.
pub const MIN_TILES_FOR_3XTF32: u32 = 32;

/// Shortest contraction for the 3xTF32 mage-002: from here its worst-case
/// error bound is inside the op's FP32 tolerance for any input.
pub const MIN_K_FOR_3XTF32: u32 = 64;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if splits(d) {
        return &super::mage_004::STAGE;
    }
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    if tiles >= MIN_TILES_FOR_3XTF32 && d[2] >= MIN_K_FOR_3XTF32 { &super::mage_002::STAGE } else { &super::mage_001::STAGE }
}

/// Shortest contraction from which [`choose`] takes mage-004.
pub const MIN_K_FOR_SPLIT_K: u32 = 512;

/// From this many 64x64 output tiles (two waves of one block per SM on
/// 132 SMs) mage-002's product fills the GPU without a split.
pub const MAX_TILES_FOR_SPLIT_K: u32 = 264;

/// Whether mage-004's split applies: its slice rule cuts k in two or
/// more, `k >= MIN_K_FOR_SPLIT_K`, fewer than `MAX_TILES_FOR_SPLIT_K` tiles.
pub fn splits(d: &[u32]) -> bool {
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    d[2] >= MIN_K_FOR_SPLIT_K && tiles < MAX_TILES_FOR_SPLIT_K && super::mage_004::slices(d) >= 2
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "mage-004 (split-K) where k >= 512 splits over fewer than 264 tiles; else mage-002 (3xTF32) from k = 64 and 32 tiles of 64x64; mage-001 below either",
    reads: &[],
    choose: |d, _| choose(d),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_measured_winner_at_every_measured_shape() {
        // results/backward-5's kernel-time verdicts.
        for (d, stage) in [
            ([256, 256, 256], "mage-001"),
            ([512, 512, 512], "mage-004"),
            ([1024, 1024, 1024], "mage-002"),
            ([2048, 2048, 2048], "mage-002"),
            ([4096, 4096, 4096], "mage-002"),
            ([1000, 1037, 999], "mage-002"),
            ([768, 768, 4096], "mage-004"),
            ([64, 64, 4096], "mage-004"),
            ([128, 128, 65536], "mage-004"),
            ([64, 128, 65536], "mage-004"),
        ] {
            assert_eq!(choose(&d).name, stage, "{d:?}");
        }
        // Short k and one-slice shapes keep the old rule.
        for d in [[64, 64, 511], [1024, 1024, 1], [17, 19, 23], [3072, 768, 4096]] {
            assert!(!splits(&d), "{d:?}");
        }
    }
}
