//! The 3xTF32 product on `wgmma` shared by mage-009, mage-010 and
//! mage-011, and by the transposed products' stages (`matmul_nt` mage-002
//! and mage-003, `matmul_tn` mage-002 to mage-005): tiles, shared-memory layout, pipeline and kernel
//! body. What it does and why, its error analysis and what it measured are
//! in [`crate::mage_009`]'s module doc; the stages own their kernel entries
//! and plans.
//!
//! The body is generic over a [`Layout`]: where A and B lie in global
//! memory, and so how their tiles are copied and split, where a thread
//! finds its fragment of `Bᵀ` and where the accumulators land in C.
//! [`KByN`] is matmul's (A `[m, k]`, B `[k, n]`), and its methods are the
//! code mage-009 and mage-010 ran before the body was generic: their PTX is
//! the same instructions in the same order (only label numbers moved) and
//! their ptxas resources are unchanged (`tests/resources.rs`). [`NByK`]
//! takes B `[n, k]` (`matmul_nt`), [`AKByM`] A `[k, m]` (`matmul_tn`'s
//! mage-003), [`KSliceByN`] is matmul's over one slice of K (mage-011's
//! split-K: A's rows longer than the slice), and [`NSliceByK`]
//! `matmul_nt`'s (its mage-003: A's and B's rows longer than the slice).

use crate::{cp_async_quad, cp_async_quad_strided};
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

/// [`stage_bytes`] with the room layout `L` needs beside the planes and the
/// B tile (its raw A tile, [`Layout::RAW_A_BYTES`]).
pub const fn layout_stage_bytes<L: Layout>(bm: u32) -> u32 {
    (2 * plane_bytes(bm) + B_TILE_BYTES + L::RAW_A_BYTES).next_multiple_of(ATOM_BYTES)
}

/// [`shared_bytes`] for layout `L`.
pub const fn layout_shared_bytes<L: Layout>(bm: u32) -> u32 {
    STAGES * layout_stage_bytes::<L>(bm) + ATOM_BYTES - 16
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

/// Issues the copies of K tile `tile` into the stage at byte `stage`, A's
/// and B's as the [`Layout`] says.
///
/// # Safety
/// `blk.a` must hold the `m * k` matrix, `blk.b` B as `L` lays it out.
#[inline(always)]
unsafe fn issue_tile<const VEC: bool, T: Tile, L: Layout>(blk: &Block, tile: u32, stage: u32) {
    unsafe { L::issue_a::<VEC, T>(blk, tile, stage) };
    unsafe { L::issue_b::<VEC>(blk, tile * BK, stage + 2 * plane_bytes(T::BM)) };
}

/// Where B lies in global memory, and what follows from it: how its part
/// of a K tile is copied into a stage, where a thread finds its fragment
/// of `Bᵀ` there, and where the accumulators (`Cᵀ`) land in C. The A tile,
/// the split, the multiplies and the pipeline do not depend on it.
pub trait Layout {
    /// Bytes of a stage, beyond A's two planes and B's tile, where A's part
    /// of a K tile lands before its split writes the planes: none where A
    /// arrives K-major (`[m, k]`) and is copied into the hi plane itself.
    const RAW_A_BYTES: u32 = 0;

    /// Issues this thread's copies of A's part of K tile `tile` (K from
    /// `tile * BK`) into the stage at byte `stage`. By default A is `[m, k]`: `BM`
    /// rows x 8 chunks straight into the hi plane; thread `t` takes chunks
    /// `q = t + 256 i` (row `q / 8`, chunk `q % 8`), so a warp reads 4 rows
    /// of 128 bytes and each 8 lanes write one swizzled row (32 distinct
    /// banks).
    ///
    /// # Safety
    /// `blk.a` must hold A as this layout lays it out.
    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        let t = thread_idx_x();
        let k0 = tile * BK;
        for i in 0..T::BM / 32 {
            let q = t + THREADS * i;
            let (r, c) = (q / 8, q % 8);
            unsafe { cp_async_quad::<VEC>(stage + swizzled(r, c), blk.a, blk.row0 + r, blk.m, k0 + 4 * c, blk.k) };
        }
    }

    /// The planes of the A tile in the stage at byte `stage`, once this
    /// thread's copies have landed (before the block's barrier). By
    /// default the low parts: each thread reads the chunks it copied (its
    /// own `cp.async` writes, visible to it after its wait, so no barrier
    /// is needed) and writes `tf32(x - trunc(x))` at the same place of the
    /// second plane. The first plane stays as copied: the multiply reads
    /// its TF32 bits, `trunc(x)`.
    #[inline(always)]
    fn split_a<T: Tile>(stage: u32) {
        let t = thread_idx_x();
        for i in 0..T::BM / 32 {
            let q = t + THREADS * i;
            let at = stage + swizzled(q / 8, q % 8);
            smem_st4(at + plane_bytes(T::BM), smem_ld4(at).map(|x| tf32_rna(x - tf32_trunc(x))));
        }
    }

    /// Issues this thread's copies of B's part of the K tile that starts at
    /// `k0` into the B tile at byte `at` of a stage.
    ///
    /// # Safety
    /// `blk.b` must hold B as this layout lays it out.
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32);
    /// This thread's four values of `Bᵀ` (the multiply's A, 64 columns of C
    /// x 8 K, fragment registers 0..4) for step `s` of the B tile at byte `at`.
    fn fragment(at: u32, s: u32) -> [f32; 4];
    /// Stores the accumulators, `Cᵀ` for the block's tile, into C.
    ///
    /// # Safety
    /// `c` must hold the `m * n` output; no other block writes this tile.
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc);
}

