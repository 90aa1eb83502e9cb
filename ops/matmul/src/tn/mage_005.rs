//! matmul_tn mage-005: split-K over the transposed product. mage-002's
//! transpose of A (`[k, m]` into scratch `[m, k4]`), then matmul
//! mage-011's split: the product per tile and slice of K into scratch
//! `[slices, m, n4]`, the slices added in order by a second kernel; slice
//! count and tile rows from mage-011's cost model.
//!
//! Kernel bodies: [`super::transpose`] (mage-002's transpose, here with
//! A's rows padded to a multiple of 4 floats), [`crate::k_slices`] (matmul
//! mage-011's slice body over [`crate::tf32x3`]'s product with the
//! [`crate::tf32x3::KSliceByN`] layout, its totals of padded partials, its
//! rule and plan) and [`crate::split_k`] (the in-order totals); this
//! module holds the entries and the plan.
//!
//! ## What changed
//!
//! In an MLP's backward pass the weight gradient `dW = Xᵀ·dY` runs
//! matmul_tn at (768, 3072, 4096) and (3072, 768, 4096): `current` takes
//! mage-002 there, 358.64 and 373.47 µs on the H200 against matmul's
//! 243.14 for the same FLOPs (4096x3072x768). mage-002's product is
//! mage-009's over all of k: 288 tiles of 64x128 on 132 SMs are 3 waves
//! for 2.18 waves of work, each block walking 128 K tiles. mage-004's
//! split is not the cure there: it runs mage-003's product (A's transpose
//! inside it, 64-row tiles only), which measured 1.12-1.55x mage-002's
//! where tiles are many (1024³ to 4096³) and 1.56x its own model at
//! 1000x1037x999 (86.54 µs against 55.4); its model puts (768, 3072,
//! 4096) at 4 slices of 1024, 295.4 µs, on the same 900 ns a tile, and
//! `current` keeps it to fewer than 264 tiles of 64x64 (`super::current`).
//! matmul mage-011 splits mage-009's own product, at 128 rows where its
//! model says so (tensor-bound tiles, where 64 rows are bound by shared
//! memory), and needs A in matmul's layout.
//!
//! Here A is transposed first, as mage-002 does (32x32 tiles through
//! shared memory, whole 128-byte rows read and written), into an `m` x
//! `k4` scratch matrix whose columns `k..k4` are zeros (`k4 = ⌈k/4⌉·4`):
//! A in matmul's layout, its rows 16 bytes aligned, in the same one
//! launch. Everything after it is matmul mage-011's plan on that scratch
//! and B ([`crate::k_slices::plan_with`]), with this stage's entries: B
//! padded to `[k4, n4]` where `k` or `n` is not a multiple of 4; block
//! `(t, s)` runs mage-009's product for tile `t` over K `s·slice_k ..
//! min((s + 1)·slice_k, k4)` into partial `s`; `matmul_tn_add_padded_slices`
//! adds each element's partials in slice order (segments of at most 8
//! loaded before they are added, the segments' sums in segment order,
//! every grouping from the shape: the same bits every run, no atomics)
//! and writes C's `n` columns. With one slice (the rule's choice where the
//! tiles fill the GPU) the product goes straight into C (or C's padded
//! copy, cut back by `matmul_resize`).
//!
//! The rule is mage-011's ([`crate::k_slices::split`]): waves of one block
//! per SM times a block's K tiles at 900 ns (64 rows) or 1600 ns (128
//! rows) and 2 µs of fill, plus the totals launch (2.5 µs and `(slices +
//! 1)·m·n4·4` bytes at 3 TB/s) where there are two slices or more; one
//! slice at mage-009's rows and every count from 2 at both heights tried,
//! the cheapest kept. Unlike mage-004's rule (slices at least 128 long)
//! its slices may be 64 long (two K tiles). The transpose costs the same
//! for every choice and is left out of it.
//!
//! So the output is matmul mage-011's on A transposed back, to the bit,
//! for every shape, slice count and tile height (the transpose moves
//! values and writes zeros, exactly; mage-011 pads A with the same zeros;
//! the rest is the same body on the same dims); with one slice it is
//! mage-002's (mage-011's one slice is mage-009's product, the zeros of
//! the padding adding exact zero products where mage-002's scalar entries
//! zero-fill the same terms) (`tests/split_k.rs`).
//!
//! ## Error
//!
//! The transpose and the padding are exact. Each term is formed as
//! mage-009's, within `38 u |a b|` with its tile's partial sum
//! ([`crate::mage_009`]'s module doc); a split changes only the tree in
//! which the `⌈k/32⌉` tile partials are added in FP32, and
//! [`crate::mage_011`]'s module doc shows that tree is never deeper than
//! mage-009's chain (a partial passes at most `T - 1` roundings in its
//! slice of `T` tiles and `s - 1` in the totals of `s` slices, `T + s - 2
//! <= ⌈k/32⌉ - (s - 2)(T - 1)`). So `|out - ref| <= (38 u + γ_(⌈k/32⌉)) Σ
//! |a b|` over the whole `k`, whatever the slices: mage-002's bound,
//! inside the op's tolerance ([`crate::tolerance`]) for any input from k
//! = 40.
//!
//! ptxas (13.0.88, sm_90a): the slice entries are mage-011's under other
//! names, and so are their resources: 250 registers at 128 rows, 142 at
//! 64, no stack, no spills; 256 threads, one block per SM, with 201712 or
//! 136176 bytes of shared memory. `matmul_tn_add_padded_slices`: 69
//! registers (as `matmul_add_slices`), 4096 bytes of shared memory, no
//! stack. `matmul_tn_transpose_padded`: 26 registers (mage-002's
//! `matmul_tn_transpose` 28), 4224 bytes of shared memory. Adding these
//! entries left every other entry of the crate's PTX the same
//! instructions (only label and local-depot numbers moved) and every
//! other ptxas snapshot unchanged.
//!
//! ## Prediction (H200)
//!
//! mage-011's model for the product and the totals, and the transpose's
//! bytes (A read and written once, `2·m·k·4`) at about 3 TB/s from L2 (4
//! from DRAM where A does not stay in it) and a launch:
//!
//! - (768, 3072, 4096): 128-row tiles, 8 slices of 512: 1152 blocks (9
//!   waves) of 16 K tiles, 248.4 µs, and totals of 85 MB, 30.8 µs: 279.2
//!   µs; the transpose of 12.6 MB, about 10 µs: about 290 µs, 0.81x
//!   mage-002's 358.64 (whose product the same model puts at 351.6 µs, 3
//!   waves of 128 tiles at 64 rows; it puts matmul's 4096x3072x768 at
//!   242.4 against a measured 243.14).
//! - (3072, 768, 4096): the same tiles and split (144 tiles of 128x128,
//!   8 slices of 512), 279.2 µs; A is 50 MB, so the transpose moves 100
//!   MB, 25-30 µs: 305-310 µs, 0.82-0.83x mage-002's 373.47.
//! - 1000x1037x999 (padded to 1000x1040x1000): 128-row tiles, 3 slices of
//!   384: 216 blocks (two waves) of 12 K tiles, 42.4 µs, totals of 16.6
//!   MB, 8.0 µs: 50.4 µs; the padded transpose (4 MB each way) and B's
//!   padding about 4 µs: about 55 µs against mage-002's 74.89 (and
//!   mage-004's 86.54, torch's 55.05).
//! - 512³: 64-row tiles, 4 slices of 128 (mage-004's split): 9.8 µs and
//!   the transpose of 1 MB, a launch, about 2.5: about 12.3 µs against
//!   mage-004's 10.31 and mage-002's 17.99: not where this stage should
//!   run.
//! - 256³: 64-row tiles, 4 slices of 64 (mage-004's rule takes slices of
//!   128 at least: 2 there): 32 blocks of two K tiles, 3.8 µs, totals 2.9
//!   µs and the transpose about 2: about 8.7 µs against mage-001's 7.91
//!   and mage-004's 8.72: bound by three launches.
//!
//! ## Measured
//!
//! `results/mage-013` (CUPTI kernel time, hot L2, medians): (768, 3072,
//! 4096) 275.29 µs (mage-002 358.30, torch.compile 403.24), (3072, 768,
//! 4096) 305.41 (376.65, 403.09), 1000x1037x999 56.34 (74.91, torch
//! 54.93): at or under the predictions, each judged FASTER than mage-002.
//! 512³ 11.10 (mage-004 10.31) and 256³ 7.69 (mage-001 7.95, not judged
//! against it), as predicted not better than the stages there; SAME as
//! mage-002 at 1024³ and 2048³ (one slice). `current` takes it where k
//! >= 512 and its rule splits over many tiles ([`super::current`]).

