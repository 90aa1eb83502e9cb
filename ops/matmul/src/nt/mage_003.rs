//! matmul_nt mage-003: split-K over mage-002's 3xTF32 product. The grid
//! gets a second dimension of K slices; each block runs mage-002's product
//! for its tile over one slice of k into scratch `[slices, m, n]`, and a
//! second kernel adds each element's partials in slice order into C:
//! matmul mage-011's split for B stored `[n, k]`.
//!
//! Kernel bodies: [`crate::tf32x3`] (mage-002's product, with the
//! [`crate::tf32x3::NSliceByK`] layout: [`crate::tf32x3::NByK`]'s copies,
//! fragments and stores with A's and B's rows longer than the slice),
//! [`crate::k_slices`] (the entries' slice body, which moves A and B to
//! the slice's first column and calls that product; matmul mage-011's
//! slice rule and plan, here with [`crate::k_slices::BLayout::NByK`]) and
//! [`crate::split_k`] (the in-order totals of flat partials, shared with
//! matmul_tn mage-004); this module holds the entries, this document and
//! the stage.
//!
//! ## What changed
//!
//! mage-002 runs one block per output tile over all of k, as matmul
//! mage-009 does, and trails PyTorch where the tiles are few
//! (`results/backward-6`): at 512³ 32 tiles of 64x128 leave 100 of the
//! 132 SMs idle (16.44 µs, torch 13.21), at 256³ `current` keeps
//! mage-001's CUDA-core tiles (7.84 µs, torch 6.42), and at 1000x1037x999
//! 72 tiles of 128 rows walk 32 K tiles each with 4-byte copies (`k` odd:
//! 73.36 µs, torch 66.16). matmul mage-011 and matmul_tn mage-005 split
//! the same shapes for their layouts (`results/mage-013`: matmul 256³
//! 6.26 µs, 512³ 9.46, 1000x1037x999 55.42).
//!
//! Here block `(t, s)` takes tile `t` (mage-002's `block_idx_x`) over K
//! `s·slice_k .. min((s + 1)·slice_k, k4)`. Both operands are K-contiguous,
//! so the slice is a window of every row of both: the entry moves A and B
//! by `s·slice_k` floats (not B by `s·slice_k·n` as matmul's `[k, n]` B
//! moves), the copies read their rows with the stride of the full k, and
//! the partial goes to the slice's `m·n` floats of scratch; the rest is
//! mage-002's body with `k` the slice's length. Slices are a multiple of
//! 64 long (two K tiles, one trip of the body's loop; 16-byte aligned in
//! the rows), so only the last can end in a partial or padded tile. Where
//! `k` is not a multiple of 4, A and B are padded first to `[m, k4]` and
//! `[n, k4]` (`matmul_resize`, the zeros adding exact zero products), so
//! the product has 16-byte copies only. `n` needs no padding: mage-002
//! stores C by the element, so the partials are `m` x `n` and
//! `matmul_nt_add_slices` adds them as one flat run of `m·n` floats
//! ([`crate::split_k`]'s body, as matmul_tn mage-004's totals: segments of
//! at most 8 slices loaded before they are added, the segments' sums in
//! segment order; every grouping from the shape, the same bits every run,
//! no atomics), 16-byte accesses where `m·n` is a multiple of 4. With one
//! slice (the rule's choice where the tiles fill the GPU, and for `k <=
//! 64`) the product goes straight into C: mage-002's plan with 16-byte
//! copies, after the padding where `k` needs it.
//!
//! The slice count and the tile rows are matmul mage-011's rule
//! ([`crate::k_slices::split`], its module doc): waves of one block per SM
//! times a block's K tiles at 900 ns (64 rows) or 1600 ns (128 rows) and 2
//! µs of fill, plus the totals launch (2.5 µs and `(slices + 1)·m·n4·4`
//! bytes at 3 TB/s; `n4` counts at most 3 columns more than these
//! partials have) where there are two slices or more; one slice at
//! mage-002's rows and every count from 2 to `min(⌈k4 / 64⌉, 1024)` at
//! both heights tried, the cheapest kept, one slice on a tie.
//!
//! So the output is matmul mage-011's on B transposed back, to the bit,
//! for every shape, tile height and slice length: each partial is
//! mage-002's product over the slice, which is mage-009's on B transposed
//! back (`tests/transposed.rs`), mage-011's partial is mage-009's over the
//! same slice, and both totals add each element's partials in the same
//! order (the grouping follows from the slice count alone). With one slice
//! it is mage-002's at the same rows (mage-002's 4-byte entries zero-fill
//! the terms past `k` that the padding fills with zeros here)
//! (`tests/split_k.rs`).
//!
//! ## Error
//!
//! The padding is exact. Each term is formed as mage-002's (mage-009's),
//! within `38 u |a b|` with its tile's partial sum ([`crate::mage_009`]'s
//! module doc); a split changes only the tree in which the `⌈k/32⌉` tile
//! partials are added in FP32, and [`crate::mage_011`]'s module doc shows
//! that tree is never deeper than mage-002's chain (a partial passes at
//! most `T - 1` roundings in its slice of `T` tiles and `s - 1` in the
//! totals of `s` slices, `T + s - 2 <= ⌈k/32⌉ - (s - 2)(T - 1)`). So
//! `|out - ref| <= (38 u + γ_(⌈k/32⌉)) Σ |a b|` over the whole `k`,
//! whatever the slices: mage-002's bound, inside the op's tolerance
//! ([`crate::tolerance`]) for any input from k = 40.
//!
//! ptxas (13.0.88, sm_90a): 255 registers at 128 rows (mage-002's 255),
//! 162 at 64 (161), no stack, no spills; 256 threads, so one block per SM
//! with 201712 or 136176 bytes of shared memory, as mage-002's.
//! `matmul_nt_add_slices`: 68 registers (`matmul_tn_add_slices`, the same
//! body on a length it is given, 64), 4096 bytes of shared memory, no
//! stack. Adding these entries and the layout left every other entry of
//! the crate's PTX the same instructions (only label numbers and comments
//! moved) and every other ptxas snapshot unchanged.
//!
//! ## Prediction (H200)
//!
//! The model above, and `matmul_resize`'s copies where `k` is odd (A and
//! B read and written once through L2, about 1.5 µs a launch):
//!
//! - 256³: 64-row tiles, 4 slices of 64: 32 blocks of two K tiles, 3.8
//!   µs, and totals of 1.3 MB, 2.9 µs: 6.7 µs (mage-001 7.84, torch 6.42;
//!   matmul mage-011's same split measured 6.26).
//! - 512³: 64-row tiles, 4 slices of 128: 128 blocks (one wave) of four K
//!   tiles, 5.6 µs, and totals of 5.2 MB, 4.2 µs: 9.8 µs (mage-002 16.44,
//!   torch 13.21; mage-011 measured 9.46).
//! - 1000x1037x999 (k padded to 1000): 128-row tiles, 3 slices of 384: 216
//!   blocks (two waves) of 12 K tiles, 42.4 µs, totals of 16.6 MB, 8.0
//!   µs, and two copies, 3 µs: about 53.5 µs against mage-002's 73.36
//!   (whose 4-byte copies the model does not see: it puts mage-002 at
//!   53.2) and torch's 66.16; mage-011 measured 55.42.
//! - 1024³: one slice at 64 rows, mage-002's plan (30.8 µs by the model,
//!   mage-002 measured 30.72 in `results/backward-3`): the same.
//! - (4096, 768, 3072), the MLP block's second Linear (x·Wᵀ, mage-002
//!   257.34 µs in `results/e2e-3`, at 64 rows): 128-row tiles, 2 slices of
//!   1536: 384 blocks (3 waves) of 48 K tiles, 236.4 µs, and totals of 38
//!   MB, 15.1 µs: 251.5 µs against the model's 265.2 for mage-002, 0.95x:
//!   about 245 µs, a small gain if any.
//! - (4096, 3072, 768), its first Linear: one slice at 128 rows, mage-002's
//!   plan (242.4 µs by the model, 234.02 measured): the same.
//!
//! ## Measured
//!
//! `results/backward-9` (CUPTI kernel time, hot L2, medians): 256³ 6.33 µs
//! (mage-001 7.86, torch 6.32), 512³ 9.48 (mage-002 16.34, torch 13.10),
//! 1000x1037x999 55.63 (mage-002 72.71, torch 65.38): at or under the
//! predictions, each judged FASTER than the stage the old rule ran there;
//! at 1024³ (one slice) 30.46 against mage-002's 30.53, SAME. `current`
//! takes it from k = 64 wherever its rule splits ([`super::current`]).
//! At 256³ it is level with torch (the totals launch is the gap:
//! `results/nsight-3`).

