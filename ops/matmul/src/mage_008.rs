//! mage-008: one TF32 product per term on the tensor cores
//! (`wgmma.mma_async.m64n64k8.f32.tf32.tf32`, sm_90a). Outside the op's
//! FP32 contract: each input is rounded to TF32 (`cvt.rna`, 10 mantissa
//! bits, relative error up to 2^-11) before it is multiplied, so an output
//! errs by up to about 2^-10 of `Σ |a| |b|` (see `tf32_tolerance`). It is
//! the one-product reference for a 3xTF32 stage, and `current` never picks
//! it.
//!
//! Kernel body: this module (`matmul_tf32_wgmma_*`), over the crate root's
//! `load_quad`.
//!
//! What changed against mage-007: the multiply-adds leave the FP32 pipes
//! for the tensor cores. A block is one warpgroup (128 threads) and owns a
//! 64x64 tile of C; per K step of 32 it issues four `m64n64k8` multiplies,
//! each D (64x64, 32 registers a thread) += A (64x8) · B (8x64) from shared
//! memory. TF32 has no transposed form: both operands must be K-major. A's
//! rows are K already; B (`[k][n]`) is transposed on its way through the
//! registers, where every value is also converted with `cvt.rna.tf32.f32`
//! (cp.async could not convert it).
//!
//! Shared layout (no swizzle): an operand tile is eight 16-byte columns of
//! K (`k / 4`), each 64 rows x 16 bytes (1 KiB); element (r, k) lies at
//! `(k / 4) * 1024 + r * 16 + (k % 4) * 4`. So a core matrix (8 rows x 16
//! bytes) is 128 contiguous bytes, the next 8 rows follow at 128 bytes (the
//! descriptor's stride byte offset) and the second half of an
//! instruction's 8 K values at 1024 (its leading byte offset); the
//! multiply for K values `8 s..8 s + 8` starts at column `2 s`. A thread
//! loads four 16-byte quads of A (four `k` of one row) and a 4x4 block of
//! B (four rows of four `n`, transposed in registers to four quads of
//! `k`), and stores each quad with one 128-bit store.
//!
//! Two buffers of 16 KiB (A then B): the multiplies of tile `t` run
//! asynchronously while the threads load tile `t + 1` from global memory
//! and store it into the other buffer. Then every thread waits for its
//! multiplies (`wgmma.wait_group 0`) and the block meets at one barrier:
//! after it the stores of tile `t + 1` are visible to the tensor cores
//! (each thread fenced them with `fence.proxy.async`) and every warp has
//! finished reading tile `t`, whose buffer tile `t + 2` overwrites. Tails
//! are zero-filled in the loads (a zero adds nothing to a sum); the
//! `_v4` entry loads 128-bit quads where `n` and `k` are multiples of 4,
//! `_scalar` loads by element. C is written from the accumulator fragments
//! (`accumulator_position`), guarded, one element per store.
//!
//! Why, and the prediction: TF32 tensor cores run at about 7 times the
//! FP32 pipes (cuBLAS TF32 at 1024³: 13.4 µs against SGEMM's 55.4), and a
//! warpgroup's `m64n64k8` replaces 32768 multiply-adds. One warpgroup per
//! block with a single wait per K step leaves the tensor cores idle while
//! the block waits for its global loads, but 32 KiB and 128 threads a
//! block let about six blocks share an SM and overlap each other. At 1024³
//! (256 blocks) about 15-30 µs (mage-006: 84.3 µs); at 4096³ (4096 blocks,
//! about 5 waves) about 400-700 µs (mage-007: 3004; at cuBLAS's TF32 rate,
//! 350 TFLOP/s, it would take 390).
//!
//! Measured: right on the GPU (bit-identical to the emulator on integer
//! inputs, `results/candidates-1/matmul-tf32-and-nsight.txt`), with TF32's
//! error, and far slower than the prediction: one warpgroup per block with
//! its loads through registers on the critical path leaves the tensor cores
//! mostly idle. GPU kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-matmul.json stage=mage-008 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 256x256x256 | 11.07 | 16.86 |
//! | 512x512x512 | 20.49 | 25.79 |
//! | 1024x1024x1024 | 51.33 | 56.58 |
//! | 2048x2048x2048 | 390.97 | 407.34 |
//! | 4096x4096x4096 | 2688 | 2674 |
//! | 1000x1037x999 | 101.48 | 107.36 |
//! <!-- /mage:table -->

use crate::load_quad;
use mage_common::device::wgmma::*;
use mage_common::device::*;

pub const BM: u32 = 64;
pub const BN: u32 = 64;
pub const BK: u32 = 32;
pub const THREADS: u32 = 128;
/// One 16-byte column of K of an operand tile: 64 rows x 16 bytes.
const COLUMN_BYTES: u32 = 64 * 16;
/// An operand tile: `BK / 4` columns.
const TILE_BYTES: u32 = BK / 4 * COLUMN_BYTES;
/// One buffer: the A tile, then the B tile.
pub const BUFFER_BYTES: u32 = 2 * TILE_BYTES;
pub const SHARED_BYTES: u32 = 2 * BUFFER_BYTES;
/// Descriptor strides: 8 rows on, and the second 16 bytes of an instruction's K.
const STRIDE_BYTE_OFFSET: u32 = 8 * 16;
const LEADING_BYTE_OFFSET: u32 = COLUMN_BYTES;
const _: () = assert!(BM == 64 && BN == 64 && THREADS == 128 && BK.is_multiple_of(8));
const _: () = assert!(SHARED_BYTES <= 48 * 1024);

/// The byte offset of buffer `i` (0 or 1) in shared memory.
#[inline(always)]
pub const fn buffer(i: u32) -> u32 {
    i * BUFFER_BYTES
}

