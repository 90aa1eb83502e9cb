//! current: the dispatcher, picking the stage measured fastest for the
//! shape (CUPTI kernel time on the H200, kernel-time verdicts in one
//! session). From 32 output tiles of 64x64 and k = 64, mage-009 (3xTF32 on
//! the tensor cores) takes every shape: in `results/tf32-1` it was judged
//! FASTER than mage-006 (which held 512³ to 1024³ before) and than mage-007
//! at every shape with k >= 64, and SLOWER than both at k = 1:
//!
//! <!-- mage:table verdicts results/tf32-1/comparison.json a=mage-009 -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-009 | rust mage-008 | 0.597 [0.594, 0.598] | FASTER |
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-009 | rust mage-006 | 0.373 [0.372, 0.373] | FASTER |
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-009 | rust mage-007 | 0.300 [0.300, 0.300] | FASTER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-009 | rust mage-006 | 0.628 [0.628, 0.628] | FASTER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-009 | rust mage-007 | 0.313 [0.313, 0.313] | FASTER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-009 | rust mage-006 | 0.373 [0.373, 0.373] | FASTER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-009 | rust mage-007 | 0.306 [0.306, 0.306] | FASTER |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-009 | rust mage-006 | 0.341 [0.341, 0.343] | FASTER |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-009 | rust mage-007 | 0.540 [0.539, 0.540] | FASTER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-009 | rust mage-006 | 1.134 [1.128, 1.141] | SLOWER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-009 | rust mage-007 | 1.295 [1.295, 1.295] | SLOWER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-009 | rust mage-006 | 0.350 [0.350, 0.350] | FASTER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-009 | rust mage-007 | 0.284 [0.283, 0.284] | FASTER |
//! <!-- /mage:table -->
//!
//! (`results/mage-010` judged it FASTER than mage-007 at 4096³,
//! 4096x4096x1024 and 1000x1037x999.) Below k = 64 its worst-case error
//! bound leaves the op's tolerance (mage-009's module doc), and at k = 1 it
//! was judged SLOWER than mage-006 anyway. There the CUDA-core stages keep
//! the shapes they held before:
//!
//! | 64x64 output tiles | stage | measured |
//! |---|---|---|
//! | fewer than 32 | mage-001 | 256³: 7.44 µs (mage-006 13.47): 16 tiles leave most of the 132 SMs idle, 256 blocks of 16x16 do not |
//! | 32 or more, and fewer than 72 of 128x128 (k < 64) | mage-006 | 512³ (64 tiles): 26.23 µs (mage-001 39.45); 1024³: 84.16 µs (mage-007 104.12) |
//! | 72 or more of 128x128 (k < 64) | mage-007 | 1000x1037x999 (72): 113.24 µs (mage-006 129.44); 2048³: 381.0 (603.1); 4096³: 2999 (4608) |
//!
//! (`results/mage-007`, measured at the op's sweep shapes, all with k >= 64:
//! the thresholds for k < 64 are carried over from them.) Below 32 tiles
//! mage-009 has not been judged against mage-001.
//!
//! Where `k` or `n` is not a multiple of 4, mage-010 runs mage-009's product
//! on copies padded to 16-byte rows instead of mage-009's 4-byte copies. Its
//! first copies (one element per thread) paid only where the product takes
//! 128-row tiles (`results/pad-1`: 1000x1037x999 and 2047³; 1000x1000x999
//! and 1023³ take 64-row ones), and `current` took it only there in the
//! session that judged its copies by quads (`results/mage-012`, where
//! `current` still runs mage-009 at the 64-row shapes); there it was
//! judged FASTER at all four, so it now takes every such shape:
//!
//! <!-- mage:table verdicts results/mage-012/comparison.json a=mage-010 ops=matmul -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-010 | rust mage-009 | 1.000 [0.999, 1.004] | SAME |
//! | matmul | 256x256x256 | hot | kernel time | rust mage-010 | rust mage-009 | 1.000 [1.000, 1.000] | SAME |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-010 | rust mage-009 | 1.000 [0.998, 1.002] | SAME |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-010 | rust mage-009 | 1.000 [0.997, 1.001] | SAME |
//! | matmul | 4096x4096x4096 | hot | kernel time | rust mage-010 | rust mage-009 | 0.999 [0.956, 1.007] | SAME |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-010 | rust mage-009 | 0.839 [0.837, 0.840] | FASTER |
//! | matmul | 4096x4096x1024 | hot | kernel time | rust mage-010 | rust mage-009 | 1.001 [0.996, 1.010] | SAME |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-010 | rust mage-009 | 1.881 [1.871, 1.890] | SLOWER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-010 | rust mage-009 | 1.000 [0.999, 1.001] | SAME |
//! | matmul | 1000x1000x999 | hot | kernel time | rust mage-010 | rust mage-009 | 0.890 [0.890, 0.894] | FASTER |
//! | matmul | 1023x1023x1023 | hot | kernel time | rust mage-010 | rust mage-009 | 0.971 [0.968, 0.972] | FASTER |
//! | matmul | 2047x2047x2047 | hot | kernel time | rust mage-010 | rust mage-009 | 0.891 [0.890, 0.893] | FASTER |
//! <!-- /mage:table -->
//!
//! From k = 64 mage-011 (split-K over mage-009's product) takes every
//! shape where its slice rule cuts k in two or more: in `results/mage-013`
//! it was judged FASTER than the stage that ran there before (mage-001 at
//! 256³, mage-009 at 512³, 768³ and 1024x1024x8192, mage-010 at
//! 1000x1037x999), and SAME where its rule takes one slice (1024³, 2048³):
//!
//! <!-- mage:table verdicts results/mage-013/comparison.json a=mage-011 ops=matmul -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-011 | rust mage-010 | 0.986 [0.986, 0.988] | SAME |
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-011 | rust mage-009 | 0.987 [0.986, 0.989] | SAME |
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-011 | rust mage-001 | 0.108 [0.108, 0.109] | FASTER |
//! | matmul | 256x256x256 | hot | kernel time | rust mage-011 | rust mage-009 | 0.677 [0.677, 0.677] | FASTER |
//! | matmul | 256x256x256 | hot | kernel time | rust mage-011 | rust mage-010 | 0.677 [0.677, 0.677] | FASTER |
//! | matmul | 256x256x256 | hot | kernel time | rust mage-011 | rust mage-001 | 0.837 [0.837, 0.841] | FASTER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-011 | rust mage-009 | 0.573 [0.572, 0.573] | FASTER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-011 | rust mage-010 | 0.574 [0.573, 0.574] | FASTER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-011 | rust mage-001 | 0.239 [0.239, 0.239] | FASTER |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-011 | rust mage-009 | 0.999 [0.997, 1.000] | SAME |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-011 | rust mage-010 | 0.999 [0.998, 1.001] | SAME |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-011 | rust mage-001 | 0.095 [0.094, 0.095] | FASTER |
//! | matmul | 4096x4096x4096 | hot | kernel time | rust mage-011 | rust mage-009 | 0.997 [0.932, 1.011] | UNCERTAIN |
//! | matmul | 4096x4096x4096 | hot | kernel time | rust mage-011 | rust mage-010 | 1.004 [0.946, 1.012] | UNCERTAIN |
//! | matmul | 4096x4096x4096 | hot | kernel time | rust mage-011 | rust mage-001 | 0.093 [0.092, 0.093] | FASTER |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-011 | rust mage-009 | 0.785 [0.784, 0.787] | FASTER |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-011 | rust mage-010 | 0.931 [0.926, 0.937] | FASTER |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-011 | rust mage-001 | 0.196 [0.196, 0.196] | FASTER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-011 | rust mage-009 | 1.290 [1.290, 1.290] | SLOWER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-011 | rust mage-010 | 0.690 [0.688, 0.690] | FASTER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-011 | rust mage-001 | 0.938 [0.935, 0.940] | FASTER |
//! | matmul | 2048x2048x1 | hot | kernel time | rust mage-011 | rust mage-009 | 1.026 [1.023, 1.026] | SLOWER |
//! | matmul | 2048x2048x1 | hot | kernel time | rust mage-011 | rust mage-010 | 0.625 [0.624, 0.628] | FASTER |
//! | matmul | 2048x2048x1 | hot | kernel time | rust mage-011 | rust mage-001 | 0.592 [0.591, 0.594] | FASTER |
//! | matmul | 4096x4096x63 | hot | kernel time | rust mage-011 | rust mage-009 | 0.907 [0.905, 0.908] | FASTER |
//! | matmul | 4096x4096x63 | hot | kernel time | rust mage-011 | rust mage-010 | 0.578 [0.577, 0.581] | FASTER |
//! | matmul | 4096x4096x63 | hot | kernel time | rust mage-011 | rust mage-001 | 0.168 [0.168, 0.168] | FASTER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-011 | rust mage-009 | 0.860 [0.859, 0.860] | FASTER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-011 | rust mage-010 | 0.859 [0.858, 0.859] | FASTER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-011 | rust mage-001 | 0.164 [0.164, 0.165] | FASTER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-011 | rust mage-009 | 0.958 [0.957, 0.963] | FASTER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-011 | rust mage-010 | 0.958 [0.955, 0.959] | FASTER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-011 | rust mage-001 | 0.097 [0.097, 0.098] | FASTER |
//! <!-- /mage:table -->
//!
//! mage-012 (small k on CUDA cores) takes k = 1: judged FASTER than
//! mage-006 and mage-007 there, SLOWER than both at 4096x4096x63 and at
//! every shape with a long k; k = 2 to 63 keeps mage-006 and mage-007
//! until it is measured between:
//!
//! <!-- mage:table verdicts results/mage-013/comparison.json a=mage-012 ops=matmul -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-012 | rust mage-011 | 8.167 [8.146, 8.203] | SLOWER |
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-012 | rust mage-006 | 2.989 [2.987, 2.994] | SLOWER |
//! | matmul | 1024x1024x1024 | hot | kernel time | rust mage-012 | rust mage-007 | 2.409 [2.408, 2.410] | SLOWER |
//! | matmul | 256x256x256 | hot | kernel time | rust mage-012 | rust mage-006 | 4.333 [4.330, 4.335] | SLOWER |
//! | matmul | 256x256x256 | hot | kernel time | rust mage-012 | rust mage-007 | 2.141 [2.140, 2.141] | SLOWER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-012 | rust mage-006 | 4.552 [4.551, 4.552] | SLOWER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-012 | rust mage-007 | 2.254 [2.254, 2.254] | SLOWER |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-012 | rust mage-006 | 2.156 [2.154, 2.162] | SLOWER |
//! | matmul | 2048x2048x2048 | hot | kernel time | rust mage-012 | rust mage-007 | 3.416 [3.414, 3.420] | SLOWER |
//! | matmul | 4096x4096x4096 | hot | kernel time | rust mage-012 | rust mage-006 | 2.269 [2.269, 2.271] | SLOWER |
//! | matmul | 4096x4096x4096 | hot | kernel time | rust mage-012 | rust mage-007 | 3.486 [3.484, 3.490] | SLOWER |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-012 | rust mage-006 | 2.567 [2.563, 2.572] | SLOWER |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-012 | rust mage-007 | 2.924 [2.911, 2.926] | SLOWER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-012 | rust mage-006 | 0.500 [0.500, 0.500] | FASTER |
//! | matmul | 1024x1024x1 | hot | kernel time | rust mage-012 | rust mage-007 | 0.571 [0.571, 0.571] | FASTER |
//! | matmul | 2048x2048x1 | hot | kernel time | rust mage-012 | rust mage-006 | 0.459 [0.457, 0.463] | FASTER |
//! | matmul | 2048x2048x1 | hot | kernel time | rust mage-012 | rust mage-007 | 0.668 [0.661, 0.672] | FASTER |
//! | matmul | 4096x4096x63 | hot | kernel time | rust mage-012 | rust mage-006 | 1.859 [1.857, 1.860] | SLOWER |
//! | matmul | 4096x4096x63 | hot | kernel time | rust mage-012 | rust mage-007 | 2.352 [2.348, 2.357] | SLOWER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-012 | rust mage-006 | 2.918 [2.911, 2.922] | SLOWER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-012 | rust mage-007 | 2.381 [2.377, 2.382] | SLOWER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-012 | rust mage-006 | 5.137 [5.133, 5.139] | SLOWER |
//! | matmul | 1024x1024x8192 | hot | kernel time | rust mage-012 | rust mage-007 | 4.166 [4.165, 4.167] | SLOWER |
//! <!-- /mage:table -->
//!
//! mage-006 takes any `m, n, k >= 1` (guarded, zero-filled tails), with its
//! `_v4` entry (16-byte `cp.async` of B, 128-bit stores of C) where `n` is a
//! multiple of 4 and its `_scalar` entry otherwise; so does mage-007.

