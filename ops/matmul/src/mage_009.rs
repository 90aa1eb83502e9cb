//! mage-009: FP32 accuracy from TF32 tensor cores (3xTF32). Each term
//! `a b` is formed as `a_hi b_hi + a_hi b_lo + a_lo b_hi` by
//! `wgmma.mma_async.m64nNk8.f32.tf32.tf32` (sm_90a) with A in registers;
//! two warpgroups per block, four shared-memory stages filled by
//! `cp.async`. Under the op's FP32 tolerance, not outside it.
//!
//! Kernel body: [`crate::tf32x3`] with its `KByN` layout (shared with
//! mage-010, and generic over the layout for `matmul_nt` and `matmul_tn`;
//! frozen for this layout: ptxas
//! resources pinned by `tests/resources.rs`, the arithmetic by the 3xTF32
//! model of `tests/stages.rs`); this module holds its entries and plan.
//!
//! ## The problem turned over
//!
//! TF32 multiplies read shared operands K-major only, and B (`[k][n]`) is
//! not. The kernel computes `Cᵀ = Bᵀ · Aᵀ`: the multiply's A is `Bᵀ`, taken
//! into registers (any layout the threads load), and its B is `Aᵀ`, which
//! is A's rows, K-major as stored. So A goes to shared memory by 16-byte
//! `cp.async` straight from global memory, in 128-byte-swizzled rows (one
//! row of 32 K per tile row, atoms of 8 rows on 1024-byte boundaries of the
//! shared window: the kernel aligns them from the window address, which
//! the GPU promises only to 16 bytes; the emulator's window starts at a
//! misaligned address so that a kernel which does not align fails there),
//! and B's rows by the same copies into a plain row-major tile (rows of 136
//! floats, so a warp's fragment loads fall on 32 distinct banks).
//!
//! ## The split
//!
//! A's stored plane is its high part: the tensor core reads only the TF32
//! bits of an FP32 word, `trunc(a)` (the emulator models the same; the PTX
//! ISA calls the layout of TF32 data implementation-defined, and CUTLASS's
//! 3xTF32 also hands the tensor cores words whose low bits are not zero).
//! After its copies land, each thread writes the low part `tf32(a -
//! trunc(a))` of the chunks it copied (its own copies, visible to it after
//! its wait: no barrier between) into a second plane. `Bᵀ`'s values are
//! split in registers as they are loaded: `tf32(b)` and `tf32(b -
//! tf32(b))`. Per step of 8 K a warpgroup issues `Bᵀ_lo · A_hi`, `Bᵀ_hi ·
//! A_lo`, `Bᵀ_hi · A_hi` (the small products first).
//!
//! ## Tiles, pipeline, registers
//!
//! A block owns `BM` rows (64 or 128: [`tile_rows`]) and 128 columns of C;
//! warpgroup `g` owns columns `64 g..64 g + 64`, all `BM` rows, with one
//! `m64nBMk8` per product (the multiply's 64 rows are C's columns). K goes
//! in tiles of 32 through four stages: A's two planes and B's tile, 49 KiB
//! at 128 rows (33 at 64). The copies of tile `t + 2` are issued after
//! the barrier of tile `t`, into the stage of tile `t - 2`.
//!
//! The loop takes two tiles per trip. The tensor cores round each
//! instruction's sum toward zero (see below), a bias that grows along one
//! accumulator, so every tile is summed from zero in a partial accumulator
//! (12 instructions) and added to the FP32 sum in registers, rounded to
//! nearest. The even and odd tiles of a trip have their own partial
//! accumulators: the odd tile's multiplies run while the even sum is added
//! and the next even tile is prepared; the trip ends by waiting for the
//! odd tile and adding it. ptxas serializes every multiply of a kernel
//! whose partial sum, written in one trip, is read in the next (C7514), so
//! nothing stays in flight across trips; the drain costs about 100 clocks
//! a tile at 128 rows (64 additions a thread, 2 warps a scheduler). A
//! step's fragments are registers its multiplies read until the wait that
//! completes them: each step is spelled out (its own registers), and from
//! the third step of a trip each first waits until 2 groups remain, which
//! frees older steps' registers and still leaves 6 multiplies queued.
//!
//! ptxas (13.0.88, sm_90a): 247 registers at 128 rows (250 in the
//! `_scalar` entry; three accumulators of 64 and the fragments), 140 at 64
//! rows (142), no stack, no spills; 256 threads, so one block per SM
//! (63232 of 65536 registers) with 201712 or 136176 bytes of shared memory.
//!
//! ## Error
//!
//! With `u = 2^-24`: `a - trunc(a)` is exact and below `2^-10 |a|`; it has
//! at most 13 significant bits, so rounding it to TF32 errs by at most
//! `2^-22 |a|`. `b - tf32(b)` is exact and at most `2^-11 |b|`, with at most
//! 12 significant bits: rounding errs by at most `2^-23 |b|`. Dropping
//! `a_lo b_lo` and the two rounding errors, each term errs by at most
//! `(2^-21 + 2^-22 + 2^-23)(1 + 2^-10) |a b| < 14.1 u |a b|` (a search over
//! 2·10^7 mantissa pairs: 11.2 u at worst, 1.24 u on average; a rounded
//! `a_hi` would give 8 u and cost a rewrite of the A tile). The products
//! are exact in the tensor core; each instruction rounds once, and a
//! partial sum passes 12 of them: `γ'_12 ≈ 24 u` with a whole unit a
//! rounding (truncation); the `T = ⌈k/32⌉` partial sums are added in FP32,
//! `γ_T`. So `|out - ref| <= (38 u + γ_T) S` to first order, `S = Σ |a b|`:
//! inside the op's `1e-6 + γ_(k+1) S(k)` for every input from `k >= 40`
//! (`38 + k/32 <= k + 1`). Below that the worst case exceeds FP32's (k =
//! 1: about 40 u against 2 u); the generator's products stay far below
//! `S(k)`, and on the emulator across k = 1 .. 8192 the largest error is at
//! most 0.084 of the tolerance (k = 1), 0.004 from k = 256 on
//! (`tests/stages.rs`). Relative L2 error there, against the FP32 fma
//! chain of the other stages: 1.2e-7 against 2.5e-8 at k = 1, 2.7e-7
//! against 1.0e-7 at 32, 2.8e-7 against 2.8e-7 at 256, 2.9e-7 against
//! 5.6e-7 at 1000, 3.5e-7 against 1.16e-6 at 4096: less accurate than FP32
//! below k ≈ 256, more accurate above, as CUTLASS's maintainers describe
//! 3xTF32 (NVIDIA/cutlass#729: less accurate than FP32 for K below 256,
//! much better as K grows).
//!
//! Why a partial sum per tile: mage-008's outputs on the GPU differ from
//! the emulator's former round-to-nearest model as a truncation per
//! instruction predicts (module doc of `mage_common::device::wgmma`). A
//! host model of 3xTF32 with one accumulator over all of K and truncating
//! instructions errs by 3.9e-5 relative at k = 4096, 34 times the FP32
//! chain; with a fresh accumulator per tile of 32, 3.5e-7.
//!
//! ## Prediction (H200, 132 SMs, 1.98 GHz; tensor cores 1024 TF32
//! multiply-adds a clock per SM)
//!
//! Per K tile a block moves 32 KiB from L2 (24 at 64 rows) and its SM's
//! shared memory carries 176 KiB (104): the multiplies' reads of A's
//! planes 96 (48), the copies 32 (24), the split 32 (16), the fragment
//! loads 16: 1408 clocks at 128 bytes a clock against 1536 of tensor work
//! at 128 rows (tensor-bound, shared memory 92% busy), 832 against 768 at
//! 64 rows (bound by shared memory).
//!
//! - 1024³: 2.15 GFLOP (6.44 of tensor work), 12 MiB. 64 rows: 128 blocks,
//!   one wave on 132 SMs; 32 tiles of about 900 clocks: 14.5 µs, and the
//!   96 MiB the blocks read from L2 take about 17 µs at 5.5 TB/s; with the
//!   pipeline's fill and the stores of C, 20-26 µs (cuBLAS SGEMM 55.4,
//!   target 28; 128 rows would give 64 blocks and about 30).
//! - 4096³: 137 GFLOP (412 of tensor work), 192 MiB. 128 rows: 1024
//!   blocks, 7.76 waves, so 8; 128 tiles of about 1640 clocks a block: 106
//!   µs a wave, 850 µs if the tensor cores never wait; with shared memory
//!   92% busy beside them, 950-1250 µs (cuBLAS SGEMM 2681, target 1340).
//!
//! ## Measured
//!
//! GPU kernel time per call (CUPTI, hot L2, `results/mage-011`; `Mage
//! current` is this stage from k = 64):
//!
//! <!-- mage:table compare results/mage-011/comparison.json ops=matmul shapes=1024x1024x1024,2048x2048x2048,4096x4096x4096,4096x4096x1024,1000x1037x999 -->
//! | op | workload | Mage current | torch | torch_compile | triton | triton_tuned | triton_tf32x3 | torch_tf32 | floor | Mage / floor |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | matmul | 1024x1024x1024 | **31.09** mage-009 | 55.52 | 55.56 | 61.80 | 56.29 | 66.64 | 12.62 | 42.08 | 0.74 |
//! | matmul | 2048x2048x2048 | **208.88** mage-009 | 338.94 | 339.02 | 419.37 | 397.47 | 334.19 | 47.36 | 336.61 | 0.62 |
//! | matmul | 4096x4096x4096 | **1607** mage-009 | 2758 | 2741 | 3263 | 3100 | 2627 | 351.07 | 2693 | 0.60 |
//! | matmul | 1000x1037x999 | 79.03 mage-009 | 66.08 | **65.99** | 164.22 | 104.21 | 229.91 | 36.89 (2) | 40.60 | 1.95 |
//! | matmul | 4096x4096x1024 | **405.72** mage-009 | 685.69 | 685.48 | 826.51 | 787.71 | 675.93 | 103.24 | 673.23 | 0.60 |
//! <!-- /mage:table -->
//!
//! Slower than predicted at both sizes: 31.09 µs at 1024³ and 1607 at
//! 4096³ (`results/mage-011`). Nsight Compute (`results/nsight-1`, the
//! `.details.csv` beside each report) says why at 4096³: 2.86 M cycles
//! against the 1.67 M of tensor work; no unit near its limit (SM 54%, L1
//! 56%, L2 21%, DRAM 9% of peak); one block of 8 warps per SM (12.5%
//! occupancy, 247 registers), each warp issuing every 6.1 cycles, most
//! waiting on shared memory (short scoreboard: the `Bᵀ` fragment loads and
//! the writes of A's low plane), then on `wgmma.wait_group`. The warps that
//! split the operands and add the partial sums are the ones that issue the
//! multiplies, and no other block shares the SM to hide them. 1024³ (64
//! rows, 128 blocks) reads the same: 59 k cycles, SM 41%, L1 57%. What
//! should move it: warpgroups specialised as producer (copies and the
//! split) and consumers (`setmaxnreg`), or both operands split once before
//! the product so that the loop only multiplies.

