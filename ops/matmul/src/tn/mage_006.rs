//! matmul_tn mage-006: split-K in one launch through a thread-block
//! cluster, as matmul mage-014 and matmul_nt mage-004 do, over mage-004's
//! product and layout. The K slices of one output tile are the blocks of
//! one cluster; each runs mage-004's slice product (A `[k, m]` copied raw
//! and split into the K-major planes inside the product: no transpose)
//! into its own shared memory, and the cluster adds the partials in slice
//! order from each other's shared memory straight into C: no scratch, no
//! totals kernel, no atomics.
//!
//! Kernel bodies: [`crate::tf32x3`] (matmul mage-009's product; frozen)
//! with [`crate::cluster_totals::AKByMInShared`] (its
//! [`crate::tf32x3::AKByM`] layout, mage-003's and mage-004's, with the
//! accumulators stored into shared memory), and [`crate::cluster_totals`]
//! (the slice body, the cluster's totals and the rule, shared with matmul
//! mage-014 and matmul_nt mage-004); this module holds the entries, the
//! plan, this document and the stage.
//!
//! ## What changed
//!
//! mage-004 stores each block's partial into scratch `[slices, m, n]` and
//! a second launch, `matmul_tn_add_slices`, adds them: at 256³ 8.72 µs
//! over two kernels (`results/backward-5`) against mage-001's 7.91 and
//! torch's 5.57; mage-005 pays three launches (7.69 µs there,
//! `results/mage-013`). Here the grid is mage-004's, `(tiles, slices)` of
//! 64x128 tiles, launched in clusters of `(1, slices)`: block `(t, s)`
//! runs mage-004's slice body (A and B moved by `k0·m` and `k0·n` floats
//! to the slice's first K row, the body over the slice's terms: its
//! partial is mage-004's to the bit) and stores its accumulators into its
//! own shared memory, in mage-014's tile of rows of 132 floats (the same
//! map of the registers as mage-014's: [`crate::tf32x3::AKByM`] stores as
//! [`crate::tf32x3::KByN`] does); then mage-014's cluster totals, rank 0
//! first, the first partial the sum itself: for `S <= 8` the additions of
//! [`crate::split_k`]'s totals (one segment), so C is mage-004's to the
//! bit at the same split (`tests/cluster.rs`), stored on C's own `n`
//! columns. Nothing is padded: A and B are read in place by the `_v4`
//! entry where `m` and `n` are multiples of 4, by the `_scalar` entry
//! (4-byte copies) elsewhere, as in mage-004.
//!
//! The slice rule ([`crate::cluster_totals::tn_slice_k`]) is matmul
//! mage-011's cost model ([`crate::k_slices::estimate_ns`]) at 64 rows,
//! the only tile height of this layout, over slices a multiple of 64 with
//! at most 8 of them: 4 slices of 64 at 256³ (mage-004's rule takes
//! slices of 128 at least: 2 there), 4 of 128 at 512³ (mage-004's split)
//! and 4 of 256 at 1000x1037x999 (`tests/cluster.rs`). One slice runs the
//! same entry in a cluster of one: mage-003's product and bits.
//!
//! ptxas (13.0.88, sm_90a): 157 registers in the `_v4` entry, 164 in
//! `_scalar` (mage-004's 160 and 167, mage-003's 151 and 164), no
//! stack, no spills; 256 threads, one block per SM, with 173040 bytes of
//! shared memory (mage-004's four stages of 43008; the partial tile, 33792
//! bytes, reuses the stages). Adding these entries left every other entry
//! of the crate's PTX the same instructions (only label numbers moved)
//! and every other ptxas snapshot unchanged.
//!
//! ## Prediction (H200, 132 SMs, 1.98 GHz)
//!
//! matmul mage-014 runs the same split at 256³ (4 slices of 64 at 64
//! rows: 8 clusters of 4, 32 blocks of two K tiles) and measured 5.70 µs
//! (`results/mage-014`, its model 4.7). This product's K tile costs about
//! 1.12x mage-009's (the raw copy and the split through shared memory:
//! mage-004 with one slice was 1.116x mage-002 at 1024³), so the 3.8 µs of
//! the product in that model become about 4.3, and the rest is
//! mage-014's: about 6.2 µs at 256³, against mage-004's 8.72, mage-001's
//! 7.91 (`current`) and torch's 5.57. From mage-004's side the same
//! shape gives less: its 8.72 without the totals launch (about 2.9 µs),
//! with half the K tiles a block (about 2 µs fewer) and the cluster's
//! reduction (0.9): about 4.7 µs. The range is 4.7 to 6.2; the cluster
//! launch's overhead, which made mage-014 1 µs slower than its model,
//! puts it nearer 6.2. At 512³ mage-014's same grid (32 clusters of 4)
//! measured 14.51 µs against its model's 6.5 (clusters not resident at
//! once on the GPCs): about 16 µs here, slower than mage-004's 10.31, and
//! not where this stage should run. At 1000x1037x999 (144 tiles, 4 slices
//! of 256: 576 blocks, 5 waves of 8 K tiles) the model gives 46 µs of
//! product at mage-009's tile, about 51.5 at this one's, and five waves'
//! reductions, 4.5: about 56 µs, mage-005's measured 56.34 (torch 54.93).
//!
//! ## Measured
//!
//! `results/backward-13` (CUPTI kernel time, hot L2, medians): 6.22 µs at
//! 256³ against mage-001's 7.94, judged FASTER (0.772), as predicted; still
//! above torch's 5.62 (1.107). SLOWER at 512³ against mage-004 (16.39
//! against 10.41, 1.590: 128 blocks in clusters of 4, past one wave) and at
//! 1000x1037x999 against mage-005 (89.86 against 56.14, 1.599). `current`
//! takes it only below 32 tiles, where mage-001 ran, where its clusters fit
//! one wave (`super::current::clusters_fit`).

