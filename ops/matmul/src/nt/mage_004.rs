//! matmul_nt mage-004: split-K in one launch through a thread-block
//! cluster, as matmul mage-014 does, over mage-003's product and layout.
//! The K slices of one output tile are the blocks of one cluster; each
//! runs mage-003's product over its slice into its own shared memory, and
//! the cluster adds the partials in slice order from each other's shared
//! memory straight into C: no scratch, no totals kernel, no atomics.
//!
//! Kernel bodies: [`crate::tf32x3`] (mage-002's product; frozen) with
//! [`crate::cluster_totals::NSliceInShared`] (its
//! [`crate::tf32x3::NSliceByK`] layout, mage-003's, with the accumulators
//! stored into shared memory), and [`crate::cluster_totals`] (the slice
//! body, the cluster's totals, the rule and the plan, shared with matmul
//! mage-014); this module holds the entries, this document and the stage.
//!
//! ## What changed
//!
//! mage-003 stores each block's partial into scratch `[slices, m, n]` and
//! a second launch, `matmul_nt_add_slices`, adds them: at 256³ 6.33 µs of
//! kernel time over two kernels against torch's 6.32 (`results/backward-9`),
//! the totals launch the gap (`results/nsight-3`). Here the grid is
//! mage-003's, `(tiles, slices)`, launched in clusters of `(1, slices)`:
//! block `(t, s)` runs mage-003's slice body (A and B moved by `s·slice_k`
//! floats, their rows the full `k4` apart: its partial is mage-003's to
//! the bit) and stores its accumulators into its own shared memory, in
//! mage-014's tile of rows of 132 floats (here in [`crate::tf32x3::NByK`]'s
//! map of the registers: columns `col` and `col + 8`, four 32-bit stores a
//! quad, each warp's on 32 banks); then mage-014's cluster totals, rank 0
//! first, the first partial the sum itself: for `S <= 8` the additions of
//! [`crate::split_k`]'s totals (one segment), so C is mage-003's to the
//! bit (`tests/cluster.rs`), stored on C's own `n` columns. A and B are
//! padded to `[m, k4]` and `[n, k4]` only where `k` is not a multiple of
//! 4, as in mage-003.
//!
//! The slice rule is mage-003's ([`crate::k_slices::split`]) with at most
//! 8 slices, mage-014's ([`crate::cluster_totals::split`]): the same split
//! as mage-003 at 256³ (4 slices of 64 at 64 rows), 512³ (4 of 128 at 64
//! rows) and 1000x1037x999 (3 of 384 at 128 rows). One slice runs the
//! same entry in a cluster of one: mage-002's product and bits.
//!
//! ptxas (13.0.88, sm_90a): 255 registers at 128 rows (mage-003's 255),
//! 160 at 64 (162), no stack, no spills; 256 threads, one block per SM,
//! with 201712 or 136176 bytes of shared memory (mage-003's; the partial
//! tile reuses the stages). Adding these entries left every other entry
//! of the crate's PTX the same instructions (only label numbers moved)
//! and every other ptxas snapshot unchanged.
//!
//! ## Prediction (H200, 132 SMs, 1.98 GHz)
//!
//! mage-003's model without the totals launch, plus mage-014's estimate
//! of each block's reduction (1.3 µs a block at 128 rows, 0.9 at 64):
//!
//! - 256³: 8 clusters of 4 (32 blocks) of two K tiles, 3.8 µs, and 0.9:
//!   4.7 µs (mage-003 measured 6.33, torch 6.32).
//! - 512³: 32 clusters of 4 (128 blocks, one wave) of four K tiles, 5.6
//!   µs, and 0.9: 6.5 µs (mage-003 9.48, torch 13.10).
//! - 1000x1037x999 (k padded to 1000): 72 clusters of 3 (216 blocks of
//!   128 rows, two waves) of 12 K tiles, 42.4 µs, two waves' reductions,
//!   2.6, and the padding's two copies, 3: 48.0 µs (mage-003 55.63, torch
//!   65.38).
//!
//! As for mage-014, a cluster's blocks must be resident on one GPC at
//! once, which may leave SMs idle at one block per SM.
//!
//! ## Measured
//!
//! `results/backward-13` (CUPTI kernel time, hot L2, medians): 5.68 µs at
//! 256³ against mage-003's 6.29, judged FASTER (0.898), and under torch's
//! 6.34 in the same session (the prediction, 4.7, was 17% low); 53.30
//! against 56.17 at 1000x1037x999 (0.950) and 245.52 against mage-002's
//! 256.95 at 4096x768x3072 (two slices, 0.947), both FASTER; SLOWER at
//! 512³, 14.67 against 9.52 (1.539): 32 tiles in clusters of 4, 128 blocks,
//! past one wave, as mage-014 at 512³. `current` takes it where its split
//! is mage-003's and its clusters fit one wave
//! (`super::current::clusters_fit`).

pub use crate::tf32x3::matmul_resize;
use crate::tf32x3::{Rows64, Rows128};

mage_common::kernel! {
    /// Block `(t, s)` of a cluster `(1, slices)`: tile `t` (128 rows x 128
    /// columns) of slice `s`'s partial into the block's shared memory, then
    /// the cluster's in-order totals of its share of the tile into C `[m,
    /// n]`; A `[m, k4]`, B `[n, k4]` (rows padded where `k` was not a
    /// multiple of 4), `slice_k` a multiple of 4. 256 threads.
    pub unsafe fn matmul_nt_3xtf32_cluster_m128(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::cluster_totals::slice_nt_in_cluster::<Rows128>(a, b, c, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the 128-row entry, 64 rows x 128 columns per block.
    pub unsafe fn matmul_nt_3xtf32_cluster_m64(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::cluster_totals::slice_nt_in_cluster::<Rows64>(a, b, c, m, n, k, slice_k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::cluster_totals::ClusterEntries;
    use crate::k_slices::BLayout;
    use mage_common::op::{Plan, Stage};

    pub use crate::cluster_totals::{MAX_CLUSTER_SLICES, slices, split};

    /// This stage's entries, for [`crate::cluster_totals::plan_with`]: B `[n, k]`.
    pub static ENTRIES: ClusterEntries = ClusterEntries {
        stage: "matmul_nt mage-004",
        m128: &matmul_nt_3xtf32_cluster_m128::KERNEL,
        m64: &matmul_nt_3xtf32_cluster_m64::KERNEL,
        b: BLayout::NByK,
    };

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`crate::k_slices::SLICE_QUANTUM`] where
    /// there are two or more, at most [`MAX_CLUSTER_SLICES`]): where `k` is
    /// not a multiple of 4, A and B padded into scratch first (`[m, k4]`,
    /// `[n, k4]`); then the clustered product and totals, straight into C.
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32) -> Plan {
        crate::cluster_totals::plan_with(d, rows, slice_k, &ENTRIES)
    }

    pub fn plan(d: &[u32]) -> Plan {
        let (rows, slice_k) = split(d);
        plan_with(d, rows, slice_k)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-004",
        summary: "split-K in one launch: the K slices of a tile are one thread-block cluster, each block mage-003's 3xTF32 product over its slice into its own shared memory, the partials added in slice order through distributed shared memory straight into C; at most 8 slices",
        kernels: &[&matmul_nt_3xtf32_cluster_m128::KERNEL, &matmul_nt_3xtf32_cluster_m64::KERNEL, &matmul_resize::KERNEL],
        supports: |_| true,
        plan,
    };
}
