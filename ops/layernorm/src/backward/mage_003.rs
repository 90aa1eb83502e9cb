//! layernorm_backward mage-003: one pass over x and dy, rows held in
//! registers, the statistics recomputed from them, dgamma's and dbeta's
//! partial sums kept in registers per chunk of rows; a short second pass.
//!
//! Kernel body: [`held_gradient`](super::held_gradient) (`held_gradient`,
//! with its unused `SAVED` path) and [`totals`](super::totals)
//! (`layernorm_backward_totals`), over `mage_common::device::column_sums`.
//!
//! What changed: mage-002 reads x and dy twice (its block-per-row dx
//! kernel, then its column kernel) and writes a `[rows, 3]` of statistics
//! between them, in three launches; here one kernel reads them once. A
//! block walks a chunk of rows, `R` rows at a time, each row spread over
//! `T` threads holding two quads of x and dy apiece (16-byte loads where
//! the width is a multiple of 4, scalar ones where not), and keeps its
//! columns' `Σ dy·x̂` and `Σ dy` in registers over the chunk; one partial
//! row of each per block goes to a scratch, and a second kernel adds the
//! chunks (each column's chunks cut into 32 contiguous segments, added in
//! chunk order, then the segments in order). Every grouping follows from
//! the shape: dgamma and dbeta are the same bits on every run, no
//! floating-point atomics.
//!
//! The entries ([`ENTRIES`], narrowest first; registers from
//! `tests/resources.rs`, no spills, no local memory): 32 threads × 8 rows
//! up to width 256 (80 registers, 3 blocks an SM), 96 × 2 up to 768 (90,
//! 3 blocks of 192), 256 × 1 up to 2048 (116, 2) and 512 × 1 up to 4096
//! (128, 1); wider rows are refused (`current` takes mage-002). The two
//! one-row entries load the next row before this row's reductions (its
//! latency hidden behind them, at no cost in blocks an SM); the narrower
//! ones would lose a block an SM to it (96 and 117 registers measured).
//! Three quads a thread (64 × 4 at 768) took 126-129 registers and four
//! 144-168, a block an SM fewer, so every entry holds two.
//!
//! The chunk rule ([`chunk_rows`](super::held_gradient::chunk_rows)): the
//! chunks, a block each, are one wave of the blocks the SMs hold (132 ×
//! the entry's blocks an SM), rows per chunk a multiple of `R`. The rows
//! are memory-bound and every block moves the same bytes, so one wave
//! keeps every SM busy to the end while the partials stay at 128-396 rows:
//! 4096x768 342 chunks of 12 rows, 8192x768 373 of 22, 1024x2048 256 of 4,
//! 4096x4096 128 of 32, 16384x4096 132 of 125.
//!
//! Prediction (H200, ~4 TB/s HBM, 50 MB L2, hot): the gradient kernel
//! moves `12·rows·width` bytes, the partials `16·chunks·⌈width/4⌉·4` more
//! through L2, and the totals kernel (48-256 blocks of 1024 threads, each
//! thread ⌈chunks/32⌉ ≤ 12 partials) takes about 2 µs. 4096x768 (37.7 MB,
//! x and dy L2-resident when hot; 3 blocks an SM, 36 KB of loads in
//! flight, six steps of two rows a block): ~10-12 + 2 µs, ~1.8x faster
//! than torch.compile's 23.16 and ~4x mage-002's 57.75; 8192x768 (75.5
//! MB): ~21 + 2 µs; 1024x2048 (25 MB, four rows a block, the next one in
//! flight): ~7 + 2 µs against eager's 11.20; 4096x4096 (201 MB, 128 SMs a
//! block each, 32 KB in flight each): ~56 + 2 µs against 104.10;
//! 16384x4096 (805 MB): ~218 + 2 µs, about 1.1x a device copy of those
//! bytes (~200 µs) and about even with torch.compile's 221.59 (against
//! mage-002's 472.35).
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=layernorm_backward -->
//! | op | workload | Mage current | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|
//! | layernorm_backward | 4096x768 | **20.46** (2) mage-003 | 24.38 (2) | 23.23 (4) | 9.98 | 2.05 |
//! | layernorm_backward | 8192x768 | **39.19** (2) mage-003 | 60.89 (2) | 44.93 (3) | 23.58 | 1.66 |
//! | layernorm_backward | 1024x2048 | 14.16 (2) mage-003 | **11.26** (2) | 15.67 (4) | 8.65 | 1.64 |
//! | layernorm_backward | 4096x4096 | 114.89 (2) mage-003 | 117.50 (2) | **103.87** (4) | 50.55 | 2.27 |
//! | layernorm_backward | 16384x4096 | 428.20 (2) mage-003 | 438.87 (2) | **222.27** (3) | 191.91 | 2.23 |
//! <!-- /mage:table -->

use super::held_gradient::gradient_entries;
#[cfg(not(target_arch = "nvptx64"))]
use super::held_gradient::{entries_support, entry_for};

gradient_entries! { recompute;
    layernorm_backward_held_32x2x8 => (32, 2, 8, 80, 3),
    layernorm_backward_held_96x2x2 => (96, 2, 2, 96, 3),
    layernorm_backward_held_256x2x1 => (256, 2, 1, 128, 2),
    layernorm_backward_held_512x2x1 => (512, 2, 1, 128, 1),
}

/// Every kernel entry of the stage.
#[cfg(not(target_arch = "nvptx64"))]
pub static KERNELS: &[&mage_common::Kernel] = &[
    &layernorm_backward_held_32x2x8::KERNEL,
    &layernorm_backward_held_96x2x2::KERNEL,
    &layernorm_backward_held_256x2x1::KERNEL,
    &layernorm_backward_held_512x2x1::KERNEL,
    &super::totals::layernorm_backward_totals::KERNEL,
];

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "one pass: a block per chunk of rows, rows held in registers (statistics recomputed), dgamma and dbeta partials in registers; the chunks added in order by a second kernel",
    kernels: KERNELS,
    supports: |d| entries_support(ENTRIES, d),
    plan: |d| {
        use super::held_gradient::{chunk_rows, shared_bytes};
        use mage_common::kernel::Dim3;
        use mage_common::op::{Arg, Launch, Plan};
        let (rows, width) = (d[0], d[1]);
        let e = entry_for(ENTRIES, width);
        let per = chunk_rows(e, rows);
        let chunks = rows.div_ceil(per);
        let stride = width.div_ceil(4) * 4;
        Plan {
            launches: vec![
                Launch {
                    kernel: e.kernel,
                    grid: Dim3::x(chunks),
                    block: Dim3::x(e.block()),
                    shared_bytes: shared_bytes(e.quads, e.rows, e.block()),
                    cluster: Dim3::ONE,
                    args: vec![
                        Arg::Input(0),
                        Arg::Input(1),
                        Arg::Input(2),
                        Arg::Output(0),
                        Arg::Scratch(0),
                        Arg::U32(rows),
                        Arg::U32(width),
                        Arg::U32(per),
                        Arg::F32(crate::EPS),
                    ],
                },
                super::totals::totals_launch(chunks, width),
            ],
            scratch: vec![(2 * chunks * stride) as usize],
        }
    },
};