use crate::tf32x3::{Rows64, Rows128};

mage_common::kernel! {
    /// `dst` (`cols` x `dst_cols`) = the transpose of `src` (`rows` x
    /// `cols`), both row-major, zeros in `dst`'s columns `rows..dst_cols`
    /// (`dst_cols <= ⌈rows / 32⌉·32`); block `b` takes tile `(b /
    /// tiles_c, b % tiles_c)` of `src`. `TRANSPOSE_SHARED_BYTES` of shared
    /// memory.
    pub unsafe fn matmul_tn_transpose_padded(src: *const f32, dst: *mut f32, rows: u32, cols: u32, dst_cols: u32) {
        unsafe { super::transpose::transpose(src, dst, rows, cols, dst_cols) }
    }
}

mage_common::kernel! {
    /// Block `(t, s)`: tile `t` (128 rows x 128 columns) of slice `s`'s
    /// partial product into `partials[s]` (`m·n` floats each) from the
    /// transposed A (`[m, k]`) and B (`[k, n]`); `n`, `k` and `slice_k`
    /// multiples of 4 (rows padded where they were not): 16-byte copies.
    /// 256 threads.
    pub unsafe fn matmul_tn_3xtf32_splitk_m128(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::k_slices::slice::<Rows128>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the 128-row entry, 64 rows x 128 columns per block.
    pub unsafe fn matmul_tn_3xtf32_splitk_m64(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::k_slices::slice::<Rows64>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// `c[i, j] = Σ_s partials[s][i, j]` for C `[m, n]`, the partials `m`
    /// x `n4` each (`n4 = ⌈n/4⌉·4`), in [`crate::split_k`]'s order
    /// (`groups` segments of the `slices`); 16-byte stores where `n` is a
    /// multiple of 4, else C's `n` columns by the element.
    /// `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_tn_add_padded_slices(partials: *const f32, c: *mut f32, m: u32, n: u32, slices: u32, groups: u32) {
        unsafe { crate::k_slices::add_padded_slices(partials, c, m, n, slices, groups) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::k_slices::{AFrom, BLayout, Entries, padded};
    use crate::tn::transpose::{TRANSPOSE_SHARED_BYTES, TRANSPOSE_THREADS, TRANSPOSE_TILE};
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan, Stage};

    pub use crate::k_slices::{slices, split};
    pub use crate::tf32x3::matmul_resize;

    /// This stage's entries, for [`crate::k_slices::plan_with`].
    pub static ENTRIES: Entries = Entries {
        stage: "matmul_tn mage-005",
        m128: &matmul_tn_3xtf32_splitk_m128::KERNEL,
        m64: &matmul_tn_3xtf32_splitk_m64::KERNEL,
        totals: &matmul_tn_add_padded_slices::KERNEL,
        b: BLayout::KByN,
    };

    /// The transpose of A (`[k, m]`, input 0) into `dst` (`[m, k4]`, the
    /// columns past `k` zeros).
    pub fn transpose(d: &[u32], dst: Arg) -> Launch {
        let (m, k) = (d[0], d[2]);
        Launch {
            kernel: &matmul_tn_transpose_padded::KERNEL,
            grid: Dim3::x(k.div_ceil(TRANSPOSE_TILE) * m.div_ceil(TRANSPOSE_TILE)),
            block: Dim3::x(TRANSPOSE_THREADS),
            shared_bytes: TRANSPOSE_SHARED_BYTES,
            cluster: Dim3::ONE,
            args: vec![Arg::Input(0), dst, Arg::U32(k), Arg::U32(m), Arg::U32(padded(d)[2])],
        }
    }

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`crate::k_slices::SLICE_QUANTUM`] where
    /// there are two or more): the transpose of A into scratch 0 (`[m,
    /// k4]`), then matmul mage-011's plan on it and B
    /// ([`crate::k_slices::plan_with`]).
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32) -> Plan {
        let dims = [d[0], d[1], d[2]];
        crate::k_slices::plan_with(d, rows, slice_k, &ENTRIES, AFrom::Written(Box::new(move |dst| transpose(&dims, dst))))
    }

    pub fn plan(d: &[u32]) -> Plan {
        let (rows, slice_k) = split(d);
        plan_with(d, rows, slice_k)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-005",
        summary: "split-K over the transposed product: A transposed into scratch (rows padded to 16 bytes), then matmul mage-011's 3xTF32 product per tile and slice of K and the slices added in order; slice count and tile rows from mage-011's cost model",
        kernels: &[
            &matmul_tn_transpose_padded::KERNEL,
            &matmul_tn_3xtf32_splitk_m128::KERNEL,
            &matmul_tn_3xtf32_splitk_m64::KERNEL,
            &matmul_tn_add_padded_slices::KERNEL,
            &matmul_resize::KERNEL,
        ],
        supports: |_| true,
        plan,
    };
}
