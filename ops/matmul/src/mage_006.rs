//! mage-006: two shared buffers; the next K tile is copied by `cp.async`
//! while the multiply-adds of this one run.
//!
//! Kernel body: this module (`matmul_cp_async_*`), over the crate root's
//! `cp_async_quad`, `rank1_update` and `store_tile`.
//!
//! What: the tiles of mage-003 (64x64 block tile, 4x4 register tile,
//! transposed A with row stride 68, 128-bit shared reads), double-buffered.
//! The K step goes back to 32 so that two buffers (16.5 KiB each, 33 KiB in
//! all) stay under 48 KiB. Tile 0 is issued before the loop; each step
//! issues the copies of tile `t + 1` into buffer `(t + 1) % 2`, commits
//! them, waits with `cp.async.wait_group 1` until only that newest group is
//! in flight (so tile `t` has landed), meets the block at a barrier, runs
//! the multiply-adds on buffer `t % 2`, and meets again before that buffer
//! is refilled. The last tile has nothing to prefetch and waits for all
//! (`wait_group 0`), then reads buffer `(tiles - 1) % 2`.
//!
//! A is staged with 4-byte `cp.async` (the transpose scatters it, so there
//! are no 16-byte runs in shared memory), one element per copy, consecutive
//! threads taking consecutive `k` of one row of A. B is staged with 16-byte
//! `cp.async`, or four 4-byte copies where `n` is not a multiple of 4 (the
//! `_scalar` entry; `k` does not matter here since A is copied by element).
//! Tile tails use the src-size operand: a copy whose source lies outside
//! the matrix copies 0 bytes and zero-fills its destination
//! ([`cp_async_ca_4_zfill`], [`cp_async_ca_16_zfill`]), with the source
//! index clamped to 0 so the address stays valid.
//!
//! Why it should help: in mage-003 every thread waits at the barrier for
//! the global loads of the tile, then the FMA units wait for nothing but
//! shared memory, and the next global loads wait for the FMAs: latency is
//! paid once per K step. With the copy of tile `t + 1` in flight during
//! the multiply-adds of tile `t`, global latency hides behind arithmetic,
//! and `cp.async` moves the data without passing through registers (no
//! staging registers, no shared stores issued by the threads).
//!
//! History: the seeds' first pipeline had two defects, found only by
//! correctness checks:
//! * buffer offsets computed in the wrong units (a count of floats where
//!   shared memory is addressed in bytes, or the reverse), so the second
//!   buffer overlapped the first, and the prefetch overwrote the tile being
//!   multiplied, or fell outside the allocation. Here offsets are bytes
//!   throughout ([`buffer`]). Only shapes with two or more K tiles use the
//!   second buffer; there the emulator reports the overlap as a
//!   shared-memory race or wrong sums, and the overrun as out of bounds.
//! * the final tile read buffer `tiles % 2` instead of `(tiles - 1) % 2`:
//!   the other buffer, which holds tile `tiles - 2` (wrong sums), or, with
//!   a single tile, nothing at all (the emulator's NaN poison).
//!
//! The tests run shapes with odd and even numbers of K tiles, each of which
//! fails with either defect (see `tests/stages.rs`).
//!
//! Measured: the overlap buys a few percent over mage-003 at 1024³ and
//! more at 4096³ and at 1000x1037x999, where the K loop is longer. GPU
//! kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-matmul.json stage=mage-006 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 256x256x256 | 13.48 | 19.17 |
//! | 512x512x512 | 26.24 | 31.58 |
//! | 1024x1024x1024 | 84.27 | 91.31 |
//! | 2048x2048x2048 | 602.80 | 609.95 |
//! | 4096x4096x4096 | 4608 | 4617 |
//! | 1000x1037x999 | 129.34 | 135.52 |
//! <!-- /mage:table -->

use crate::{cp_async_quad, rank1_update, store_tile};
use mage_common::device::*;

pub const BM: u32 = 64;
pub const BN: u32 = 64;
pub const BK: u32 = 32;
pub const THREADS: u32 = 256;
/// Row stride of the transposed A tile `As[kk][r]`, in floats.
pub const AS_STRIDE: u32 = BM + 4;
const A_FLOATS: u32 = BK * AS_STRIDE;
/// `Bs[kk][c]`, row stride `BN`, after the A tile.
const B_FLOATS: u32 = BK * BN;
/// One buffer: the A tile, then the B tile. Bytes.
pub const BUFFER_BYTES: u32 = (A_FLOATS + B_FLOATS) * 4;
pub const SHARED_BYTES: u32 = 2 * BUFFER_BYTES;
/// A elements each thread copies per tile.
const A_COPIES: u32 = BM * BK / THREADS;
/// B quads each thread copies per tile.
const B_COPIES: u32 = BK * BN / 4 / THREADS;

