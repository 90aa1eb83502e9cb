//! mage-010: mage-009's 3xTF32 product on rows that are not 16-byte
//! aligned, padded first instead of copied by the word.
//!
//! Kernel body: [`crate::tf32x3`] with its `KByN` layout (shared with
//! mage-009; frozen for this layout: ptxas
//! resources pinned by `tests/resources.rs`, the arithmetic by the 3xTF32
//! model of `tests/stages.rs`); this module holds its entries, the padding
//! and the plan.
//!
//! ## What changed
//!
//! Where `k` or `n` is not a multiple of 4, mage-009 runs its `_scalar`
//! entries: four 4-byte `cp.async` per 16 bytes of A and B, since a row of
//! A (`k` floats) or B (`n` floats) then starts anywhere in a 16-byte
//! word. This stage copies A into an `m` x `k4` scratch matrix and B into
//! `k4` x `n4` (`k4`, `n4` the next multiples of 4; the new elements
//! zero), multiplies those with the 16-byte entry, into an `m` x `n4`
//! scratch C, and copies C's first `n` columns out: three small launches
//! of [`matmul_resize`] around the product. The zeros add zero products,
//! exactly, so the output is mage-009's bit for bit (`tests/stages.rs`
//! holds it to that on the emulator). Aligned shapes launch the product
//! alone. The product is mage-009's body ([`crate::tf32x3`]) with its own
//! entries; the tile rows are chosen for the padded dims as mage-009
//! chooses them.
//!
//! ## Prediction
//!
//! 1000x1037x999 (pads to 1000x1040x1000): mage-009's scalar entry took
//! 70.22 µs in one sweep and 79.03 in the comparison of the same session
//! (`results/mage-011`), 72 blocks of 128 rows, Nsight's leading stall
//! long scoreboard (`results/nsight-1`). The 16-byte entry at 128 rows
//! takes 1.58 µs a K tile when every SM is busy (4096x4096x1024: 405.72 µs
//! for 8 waves of 32 tiles); 32 tiles make about 51 µs, and the three
//! copies move about 24 MB through L2 (A, B and C read and written once):
//! 4-6 µs. About 56 µs against cuBLAS's 66.
//!
//! ## Measured
//!
//! First written with one element per thread in [`matmul_resize`]: 61.58
//! µs at 1000x1037x999 against mage-009's 69.70 and cuBLAS's 59.36 in one
//! session (`results/pad-1`); Nsight (`results/nsight-1`) put the product
//! at 61.3 µs at its lower clock and the copy of C back at 5.6 µs, long
//! scoreboard leading (each thread waited for one 4-byte load, with a
//! division per element). The copies now take four elements per thread
//! with a 16-byte access on the padded side: 24 MB through L2 in three
//! launches should take under 2 µs each. The comparison after the change
//! (`results/mage-012`; `current` ran this stage at 1000x1037x999 and
//! 2047³ and mage-009 at the other two, kernel µs):
//!
//! <!-- mage:table compare results/mage-012/comparison.json ops=matmul shapes=1000x1037x999,1000x1000x999,1023x1023x1023,2047x2047x2047 stages=mage-009,mage-010 -->
//! | op | workload | Mage current | rust mage-009 | rust mage-010 | torch | torch_compile | triton | triton_tuned | triton_tf32x3 | torch_tf32 | floor | Mage / floor |
//! |---|---|---|---|---|---|---|---|---|---|---|---|---|
//! | matmul | 1000x1037x999 | 69.20 (4) mage-010 | 77.42 | 63.63 (4) | 60.11 | **59.95** | 149.56 | 101.47 | 223.61 | 36.39 (2) | 40.73 | 1.70 |
//! | matmul | 1000x1000x999 | 44.25 mage-009 | 44.21 | **39.37** (4) | 50.44 | 50.90 | 78.49 | 72.75 | 174.66 | 30.42 (2) | 39.28 | 1.13 |
//! | matmul | 1023x1023x1023 | 41.57 mage-009 | 41.56 | **40.48** (4) | 54.02 | 54.30 | 78.34 | 73.77 | 175.26 | 28.27 (2) | 42.09 | 0.99 |
//! | matmul | 2047x2047x2047 | 239.59 (4) mage-010 | 268.10 | **238.47** (4) | 342.21 | 342.92 | 606.36 | 521.17 | 728.58 | 130.93 | 337.23 | 0.71 |
//! <!-- /mage:table -->
//!
//! Against mage-009 it was judged FASTER at all four (the verdicts are in
//! [`crate::current`]'s doc), and at 1000x1037x999 `current` against the
//! best alternative (cuBLAS through torch.compile) 0.986, SAME: the
//! product, 72 blocks of 128 rows on 132 SMs, is the time; the three
//! copies took 4.7 µs under Nsight for the largest (`results/nsight-2`,
//! where caches are flushed), long scoreboard still leading.

pub use crate::tf32x3::matmul_resize;
#[cfg(not(target_arch = "nvptx64"))]
use crate::tf32x3::{BN, THREADS, resize, shared_bytes, tile_rows};
use crate::tf32x3::{KByN, Rows64, Rows128, body};

mage_common::kernel! {
    /// 128 x 128 of C per block, rows of a multiple of 4 floats (padded where they were not).
    pub unsafe fn matmul_3xtf32_aligned_m128(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows128, KByN>(a, b, c, m, n, k) }
    }
}

mage_common::kernel! {
    /// 64 x 128 of C per block, rows of a multiple of 4 floats.
    pub unsafe fn matmul_3xtf32_aligned_m64(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32) {
        unsafe { body::<true, Rows64, KByN>(a, b, c, m, n, k) }
    }
}

/// The padded dims: `[m, n4, k4]`.
pub fn padded(d: &[u32]) -> [u32; 3] {
    [d[0], d[1].next_multiple_of(4), d[2].next_multiple_of(4)]
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    use mage_common::op::{Arg, Plan};
    let p = padded(d);
    let rows = tile_rows(&p);
    let kernel = if rows == 128 { &matmul_3xtf32_aligned_m128::KERNEL } else { &matmul_3xtf32_aligned_m64::KERNEL };
    let mut product = crate::tiled_launch(&p, kernel, rows, BN, THREADS, shared_bytes(rows));
    if crate::vector_rows(d) {
        return product;
    }
    let (m, n, k, n4, k4) = (d[0], d[1], d[2], p[1], p[2]);
    let mut main = product.launches.remove(0);
    main.args = vec![Arg::Scratch(0), Arg::Scratch(1), Arg::Scratch(2), Arg::U32(m), Arg::U32(n4), Arg::U32(k4)];
    Plan {
        launches: vec![
            resize(Arg::Input(0), Arg::Scratch(0), [m, k], [m, k4]),
            resize(Arg::Input(1), Arg::Scratch(1), [k, n], [k4, n4]),
            main,
            resize(Arg::Scratch(2), Arg::Output(0), [m, n4], [m, n]),
        ],
        scratch: vec![m as usize * k4 as usize, k4 as usize * n4 as usize, m as usize * n4 as usize],
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-010",
    summary: "mage-009's 3xTF32 product with 16-byte copies on any shape: rows of A and B padded to a multiple of 4 floats in scratch first",
    kernels: &[&matmul_3xtf32_aligned_m128::KERNEL, &matmul_3xtf32_aligned_m64::KERNEL, &matmul_resize::KERNEL],
    supports: |_| true,
    plan,
};
