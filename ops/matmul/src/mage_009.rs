//! mage-009: FP32 accuracy from TF32 tensor cores (3xTF32). Each term
//! `a b` is formed as `a_hi b_hi + a_hi b_lo + a_lo b_hi` by
//! `wgmma.mma_async.m64nNk8.f32.tf32.tf32` (sm_90a) with A in registers;
//! two warpgroups per block, four shared-memory stages filled by
//! `cp.async`. Under the op's FP32 tolerance, not outside it.
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

use crate::cp_async_quad;
use mage_common::device::wgmma::*;
use mage_common::device::*;

/// Columns of C per block: a slice of 64 per warpgroup.
pub const BN: u32 = 128;
/// K per pipeline stage: one 128-byte swizzle row of A per row of the tile.
pub const BK: u32 = 32;
/// Shared-memory stages.
pub const STAGES: u32 = 4;
/// K tiles whose copies are in flight beyond the one being multiplied: the
/// stage of tile `t - 1` may still be read by its multiplies while tile
/// `t` is multiplied, so `STAGES - 2` are left for copies.
pub const LOOKAHEAD: u32 = STAGES - 2;
/// Two warpgroups.
pub const THREADS: u32 = 256;
/// Floats per row of the B tile in shared memory: 8 more than `BN`, so the
/// four K rows one fragment load of a warp touches start 8 banks apart.
pub const B_ROW_FLOATS: u32 = BN + 8;
const B_TILE_BYTES: u32 = BK * B_ROW_FLOATS * 4;
/// The 128-byte swizzle repeats every 8 rows of 128 bytes: each A plane
/// starts on a multiple of this in the shared window.
pub const ATOM_BYTES: u32 = 1024;
/// Descriptor strides of a swizzled K-major plane: 8 rows on, and the
/// leading byte offset swizzled layouts ignore (CUTLASS's value).
const STRIDE_BYTE_OFFSET: u32 = ATOM_BYTES;
const LEADING_BYTE_OFFSET: u32 = 16;
/// SMs of the H200, for the choice of tile rows ([`tile_rows`]).
pub const SMS: u32 = 132;

/// One plane of an A tile: `bm` rows of `BK` floats, 128 bytes each.
pub const fn plane_bytes(bm: u32) -> u32 {
    bm * BK * 4
}

/// One stage: the A tile as stored (its TF32 high part, read truncated),
/// the A tile's low parts, the B tile; rounded up to a whole atom so that
/// every stage's planes stay aligned.
pub const fn stage_bytes(bm: u32) -> u32 {
    (2 * plane_bytes(bm) + B_TILE_BYTES).next_multiple_of(ATOM_BYTES)
}

/// Shared bytes per block: the stages, and room to move them to a 1024-byte
/// boundary of the shared window (at most 1008 bytes, the window being
/// 16-byte aligned).
pub const fn shared_bytes(bm: u32) -> u32 {
    STAGES * stage_bytes(bm) + ATOM_BYTES - 16
}

/// Where chunk `c` (16 bytes: K `4 c..4 c + 4`) of row `r` of an A plane
/// lies: rows of 128 bytes in atoms of 8 rows, the chunk index XORed with
/// the row within the atom (the 128-byte swizzle, with the plane on an
/// atom boundary of the window).
#[inline(always)]
pub const fn swizzled(r: u32, c: u32) -> u32 {
    r / 8 * ATOM_BYTES + r % 8 * 128 + (c ^ (r % 8)) * 16
}

/// A block's rows of C, and what goes with them: the accumulators of
/// `wgmma.m64nBMk8` (BM / 2 per thread) and their multiply.
pub trait Tile {
    const BM: u32;
    type Acc: Accumulators;
    fn zero() -> Self::Acc;
    /// `acc = a · b (+ acc)` with A (64 x 8) from this thread's fragment
    /// and B (BM x 8, K-major) from the descriptor; `accumulate` false
    /// ignores what `acc` holds.
    fn mma(acc: &mut Self::Acc, a: [f32; 4], b: u64, accumulate: bool);
    /// `sum[i] += part[i]` for every register, one FP32 addition each
    /// (round to nearest), spelled out.
    fn add(sum: &mut Self::Acc, part: &Self::Acc);
    /// `f(j, registers 4 j..4 j + 4)` for every quad `j`, spelled out: LLVM
    /// leaves such loops rolled and moves the accumulators to local memory.
    fn each_quad(acc: &Self::Acc, f: impl FnMut(u32, [f32; 4]));
}