/// B stored `[k, n]` (matmul's): its tile a plain row-major block of 32 K
/// rows, read into registers with a permutation of the fragment's rows.
pub struct KByN;

impl Layout for KByN {
    /// 32 K rows x 32 chunks; chunk `q` at row `q / 32`, a warp's 32 lanes
    /// one row of 512 bytes.
    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        let t = thread_idx_x();
        for i in 0..BK * BN / 4 / THREADS {
            let q = t + THREADS * i;
            let (r, c) = (q / 32, q % 32);
            let dst = at + r * B_ROW_FLOATS * 4 + c * 16;
            unsafe { cp_async_quad::<VEC>(dst, blk.b, k0 + r, blk.k, blk.col0 + 4 * c, blk.n) };
        }
    }

    /// Fragment row `ρ` of warp `w` (rows `16 w + l / 4` and `+ 8` for lane
    /// `l`) stands for column `16 w + 2 (ρ - 16 w)` of the warpgroup's 64, or
    /// that plus 1 for the second 8 rows: the two rows a thread holds are two
    /// adjacent columns, one 64-bit load per K row, and the accumulators' rows
    /// are permuted the same way (see the store).
    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        let t = thread_idx_x();
        let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
        let col = 64 * warpgroup + 16 * warp + 2 * (lane / 4);
        let row_at = |kk: u32| at + (kk * B_ROW_FLOATS + col) * 4;
        // Registers 0 and 1: K `8 s + l % 4`, columns `col`, `col + 1`; 2 and 3: K + 4.
        let [x0, x1] = smem_ld2(row_at(8 * s + lane % 4));
        let [x2, x3] = smem_ld2(row_at(8 * s + lane % 4 + 4));
        [x0, x1, x2, x3]
    }

    /// The accumulators hold Cᵀ: fragment row ρ is a column of C (the
    /// permutation of `fragment`), fragment column j the row `row0 + j`.
    /// Registers 4 q and 4 q + 2 are C's row `8 q + 2 (l % 4)`, columns
    /// `col` and `col + 1`; registers 4 q + 1 and 4 q + 3 the next row.
    #[inline(always)]
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc) {
        let (m, n, row0) = (blk.m, blk.n, blk.row0);
        let t = thread_idx_x();
        let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
        let col = blk.col0 + 64 * warpgroup + 16 * warp + 2 * (lane / 4);
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
        T::each_quad(acc, store);
    }
}

/// B stored `[n, k]` (matmul_nt's, `C = A·Bᵀ`): its rows are K-contiguous
/// like A's, so its tile is `BN` rows of 32 K in the A planes' 128-byte
/// swizzle, and the fragment takes the natural register layout: fragment
/// row `ρ` of warp `w` is column `16 w + ρ` of the warpgroup's 64.
pub struct NByK;

