//! mage-014: split-K in one launch through a thread-block cluster. The K
//! slices of one output tile are the blocks of one cluster; each runs
//! mage-011's product over its slice into its own shared memory, and the
//! cluster adds the partials in slice order from each other's shared
//! memory straight into C: no scratch, no second kernel, no atomics.
//!
//! Kernel bodies: [`crate::tf32x3`] (mage-009's product; frozen) with
//! [`crate::cluster_totals::KSliceInShared`] (its [`crate::tf32x3::KSliceByN`]
//! layout, mage-011's, with the accumulators stored into shared memory),
//! and [`crate::cluster_totals`] (the slice body, the cluster's totals, the
//! rule and the plan); this module holds the entries, this document and the
//! stage.
//!
//! ## What changed
//!
//! mage-011 stores each block's partial into scratch `[slices, m, n]` and
//! a second launch, `matmul_add_slices`, adds them: at 256³ 6.26 µs of
//! kernel time over two kernels, of which the cost model gives the totals
//! launch 2.9 µs (2.5 µs of it the launch and its ramp), against torch's
//! 6.32. Here the grid is mage-011's, `(tiles, slices)`, launched in
//! clusters of `(1, slices)` (`cuLaunchKernelEx`), so a block's rank in its
//! cluster is its slice. Block `(t, s)` runs mage-011's slice body (the
//! same copies, split and multiplies: its partial is mage-011's to the
//! bit) and, instead of storing its accumulators to global memory, stores
//! them after a block barrier into its own shared memory, from byte 0 (the
//! pipeline's stages are done with) as a row-major tile of rows of 132
//! floats (4 of padding: a half-warp's 64-bit stores on 32 banks); then
//! `barrier.cluster.arrive` (release) and `barrier.cluster.wait` (acquire).
//! Block `r` of `S` then takes quads `r·⌈Q/S⌉..` of the tile's `Q`
//! (row-major, 4096 at 128 rows, 2048 at 64), loads each from every
//! rank's shared memory (`mapa.shared::cluster`, 16-byte
//! `ld.shared::cluster`, all `S` issued before the additions) and adds
//! them rank 0 first, the first partial the sum itself: for `S <= 8` the
//! additions of [`crate::split_k`]'s totals (one segment), so C is
//! mage-011's to the bit (`tests/cluster.rs`). It stores each total
//! into C (16 bytes where `n` is a multiple of 4, else by the element,
//! C's own `n` columns: no copy back), and a second cluster barrier keeps
//! every block's shared memory alive until its peers have read it.
//!
//! The slice rule is mage-011's ([`crate::k_slices::split`], its cost
//! model with the totals launch) with at most 8 slices, the portable
//! cluster size ([`crate::cluster_totals::split`]): the same split as
//! mage-011 at 256³ (4 slices of 64 at 64 rows), 512³ (4 of 128 at 64
//! rows), 1000x1037x999 (3 of 384 at 128 rows) and every shape where
//! mage-011 takes 8 slices or fewer. One slice (the rule's choice where
//! the tiles fill the GPU) runs the same entry in a cluster of one: the
//! product of mage-009 (mage-010's where rows are padded), its total the
//! partial itself, the same bits, and C written in place where `n` is not
//! a multiple of 4. Rows not a multiple of 4 floats are padded first, as
//! mage-011 pads them.
//!
//! ptxas (13.0.88, sm_90a): 248 registers at 128 rows (mage-011's 250),
//! 142 at 64 (142), no stack, no spills; 256 threads, so one block per
//! SM, with 201712 or 136176 bytes of shared memory (mage-011's; the
//! partial tile, 67584 or 33792 bytes, reuses the stages). Adding these
//! entries left every other entry of the crate's PTX the same
//! instructions (only label numbers moved) and every other ptxas
//! snapshot unchanged.
//!
//! ## Prediction (H200, 132 SMs, 1.98 GHz)
//!
//! mage-011's model ([`crate::k_slices::estimate_ns`]) without the totals
//! launch, plus each block's reduction: its partial tile stored to its own
//! shared memory (64 or 32 KiB at 128 bytes a clock: 0.26 or 0.13 µs), the
//! same bytes read through the cluster's window (assumed half that rate:
//! 0.52 or 0.26 µs) and two cluster barriers (assumed 0.5 µs together):
//! 1.3 µs a block at 128 rows, 0.9 at 64.
//!
//! - 256³: 8 clusters of 4 (32 blocks, one wave) of two K tiles, 3.8 µs,
//!   and the reduction, 0.9: 4.7 µs (mage-011's model 6.7, measured 6.26;
//!   torch 6.32).
//! - 512³: 32 clusters of 4 (128 blocks, one wave) of four K tiles, 5.6
//!   µs, and 0.9: 6.5 µs (mage-011's model 9.8, measured 9.46; torch 12.64).
//! - 1000x1037x999 (padded to 1000x1040x1000): 72 clusters of 3 (216
//!   blocks of 128 rows, two waves) of 12 K tiles, 42.4 µs, two waves'
//!   reductions, 2.6, and the padding's two copies, 3: 48.0 µs (mage-011's
//!   model 53.4, measured 55.42; torch 59.31).
//!
//! A cluster's blocks must be resident on one GPC at once: at one block
//! per SM the GPCs' sizes may leave SMs idle (512³ needs 32 clusters of 4
//! resident for one wave; `cuOccupancyMaxActiveClusters` on the GPU says
//! whether they are, and a second wave would cost about 5.6 µs).
//!
//! ## Measured
//!
//! `results/mage-014` (CUPTI kernel time, hot L2, medians): 256³ 5.70 µs
//! (mage-011 6.44, torch 6.18), 768³ 17.30 (20.33), 1000x1037x999 51.99
//! (55.76, torch 59.42), 4096x768x3072 247.64 (268.51), each judged FASTER
//! than mage-011; 512³ 14.51 against 9.55, SLOWER: its 32 clusters of 4
//! did not fit one wave. `current` takes it where its clusters fit
//! ([`crate::current`]). The prediction held at 256³ (4.7 predicted) only
//! in direction: the reduction cost about 1.8 µs, not 0.9.

