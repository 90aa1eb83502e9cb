//! The 16x16 shared-tile body of matmul_nt mage-001 and matmul_tn mage-001,
//! over where each operand lies (`A_KM`: A stored `[k, m]`, else `[m, k]`;
//! `B_KN`: B stored `[k, n]`, else `[n, k]`).
//!
//! A 256-thread block computes a 16x16 tile of C. For each K step of 16,
//! thread `(tx, ty)` copies one element of each operand's tile into shared
//! memory by K row (`As[p][i]`, `Bs[p][j]`): from a row-major operand whose
//! rows run along K it reads `X[r0 + ty, k0 + tx]` and stores it at
//! `[tx][ty]`, from one whose rows run along M or N it reads `X[k0 + ty,
//! r0 + tx]` into `[ty][tx]`; either way a half-warp reads 16 consecutive
//! floats of a row, zero outside the matrix. The tiles' rows are 17 floats
//! apart, so the transposed stores of a half-warp fall on 16 banks. After
//! a barrier each thread runs 16 fused multiply-adds, `acc = fma(As[p][ty],
//! Bs[p][tx], acc)` in K order: a broadcast from `As`, 16 consecutive
//! floats of `Bs`. Each output is `fma(a, b, acc)` for `p = 0, 1, ..., k -
//! 1` in that order, matmul mage-001's bits on the operands transposed back
//! (`tests/transposed.rs` holds both stages to that).

use mage_common::device::*;

pub const TILE: u32 = 16;
pub const THREADS: u32 = TILE * TILE;
/// Floats per K row of each tile in shared memory: one more than `TILE`.
pub const ROW_FLOATS: u32 = TILE + 1;
/// The A tile, then the B tile: 16 K rows of 17 floats each.
pub const SHARED_BYTES: u32 = 2 * TILE * ROW_FLOATS * 4;

/// Element `(p, i)` (K row `p`, column `i`) of the tile at byte `base`.
#[inline(always)]
const fn at(base: u32, p: u32, i: u32) -> u32 {
    base + (p * ROW_FLOATS + i) * 4
}

/// Stages this thread's element of a `TILE x TILE` tile of `x` into the
/// tile at byte `base`: rows `r0..` of the output (M or N), K from `k0`,
/// `rows` of them and `k` in all; `K_ROWS` when `x` is stored `[k, rows]`.
#[inline(always)]
unsafe fn stage<const K_ROWS: bool>(x: *const f32, base: u32, r0: u32, rows: u32, k0: u32, k: u32) {
    let t = thread_idx_x();
    let (tx, ty) = (t % TILE, t / TILE);
    let (r, kk, dst) = if K_ROWS { (r0 + tx, k0 + ty, at(base, ty, tx)) } else { (r0 + ty, k0 + tx, at(base, tx, ty)) };
    let inside = r < rows && kk < k;
    let v = if inside { unsafe { ld_nc(x, if K_ROWS { kk * rows + r } else { r * k + kk }) } } else { 0.0 };
    smem_st(dst, v);
}

/// The kernel body. Block `b` computes tile `(b / tiles_n, b % tiles_n)`
/// of C; `SHARED_BYTES` of shared memory.
///
/// # Safety
/// `a`, `b`, `c` must hold the matrices `m`, `n`, `k` and the layouts describe.
#[inline(always)]
pub unsafe fn body<const A_KM: bool, const B_KN: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let (tx, ty) = (t % TILE, t / TILE);
    // At least 1 (n >= 1), said so the division needs no zero check.
    let tiles_n = n.div_ceil(TILE).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * TILE, block_idx_x() % tiles_n * TILE);
    let b_base = TILE * ROW_FLOATS * 4;
    let mut acc = 0.0;
    let mut k0 = 0;
    while k0 < k {
        unsafe {
            stage::<A_KM>(a, 0, row0, m, k0, k);
            stage::<B_KN>(b, b_base, col0, n, k0, k);
        }
        sync_threads();
        for p in 0..TILE {
            acc = fma(smem_ld(at(0, p, ty)), smem_ld(at(b_base, p, tx)), acc);
        }
        // Everyone is done with the tiles before they are overwritten.
        sync_threads();
        k0 += TILE;
    }
    let (row, col) = (row0 + ty, col0 + tx);
    if row < m && col < n {
        unsafe { st(c, row * n + col, acc) }
    }
}