impl Layout for NByK {
    /// `BN` rows x 8 chunks, as A's: thread `t` takes chunks `q = t + 256
    /// i` (row `q / 8`, chunk `q % 8`), a warp 4 rows of 128 bytes read and
    /// each 8 lanes one swizzled row written (32 distinct banks).
    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        let t = thread_idx_x();
        for i in 0..BN * BK / 4 / THREADS {
            let q = t + THREADS * i;
            let (r, c) = (q / 8, q % 8);
            unsafe { cp_async_quad::<VEC>(at + swizzled(r, c), blk.b, blk.col0 + r, blk.n, k0 + 4 * c, blk.k) };
        }
    }

    /// Lane `l` of warp `w` in warpgroup `g` holds tile rows `r = 64 g +
    /// 16 w + l / 4` and `r + 8`, at K `8 s + l % 4` (registers 0 and 1:
    /// chunk `2 s`) and `+ 4` (registers 2 and 3: chunk `2 s + 1`): four
    /// scalar loads, each warp's 32 on 32 distinct banks (its 8 rows of an
    /// atom XOR the chunk to 8 different ones, 4 lanes within each).
    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        let t = thread_idx_x();
        let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
        // Row `r` is row `l / 4` of its atom (`64 g + 16 w` is a multiple
        // of 8), and row `r + 8` the same row of the next atom.
        let row = at + swizzled(64 * warpgroup + 16 * warp + lane / 4, 0) - (lane / 4) * 16 + 4 * (lane % 4);
        let ld = |next_atom: u32, c: u32| smem_ld(row + next_atom * ATOM_BYTES + (c ^ (lane / 4)) * 16);
        [ld(0, 2 * s), ld(1, 2 * s), ld(0, 2 * s + 1), ld(1, 2 * s + 1)]
    }

    /// Fragment row ρ is C's column `col0 + 64 g + 16 w + ρ`, fragment
    /// column j the row `row0 + j`: registers 4 q and 4 q + 2 are C's row
    /// `8 q + 2 (l % 4)`, columns `col` and `col + 8`; registers 4 q + 1
    /// and 4 q + 3 the next row.
    #[inline(always)]
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc) {
        let (m, n, row0) = (blk.m, blk.n, blk.row0);
        let t = thread_idx_x();
        let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
        let col = blk.col0 + 64 * warpgroup + 16 * warp + lane / 4;
        let store = |q: u32, v: [f32; 4]| {
            let row = row0 + 8 * q + 2 * (lane % 4);
            for (r, x, y) in [(row, v[0], v[2]), (row + 1, v[1], v[3])] {
                if r < m {
                    if col < n {
                        unsafe { st(c, r * n + col, x) };
                    }
                    if col + 8 < n {
                        unsafe { st(c, r * n + col + 8, y) };
                    }
                }
            }
        };
        T::each_quad(acc, store);
    }
}

/// matmul's layout over one slice of K (split-K, mage-011): A `[m, k]`
/// read in a window of `k` columns (the slice's length; the caller moves
/// `a` to the slice's first column) of rows [`Block::a_row`] floats apart,
/// B `[k, n]` from the slice's first row as [`KByN`] reads it. Everything
/// else is [`KByN`]'s: the same copies (the chunks' columns and zero-fill
/// bounds; only A's row stride is not the bound), split, fragments and
/// stores, so a slice's partial is mage-009's product over the slice.
pub struct KSliceByN;

impl Layout for KSliceByN {
    /// [`Layout::issue_a`]'s copies with A's rows `a_row` apart.
    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        let t = thread_idx_x();
        let k0 = tile * BK;
        for i in 0..T::BM / 32 {
            let q = t + THREADS * i;
            let (r, c) = (q / 8, q % 8);
            let dst = stage + swizzled(r, c);
            unsafe { cp_async_quad_strided::<VEC>(dst, blk.a, blk.row0 + r, blk.m, k0 + 4 * c, blk.k, blk.a_row) };
        }
    }

    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        unsafe { KByN::issue_b::<VEC>(blk, k0, at) }
    }

    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        KByN::fragment(at, s)
    }

    #[inline(always)]
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc) {
        unsafe { KByN::store::<T>(blk, c, acc) }
    }
}

/// matmul_nt's layout over one slice of K (split-K, matmul_nt mage-003):
/// A `[m, k]` as [`KSliceByN`] reads it (a window of `k` columns, the
/// slice's length, of rows [`Block`]'s `a_row` floats apart), and B `[n, k]`
/// as [`NByK`] reads it but for the same stride: its rows are as long as
/// A's (the full K), so the window of the slice's columns is read with
/// rows `a_row` apart too (the caller moves `b` to the slice's first
/// column). Everything else is [`NByK`]'s: the chunks' columns and
/// zero-fill bounds, the split, fragments and stores by the element, so a
/// slice's partial is matmul_nt mage-002's product over the slice.
pub struct NSliceByK;