//! mage-014 (the same split in one launch, a tile's slices one cluster)
//! takes mage-011's shapes where its split is mage-011's, except where
//! clusters of four or more slices would fill more than 96 SMs: in
//! `results/mage-014` it was FASTER than mage-011 at 256³ (32 blocks in
//! clusters of 4), 768³ (108 in clusters of 3), 1000x1037x999 (216 in
//! clusters of 3) and 4096x768x3072 (384 in clusters of 2), and SLOWER at
//! 512³, whose 32 clusters of 4 (128 blocks) did not all fit at once on
//! the GPCs (14.51 µs against 9.55: a second wave):
//!
//! <!-- mage:table verdicts results/mage-014/comparison.json a=mage-014 -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul | 256x256x256 | hot | kernel time | rust mage-014 | rust mage-011 | 0.885 [0.883, 0.888] | FASTER |
//! | matmul | 512x512x512 | hot | kernel time | rust mage-014 | rust mage-011 | 1.515 [1.515, 1.515] | SLOWER |
//! | matmul | 1000x1037x999 | hot | kernel time | rust mage-014 | rust mage-011 | 0.932 [0.930, 0.934] | FASTER |
//! | matmul | 768x768x768 | hot | kernel time | rust mage-014 | rust mage-011 | 0.849 [0.848, 0.850] | FASTER |
//! | matmul | 4096x768x3072 | hot | kernel time | rust mage-014 | rust mage-011 | 0.926 [0.923, 0.927] | FASTER |
//! <!-- /mage:table -->