pub use crate::tf32x3::{BK, BN, LOOKAHEAD, Rows64, Rows128, SMS, STAGES, THREADS, Tile, shared_bytes, tile_clocks, tile_rows};
use crate::tf32x3::{KByN, body};

mage_common::kernel! {
    /// 128 rows x 128 columns of C per block; `n`, `k` multiples of 4: 16-byte copies. 256 threads.
    pub unsafe fn matmul_3xtf32_m128_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows128, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 128 x 128 per block, any shape: 4-byte copies.
    pub unsafe fn matmul_3xtf32_m128_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows128, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block; `n`, `k` multiples of 4.
    pub unsafe fn matmul_3xtf32_m64_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows64, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block, any shape.
    pub unsafe fn matmul_3xtf32_m64_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows64, KByN>(a, b, c, m, n, k) }
    }
}

/// The launch with `rows` (64 or 128) rows per block.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan_with_rows(d: &[u32], rows: u32) -> mage_common::op::Plan {
    let kernel = match (rows, crate::vector_rows(d)) {
        (128, true) => &matmul_3xtf32_m128_v4::KERNEL,
        (128, false) => &matmul_3xtf32_m128_scalar::KERNEL,
        (64, true) => &matmul_3xtf32_m64_v4::KERNEL,
        (64, false) => &matmul_3xtf32_m64_scalar::KERNEL,
        _ => panic!("mage-009 has tiles of 64 or 128 rows, not {rows}"),
    };
    crate::tiled_launch(d, kernel, rows, BN, THREADS, shared_bytes(rows))
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    plan_with_rows(d, tile_rows(d))
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-009",
    summary: "3xTF32 (FP32 accuracy): three TF32 products per term on wgmma with A in registers, 128x128 or 64x128 tiles, two warpgroups, four cp.async stages",
    kernels: &[
        &matmul_3xtf32_m128_v4::KERNEL,
        &matmul_3xtf32_m128_scalar::KERNEL,
        &matmul_3xtf32_m64_v4::KERNEL,
        &matmul_3xtf32_m64_scalar::KERNEL,
    ],
    supports: |_| true,
    plan,
};