/// The byte offset of buffer `i` (0 or 1) in shared memory.
#[inline(always)]
pub const fn buffer(i: u32) -> u32 {
    i * BUFFER_BYTES
}

/// Issues the copies of the K tile starting at `k0` into the buffer at byte
/// `buf`: A's 64x32 tile transposed, B's 32x64 tile; zero-filled outside
/// the matrices. `VEC`: 16-byte copies of B (needs `n % 4 == 0`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn issue_tile<const VEC: bool>(a: *const f32, b: *const f32, m: u32, n: u32, k: u32, row0: u32, col0: u32, k0: u32, buf: u32) {
    let t = thread_idx_x();
    // A element (r, kk): kk = t % 32, r = t / 32 + 8 i; to As[kk][r].
    let kk = t % BK;
    let ka = k0 + kk;
    for i in 0..A_COPIES {
        let r = t / BK + (THREADS / BK) * i;
        let row = row0 + r;
        let ok = row < m && ka < k;
        let src = if ok { row * k + ka } else { 0 };
        unsafe { cp_async_ca_4_zfill(buf + (kk * AS_STRIDE + r) * 4, a, src, if ok { 4 } else { 0 }) };
    }
    // B quad q: row q / 16, columns 4 (q % 16)..; to Bs[row][4 (q % 16)].
    for i in 0..B_COPIES {
        let q = t + THREADS * i;
        let (r, c) = (q / 16, 4 * (q % 16));
        let (row, col) = (k0 + r, col0 + c);
        let dst = buf + (A_FLOATS + r * BN + c) * 4;
        unsafe { cp_async_quad::<VEC>(dst, b, row, k, col, n) };
    }
}

/// The multiply-adds of one K tile from the buffer at byte `buf`.
#[inline(always)]
fn multiply_tile(acc: &mut [[f32; 4]; 4], buf: u32, tx: u32, ty: u32) {
    for kk in 0..BK {
        let av = smem_ld4(buf + (kk * AS_STRIDE + ty * 4) * 4).to_array();
        let bv = smem_ld4(buf + (A_FLOATS + kk * BN + tx * 4) * 4).to_array();
        rank1_update(acc, av, bv);
    }
}

/// The kernel body; `VEC` picks 16-byte copies of B and 128-bit stores of C.
#[inline(always)]
unsafe fn body<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let (tx, ty) = (t % 16, t / 16);
    let tiles_n = n.div_ceil(BN).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * BM, block_idx_x() % tiles_n * BN);
    let tiles = k.div_ceil(BK);
    let mut acc = [[0.0f32; 4]; 4];
    unsafe { issue_tile::<VEC>(a, b, m, n, k, row0, col0, 0, buffer(0)) };
    cp_async_commit();
    for tile in 0..tiles - 1 {
        unsafe { issue_tile::<VEC>(a, b, m, n, k, row0, col0, (tile + 1) * BK, buffer((tile + 1) % 2)) };
        cp_async_commit();
        // Tile `tile` has landed (only the group just committed may be in flight) ...
        cp_async_wait_group::<1>();
        // ... for every thread's copies.
        sync_threads();
        multiply_tile(&mut acc, buffer(tile % 2), tx, ty);
        // Everyone is done with this buffer before the next step refills it.
        sync_threads();
    }
    cp_async_wait_group::<0>();
    sync_threads();
    multiply_tile(&mut acc, buffer((tiles - 1) % 2), tx, ty);
    unsafe { store_tile::<VEC>(c, &acc, row0 + ty * 4, col0 + tx * 4, m, n) }
}

mage_common::kernel! {
    /// `n` a multiple of 4: 16-byte copies of B, 128-bit stores of C. `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_cp_async_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// Any shape: 4-byte copies of B, scalar stores of C.
    pub unsafe fn matmul_cp_async_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false>(a, b, c, m, n, k) }
    }
}

/// Whether the `_v4` entry applies: B's and C's rows (`n` floats) start
/// 16-byte aligned. (A is copied by element, so `k` does not matter.)
#[cfg(not(target_arch = "nvptx64"))]
pub use crate::vector_b_rows as vector_entry;

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if vector_entry(d) { &matmul_cp_async_v4::KERNEL } else { &matmul_cp_async_scalar::KERNEL };
    crate::tiled_launch(d, kernel, BM, BN, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-006",
    summary: "double-buffered shared tiles filled by cp.async (A 4-byte, B 16-byte) during the multiply-adds, K step 32",
    kernels: &[&matmul_cp_async_v4::KERNEL, &matmul_cp_async_scalar::KERNEL],
    supports: |_| true,
    plan,
};