use mage_common::op::{Dispatcher, Stage};

/// SMs that clusters of [`MIN_SLICES_PACKED`] or more blocks may fill in
/// one wave (one block an SM): 128 blocks in clusters of 4 took a second
/// wave at 512³ (`results/mage-014`).
pub const MAX_CLUSTERED_BLOCKS: u32 = 96;

/// From this many slices a cluster the GPCs' packing limits mage-014
/// ([`MAX_CLUSTERED_BLOCKS`]); 108 blocks in clusters of 3 ran in one wave.
pub const MIN_SLICES_PACKED: u32 = 4;

/// Whether mage-014 takes a shape mage-011 splits: the same split, and
/// its clusters fit one wave as measured.
pub fn clusters_fit(d: &[u32]) -> bool {
    let (rows, slice_k) = crate::mage_014::split(d);
    if (rows, slice_k) != crate::mage_011::split(d) {
        return false;
    }
    let slices = crate::mage_014::slices(d);
    let blocks = crate::mage_011::tiles(d, rows) * slices;
    slices < MIN_SLICES_PACKED || blocks <= MAX_CLUSTERED_BLOCKS
}

/// Below this many 64x64 output tiles, the 16x16 tiles of mage-001 fill the GPU better.
pub const MIN_TILES_FOR_MAGE_006: u32 = 32;

