//! matmul_tn's dispatcher, by matmul's rule (its `current`'s doc has the
//! measurements): the 3xTF32 product (mage-002) from k = 64, where its
//! worst-case error bound is inside the FP32 tolerance for any input, and
//! from 32 output tiles of 64x64, below which matmul keeps its CUDA-core
//! 16x16 tiles (mage-001) because the 3xTF32 blocks leave most of the 132
//! SMs idle; mage-001 everywhere else. The rule is carried over, not yet
//! measured for this op on the GPU. Of the two 3xTF32 stages it takes
//! mage-002 (A transposed in a launch of its own, then mage-009's product
//! at 64 or 128 rows): mage-003 (the transpose inside the product) has 64
//! rows only, predicted about 1.2x slower than 128-row tiles at 4096³ and
//! within a few µs of mage-002 at 1024³ either way (the module docs'
//! predictions); it is taken nowhere until the two are measured.

use mage_common::op::{Dispatcher, Stage};

/// Below this many 64x64 output tiles, mage-001's 16x16 tiles fill the GPU better.
pub const MIN_TILES_FOR_3XTF32: u32 = 32;

/// Shortest contraction for the 3xTF32 mage-002: from here its worst-case
/// error bound is inside the op's FP32 tolerance for any input.
pub const MIN_K_FOR_3XTF32: u32 = 64;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    if tiles >= MIN_TILES_FOR_3XTF32 && d[2] >= MIN_K_FOR_3XTF32 { &super::mage_002::STAGE } else { &super::mage_001::STAGE }
}

/// Shortest contraction from which [`choose_with_split_k`] takes mage-004.
pub const MIN_K_FOR_SPLIT_K: u32 = 1024;

/// [`choose`] with split-K (mage-004) where the output has fewer than
/// [`MIN_TILES_FOR_3XTF32`] tiles of 64x64 and `k >= MIN_K_FOR_SPLIT_K`:
/// the weight gradients of Linear layers, few tiles over a long k, where
/// mage-001's few blocks each walk all of k (mage-004's module doc has the
/// prediction). Not the registry's `current` yet: it waits for mage-004's
/// kernel time on the GPU against mage-001's at those shapes, and then is
/// the dispatcher's `choose` in one line.
pub fn choose_with_split_k(d: &[u32]) -> &'static Stage {
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    if tiles < MIN_TILES_FOR_3XTF32 && d[2] >= MIN_K_FOR_SPLIT_K { &super::mage_004::STAGE } else { choose(d) }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "mage-002 (3xTF32) from k = 64 and 32 tiles of 64x64; mage-001 below either",
    reads: &[],
    choose: |d, _| choose(d),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_k_takes_few_tiles_over_a_long_k_and_defers_to_choose_elsewhere() {
        for d in [[128, 128, 65536], [64, 128, 65536], [64, 64, 4096], [32, 64, 4096], [256, 256, 16384], [1, 1, 1024], [320, 320, 1024]] {
            assert_eq!(choose_with_split_k(&d).name, "mage-004", "{d:?}");
        }
        for d in [[64, 64, 1023], [1024, 1024, 1], [768, 768, 4096], [1024, 1024, 1024], [384, 384, 4096], [17, 19, 23], [4096, 4096, 4096]]
        {
            assert!(std::ptr::eq(choose_with_split_k(&d), choose(&d)), "{d:?}");
        }
    }
}