/// A tile's values on their way to shared memory: four quads of A (four
/// `k` of one row each) and four rows of four `n` of B.
struct Staged {
    a: [F32x4; 4],
    b: [F32x4; 4],
}

/// Loads the K tile starting at `k0`, zero outside the matrices. Thread
/// `t` takes A quads `t + 128 i` (row `q % 64`, K column `q / 64`) and the
/// B block at K rows `4 (t / 16)..` and columns `4 (t % 16)..`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn load_tile<const VEC: bool>(a: *const f32, b: *const f32, m: u32, n: u32, k: u32, row0: u32, col0: u32, k0: u32) -> Staged {
    let t = thread_idx_x();
    let a_quad = |i: u32| {
        let q = t + THREADS * i;
        unsafe { load_quad::<VEC>(a, row0 + q % BM, m, k0 + 4 * (q / BM), k) }
    };
    let b_row = |j: u32| unsafe { load_quad::<VEC>(b, k0 + 4 * (t / 16) + j, k, col0 + 4 * (t % 16), n) };
    Staged { a: [a_quad(0), a_quad(1), a_quad(2), a_quad(3)], b: [b_row(0), b_row(1), b_row(2), b_row(3)] }
}

/// Converts a staged tile to TF32 and stores it K-major into the buffer at
/// byte `buf`, then fences the stores for the tensor cores.
#[inline(always)]
fn store_tile(s: &Staged, buf: u32) {
    let t = thread_idx_x();
    for (i, quad) in s.a.iter().enumerate() {
        let q = t + THREADS * i as u32;
        smem_st4(buf + q / BM * COLUMN_BYTES + q % BM * 16, quad.map(tf32_rna));
    }
    // Column `c` of the 4x4 block: `n = 4 (t % 16) + c`, four `k` from `4 (t / 16)`.
    let [r0, r1, r2, r3] = s.b.map(|r| r.to_array());
    for c in 0..4 {
        let quad = F32x4::new(r0[c], r1[c], r2[c], r3[c]).map(tf32_rna);
        smem_st4(buf + TILE_BYTES + t / 16 * COLUMN_BYTES + (4 * (t % 16) + c as u32) * 16, quad);
    }
    fence_proxy_async_shared();
}

/// `$f(i)` for each listed `i`, spelled out: LLVM leaves loops over the
/// accumulators rolled, indexes them at run time and moves all 32 to local
/// memory, around the asynchronous multiplies too.
macro_rules! unrolled {
    ($f:ident: $($i:literal)*) => { $($f($i);)* };
}

/// The four multiplies of the K tile in the buffer at byte `buf`; `first`:
/// the first tile, whose first multiply ignores the accumulators.
#[inline(always)]
fn multiply_tile(acc: &mut [f32; 32], buf: u32, first: bool) {
    let mut step = |s: u32| {
        let column = 2 * s * COLUMN_BYTES;
        let a = MatrixDescriptor::k_major(buf + column, LEADING_BYTE_OFFSET, STRIDE_BYTE_OFFSET, Swizzle::None);
        let b = MatrixDescriptor::k_major(buf + TILE_BYTES + column, LEADING_BYTE_OFFSET, STRIDE_BYTE_OFFSET, Swizzle::None);
        wgmma_m64n64k8_f32_tf32(acc, a, b, !(first && s == 0));
    };
    const _: () = assert!(BK == 32);
    unrolled!(step: 0 1 2 3);
}

/// The kernel body; `VEC` picks 128-bit loads of A and B.
#[inline(always)]
unsafe fn body<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let tiles_n = n.div_ceil(BN).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * BM, block_idx_x() % tiles_n * BN);
    let tiles = k.div_ceil(BK);
    let mut acc = [0.0f32; 32];
    store_tile(&unsafe { load_tile::<VEC>(a, b, m, n, k, row0, col0, 0) }, buffer(0));
    sync_threads();
    for tile in 0..tiles {
        wgmma_fence();
        multiply_tile(&mut acc, buffer(tile % 2), tile == 0);
        wgmma_commit_group();
        if tile + 1 < tiles {
            // The other buffer: its multiplies (tile - 1) ended before the last barrier.
            store_tile(&unsafe { load_tile::<VEC>(a, b, m, n, k, row0, col0, (tile + 1) * BK) }, buffer((tile + 1) % 2));
        }
        wgmma_wait_group::<0>();
        fence_accumulators(&mut acc);
        // Every warp is done with this buffer, and the next one is stored.
        sync_threads();
    }
    let store = |i: u32| {
        let (r, col) = accumulator_position(t, i);
        let (row, col) = (row0 + r, col0 + col);
        if row < m && col < n {
            unsafe { st(c, row * n + col, acc[i as usize]) }
        }
    };
    unrolled!(store: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
}

mage_common::kernel! {
    /// `n` and `k` multiples of 4: 128-bit loads of A and B. `SHARED_BYTES` of shared memory, 128 threads.
    pub unsafe fn matmul_tf32_wgmma_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// Any shape: loads by element.
    pub unsafe fn matmul_tf32_wgmma_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false>(a, b, c, m, n, k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if crate::vector_rows(d) { &matmul_tf32_wgmma_v4::KERNEL } else { &matmul_tf32_wgmma_scalar::KERNEL };
    crate::tiled_launch(d, kernel, BM, BN, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-008",
    summary: "TF32 (outside the FP32 contract): one cvt.rna product per term on wgmma m64n64k8 tensor cores, 64x64 tiles, K step 32, two shared buffers",
    kernels: &[&matmul_tf32_wgmma_v4::KERNEL, &matmul_tf32_wgmma_scalar::KERNEL],
    supports: |_| true,
    plan,
};