/// From this many 128x128 output tiles, mage-007's larger tiles fill the GPU.
pub const MIN_TILES_FOR_MAGE_007: u32 = 72;

/// Shortest contraction for the 3xTF32 mage-009: from here its worst-case
/// error bound is inside the op's FP32 tolerance for any input (below, only
/// the typical error is); it was judged FASTER than mage-006 and mage-007
/// at every shape with k >= 64 where they met (`results/tf32-1`,
/// `results/mage-010`, kernel-time verdicts).
pub const MIN_K_FOR_3XTF32: u32 = 64;

/// The longest contraction mage-012 takes (below 32 tiles of 64x64
/// mage-001 keeps it): judged FASTER at k = 1, SLOWER at 4096x4096x63
/// (`results/mage-013`); between them it is not measured.
pub const MAX_K_FOR_MAGE_012: u32 = 1;

/// The stage `current` runs for these dims.
pub fn choose(d: &[u32]) -> &'static Stage {
    let tiles = d[0].div_ceil(64) * d[1].div_ceil(64);
    let big_tiles = d[0].div_ceil(128) * d[1].div_ceil(128);
    if d[2] >= MIN_K_FOR_3XTF32 && crate::mage_011::slices(d) >= 2 {
        if clusters_fit(d) { &crate::mage_014::STAGE } else { &crate::mage_011::STAGE }
    } else if tiles < MIN_TILES_FOR_MAGE_006 {
        &crate::mage_001::STAGE
    } else if d[2] >= MIN_K_FOR_3XTF32 {
        if crate::vector_rows(d) { &crate::mage_009::STAGE } else { &crate::mage_010::STAGE }
    } else if d[2] <= MAX_K_FOR_MAGE_012 {
        &crate::mage_012::STAGE
    } else if big_tiles < MIN_TILES_FOR_MAGE_007 {
        &crate::mage_006::STAGE
    } else {
        &crate::mage_007::STAGE
    }
}

/// `current` for the registry: picks from the dims alone.
pub const DISPATCHER: Dispatcher = Dispatcher {
    summary: "from k = 64 where its rule splits K mage-014 (one launch) where its clusters fit, else mage-011; else mage-001 below 32 tiles of 64x64; else from k = 64 mage-009 where k and n are multiples of 4, mage-010 (padded rows) elsewhere; at k = 1 mage-012; else mage-006 under 72 tiles of 128x128 and mage-007 from there",
    reads: &[],
    choose: |d, _| choose(d),
};
