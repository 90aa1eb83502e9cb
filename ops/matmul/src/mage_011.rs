//! mage-011: split-K over mage-009's 3xTF32 product. The grid gets a
//! second dimension of K slices; each block runs the product for its tile
//! over one slice of k into scratch `[slices, m, n]`, and a second kernel
//! adds each element's partials in slice order into C.
//!
//! Kernel bodies: [`crate::tf32x3`] (mage-009's and mage-010's product,
//! with its [`crate::tf32x3::KSliceByN`] layout: mage-009's copies with A's
//! rows longer than the slice; frozen), [`crate::k_slices`] (the entries'
//! slice body, which moves the operands to the slice and calls that
//! product, the totals of padded partials, the slice rule and the plan;
//! shared with matmul_tn mage-005, which runs them on A transposed into
//! scratch) and [`crate::split_k`] (the in-order totals, shared with
//! matmul_tn mage-004); this module holds the entries (the slice products
//! and `matmul_add_slices`), this document and the stage.
//!
//! ## What changed
//!
//! mage-009 runs one block per output tile over all of k: at 512³ 32 tiles
//! of 64x128 leave 100 of the 132 SMs idle (16.54 µs on the H200), at 256³
//! 8 tiles leave 124, and at 1000x1037x999 its 72 tiles of 128 rows leave
//! 60 idle for 32 K tiles each. matmul_tn mage-004 showed what a split
//! buys on its product (512³: 10.31 µs against 17.99). Here block `(t,
//! s)` takes tile `t` (mage-009's `block_idx_x`) over K `s·slice_k ..
//! min((s + 1)·slice_k, k)`: its entry moves A to column `s·slice_k` (A
//! `[m, k]`: the slice is a window of each row, read with the rows' own
//! stride `k`), B to row `s·slice_k` (B `[k, n]`: contiguous rows), and C
//! to the slice's `m·n` partial in scratch, and calls mage-009's body with
//! `k` = the slice's length. Slices are a multiple of 64 long (two K
//! tiles, one trip of the body's loop; 16-byte aligned in A's rows), so
//! only the last one can end in a partial or padded tile. Rows not a
//! multiple of 4 floats (`k` or `n`) are padded first, as mage-010 pads
//! them (the zeros add exact zero products), so the product has 16-byte
//! entries only: rows of `n4 = ⌈n/4⌉·4` floats, `k4 = ⌈k/4⌉·4` terms.
//!
//! The second launch, `matmul_add_slices` ([`crate::split_k`]'s body),
//! adds each element's partials over the slices in slice order (segments
//! of at most 8 slices loaded before they are added, the segments' sums in
//! segment order): every grouping follows from the shape, so every run
//! gives the same bits, with no atomics. Where `n` is not a multiple of 4
//! it writes C's `n` columns of the partials' `n4` itself, so a padded
//! shape takes no copy of C back. One slice (the rule's choice where the
//! tiles fill the GPU, and for `k <= 64`) is mage-009's plan (mage-010's
//! where rows are padded): one launch of the product straight into C (or
//! into C's padded copy), the same bits.
//!
//! The slice count and the tile rows ([`split`]) come from the dims by a
//! cost model ([`estimate_ns`], as matmul_tn mage-004's): waves of blocks
//! on the 132 SMs (one block per SM at either height: 247 or 140 registers
//! for 256 threads, 197 or 133 KiB of shared memory) times a block's K
//! tiles, 900 ns a tile at 64 rows (mage-009's 64-row 1024³: one wave of
//! 32 tiles in 31.09 µs) and 1600 at 128 rows (4096x4096x1024: 405.72 µs
//! for 8 waves of 32 tiles), plus 2 µs of a block's fill and stores, plus
//! the totals launch (2.5 µs and `(slices + 1)·m·n·4` bytes at 3 TB/s)
//! where there are two slices or more. One slice at mage-009's rows
//! ([`crate::tf32x3::tile_rows`]) and every slice count from 2 to
//! `min(⌈k4 / 64⌉, 1024)` at both heights are tried, the cheapest kept, one
//! slice on a tie. It gives 4 slices of 64 at 64 rows at 256³, 4 of 128
//! at 64 rows at 512³, 3 of 384 at 128 rows at 1000x1037x999, and one
//! slice at 1024³, 2048³, 4096x4096x1024, 1000x1000x999, 1023³ and every
//! `k <= 64` (`tests/split_k.rs`).
//!
//! ## Error
//!
//! Each term is formed as mage-009's, `38 u |a b|` with its tile's partial
//! sum ([`crate::mage_009`]'s module doc); a split changes only the tree in
//! which the `⌈k/32⌉` tile partials are added in FP32. With `s >= 2`
//! slices of `T` tiles (the last `T` or fewer), a partial passes at most
//! `T - 1` roundings in its slice and `s - 1` in the totals (matmul_tn
//! mage-004's module doc: `seg + G <= s + 1` for the segments), `T + s -
//! 2 <= ⌈k/32⌉ - (s - 2)(T - 1)` in all: never deeper than mage-009's
//! chain. So `|out - ref| <= (38 u + γ_(⌈k/32⌉)) Σ |a b|` over the whole
//! `k`, whatever the slices: the bound of mage-009, inside the op's
//! tolerance ([`crate::tolerance`]) for any input from k = 40 (`current`
//! takes the 3xTF32 stages from k = 64). The slice length plays no part
//! in it: a slice of 64 terms errs no more than mage-009 at k = 64 would,
//! its chain being shorter, and the bound is stated for the full k. With
//! one slice the output is mage-009's to the bit.
//!
//! ptxas (13.0.88, sm_90a): 250 registers at 128 rows (mage-009's `_v4`
//! 247, the difference the slice's 64-bit offsets), 142 at 64 rows (140),
//! no stack, no spills; 256 threads, so one block per SM (64000 of 65536
//! registers at 128 rows) with 201712 or 136176 bytes of shared memory.
//! `matmul_add_slices`: 69 registers (`matmul_tn_add_slices` 64; the
//! division that finds a quad's row where C's columns are cut), 4096 bytes
//! of shared memory, no stack. Adding these entries left every other entry
//! of the crate's PTX the same instructions (only label numbers moved) and
//! every other ptxas snapshot unchanged.
//!
//! ## Prediction (H200)
//!
//! The model above, with the padding's copies where rows are padded (A and
//! B read and written once through L2, about 1.5 µs a launch):
//!
//! - 256³: 32 blocks of two K tiles, 3.8 µs, and totals of 1.3 MB, 2.9
//!   µs: 6.7 µs (mage-001 7.46, torch 6.30); with few blocks a tile may run
//!   nearer mage-009's 450 ns model, 5.8 µs.
//! - 512³: 128 blocks (one wave) of four K tiles, 5.6 µs, and totals of
//!   5.2 MB, 4.2 µs: 9.8 µs (mage-009 16.54, torch 12.48; matmul_tn
//!   mage-004's same split measured 10.31).
//! - 1000x1037x999 (padded to 1000x1040x1000): 216 blocks of 128 rows (two
//!   waves) of 12 K tiles, 42.4 µs, totals of 16.6 MB, 8.0 µs, and two
//!   copies, 3 µs: about 53 µs against mage-010's 53 + 4.5 by the same
//!   model (measured 63.63 and 74.9 in two sessions, torch.compile 59.95
//!   and 74.9 beside them): 0.9-0.95× mage-010.
//! - 1024x1024x1: one slice, mage-009's product (3.8 µs by the model;
//!   mage-009 measured SLOWER than mage-006's 4.13 µs there): not where
//!   this stage should run.
//!
//! ## Measured
//!
//! `results/mage-013` (CUPTI kernel time, hot L2, medians): 256³ 6.26 µs
//! (mage-001 7.45, torch 6.32), 512³ 9.46 (mage-009 16.48, torch 12.64),
//! 1000x1037x999 55.42 (mage-010 59.64, torch 59.31): within the
//! predictions. Judged FASTER than mage-009 at 768³ (0.860) and
//! 1024x1024x8192 (0.958), where the rule splits too, and SAME where it
//! takes one slice (1024³, 2048³). `current` takes it wherever the rule
//! splits ([`crate::current`]).