impl Layout for NSliceByK {
    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        unsafe { KSliceByN::issue_a::<VEC, T>(blk, tile, stage) }
    }

    /// [`NByK::issue_b`]'s copies with B's rows `a_row` apart.
    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        let t = thread_idx_x();
        for i in 0..BN * BK / 4 / THREADS {
            let q = t + THREADS * i;
            let (r, c) = (q / 8, q % 8);
            let dst = at + swizzled(r, c);
            unsafe { cp_async_quad_strided::<VEC>(dst, blk.b, blk.col0 + r, blk.n, k0 + 4 * c, blk.k, blk.a_row) };
        }
    }

    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        NByK::fragment(at, s)
    }

    #[inline(always)]
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc) {
        unsafe { NByK::store::<T>(blk, c, acc) }
    }
}

/// Floats per row of [`AKByM`]'s raw A tile: 4 more than its 64 rows of
/// C, so that the 8 K rows a quarter-warp's 16-byte reads touch fall on 8
/// different 16-byte slots of the banks.
pub const RAW_ROW_FLOATS: u32 = 64 + 4;

/// A stored `[k, m]` (matmul_tn's, `C = Aᵀ·B`), B `[k, n]` as matmul's,
/// 64 rows of C per block only. A arrives M-contiguous, and TF32 `wgmma`
/// reads its shared operand K-major only: the K tile (32 K rows of 64
/// floats) is copied raw by 16-byte `cp.async` into a buffer of its own in
/// the stage (rows of [`RAW_ROW_FLOATS`]), and the split writes both planes
/// from there: the hi plane the float itself (the multiply reads its TF32
/// bits, `trunc(x)`, as mage-009's copied plane), the lo plane `tf32(x -
/// trunc(x))`, so the products are mage-009's to the bit. Thread `t` copies
/// K row `t % 32`, chunks `2 (t / 32)` and `+ 1` (32 contiguous bytes of a
/// row of A; a warp 32 K rows), and splits exactly what it copied: no
/// barrier between its wait and its split. Each of its 8 values goes to
/// one row of the planes by a 4-byte store, a warp's 32 lanes the 32 K of
/// one row (32 distinct banks). A stage of 128 rows (two planes, the B
/// tile and a raw tile: 66 KiB) would not fit four times in the 227 KiB a
/// block may have; 64 rows take 42 KiB.
pub struct AKByM;

impl Layout for AKByM {
    const RAW_A_BYTES: u32 = BK * RAW_ROW_FLOATS * 4;

    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        const { assert!(T::BM == 64, "matmul_tn's split takes 64 rows") };
        let t = thread_idx_x();
        let k0 = tile * BK;
        let (kk, pair) = (t % 32, t / 32);
        let raw = stage + 2 * plane_bytes(T::BM) + B_TILE_BYTES + kk * RAW_ROW_FLOATS * 4;
        for j in 0..2 {
            let c = 2 * pair + j;
            unsafe { cp_async_quad::<VEC>(raw + c * 16, blk.a, k0 + kk, blk.k, blk.row0 + 4 * c, blk.m) };
        }
    }

    #[inline(always)]
    fn split_a<T: Tile>(stage: u32) {
        let t = thread_idx_x();
        let (kk, pair) = (t % 32, t / 32);
        let raw = stage + 2 * plane_bytes(T::BM) + B_TILE_BYTES + kk * RAW_ROW_FLOATS * 4;
        for j in 0..2 {
            let c = 2 * pair + j;
            // Row `4 c + e` of the planes, K `kk`; spelled out (an array
            // iterated here leaves a dead local frame behind in the PTX).
            let put = |e: u32, x: f32| {
                let at = stage + swizzled(4 * c + e, kk / 4) + 4 * (kk % 4);
                smem_st(at, x);
                smem_st(at + plane_bytes(T::BM), tf32_rna(x - tf32_trunc(x)));
            };
            let [x0, x1, x2, x3] = smem_ld4(raw + c * 16).to_array();
            put(0, x0);
            put(1, x1);
            put(2, x2);
            put(3, x3);
        }
    }

    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        unsafe { KByN::issue_b::<VEC>(blk, k0, at) }
    }

    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        KByN::fragment(at, s)
    }

    #[inline(always)]
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc) {
        unsafe { KByN::store::<T>(blk, c, acc) }
    }
}

