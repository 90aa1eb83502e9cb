//! matmul_tn mage-004: split-K. The grid gets a second dimension of K
//! slices; each block runs mage-003's 3xTF32 product for its 64x128 tile
//! over one slice of k and writes its partial tile to scratch `[slices, m,
//! n]`, and a second kernel adds each element's partials in slice order
//! into C.
//!
//! Kernel bodies: [`crate::tf32x3`] (matmul mage-009's and mage-010's
//! product, with A's [`crate::tf32x3::AKByM`] layout as matmul_tn
//! mage-003; unchanged), [`crate::split_k`] (the totals, shared with
//! matmul mage-011) and this module (the slice entries, which offset the
//! operands and call that body); this module holds the entries
//! (`matmul_tn_add_slices` among them) and the plan.
//!
//! ## What changed
//!
//! The weight gradient of a Linear (`dW = dYᵀ·X`) has few output tiles and
//! a long k (tokens, nodes): at (64, 64, 4096) mage-001 runs 16 blocks
//! that each walk all of k (98 µs on the H200 inside a model), and the
//! 3xTF32 stages would run one block of 64x128. Here block `(t, s)` takes
//! tile `t` (mage-003's `block_idx_x`) over K `s·slice_k .. min((s + 1)
//! slice_k, k)`: its entry moves A and B to row `s·slice_k` (A `[k, m]`
//! and B `[k, n]` are K-row-major, so a slice is the contiguous rows
//! `k0..`, 16-byte aligned wherever the `_v4` entry runs) and C to the
//! slice's `m·n` partial in scratch, and calls mage-003's body with `k` =
//! the slice's length: the body is unchanged, its K tail (zero-filled
//! copies, an odd tile count padded with a zero tile) handles the last
//! slice. Slices are a multiple of 64 long (two K tiles, one trip of the
//! body's loop), so only the last one can end in a partial or padded
//! tile. mage-003's body rather than mage-002's: mage-002 transposes A
//! into scratch first, `2·m·k·4` bytes through memory (64 MiB at (128,
//! 128, 65536), more than the product's own reads), and its 128-row tiles
//! matter only where there are many tiles, which is where split-K is not
//! needed.
//!
//! The second launch, `matmul_tn_add_slices` ([`crate::split_k`]'s
//! body), adds the partials of each element: blocks of 256 threads, each thread 4 consecutive elements of C
//! (16-byte loads and stores where `m·n` is a multiple of 4); the slices
//! are cut into [`total_groups`] contiguous segments (a power of two, so
//! that up to 256 slices a thread's segment is at most [`SEGMENT`]
//! partials, all loaded before they are added: one round trip to L2, not a
//! chain), each group of
//! threads adds its segment in slice order, and the group-0 thread adds
//! the segments' sums in segment order (one barrier, through shared
//! memory). Every grouping follows from the shape, so every run adds the
//! same values in the same order: the same bits, with no atomics. One
//! slice (the rule's choice wherever the tiles fill the GPU, and for `k <
//! 256`) is one launch straight into C: mage-003's plan and bits.
//!
//! The slice count ([`slice_k`]) is chosen from the dims by a cost model
//! ([`estimate_ns`]): waves of blocks on the 132 SMs (one block per SM:
//! 173 KiB of shared memory) times a block's K tiles at about 900 ns each
//! (mage-009's 64-row tile measured 31.09 µs at 1024³: one wave of 32
//! tiles) plus 2 µs of fill and stores, plus the second launch (2.5 µs and
//! its `(slices + 1)·m·n·4` bytes at 3 TB/s) where there are two
//! slices or more; every slice count from 1 to `min(k / 128, 1024)` is
//! tried (slices at least 128 long: four K tiles), the cheapest kept,
//! fewer slices on a tie. It gives 32 slices of 128 at (64, 64, 4096) and
//! (32, 64, 4096), 64 of 1024 at (128, 128, 65536), 128 of 512 at (64,
//! 128, 65536), 16 of 1024 at (256, 256, 16384), 5 of 832 at (768, 768,
//! 4096), and one slice at (1024, 1024, 1024) and (1024, 1024, 1)
//! (`tests/split_k.rs`).
//!
//! ## Error
//!
//! Each term is formed as mage-009's (38 u `|a b|` with its tile's partial
//! sum, module doc of [`crate::mage_009`]); what changes is only the tree
//! in which the tile partials are added in FP32. With `s >= 2` slices of
//! `T` tiles (the last one `T` or fewer; a zero tile the body pads with
//! adds exactly), a partial passes at most `T - 1` roundings in its slice
//! (the body's sum starts at zero: its first addition is exact), then at
//! most `seg - 1` in its segment and `G - 1` across the `G` segments, with
//! `seg + G <= s + 1` for every count [`total_groups`] gives
//! (`tests/split_k.rs`):
//! `T + s - 2` in all, the chain of a single sum over the slices. The
//! tile count `⌈k/32⌉` is at least `(s - 1) T + 1`, so the depth is at
//! most `⌈k/32⌉ - (s - 2)(T - 1)`: never more than the `⌈k/32⌉` of
//! mage-003's chain. The γ_s of the second pass is therefore inside the
//! `γ_(⌈k/32⌉+2)` that matmul's tolerance ([`crate::tolerance`]) already
//! allows the tile sums: the same bound holds for any input, and with one
//! slice the output is mage-003's.
//!
//! ptxas (13.0.88, sm_90a): 160 registers in the `_v4` product entry (167
//! in `_scalar`; mage-003's 151 and 164, the difference the slice's 64-bit
//! offsets), no stack, no spills; 173040 bytes of shared memory
//! (mage-003's four stages of 43008), one block of 256 threads per SM
//! (40960 of 65536 registers). `matmul_tn_add_slices`: 64 registers, 4096
//! bytes of shared memory, no stack. Adding these entries left every other
//! entry of the crate's PTX as it was (the same instructions; only label
//! numbers in comments moved) and every other ptxas snapshot unchanged.
//!
//! ## Prediction (H200)
//!
//! The model above, and the bytes: (64, 64, 4096): 32 blocks of 4 K tiles,
//! about 5.6 µs, and the totals launch 2.5-3 µs: 7-10 µs against mage-001's
//! 98. (128, 128, 65536): 128 blocks of 32 tiles, one wave, the traffic of
//! mage-009's 64-row 1024³ (96 MiB through L2, 64 MiB of A and B from
//! DRAM in 16 µs): 31-36 µs as that and mage-003's prediction, and 3 µs
//! of totals (4 MiB): 34-40 µs. (64, 128, 65536): 128 blocks of 16 tiles:
//! about 16.4 µs (A and B 48 MiB, 12 µs at 4 TB/s, below it), totals 2.8:
//! 18-22 µs. (768, 768, 4096): 360 blocks (3 waves) of 26 tiles and 12
//! MiB of totals: 80-95 µs against mage-002's 72 blocks of 128 tiles
//! (about 117 µs and the transpose's 3). (256, 256, 16384): 128 blocks of
//! 32 tiles, 33-37 µs. At many tiles it is mage-003 (one slice). The 900
//! ns a tile is mage-009's, loaded by 128 blocks reading from L2; with
//! fewer blocks, or the fill hidden by a longer slice, the tile may run
//! nearer its 450 ns model (module doc of [`crate::mage_009`]), and the
//! small shapes are bound by the two launches.
//!
//! ## Measured
//!
//! `results/backward-5` (one H200, CUPTI kernel time, hot L2, one
//! session, A-B-B-A verdicts on kernel time): at the weight-gradient
//! shapes it is what the prediction said or better: 9.42 µs at
//! (64,64,4096) (7-10 predicted; mage-001 100.24, torch 8.08), 46.52 at
//! (128,128,65536) (34-40 predicted; torch 56.24), 27.30 at (64,128,65536)
//! (18-22 predicted; torch 38.57), 105.74 at (768,768,4096) (80-95
//! predicted; mage-002 124.51, torch 105.12), and 10.31 at 512³ against
//! mage-002's 17.99. With one slice (mage-003's product) it is 1.12x
//! mage-002 at 1024³ and 1.55x at 2048³ and 4096³, and at 1000x1037x999
//! (272 tiles, four slices) 1.15x: `current` takes it where it splits k
//! over fewer than two waves of tiles (`super::current`). Its error
//! against f64 was below mage-002's everywhere (2.1e-5 against 1.1e-4 at
//! (128,128,65536)): the slices shorten each FP32 chain.
//!
//! <!-- mage:table compare results/backward-5/comparison.json ops=matmul_tn stages=mage-001,mage-002,mage-004 -->
//! | op | workload | Mage current | rust mage-001 | rust mage-002 | rust mage-004 | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|---|---|---|
//! | matmul_tn | 1024x1024x1024 | **33.84** (2) mage-002 | 359.30 | 33.88 (2) | 37.85 | 51.74 (2) | 52.01 (2) | 42.08 | 0.80 |
//! | matmul_tn | 256x256x256 | 7.91 mage-001 | 7.91 | 10.38 (2) | 8.72 (2) | **5.57** (2) | 5.57 (2) | 9.11 | 0.87 |
//! | matmul_tn | 512x512x512 | 17.99 (2) mage-002 | 48.87 | 18.00 (2) | **10.31** (2) | 12.44 (2) | 12.50 (2) | 6.94 | 2.59 |
//! | matmul_tn | 2048x2048x2048 | **206.15** (2) mage-002 | 2766 | 207.52 (2) | 321.89 | 329.25 | 328.45 | 336.63 | 0.61 |
//! | matmul_tn | 4096x4096x4096 | **1646** (2) mage-002 | 21982 | 1648 (2) | 2556 | 2649 | 2649 | 2693 | 0.61 |
//! | matmul_tn | 1000x1037x999 | 74.89 (2) mage-002 | 355.93 | 73.96 (2) | 86.54 (2) | **55.05** | 55.28 | 40.60 | 1.84 |
//! | matmul_tn | 64x64x4096 | 100.24 mage-001 | 100.21 | 124.11 (2) | 9.42 (2) | 8.08 (2) | **8.03** (2) | 6.33 | 15.84 |
//! | matmul_tn | 128x128x65536 | 2687 mage-001 | 2680 | 1836 (2) | **46.52** (2) | 56.24 (2) | 56.38 (2) | 42.08 | 63.85 |
//! | matmul_tn | 64x128x65536 | 2673 mage-001 | 2673 | 1831 (2) | **27.30** (2) | 38.57 (2) | 38.77 (2) | 21.04 | 127.05 |
//! | matmul_tn | 768x768x4096 | 124.51 (2) mage-002 | 818.42 | 124.47 (2) | 105.74 (2) | **105.12** (2) | 105.12 (2) | 94.68 | 1.32 |
//! <!-- /mage:table -->
//!
//! <!-- mage:table verdicts results/backward-5/comparison.json ops=matmul_tn a=mage-004 -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | matmul_tn | 1024x1024x1024 | hot | kernel time | rust mage-004 | rust mage-003 | 0.984 [0.983, 0.985] | SAME |
//! | matmul_tn | 1024x1024x1024 | hot | kernel time | rust mage-004 | rust mage-001 | 0.105 [0.105, 0.105] | FASTER |
//! | matmul_tn | 1024x1024x1024 | hot | kernel time | rust mage-004 | rust mage-002 | 1.116 [1.115, 1.121] | SLOWER |
//! | matmul_tn | 256x256x256 | hot | kernel time | rust mage-004 | rust mage-001 | 1.101 [1.101, 1.105] | SLOWER |
//! | matmul_tn | 256x256x256 | hot | kernel time | rust mage-004 | rust mage-002 | 0.838 [0.837, 0.840] | FASTER |
//! | matmul_tn | 512x512x512 | hot | kernel time | rust mage-004 | rust mage-001 | 0.211 [0.211, 0.212] | FASTER |
//! | matmul_tn | 512x512x512 | hot | kernel time | rust mage-004 | rust mage-002 | 0.574 [0.574, 0.575] | FASTER |
//! | matmul_tn | 2048x2048x2048 | hot | kernel time | rust mage-004 | rust mage-001 | 0.115 [0.115, 0.116] | FASTER |
//! | matmul_tn | 2048x2048x2048 | hot | kernel time | rust mage-004 | rust mage-002 | 1.553 [1.552, 1.556] | SLOWER |
//! | matmul_tn | 4096x4096x4096 | hot | kernel time | rust mage-004 | rust mage-001 | 0.116 [0.115, 0.116] | FASTER |
//! | matmul_tn | 4096x4096x4096 | hot | kernel time | rust mage-004 | rust mage-002 | 1.551 [1.542, 1.559] | SLOWER |
//! | matmul_tn | 1000x1037x999 | hot | kernel time | rust mage-004 | rust mage-001 | 0.242 [0.242, 0.243] | FASTER |
//! | matmul_tn | 1000x1037x999 | hot | kernel time | rust mage-004 | rust mage-002 | 1.149 [1.143, 1.150] | SLOWER |
//! | matmul_tn | 64x64x4096 | hot | kernel time | rust mage-004 | rust mage-001 | 0.096 [0.096, 0.096] | FASTER |
//! | matmul_tn | 64x64x4096 | hot | kernel time | rust mage-004 | rust mage-002 | 0.079 [0.079, 0.079] | FASTER |
//! | matmul_tn | 128x128x65536 | hot | kernel time | rust mage-004 | rust mage-001 | 0.017 [0.017, 0.017] | FASTER |
//! | matmul_tn | 128x128x65536 | hot | kernel time | rust mage-004 | rust mage-002 | 0.025 [0.025, 0.025] | FASTER |
//! | matmul_tn | 64x128x65536 | hot | kernel time | rust mage-004 | rust mage-001 | 0.010 [0.010, 0.010] | FASTER |
//! | matmul_tn | 64x128x65536 | hot | kernel time | rust mage-004 | rust mage-002 | 0.015 [0.015, 0.015] | FASTER |
//! | matmul_tn | 768x768x4096 | hot | kernel time | rust mage-004 | rust mage-001 | 0.129 [0.129, 0.129] | FASTER |
//! | matmul_tn | 768x768x4096 | hot | kernel time | rust mage-004 | rust mage-002 | 0.850 [0.849, 0.850] | FASTER |
//! <!-- /mage:table -->

