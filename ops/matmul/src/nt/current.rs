//! matmul_nt's dispatcher: from k = 64, split-K in one launch (mage-004,
//! a tile's slices one thread-block cluster) where its rule splits and its
//! clusters fit one wave ([`clusters_fit`]); then split-K over the 3xTF32
//! product (mage-003) where its slice rule cuts k in three or more; elsewhere
//! matmul's rule, the 3xTF32 product (mage-002) from k = 64 and 32 output
//! tiles of 64x64, below which the CUDA-core 16x16 tiles (mage-001) fill
//! the 132 SMs better; mage-001 everywhere else.
//!
//! Measured (`results/backward-9`, one H200, CUPTI kernel time, hot L2,
//! A-B-B-A verdicts on kernel time): mage-003 against the stages the old
//! rule ran:
//!
//! <!-- mage:table verdicts results/backward-9/comparison.json a=mage-003 ops=matmul_nt -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul_nt | 256x256x256 | hot | kernel time | rust mage-003 | rust mage-002 | 0.678 [0.678, 0.678] | FASTER |
//! | matmul_nt | 256x256x256 | hot | kernel time | rust mage-003 | rust mage-001 | 0.808 [0.805, 0.808] | FASTER |
//! | matmul_nt | 512x512x512 | hot | kernel time | rust mage-003 | rust mage-002 | 0.575 [0.573, 0.575] | FASTER |
//! | matmul_nt | 512x512x512 | hot | kernel time | rust mage-003 | rust mage-001 | 0.193 [0.193, 0.193] | FASTER |
//! | matmul_nt | 1000x1037x999 | hot | kernel time | rust mage-003 | rust mage-002 | 0.762 [0.761, 0.763] | FASTER |
//! | matmul_nt | 1000x1037x999 | hot | kernel time | rust mage-003 | rust mage-001 | 0.156 [0.156, 0.156] | FASTER |
//! | matmul_nt | 1024x1024x1024 | hot | kernel time | rust mage-003 | rust mage-002 | 0.997 [0.996, 0.998] | SAME |
//! | matmul_nt | 1024x1024x1024 | hot | kernel time | rust mage-003 | rust mage-001 | 0.085 [0.085, 0.085] | FASTER |
//! <!-- /mage:table -->
//!
//! At 1024³ its rule takes one slice, mage-002's plan: SAME, and `current`
//! keeps mage-002 there; at 4096x768x3072, two slices, it was SLOWER
//! (`results/backward-10`: 265.29 µs against mage-002's 257.03). The
//! 3xTF32 stages start at k = 64, where their worst-case error bound is
//! inside the FP32 tolerance for any input.
//!
//! mage-004 (`results/backward-13`) was FASTER than the stages this rule ran
//! before, and SLOWER at 512³, where its 128 blocks in clusters of 4 did
//! not fit one wave:
//!
//! <!-- mage:table verdicts results/backward-13/comparison.json a=mage-004 ops=matmul_nt -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul_nt | 256x256x256 | hot | kernel time | rust mage-004 | rust mage-003 | 0.898 [0.898, 0.898] | FASTER |
//! | matmul_nt | 256x256x256 | hot | kernel time | rust mage-004 | rust mage-002 | 0.608 [0.608, 0.608] | FASTER |
//! | matmul_nt | 512x512x512 | hot | kernel time | rust mage-004 | rust mage-003 | 1.539 [1.539, 1.542] | SLOWER |
//! | matmul_nt | 512x512x512 | hot | kernel time | rust mage-004 | rust mage-002 | 0.893 [0.893, 0.894] | FASTER |
//! | matmul_nt | 1000x1037x999 | hot | kernel time | rust mage-004 | rust mage-003 | 0.950 [0.950, 0.952] | FASTER |
//! | matmul_nt | 1000x1037x999 | hot | kernel time | rust mage-004 | rust mage-002 | 0.727 [0.726, 0.728] | FASTER |
//! | matmul_nt | 4096x768x3072 | hot | kernel time | rust mage-004 | rust mage-003 | 0.925 [0.924, 0.925] | FASTER |
//! | matmul_nt | 4096x768x3072 | hot | kernel time | rust mage-004 | rust mage-002 | 0.947 [0.943, 0.949] | FASTER |
//! <!-- /mage:table -->

use mage_common::op::{Dispatcher, Stage};

/// Fewest K slices for which [`choose`] takes mage-003: with two, at the
/// MLP block's 4096x768x3072, it was SLOWER than mage-002 (1.037,
/// `results/backward-10`); with three and four FASTER.
pub const MIN_SLICES_FOR_MAGE_003: u32 = 3;

/// Below this many 64x64 output tiles, mage-001's 16x16 tiles fill the GPU better.
pub const MIN_TILES_FOR_3XTF32: u32 = 32;

/// Shortest contraction for the 3xTF32 mage-002: from here its worst-case
/// error bound is inside the op's FP32 tolerance for any input.
pub const MIN_K_FOR_3XTF32: u32 = 64;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    if d[2] >= MIN_K_FOR_3XTF32 && clusters_fit(d) {
        return &super::mage_004::STAGE;
    }
    if d[2] >= MIN_K_FOR_3XTF32 && super::mage_003::slices(d) >= MIN_SLICES_FOR_MAGE_003 {
        return &super::mage_003::STAGE;
    }
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    if tiles >= MIN_TILES_FOR_3XTF32 && d[2] >= MIN_K_FOR_3XTF32 { &super::mage_002::STAGE } else { &super::mage_001::STAGE }
}

/// Whether mage-004 takes a shape: its rule cuts k in two slices or more,
/// the same split as mage-003's (where mage-003 would cut k in more than 8
/// slices, mage-004's longer slices are not measured), and its clusters
/// fit one wave as matmul mage-014's were measured to (fewer than
/// [`crate::current::MIN_SLICES_PACKED`] slices, or at most
/// [`crate::current::MAX_CLUSTERED_BLOCKS`] blocks): 512³'s 32 tiles in
/// clusters of 4 do not, and lost to mage-003 (1.539, `results/backward-13`).
pub fn clusters_fit(d: &[u32]) -> bool {
    let (rows, slice_k) = super::mage_004::split(d);
    if (rows, slice_k) != super::mage_003::split(d) {
        return false;
    }
    let slices = super::mage_004::slices(d);
    let blocks = crate::k_slices::tiles(d, rows) * slices;
    slices >= 2 && (slices < crate::current::MIN_SLICES_PACKED || blocks <= crate::current::MAX_CLUSTERED_BLOCKS)
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "from k = 64 mage-004 (split-K in one launch) where its rule splits as mage-003's and its clusters fit one wave; else mage-003 (split-K) where its rule cuts K in 3 or more; else mage-002 (3xTF32) from k = 64 and 32 tiles of 64x64; mage-001 below either",
    reads: &[],
    choose: |d, _| choose(d),
};
