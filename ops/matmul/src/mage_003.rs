//! mage-003: 128-bit shared reads, the A tile stored transposed, K step 64.
//!
//! Kernel body: this module (`matmul_smem128_*`), over the crate root's
//! `load_quad`, `rank1_update` and `store_tile`.
//!
//! What: the block and register tiles of mage-002, but the A tile is stored
//! transposed in shared memory, `As[kk][r]` with a row stride of 68 floats,
//! so the four A values a thread needs for one `k` are consecutive and come
//! in one 128-bit shared load, as do its four B values from `Bs[kk][c]`.
//! The global quads of A are scattered into the transposed tile with four
//! scalar shared stores. The K step doubles to 64 (33 KiB of shared
//! memory), halving the barriers per multiply-add.
//!
//! Why it should help: the inner loop of mage-002 issues 8 scalar shared
//! loads per 16 multiply-adds, and its A reads are strided; here it is 2
//! vector loads per 16. The 4-float padding of the transposed rows (68,
//! not 64) moves successive rows by 4 banks: a warp's scattered stores of
//! one quad element fall on 4 banks instead of 2 (8-way conflicts instead
//! of 16-way); the 128-bit reads are conflict-free either way.
//!
//! Tails and alignment as in mage-002: zero-filled quads, and a `_v4` entry
//! where `n` and `k` are multiples of 4, a `_scalar` entry otherwise.
//!
//! Measured: faster than mage-002 at every shape from 512³. GPU kernel time
//! per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-matmul.json stage=mage-003 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 256x256x256 | 13.73 | 19.90 |
//! | 512x512x512 | 26.47 | 31.74 |
//! | 1024x1024x1024 | 86.26 | 93.49 |
//! | 2048x2048x2048 | 646.21 | 652.45 |
//! | 4096x4096x4096 | 5031 | 5042 |
//! | 1000x1037x999 | 147.70 | 153.60 |
//! <!-- /mage:table -->

use crate::{load_quad, rank1_update, store_tile};
use mage_common::device::*;

pub const BM: u32 = 64;
pub const BN: u32 = 64;
pub const BK: u32 = 64;
pub const THREADS: u32 = 256;
/// Row stride of the transposed A tile `As[kk][r]`, in floats (16-byte
/// multiple, so its rows start aligned for 128-bit reads).
pub const AS_STRIDE: u32 = BM + 4;
const A_FLOATS: u32 = BK * AS_STRIDE;
/// `Bs[kk][c]`, row stride `BN`, after the A tile.
const B_FLOATS: u32 = BK * BN;
pub const SHARED_BYTES: u32 = (A_FLOATS + B_FLOATS) * 4;
// Each thread copies four quads of each tile.
const _: () = assert!(BM * BK / 4 / THREADS == 4 && BK * BN / 4 / THREADS == 4);

/// The kernel body; `VEC` picks 128-bit or scalar global accesses.
#[inline(always)]
unsafe fn body<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
    let t = thread_idx_x();
    let (tx, ty) = (t % 16, t / 16);
    let tiles_n = n.div_ceil(BN).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * BM, block_idx_x() % tiles_n * BN);
    let mut acc = [[0.0f32; 4]; 4];
    let mut k0 = 0;
    while k0 < k {
        // Quad q of either tile: row q / 16, columns 4 (q % 16)... The four
        // quads are spelled out, not looped over: in the scalar entry LLVM
        // leaves such a loop rolled and the quad arrays go to local memory.
        let quad = |i: u32| t + THREADS * i;
        let load_a = |i: u32| unsafe { load_quad::<VEC>(a, row0 + quad(i) / 16, m, k0 + 4 * (quad(i) % 16), k) };
        let load_b = |i: u32| unsafe { load_quad::<VEC>(b, k0 + quad(i) / 16, k, col0 + 4 * (quad(i) % 16), n) };
        let va = [load_a(0), load_a(1), load_a(2), load_a(3)];
        let vb = [load_b(0), load_b(1), load_b(2), load_b(3)];
        let stash = |i: u32, va: F32x4, vb: F32x4| {
            let (r, kk) = (quad(i) / 16, 4 * (quad(i) % 16));
            let v = va.to_array();
            for e in 0..4 {
                smem_st(((kk + e) * AS_STRIDE + r) * 4, v[e as usize]);
            }
            smem_st4((A_FLOATS + r * BN + kk) * 4, vb);
        };
        stash(0, va[0], vb[0]);
        stash(1, va[1], vb[1]);
        stash(2, va[2], vb[2]);
        stash(3, va[3], vb[3]);
        sync_threads();
        for kk in 0..BK {
            let av = smem_ld4((kk * AS_STRIDE + ty * 4) * 4).to_array();
            let bv = smem_ld4((A_FLOATS + kk * BN + tx * 4) * 4).to_array();
            rank1_update(&mut acc, av, bv);
        }
        // Everyone is done with the tiles before they are overwritten.
        sync_threads();
        k0 += BK;
    }
    unsafe { store_tile::<VEC>(c, &acc, row0 + ty * 4, col0 + tx * 4, m, n) }
}

mage_common::kernel! {
    /// `n` and `k` multiples of 4: 128-bit global loads and stores. `SHARED_BYTES` of shared memory.
    pub unsafe fn matmul_smem128_v4(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// Any shape: scalar global loads and stores.
    pub unsafe fn matmul_smem128_scalar(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<false>(a, b, c, m, n, k) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    let kernel = if crate::vector_rows(d) { &matmul_smem128_v4::KERNEL } else { &matmul_smem128_scalar::KERNEL };
    crate::tiled_launch(d, kernel, BM, BN, THREADS, SHARED_BYTES)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "128-bit shared reads, A tile transposed in shared (row stride 68), K step 64",
    kernels: &[&matmul_smem128_v4::KERNEL, &matmul_smem128_scalar::KERNEL],
    supports: |_| true,
    plan,
};