pub use crate::tf32x3::matmul_resize;
use crate::tf32x3::{Rows64, Rows128};

mage_common::kernel! {
    /// Block `(t, s)`: tile `t` (128 rows x 128 columns) of slice `s`'s
    /// partial product into `partials[s]` (`m·n` floats each); `n`, `k`
    /// and `slice_k` multiples of 4 (rows padded where they were not):
    /// 16-byte copies. 256 threads.
    pub unsafe fn matmul_3xtf32_splitk_m128(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::k_slices::slice::<Rows128>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the 128-row entry, 64 rows x 128 columns per block.
    pub unsafe fn matmul_3xtf32_splitk_m64(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { crate::k_slices::slice::<Rows64>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// `c[i, j] = Σ_s partials[s][i, j]` for C `[m, n]`, the partials `m`
    /// x `n4` each (`n4 = ⌈n/4⌉·4`): quads of the partials in
    /// [`crate::split_k`]'s order (`groups` segments of the `slices`),
    /// each total stored in one 16-byte store where `n` is a multiple of
    /// 4, else by the element, C's `n` columns of the partials' `n4`.
    /// `TOTALS_SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_add_slices(partials: *const f32, c: *mut f32, m: u32, n: u32, slices: u32, groups: u32) {
        unsafe { crate::k_slices::add_padded_slices(partials, c, m, n, slices, groups) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::k_slices::{AFrom, BLayout, Entries};
    use mage_common::op::{Plan, Stage};

    pub use crate::k_slices::{BLOCK_NS, MAX_SLICES, SLICE_QUANTUM, TILE_NS_64, TILE_NS_128, estimate_ns, padded, slices, split, tiles};

    /// This stage's entries, for [`crate::k_slices::plan_with`].
    pub static ENTRIES: Entries = Entries {
        stage: "mage-011",
        m128: &matmul_3xtf32_splitk_m128::KERNEL,
        m64: &matmul_3xtf32_splitk_m64::KERNEL,
        totals: &matmul_add_slices::KERNEL,
        b: BLayout::KByN,
    };

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`SLICE_QUANTUM`] where there are two or
    /// more): where `k` or `n` is not a multiple of 4, A and B first padded
    /// into scratch (`[m, k4]`, `[k4, n4]`); then the product, straight
    /// into C where one slice holds all of k and `n` is a multiple of 4,
    /// into C's padded copy (then cut back) where it is not, and into the
    /// partials (`[slices, m, n4]`) where there are two slices or more,
    /// added into C by `matmul_add_slices` ([`crate::k_slices::plan_with`]
    /// with A read from input 0).
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32) -> Plan {
        crate::k_slices::plan_with(d, rows, slice_k, &ENTRIES, AFrom::Input)
    }

    pub fn plan(d: &[u32]) -> Plan {
        let (rows, slice_k) = split(d);
        plan_with(d, rows, slice_k)
    }

    pub static STAGE: Stage = Stage {
        name: "mage-011",
        summary: "split-K: mage-009's 3xTF32 product per tile and slice of K into scratch (rows padded to 16 bytes as mage-010's), the slices added in order by a second kernel; slice count and tile rows from the dims",
        kernels: &[
            &matmul_3xtf32_splitk_m128::KERNEL,
            &matmul_3xtf32_splitk_m64::KERNEL,
            &matmul_add_slices::KERNEL,
            &matmul_resize::KERNEL,
        ],
        supports: |_| true,
        plan,
    };
}