mage_common::kernel! {
    /// Block `(t, s)` of a cluster `(1, slices)`: tile `t` (64 rows x 128
    /// columns) of slice `s`'s partial into the block's shared memory,
    /// then the cluster's in-order totals of its share of the tile into C
    /// `[m, n]`; A `[k, m]`, B `[k, n]`, `m`, `n` multiples of 4: 16-byte
    /// copies; `slice_k` a multiple of 32. 256 threads.
    pub unsafe fn matmul_tn_3xtf32_cluster_m64_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::cluster_totals::slice_tn_in_cluster::<true>(a, b, c, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the `_v4` entry, any shape: 4-byte copies.
    pub unsafe fn matmul_tn_3xtf32_cluster_m64_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::cluster_totals::slice_tn_in_cluster::<false>(a, b, c, m, n, k, slice_k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::tf32x3::{AKByM, BK, THREADS, layout_shared_bytes};
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan, Stage};

    pub use crate::cluster_totals::{MAX_CLUSTER_SLICES, tn_slice_k as slice_k};

    /// Bytes of shared memory a block asks for: four stages of the 64-row
    /// product with A's raw tile, as mage-004's.
    pub const SHARED_BYTES: u32 = layout_shared_bytes::<AKByM>(64);

    /// Slices for these dims.
    pub fn slices(d: &[u32]) -> u32 {
        d[2].div_ceil(slice_k(d))
    }

    /// Output tiles of 64 rows x 128 columns.
    pub fn tiles(d: &[u32]) -> u32 {
        crate::k_slices::tiles(d, 64)
    }

    /// The launch with slices of `slice_k` (a multiple of 32 where there
    /// are two or more, at most [`MAX_CLUSTER_SLICES`] of them): grid
    /// `(tiles, slices)` in clusters of `(1, slices)`, A and B read in
    /// place (the `_v4` entry where `m` and `n` are multiples of 4),
    /// straight into C.
    pub fn plan_with(d: &[u32], slice_k: u32) -> Plan {
        let (m, n, k) = (d[0], d[1], d[2]);
        let slices = k.div_ceil(slice_k);
        assert!(slices == 1 || slice_k.is_multiple_of(BK), "matmul_tn mage-006: slices of {slice_k} are not a multiple of {BK}");
        assert!(slices <= MAX_CLUSTER_SLICES, "matmul_tn mage-006: {slices} slices; a cluster holds at most {MAX_CLUSTER_SLICES}");
        let vector_rows = m.is_multiple_of(4) && n.is_multiple_of(4);
        let kernel = if vector_rows { &matmul_tn_3xtf32_cluster_m64_v4::KERNEL } else { &matmul_tn_3xtf32_cluster_m64_scalar::KERNEL };
        Launch {
            kernel,
            grid: Dim3 { x: tiles(d), y: slices, z: 1 },
            block: Dim3::x(THREADS),
            shared_bytes: SHARED_BYTES,
            cluster: Dim3 { x: 1, y: slices, z: 1 },
            args: vec![Arg::Input(0), Arg::Input(1), Arg::Output(0), Arg::U32(m), Arg::U32(n), Arg::U32(k), Arg::U32(slice_k.min(k))],
        }
        .into()
    }

    pub fn plan(d: &[u32]) -> Plan {
        plan_with(d, slice_k(d))
    }

    pub static STAGE: Stage = Stage {
        name: "mage-006",
        summary: "split-K in one launch: the K slices of a 64x128 tile are one thread-block cluster, each block mage-004's 3xTF32 product (A's transpose inside it) over its slice into its own shared memory, the partials added in slice order through distributed shared memory straight into C; at most 8 slices",
        kernels: &[&matmul_tn_3xtf32_cluster_m64_v4::KERNEL, &matmul_tn_3xtf32_cluster_m64_scalar::KERNEL],
        supports: |_| true,
        plan,
    };
}