pub use crate::tf32x3::matmul_resize;
use crate::tf32x3::{Rows64, Rows128};

mage_common::kernel! {
    /// Block `(t, s)`: tile `t` (128 rows x 128 columns) of slice `s`'s
    /// partial product into `partials[s]` (`m·n` floats each) from A `[m,
    /// k]` and B `[n, k]`; `k` and `slice_k` multiples of 4 (rows padded
    /// where they were not): 16-byte copies. 256 threads.
    pub unsafe fn matmul_nt_3xtf32_splitk_m128(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::k_slices::slice_nt::<Rows128>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the 128-row entry, 64 rows x 128 columns per block.
    pub unsafe fn matmul_nt_3xtf32_splitk_m64(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::k_slices::slice_nt::<Rows64>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// `c[i] = Σ_s partials[s][i]` for the `m·n` elements of C, the
    /// partials in C's layout: [`crate::split_k`]'s order (`groups`
    /// segments of the `slices`), 16-byte accesses where `m·n` is a
    /// multiple of 4. `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_nt_add_slices(partials: *const f32, c: *mut f32, m: u32, n: u32, slices: u32, groups: u32) {
        let len = m * n;
        if len.is_multiple_of(4) {
            unsafe { crate::split_k::add_flat_slices::<true>(partials, c, len, slices, groups) }
        } else {
            unsafe { crate::split_k::add_flat_slices::<false>(partials, c, len, slices, groups) }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::k_slices::{AFrom, BLayout, Entries};
    use mage_common::op::{Plan, Stage};

    pub use crate::k_slices::{slices, split};

    /// This stage's entries, for [`crate::k_slices::plan_with`]: B `[n, k]`.
    pub static ENTRIES: Entries = Entries {
        stage: "matmul_nt mage-003",
        m128: &matmul_nt_3xtf32_splitk_m128::KERNEL,
        m64: &matmul_nt_3xtf32_splitk_m64::KERNEL,
        totals: &matmul_nt_add_slices::KERNEL,
        b: BLayout::NByK,
    };

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`crate::k_slices::SLICE_QUANTUM`] where
    /// there are two or more): where `k` is not a multiple of 4, A and B
    /// first padded into scratch (`[m, k4]`, `[n, k4]`); then the product,
    /// straight into C where one slice holds all of k, and into the
    /// partials (`[slices, m, n]`) where there are two slices or more,
    /// added into C by `matmul_nt_add_slices`
    /// ([`crate::k_slices::plan_with`] with A read from input 0).
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32) -> Plan {
        crate::k_slices::plan_with(d, rows, slice_k, &ENTRIES, AFrom::Input)
    }

    pub fn plan(d: &[u32]) -> Plan {
        let (rows, slice_k) = split(d);
        plan_with(d, rows, slice_k)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-003",
        summary: "split-K over mage-002's 3xTF32 product: per tile and slice of K into scratch (rows padded to 16 bytes where k needs it), the slices added in order by a second kernel; slice count and tile rows from matmul mage-011's cost model",
        kernels: &[
            &matmul_nt_3xtf32_splitk_m128::KERNEL,
            &matmul_nt_3xtf32_splitk_m64::KERNEL,
            &matmul_nt_add_slices::KERNEL,
            &matmul_resize::KERNEL,
        ],
        supports: |_| true,
        plan,
    };
}