/// This thread's fragment of `Bᵀ` (the multiply's A: 64 columns of C x 8
/// K) for step `s` of the K tile in the stage at byte `stage`, where `L`
/// puts it, split into high and low parts: each value `x` into `tf32(x)`
/// and `tf32(x - tf32(x))`.
#[inline(always)]
fn fragment<T: Tile, L: Layout>(stage: u32, s: u32) -> ([f32; 4], [f32; 4]) {
    let x = L::fragment(stage + 2 * plane_bytes(T::BM), s);
    let hi = x.map(tf32_rna);
    (hi, [0, 1, 2, 3].map(|j| tf32_rna(x[j] - hi[j])))
}

/// Step `s` (8 K) of the multiplies of the K tile in the stage at byte
/// `stage` into `part`, one group: `Bᵀ_lo · A_hi`, `Bᵀ_hi · A_lo`, then
/// `Bᵀ_hi · A_hi` (the small products first), each `wgmma.m64nBMk8` with A
/// from registers and B from a plane of the stage; step 0 starts `part`
/// afresh.
#[inline(always)]
fn multiply_step<T: Tile, L: Layout>(part: &mut T::Acc, stage: u32, s: u32) {
    let (hi, lo) = (stage, stage + plane_bytes(T::BM));
    let desc = |plane: u32| MatrixDescriptor::k_major(plane + 32 * s, LEADING_BYTE_OFFSET, STRIDE_BYTE_OFFSET, Swizzle::Bytes128);
    let (x_hi, x_lo) = fragment::<T, L>(stage, s);
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
pub struct Block {
    pub(crate) a: *const f32,
    pub(crate) b: *const f32,
    pub(crate) m: u32,
    pub(crate) n: u32,
    pub(crate) k: u32,
    /// Floats from one row of A to the next where A `[m, k]` is read over
    /// a slice of its K ([`KSliceByN`]: the whole rows' length; and of B
    /// `[n, k]` too for [`NSliceByK`]); the other layouts read `k`.
    pub(crate) a_row: u32,
    pub(crate) row0: u32,
    pub(crate) col0: u32,
    /// K tiles, rounded up to even: an odd count gets a last tile of zeros.
    pub(crate) tiles: u32,
    /// Byte offset of the first stage: its window address a multiple of 1024.
    pub(crate) first: u32,
}

impl Block {
    #[inline(always)]
    fn stage<T: Tile, L: Layout>(&self, tile: u32) -> u32 {
        self.first + tile % STAGES * layout_stage_bytes::<L>(T::BM)
    }

    /// Issues the copies of `tile` if there is one (a tile past `k` is all
    /// zero-filled), and commits a group either way (one group per tile,
    /// empty past the last).
    #[inline(always)]
    fn issue<const VEC: bool, T: Tile, L: Layout>(&self, tile: u32) {
        if tile < self.tiles {
            // SAFETY: the kernel's caller passes the matrices `m`, `n`, `k` describe.
            unsafe { issue_tile::<VEC, T, L>(self, tile, self.stage::<T, L>(tile)) };
        }
        cp_async_commit();
    }
}

/// Prepares K tile `tile` for its multiplies: this thread waits for its
/// copies of the tile, writes its low parts of A, meets the block, and
/// issues the copies of `tile + LOOKAHEAD`.
#[inline(always)]
fn prepare<const VEC: bool, T: Tile, L: Layout>(blk: &Block, tile: u32) {
    // This thread's copies of `tile` have landed (one group per tile,
    // `LOOKAHEAD` committed beyond it) ...
    cp_async_wait_group::<{ LOOKAHEAD - 1 }>();
    L::split_a::<T>(blk.stage::<T, L>(tile));
    fence_proxy_async_shared();
    // ... and everyone's, with the low parts written. Every thread has
    // waited for the multiplies of `tile - 2` (see `body`), so its stage
    // takes the copies of `tile + 2`.
    sync_threads();
    blk.issue::<VEC, T, L>(tile + LOOKAHEAD);
}

/// The kernel body; `VEC` picks 16-byte copies, `L` where B lies.
///
/// # Safety
/// `a` and `c` must hold the `m * k` and `m * n` matrices, `b` the `k * n`
/// (or `n * k`) one as `L` lays it out.
#[inline(always)]
pub(crate) unsafe fn body<const VEC: bool, T: Tile, L: Layout>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    unsafe { body_with_a_rows::<VEC, T, L>(a, b, c, m, n, k, k) }
}

