//! mage-007: a 128x128 block tile, an 8x8 register tile per thread in
//! 32x64 warp tiles, K step 16, one barrier per K step.
//!
//! Kernel body: this module (`matmul_warptile8x8_*`), over the crate root's
//! `cp_async_quad` and `store_quad`.
//!
//! What changed against mage-006: the block tile grows from 64x64 to
//! 128x128 and each of the 256 threads owns an 8x8 piece of it (64
//! accumulators) instead of 4x4. A warp covers a 32x64 tile of C: warp `w`
//! takes rows `32 (w / 2)..` and columns `64 (w % 2)..` of the block tile;
//! within it lane `l` takes the row quads `4 (l / 8)` and `4 (l / 8) + 16`
//! and the column quads `4 (l % 8)` and `4 (l % 8) + 32`. Per `k` a thread
//! reads two 128-bit quads of the transposed A tile and two of the B tile
//! and does the 64 multiply-adds of their outer product. In a quarter warp
//! (8 lanes, one 128-bit shared wavefront) the B quads are 8 consecutive
//! quads, 128 bytes on 32 distinct banks, and the A quads one broadcast
//! address: no bank conflicts on the reads.
//!
//! The shared tiles are double-buffered as in mage-006, filled by
//! `cp.async`: per K step A's 128x16 tile, transposed to `As[kk][r]` (row
//! stride 132 floats, 16-byte aligned rows), and B's 16x128 tile
//! `Bs[kk][c]`; 16.25 KiB per buffer, 32.5 KiB in all. A goes by 4-byte
//! copies (the transpose scatters each global quad over four shared rows,
//! so there are no 16-byte runs to copy), 8 per thread; a warp's copies take
//! 8 consecutive `k` of 4 consecutive rows, so the 32 shared words fall on
//! 32 distinct banks (`kk * 132 + r` ≡ `4 kk + r` mod 32) and each row read
//! is one 32-byte run of global memory. B goes by 16-byte copies (two per thread), or by
//! four 4-byte copies in the `_scalar` entry where `n` is not a multiple of
//! 4. Tails are zero-filled with the src-size operand, the source index
//! clamped to 0, as in mage-006.
//!
//! One barrier per K step instead of two: step `t` waits for its own
//! copies (`cp.async.wait_group 0`), meets the block, and only then issues
//! the copies of tile `t + 1` into the other buffer, which every thread
//! finished reading (tile `t - 1`) before that same barrier; the copies
//! then run during the multiply-adds of tile `t`.
//!
//! K step 16 rather than 8: half the barriers and waits per multiply-add,
//! at 32.5 KiB of shared memory (under 48 KiB; 2 blocks take 65 KiB of the
//! SM's 228).
//!
//! Every output is still one `fma` per `k`, `k` ascending, from 0: the same
//! bits as every other stage.
//!
//! Why it should help: mage-006 is issue-bound (Nsight Compute at 1024³:
//! low stalls, 23% achieved occupancy). Its 4x4 tile does 16 multiply-adds
//! per 2 shared 128-bit loads (8 floats); the 8x8 tile does 64 per 4 loads
//! (16 floats): twice the multiply-adds per shared load and per load
//! instruction, and the loop overhead, address arithmetic and barriers of
//! a K step are spread over four times the multiply-adds per thread. Each
//! value copied from global memory serves twice as many outputs (128
//! instead of 64), halving the copies per multiply-add.
//!
//! Prediction, and its catch: at 1024³ the 128x128 tiles make a grid of
//! only 64 blocks for 132 SMs, one block (8 warps) on each of 64 SMs. An
//! SM's FP32 peak (128 multiply-adds per clock at 1.98 GHz) then bounds the
//! kernel at 66 µs whatever the code (each busy SM does 128·128·1024
//! multiply-adds, 131072 clocks), and with 8 warps per SM and a barrier per
//! K step the FMA pipes will not stay full: from 84 µs to about 75-90 µs,
//! no clear gain; 1000x1037x999 (72 blocks) likewise. Where the grid fills
//! the GPU (2048³: 256 blocks, 4096³: 1024 blocks, 3.9 waves of 264) the
//! doubled arithmetic intensity should show: 4096³ from 4610 µs (45% of
//! the FP32 peak) toward 2800-3400 µs. ptxas: 128 registers (127 in
//! `_scalar`), no stack, no spills, so 2 blocks per SM exactly (2 · 256 ·
//! 128 = 65536 registers); one more register would halve that.
//!
//! Measured: much faster than mage-006 where the grid fills the GPU (2048³,
//! 4096³, 1000x1037x999); slower at 1024³ and 512³, where 64 and 16 blocks
//! of 128x128 leave most of the 132 SMs idle, as the prediction said. GPU
//! kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-matmul.json stage=mage-007 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 256x256x256 | 27.39 | 33.78 |
//! | 512x512x512 | 52.96 | 58.21 |
//! | 1024x1024x1024 | 104.16 | 111.12 |
//! | 2048x2048x2048 | 381.63 | 388.66 |
//! | 4096x4096x4096 | 3004 | 3014 |
//! | 1000x1037x999 | 113.94 | 119.90 |
//! <!-- /mage:table -->