use crate::tf32x3::{Rows64, Rows128};

pub use crate::tf32x3::matmul_resize;

mage_common::kernel! {
    /// Block `(t, s)` of a cluster `(1, slices)`: tile `t` (128 rows x 128
    /// columns) of slice `s`'s partial into the block's shared memory, then
    /// the cluster's in-order totals of its share of the tile into C `[m,
    /// n]`; A `[m, k4]`, B `[k4, n4]` (rows padded where they were not
    /// multiples of 4), `slice_k` a multiple of 4. 256 threads.
    pub unsafe fn matmul_3xtf32_cluster_m128(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::cluster_totals::slice_in_cluster::<Rows128>(a, b, c, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the 128-row entry, 64 rows x 128 columns per block.
    pub unsafe fn matmul_3xtf32_cluster_m64(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::cluster_totals::slice_in_cluster::<Rows64>(a, b, c, m, n, k, slice_k) }
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

    /// This stage's entries, for [`crate::cluster_totals::plan_with`].
    pub static ENTRIES: ClusterEntries = ClusterEntries {
        stage: "mage-014",
        m128: &matmul_3xtf32_cluster_m128::KERNEL,
        m64: &matmul_3xtf32_cluster_m64::KERNEL,
        b: BLayout::KByN,
    };

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`crate::k_slices::SLICE_QUANTUM`] where
    /// there are two or more, at most [`MAX_CLUSTER_SLICES`]): where `k`
    /// or `n` is not a multiple of 4, A and B padded into scratch first;
    /// then the clustered product and totals, straight into C.
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32) -> Plan {
        crate::cluster_totals::plan_with(d, rows, slice_k, &ENTRIES)
    }

    pub fn plan(d: &[u32]) -> Plan {
        let (rows, slice_k) = split(d);
        plan_with(d, rows, slice_k)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-014",
        summary: "split-K in one launch: the K slices of a tile are one thread-block cluster, each block mage-011's 3xTF32 product over its slice into its own shared memory, the partials added in slice order through distributed shared memory straight into C; at most 8 slices",
        kernels: &[&matmul_3xtf32_cluster_m128::KERNEL, &matmul_3xtf32_cluster_m64::KERNEL, &matmul_resize::KERNEL],
        supports: |_| true,
        plan,
    };
}