/// [`body`] with A's rows `a_row` floats apart (`a_row >= k`), for a
/// layout that reads A over a slice of its K ([`KSliceByN`], and
/// [`NSliceByK`], whose B's rows are `a_row` apart too).
///
/// # Safety
/// As [`body`], `a` holding `m` rows of `a_row` floats.
#[inline(always)]
pub(crate) unsafe fn body_with_a_rows<const VEC: bool, T: Tile, L: Layout>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
    a_row: u32,
) {
    let tiles_n = n.div_ceil(BN);
    let (row0, col0) = (block_idx_x() / tiles_n * T::BM, block_idx_x() % tiles_n * BN);
    let tiles = k.div_ceil(BK).next_multiple_of(2);
    let blk = Block { a, b, m, n, k, a_row, row0, col0, tiles, first: align_up_in_window(0, ATOM_BYTES) };
    for tile in 0..LOOKAHEAD {
        blk.issue::<VEC, T, L>(tile);
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
    prepare::<VEC, T, L>(&blk, 0);
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
        let (se, so) = (blk.stage::<T, L>(e), blk.stage::<T, L>(o));
        multiply_step::<T, L>(&mut even, se, 0);
        multiply_step::<T, L>(&mut even, se, 1);
        wgmma_wait_group::<2>();
        multiply_step::<T, L>(&mut even, se, 2);
        wgmma_wait_group::<2>();
        multiply_step::<T, L>(&mut even, se, 3);
        prepare::<VEC, T, L>(&blk, o);
        wgmma_wait_group::<2>();
        multiply_step::<T, L>(&mut odd, so, 0);
        wgmma_wait_group::<2>();
        multiply_step::<T, L>(&mut odd, so, 1);
        // Only the odd tile's first two steps can be in flight: the even
        // tile's sum is done.
        wgmma_wait_group::<2>();
        add_partial::<T>(&mut acc, &mut even);
        multiply_step::<T, L>(&mut odd, so, 2);
        wgmma_wait_group::<2>();
        multiply_step::<T, L>(&mut odd, so, 3);
        if o + 1 < blk.tiles {
            prepare::<VEC, T, L>(&blk, o + 1);
        }
        wgmma_wait_group::<0>();
        add_partial::<T>(&mut acc, &mut odd);
    }
    // SAFETY: the caller passes the `m * n` output.
    unsafe { L::store::<T>(&blk, c, &acc) };
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

/// Threads per block of [`matmul_resize`].
pub const RESIZE_THREADS: u32 = 256;

mage_common::kernel! {
    /// `dst` (`rows_out` x `cols_out`, row-major) = the top-left corner of
    /// `src` (`rows` x `cols`), zeros where `src` has no element: a matrix
    /// padded to rows of a multiple of 4 floats, or cut back from them.
    /// Four consecutive elements of a row per thread, each side read or
    /// written in one 16-byte access where its rows are a multiple of 4
    /// floats (the padded side always is), element by element otherwise.
    pub unsafe fn matmul_resize(src: *const f32, dst: *mut f32, rows: u32, cols: u32, rows_out: u32, cols_out: u32) {
        let q = block_idx_x() * block_dim_x() + thread_idx_x();
        let quads = cols_out.div_ceil(4);
        if q < rows_out * quads {
            let (r, c) = (q / quads, 4 * (q % quads));
            let v = if cols.is_multiple_of(4) {
                unsafe { crate::load_quad::<true>(src, r, rows, c, cols) }
            } else {
                unsafe { crate::load_quad::<false>(src, r, rows, c, cols) }
            };
            if cols_out.is_multiple_of(4) {
                unsafe { crate::store_quad::<true>(dst, r, rows_out, c, cols_out, v) }
            } else {
                unsafe { crate::store_quad::<false>(dst, r, rows_out, c, cols_out, v) }
            }
        }
    }
}

/// The launch of [`matmul_resize`] from `src` (`rows` x `cols`) into `dst`
/// (`rows_out` x `cols_out`).
#[cfg(not(target_arch = "nvptx64"))]
pub fn resize(src: mage_common::op::Arg, dst: mage_common::op::Arg, from: [u32; 2], to: [u32; 2]) -> mage_common::op::Launch {
    use mage_common::op::Arg;
    mage_common::op::Launch {
        kernel: &matmul_resize::KERNEL,
        grid: mage_common::kernel::Dim3::x((to[0] * to[1].div_ceil(4)).div_ceil(RESIZE_THREADS)),
        block: mage_common::kernel::Dim3::x(RESIZE_THREADS),
        shared_bytes: 0,
        cluster: mage_common::kernel::Dim3::ONE,
        args: vec![src, dst, Arg::U32(from[0]), Arg::U32(from[1]), Arg::U32(to[0]), Arg::U32(to[1])],
    }
}