use crate::{cp_async_quad, store_quad};
use mage_common::device::*;

pub const BM: u32 = 128;
pub const BN: u32 = 128;
pub const BK: u32 = 16;
pub const THREADS: u32 = 256;
/// Row stride of the transposed A tile `As[kk][r]`, in floats (a multiple of
/// 4, so rows start 16-byte aligned; 4 more than `BM` so that successive
/// `kk` rows start 4 banks apart).
pub const AS_STRIDE: u32 = BM + 4;
const A_FLOATS: u32 = BK * AS_STRIDE;
/// `Bs[kk][c]`, row stride `BN`, after the A tile.
const B_FLOATS: u32 = BK * BN;
/// One buffer: the A tile, then the B tile. Bytes.
pub const BUFFER_BYTES: u32 = (A_FLOATS + B_FLOATS) * 4;
pub const SHARED_BYTES: u32 = 2 * BUFFER_BYTES;
/// A elements each thread copies per K tile.
const A_COPIES: u32 = BM * BK / THREADS;
/// B quads each thread copies per K tile.
const B_COPIES: u32 = BK * BN / 4 / THREADS;
const _: () = assert!(A_COPIES == 8 && B_COPIES == 2 && SHARED_BYTES <= 48 * 1024);
const _: () = assert!(BUFFER_BYTES.is_multiple_of(16) && (A_FLOATS * 4).is_multiple_of(16));

/// The byte offset of buffer `i` (0 or 1) in shared memory.
#[inline(always)]
pub const fn buffer(i: u32) -> u32 {
    i * BUFFER_BYTES
}

/// Issues the copies of the K tile starting at `k0` into the buffer at byte
/// `buf`: A's 128x16 tile transposed, B's 16x128 tile; zero-filled outside
/// the matrices. `VEC`: 16-byte copies of B (needs `n % 4 == 0`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn issue_tile<const VEC: bool>(a: *const f32, b: *const f32, m: u32, n: u32, k: u32, row0: u32, col0: u32, k0: u32, buf: u32) {
    let t = thread_idx_x();
    // A element (r, kk) to As[kk][r]: in a warp, kk takes 8 consecutive
    // values (lane % 8) and r 4 consecutive rows (lane / 8); the warps
    // cover kk 0..8 or 8..16 (warp % 2) and rows 4 (warp / 2) + 16 i.
    let kk = t % 8 + 8 * (t / 32 % 2);
    let r0 = t / 8 % 4 + 4 * (t / 64);
    let ka = k0 + kk;
    for i in 0..A_COPIES {
        let r = r0 + 16 * i;
        let row = row0 + r;
        let ok = row < m && ka < k;
        let src = if ok { row * k + ka } else { 0 };
        unsafe { cp_async_ca_4_zfill(buf + (kk * AS_STRIDE + r) * 4, a, src, if ok { 4 } else { 0 }) };
    }
    // B quad q: row q / 32, columns 4 (q % 32)..; to Bs[row][4 (q % 32)].
    for i in 0..B_COPIES {
        let q = t + THREADS * i;
        let (r, c) = (q / 32, 4 * (q % 32));
        let (row, col) = (k0 + r, col0 + c);
        let dst = buf + (A_FLOATS + r * BN + c) * 4;
        unsafe { cp_async_quad::<VEC>(dst, b, row, k, col, n) };
    }
}

/// The eight values of two quads, `lo` then `hi`.
#[inline(always)]
fn two_quads(lo: F32x4, hi: F32x4) -> [f32; 8] {
    [lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w]
}