use crate::split_k::add_flat_slices;
use crate::tf32x3::{AKByM, Rows64, body};
#[cfg(not(target_arch = "nvptx64"))]
use crate::tf32x3::{BK, BN, SMS, THREADS, layout_shared_bytes};
use mage_common::device::*;

pub use crate::split_k::{MAX_GROUPS, SEGMENT, TOTALS_SHARED_BYTES, TOTALS_THREADS, total_groups};

/// The product over slice `block_idx_y()` of K (`slice_k` long, the last
/// one what is left of `k`): A, B and the output moved to the slice, then
/// mage-003's body.
///
/// # Safety
/// `a`, `b` hold A `[k, m]` and B `[k, n]`; `partials` holds `⌈k /
/// slice_k⌉·m·n` floats; `block_idx_y() < ⌈k / slice_k⌉`.
#[inline(always)]
unsafe fn slice<const VEC: bool>(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
    let s = block_idx_y();
    let k0 = s * slice_k;
    let len = slice_k.min(k - k0);
    let a = a.wrapping_add(k0 as usize * m as usize);
    let b = b.wrapping_add(k0 as usize * n as usize);
    let c = partials.wrapping_add(s as usize * m as usize * n as usize);
    unsafe { body::<VEC, Rows64, AKByM>(a, b, c, m, n, len) }
}