/// `$sum[i] += $part[i]` for each listed `i`.
macro_rules! add_each {
    ($sum:ident, $part:ident: $($i:literal)*) => { $( $sum[$i] += $part[$i]; )* };
}

/// `$f(j, [acc[4 j], .., acc[4 j + 3]])` for each listed `j`.
macro_rules! quads {
    ($acc:ident, $f:ident: $($j:literal)*) => { $( $f($j, [$acc[4 * $j], $acc[4 * $j + 1], $acc[4 * $j + 2], $acc[4 * $j + 3]]); )* };
}

/// 128 rows per block.
pub struct Rows128;
/// 64 rows per block: twice the blocks where 128 rows leave SMs idle.
pub struct Rows64;

impl Tile for Rows128 {
    const BM: u32 = 128;
    type Acc = [f32; 64];
    #[inline(always)]
    fn zero() -> [f32; 64] {
        [0.0; 64]
    }
    #[inline(always)]
    fn mma(acc: &mut [f32; 64], a: [f32; 4], b: u64, accumulate: bool) {
        wgmma_m64n128k8_f32_tf32_rs(acc, a, b, accumulate)
    }
    #[inline(always)]
    fn add(sum: &mut [f32; 64], part: &[f32; 64]) {
        add_each!(sum, part: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
    }
    #[inline(always)]
    fn each_quad(acc: &[f32; 64], mut f: impl FnMut(u32, [f32; 4])) {
        quads!(acc, f: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    }
}

impl Tile for Rows64 {
    const BM: u32 = 64;
    type Acc = [f32; 32];
    #[inline(always)]
    fn zero() -> [f32; 32] {
        [0.0; 32]
    }
    #[inline(always)]
    fn mma(acc: &mut [f32; 32], a: [f32; 4], b: u64, accumulate: bool) {
        wgmma_m64n64k8_f32_tf32_rs(acc, a, b, accumulate)
    }
    #[inline(always)]
    fn add(sum: &mut [f32; 32], part: &[f32; 32]) {
        add_each!(sum, part: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    }
    #[inline(always)]
    fn each_quad(acc: &[f32; 32], mut f: impl FnMut(u32, [f32; 4])) {
        quads!(acc, f: 0 1 2 3 4 5 6 7);
    }
}

/// Issues the copies of K tile `tile` into the stage at byte `stage`.
/// A: `BM` rows x 8 chunks; thread `t` takes chunks `q = t + 256 i`
/// (row `q / 8`, chunk `q % 8`), so a warp reads 4 rows of 128 bytes and
/// each 8 lanes write one swizzled row (32 distinct banks). B: 32 K rows x
/// 32 chunks; chunk `q` at row `q / 32`, a warp's 32 lanes one row of 512
/// bytes.
///
/// # Safety
/// `blk.a`, `blk.b` must hold the `m * k` and `k * n` matrices.
#[inline(always)]
unsafe fn issue_tile<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
    let t = thread_idx_x();
    let k0 = tile * BK;
    for i in 0..T::BM / 32 {
        let q = t + THREADS * i;
        let (r, c) = (q / 8, q % 8);
        unsafe { cp_async_quad::<VEC>(stage + swizzled(r, c), blk.a, blk.row0 + r, blk.m, k0 + 4 * c, blk.k) };
    }
    for i in 0..BK * BN / 4 / THREADS {
        let q = t + THREADS * i;
        let (r, c) = (q / 32, q % 32);
        let dst = stage + 2 * plane_bytes(T::BM) + r * B_ROW_FLOATS * 4 + c * 16;
        unsafe { cp_async_quad::<VEC>(dst, blk.b, k0 + r, blk.k, blk.col0 + 4 * c, blk.n) };
    }
}

/// The low parts of the A tile in the stage at byte `stage`: each thread
/// reads the chunks it copied (its own `cp.async` writes, visible to it
/// after its wait, so no barrier is needed) and writes `tf32(x - trunc(x))`
/// at the same place of the second plane. The first plane stays as
/// copied: the multiply reads its TF32 bits, `trunc(x)`.
#[inline(always)]
fn split_a<T: Tile>(stage: u32) {
    let t = thread_idx_x();
    for i in 0..T::BM / 32 {
        let q = t + THREADS * i;
        let at = stage + swizzled(q / 8, q % 8);
        smem_st4(at + plane_bytes(T::BM), smem_ld4(at).map(|x| tf32_rna(x - tf32_trunc(x))));
    }
}

/// This thread's fragment of `Bᵀ` (the multiply's A: 64 columns of C x 8
/// K) for step `s` of the K tile in the stage at byte `stage`, split into
/// high and low parts: each value `x` into `tf32(x)` and `tf32(x -
/// tf32(x))`.
///
/// Fragment row `ρ` of warp `w` (rows `16 w + l / 4` and `+ 8` for lane
/// `l`) stands for column `16 w + 2 (ρ - 16 w)` of the warpgroup's 64, or
/// that plus 1 for the second 8 rows: the two rows a thread holds are two
/// adjacent columns, one 64-bit load per K row, and the accumulators' rows
/// are permuted the same way (see the store).
#[inline(always)]
fn fragment<T: Tile>(stage: u32, s: u32) -> ([f32; 4], [f32; 4]) {
    let t = thread_idx_x();
    let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
    let col = 64 * warpgroup + 16 * warp + 2 * (lane / 4);
    let row_at = |kk: u32| stage + 2 * plane_bytes(T::BM) + (kk * B_ROW_FLOATS + col) * 4;
    // Registers 0 and 1: K `8 s + l % 4`, columns `col`, `col + 1`; 2 and 3: K + 4.
    let [x0, x1] = smem_ld2(row_at(8 * s + lane % 4));
    let [x2, x3] = smem_ld2(row_at(8 * s + lane % 4 + 4));
    let x = [x0, x1, x2, x3];
    let hi = x.map(tf32_rna);
    (hi, [0, 1, 2, 3].map(|j| tf32_rna(x[j] - hi[j])))
}

/// Step `s` (8 K) of the multiplies of the K tile in the stage at byte
/// `stage` into `part`, one group: `Bᵀ_lo · A_hi`, `Bᵀ_hi · A_lo`, then
/// `Bᵀ_hi · A_hi` (the small products first), each `wgmma.m64nBMk8` with A
/// from registers and B from a plane of the stage; step 0 starts `part`
/// afresh.
#[inline(always)]
fn multiply_step<T: Tile>(part: &mut T::Acc, stage: u32, s: u32) {
    let (hi, lo) = (stage, stage + plane_bytes(T::BM));
    let desc = |plane: u32| MatrixDescriptor::k_major(plane + 32 * s, LEADING_BYTE_OFFSET, STRIDE_BYTE_OFFSET, Swizzle::Bytes128);
    let (x_hi, x_lo) = fragment::<T>(stage, s);
    wgmma_fence();
    T::mma(part, x_lo, desc(hi), s > 0);
    T::mma(part, x_hi, desc(lo), true);
    T::mma(part, x_hi, desc(hi), true);
    wgmma_commit_group();
}

/// `sum += part`, once the multiplies into `part` are done (the caller
/// waited): FP32 additions, rounded to nearest, kept in place between the
/// two fences (not sunk past the multiplies that follow).
#[inline(always)]
fn add_partial<T: Tile>(sum: &mut T::Acc, part: &mut T::Acc) {
    fence_accumulators(part);
    T::add(sum, part);
    fence_accumulators(sum);
}

/// `wgmma` groups per K tile: one per step of 8 K.
const GROUPS_PER_TILE: u32 = BK / 8;

/// Where a block is, and the arguments every step needs.
#[derive(Clone, Copy)]
struct Block {
    a: *const f32,
    b: *const f32,
    m: u32,
    n: u32,
    k: u32,
    row0: u32,
    col0: u32,
    /// K tiles, rounded up to even: an odd count gets a last tile of zeros.
    tiles: u32,
    /// Byte offset of the first stage: its window address a multiple of 1024.
    first: u32,
}

impl Block {
    #[inline(always)]
    fn stage<T: Tile>(&self, tile: u32) -> u32 {
        self.first + tile % STAGES * stage_bytes(T::BM)
    }

    /// Issues the copies of `tile` if there is one (a tile past `k` is all
    /// zero-filled), and commits a group either way (one group per tile,
    /// empty past the last).
    #[inline(always)]
    fn issue<const VEC: bool, T: Tile>(&self, tile: u32) {
        if tile < self.tiles {
            // SAFETY: the kernel's caller passes the matrices `m`, `n`, `k` describe.
            unsafe { issue_tile::<VEC, T>(self, tile, self.stage::<T>(tile)) };
        }
        cp_async_commit();
    }
}

/// Prepares K tile `tile` for its multiplies: this thread waits for its
/// copies of the tile, writes its low parts of A, meets the block, and
/// issues the copies of `tile + LOOKAHEAD`.
#[inline(always)]
fn prepare<const VEC: bool, T: Tile>(blk: &Block, tile: u32) {
    // This thread's copies of `tile` have landed (one group per tile,
    // `LOOKAHEAD` committed beyond it) ...
    cp_async_wait_group::<{ LOOKAHEAD - 1 }>();
    split_a::<T>(blk.stage::<T>(tile));
    fence_proxy_async_shared();
    // ... and everyone's, with the low parts written. Every thread has
    // waited for the multiplies of `tile - 2` (see `body`), so its stage
    // takes the copies of `tile + 2`.
    sync_threads();
    blk.issue::<VEC, T>(tile + LOOKAHEAD);
}

/// The kernel body; `VEC` picks 16-byte copies.
///
/// # Safety
/// `a`, `b`, `c` must hold the `m * k`, `k * n` and `m * n` matrices.
#[inline(always)]
unsafe fn body<const VEC: bool, T: Tile>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let tiles_n = n.div_ceil(BN);
    let (row0, col0) = (block_idx_x() / tiles_n * T::BM, block_idx_x() % tiles_n * BN);
    let tiles = k.div_ceil(BK).next_multiple_of(2);
    let blk = Block { a, b, m, n, k, row0, col0, tiles, first: align_up_in_window(0, ATOM_BYTES) };
    for tile in 0..LOOKAHEAD {
        blk.issue::<VEC, T>(tile);
    }
    // The sum, in FP32 registers, and the partial sums of an even and an
    // odd tile on the tensor cores (see the module doc: the tensor cores
    // truncate each instruction's sum, so a partial sum spans one tile).
    // Each trip of the loop takes two tiles and ends with nothing in
    // flight: ptxas serializes every multiply of a kernel where a
    // partial sum written in one trip is read in the next. The odd tile's
    // multiplies overlap the even one's addition and the preparation of
    // the next even tile; only its own addition, at the end of the trip,
    // waits for them. The tile count is even (the last tile of an odd
    // count is zeros).
    let (mut acc, mut even, mut odd) = (T::zero(), T::zero(), T::zero());
    prepare::<VEC, T>(&blk, 0);
    for pair in 0..blk.tiles / 2 {
        let (e, o) = (2 * pair, 2 * pair + 1);
        // Each step spelled out: its fragments are registers of their own,
        // read by its multiplies until the wait that completes them (a loop
        // over the steps would rewrite one step's registers while the last
        // step's multiplies read them, which the ISA leaves undefined).
        // From the third step of the trip on, a step first waits until at
        // most 2 groups are in flight: it frees the registers of older
        // steps (255 registers otherwise, and spills, at 128 rows) and
        // still leaves 6 multiplies queued.
        const _: () = assert!(GROUPS_PER_TILE == 4);
        let (se, so) = (blk.stage::<T>(e), blk.stage::<T>(o));
        multiply_step::<T>(&mut even, se, 0);
        multiply_step::<T>(&mut even, se, 1);
        wgmma_wait_group::<2>();
        multiply_step::<T>(&mut even, se, 2);
        wgmma_wait_group::<2>();
        multiply_step::<T>(&mut even, se, 3);
        prepare::<VEC, T>(&blk, o);
        wgmma_wait_group::<2>();
        multiply_step::<T>(&mut odd, so, 0);
        wgmma_wait_group::<2>();
        multiply_step::<T>(&mut odd, so, 1);
        // Only the odd tile's first two steps can be in flight: the even
        // tile's sum is done.
        wgmma_wait_group::<2>();
        add_partial::<T>(&mut acc, &mut even);
        multiply_step::<T>(&mut odd, so, 2);
        wgmma_wait_group::<2>();
        multiply_step::<T>(&mut odd, so, 3);
        if o + 1 < blk.tiles {
            prepare::<VEC, T>(&blk, o + 1);
        }
        wgmma_wait_group::<0>();
        add_partial::<T>(&mut acc, &mut odd);
    }
    // The accumulators hold Cᵀ: fragment row ρ is a column of C (the
    // permutation of `fragment`), fragment column j the row `row0 + j`.
    // Registers 4 q and 4 q + 2 are C's row `8 q + 2 (l % 4)`, columns
    // `col` and `col + 1`; registers 4 q + 1 and 4 q + 3 the next row.
    let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
    let col = col0 + 64 * warpgroup + 16 * warp + 2 * (lane / 4);
    let store = |q: u32, v: [f32; 4]| {
        let row = row0 + 8 * q + 2 * (lane % 4);
        for (r, x, y) in [(row, v[0], v[2]), (row + 1, v[1], v[3])] {
            if r < m {
                if col < n {
                    unsafe { st(c, r * n + col, x) };
                }
                if col + 1 < n {
                    unsafe { st(c, r * n + col + 1, y) };
                }
            }
        }
    };
    T::each_quad(&acc, store);
}

mage_common::kernel! {
    /// 128 rows x 128 columns of C per block; `n`, `k` multiples of 4: 16-byte copies. 256 threads.
    pub unsafe fn matmul_3xtf32_m128_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows128>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 128 x 128 per block, any shape: 4-byte copies.
    pub unsafe fn matmul_3xtf32_m128_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows128>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block; `n`, `k` multiples of 4.
    pub unsafe fn matmul_3xtf32_m64_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows64>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 per block, any shape.
    pub unsafe fn matmul_3xtf32_m64_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false, Rows64>(a, b, c, m, n, k) }
    }
}

/// Estimated clocks of one K tile on one SM (see the module doc): 128 rows
/// are tensor-bound (3 · 128 · 128 · 32 multiply-adds at 1024 a clock:
/// 1536) and 64 rows bound by shared memory (104 KiB a tile at 128 bytes a
/// clock: 832), each with half of a trip's drain (about 100 and 65).
pub const fn tile_clocks(bm: u32) -> u32 {
    if bm == 128 { 1636 } else { 897 }
}

/// The rows per block for these dims: the tile with fewer estimated clocks
/// per SM (waves of [`SMS`] blocks times [`tile_clocks`]), 128 on a tie.
pub fn tile_rows(d: &[u32]) -> u32 {
    let cost = |bm: u32| (d[0].div_ceil(bm) * d[1].div_ceil(BN)).div_ceil(SMS) as u64 * tile_clocks(bm) as u64;
    if cost(128) <= cost(64) { 128 } else { 64 }
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