/// `acc[i][j] += a[i] * b[j]` with one rounding each: the rank-1 update of
/// the 8x8 register tile by one `k`. Constant trip counts, fully unrolled,
/// so `acc` stays in registers.
#[inline(always)]
fn rank1_update_8x8(acc: &mut [[f32; 8]; 8], a: &[f32; 8], b: &[f32; 8]) {
    for i in 0..8 {
        for j in 0..8 {
            acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
    }
}

/// The multiply-adds of one K tile from the buffer at byte `buf`; `ar`, `bc`:
/// the thread's first row of the A tile and first column of the B tile.
///
/// The 16 steps are spelled out: LLVM leaves a loop over them rolled (each
/// step is 4 loads and 64 multiply-adds), and so does ptxas. Unrolled, the
/// shared addresses are constant offsets from two registers, and ptxas
/// issues the loads of step `kk + 1` among the multiply-adds of step `kk`
/// (128 registers; rolled, 106, every step waiting for its own loads;
/// unrolled by 4 or by 8, 129 and 155).
#[inline(always)]
fn multiply_tile(acc: &mut [[f32; 8]; 8], buf: u32, ar: u32, bc: u32) {
    let step = |acc: &mut [[f32; 8]; 8], kk: u32| {
        let a_at = buf + (kk * AS_STRIDE + ar) * 4;
        let b_at = buf + (A_FLOATS + kk * BN + bc) * 4;
        let av = two_quads(smem_ld4(a_at), smem_ld4(a_at + 16 * 4));
        let bv = two_quads(smem_ld4(b_at), smem_ld4(b_at + 32 * 4));
        rank1_update_8x8(acc, &av, &bv);
    };
    const _: () = assert!(BK == 16);
    step(acc, 0);
    step(acc, 1);
    step(acc, 2);
    step(acc, 3);
    step(acc, 4);
    step(acc, 5);
    step(acc, 6);
    step(acc, 7);
    step(acc, 8);
    step(acc, 9);
    step(acc, 10);
    step(acc, 11);
    step(acc, 12);
    step(acc, 13);
    step(acc, 14);
    step(acc, 15);
}

/// The kernel body; `VEC` picks 16-byte copies of B and 128-bit stores of C.
#[inline(always)]
unsafe fn body<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let (warp, lane) = (t / 32, t % 32);
    // The thread's rows ar..ar + 4 and ar + 16..ar + 20, columns bc..bc + 4
    // and bc + 32..bc + 36, within the block tile.
    let ar = 32 * (warp / 2) + 4 * (lane / 8);
    let bc = 64 * (warp % 2) + 4 * (lane % 8);
    let tiles_n = n.div_ceil(BN).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * BM, block_idx_x() % tiles_n * BN);
    let tiles = k.div_ceil(BK);
    let mut acc = [[0.0f32; 8]; 8];
    unsafe { issue_tile::<VEC>(a, b, m, n, k, row0, col0, 0, buffer(0)) };
    cp_async_commit();
    for tile in 0..tiles {
        // This thread's copies of tile `tile` have landed ...
        cp_async_wait_group::<0>();
        // ... and everyone's; and everyone is done with tile `tile - 1`,
        // so its buffer can be refilled.
        sync_threads();
        if tile + 1 < tiles {
            unsafe { issue_tile::<VEC>(a, b, m, n, k, row0, col0, (tile + 1) * BK, buffer((tile + 1) % 2)) };
            cp_async_commit();
        }
        multiply_tile(&mut acc, buffer(tile % 2), ar, bc);
    }
    // Row `i` of the register tile: rows ar + i (i < 4) and ar + 16 + i - 4.
    // Spelled out, not looped over: in the scalar entry LLVM leaves such a
    // loop rolled (its body is 8 guarded stores) and `acc` goes to local memory.
    let store_row = |i: u32, r: [f32; 8]| {
        let row = row0 + ar + if i < 4 { i } else { 16 + i - 4 };
        unsafe {
            store_quad::<VEC>(c, row, m, col0 + bc, n, F32x4::new(r[0], r[1], r[2], r[3]));
            store_quad::<VEC>(c, row, m, col0 + bc + 32, n, F32x4::new(r[4], r[5], r[6], r[7]));
        }
    };
    store_row(0, acc[0]);
    store_row(1, acc[1]);
    store_row(2, acc[2]);
    store_row(3, acc[3]);
    store_row(4, acc[4]);
    store_row(5, acc[5]);
    store_row(6, acc[6]);
    store_row(7, acc[7]);
}

mage_common::kernel! {
    /// `n` a multiple of 4: 16-byte copies of B, 128-bit stores of C. `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_warptile8x8_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// Any shape: 4-byte copies of B, scalar stores of C.
    pub unsafe fn matmul_warptile8x8_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false>(a, b, c, m, n, k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if crate::vector_b_rows(d) { &matmul_warptile8x8_v4::KERNEL } else { &matmul_warptile8x8_scalar::KERNEL };
    crate::tiled_launch(d, kernel, BM, BN, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-007",
    summary: "128x128 block tile, 8x8 register tile per thread in 32x64 warp tiles, K step 16, cp.async double buffer, one barrier per K step",
    kernels: &[&matmul_warptile8x8_v4::KERNEL, &matmul_warptile8x8_scalar::KERNEL],
    supports: |_| true,
    plan,
};