mage_common::kernel! {
    /// Block `(t, s)`: tile `t` (64 rows x 128 columns) of slice `s`'s
    /// partial product into `partials[s]` (`m·n` floats each); `m`, `n`
    /// multiples of 4: 16-byte copies. 256 threads.
    pub unsafe fn matmul_tn_3xtf32_splitk_m64_v4(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { slice::<true>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// As the `_v4` entry, any shape: 4-byte copies.
    pub unsafe fn matmul_tn_3xtf32_splitk_m64_scalar(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
        unsafe { slice::<false>(a, b, partials, m, n, k, slice_k) }
    }
}

mage_common::kernel! {
    /// `c[i] = Σ_s partials[s·len + i]` for `i < len`: block `b`'s threads
    /// `g·lanes + l` (`lanes = 256 / groups`) add quad `b·lanes + l` over
    /// segment `g` of the `slices` (`⌈slices / groups⌉` each) in slice
    /// order; group 0 adds the segments in order. `TOTALS_SHARED_BYTES` of
    /// shared memory; 16-byte accesses where `len` is a multiple of 4.
    pub unsafe fn matmul_tn_add_slices(partials: *const f32, c: *mut f32, len: u32, slices: u32, groups: u32) {
        if len.is_multiple_of(4) {
            unsafe { add_flat_slices::<true>(partials, c, len, slices, groups) }
        } else {
            unsafe { add_flat_slices::<false>(partials, c, len, slices, groups) }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::split_k::{totals_launch, totals_ns};
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan, Stage};

    /// Slice lengths of the rule are a multiple of this: two K tiles, one
    /// trip of the body's loop.
    pub const SLICE_QUANTUM: u32 = 2 * BK;
    /// The shortest slice the rule takes: four K tiles.
    pub const MIN_SLICE_K: u32 = 128;
    /// The most slices the rule takes.
    pub const MAX_SLICES: u32 = 1024;
    /// The cost model's time of one K tile of a 64x128 block (mage-009's at
    /// 64 rows, 1024³: one wave of 32 tiles in 31.09 µs), ...
    pub const TILE_NS: u64 = 900;
    /// ... and of a block's pipeline fill and stores; the totals launch
    /// is [`crate::split_k::totals_ns`].
    pub const BLOCK_NS: u64 = 2000;

    /// Whether the rows of A (`m` floats) and B (`n` floats) take 16-byte
    /// copies, as in mage-003.
    pub fn vector_rows(d: &[u32]) -> bool {
        d[0].is_multiple_of(4) && d[1].is_multiple_of(4)
    }

    /// Output tiles of 64 rows x 128 columns.
    pub fn tiles(d: &[u32]) -> u32 {
        d[0].div_ceil(64) * d[1].div_ceil(BN)
    }

    /// The cost model's time in ns of the dims with slices of `slice_k`:
    /// waves of one block per SM, each block its K tiles (rounded up to
    /// even, as the body runs them) and its fill, and the totals launch
    /// where there are two slices or more.
    pub fn estimate_ns(d: &[u32], slice_k: u32) -> u64 {
        let (m, n, k) = (d[0] as u64, d[1] as u64, d[2]);
        let slices = k.div_ceil(slice_k) as u64;
        let waves = (tiles(d) as u64 * slices).div_ceil(SMS as u64);
        let block = slice_k.min(k).div_ceil(BK).next_multiple_of(2) as u64 * TILE_NS + BLOCK_NS;
        let totals = if slices > 1 { totals_ns(m * n, slices) } else { 0 };
        waves * block + totals
    }

    /// K per slice for these dims: of one slice (`k`) and, for every count
    /// `s` from 2 to `min(k / MIN_SLICE_K, MAX_SLICES)`, `⌈k / s⌉` rounded
    /// up to [`SLICE_QUANTUM`], the one [`estimate_ns`] puts cheapest (the
    /// longer on a tie).
    pub fn slice_k(d: &[u32]) -> u32 {
        let k = d[2];
        let mut best = (estimate_ns(d, k), k);
        for s in 2..=(k / MIN_SLICE_K).min(MAX_SLICES) {
            let len = k.div_ceil(s).next_multiple_of(SLICE_QUANTUM);
            let cost = estimate_ns(d, len);
            if cost < best.0 {
                best = (cost, len);
            }
        }
        best.1
    }

    /// Slices for these dims.
    pub fn slices(d: &[u32]) -> u32 {
        d[2].div_ceil(slice_k(d))
    }

    /// The launches with slices of `slice_k` (a multiple of `BK` where
    /// there are two or more): one straight into C where one slice holds
    /// all of k, else the products into scratch 0 (`[slices, m, n]`) and
    /// the totals into C.
    pub fn plan_with_slice_k(d: &[u32], slice_k: u32) -> Plan {
        let (m, n, k) = (d[0], d[1], d[2]);
        let slices = k.div_ceil(slice_k);
        assert!(slices == 1 || slice_k.is_multiple_of(BK), "matmul_tn mage-004: slices of {slice_k} are not a multiple of {BK}");
        let kernel = if vector_rows(d) { &matmul_tn_3xtf32_splitk_m64_v4::KERNEL } else { &matmul_tn_3xtf32_splitk_m64_scalar::KERNEL };
        let into = if slices == 1 { Arg::Output(0) } else { Arg::Scratch(0) };
        let product = Launch {
            kernel,
            grid: Dim3 { x: tiles(d), y: slices, z: 1 },
            block: Dim3::x(THREADS),
            shared_bytes: layout_shared_bytes::<AKByM>(64),
            cluster: Dim3::ONE,
            args: vec![Arg::Input(0), Arg::Input(1), into, Arg::U32(m), Arg::U32(n), Arg::U32(k), Arg::U32(slice_k.min(k))],
        };
        if slices == 1 {
            return product.into();
        }
        let len = m * n;
        let args = vec![Arg::Scratch(0), Arg::Output(0), Arg::U32(len), Arg::U32(slices), Arg::U32(total_groups(slices))];
        let totals = totals_launch(&matmul_tn_add_slices::KERNEL, len, slices, args);
        Plan { launches: vec![product, totals], scratch: vec![slices as usize * len as usize] }
    }

    pub fn plan(d: &[u32]) -> Plan {
        plan_with_slice_k(d, slice_k(d))
    }

    pub static STAGE: Stage = Stage {
        name: "mage-004",
        summary: "split-K: mage-003's 3xTF32 product per 64x128 tile and slice of K into scratch, the slices added in order by a second kernel; slice count from the dims",
        kernels: &[&matmul_tn_3xtf32_splitk_m64_v4::KERNEL, &matmul_tn_3xtf32_splitk_m64_scalar::KERNEL, &matmul_tn_add_slices::KERNEL],
        supports: |_| true,
        plan,
    };
}
