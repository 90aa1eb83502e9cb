//! mage-010: a block per row, four quads per thread loaded before any is
//! used, the warps merged without a division.
//!
//! Kernel body: [`crate::held_rows`] (shared with mage-009; frozen: ptxas
//! resources pinned by `tests/resources.rs`).
//!
//! Against mage-008 (held row, two quads per thread, 256 or 512 threads)
//! and mage-001 (scalar three-pass, the fastest on rows of 4096): each
//! thread of [`held_rows`](crate::held_rows::held_rows) issues four 128-bit loads of
//! its row back to back, with no branch between them, so 64 bytes per
//! thread are in flight at once; the block grows with the row (128 threads
//! up to 2048, 256 up to 4096, 512 up to 8192). After the two butterflies
//! each warp publishes its sum, mean, centred second moment and count in
//! 16 bytes, so the merge behind the one barrier is FMAs over 4 to 16
//! slots: mage-008 recomputed every warp's count and divided once per warp
//! in every thread (16 divisions per thread per row of 4096 at 512
//! threads), which at one row per 512-thread block is more issue time than
//! the arithmetic on the row itself.
//!
//! Prediction, from bytes in flight and occupancy (44 registers in the
//! snapshot: five 256-thread blocks, 40 warps, per SM):
//!
//! * 4096x4096 and 16384x4096 (256 threads, 16 KiB per row): 80 KiB of
//!   loads in flight per SM while its blocks load, against the ~33 KiB
//!   that 4.25 TB/s at about 1 µs of DRAM latency needs per SM; the row is
//!   read once and written once. 51.9 → about 35 µs and 176.5 → about
//!   133 µs (Triton's 34.8 and 133.5: its kernel has this shape).
//! * 1024x2048 (128 threads, 8 KiB per row): 1024 blocks in one wave (ten
//!   fit per SM), four warps to merge instead of eight, and a thread whose
//!   four quads are all in the row issues its gamma and beta loads
//!   together. 5.43 → about 4.6 µs.
//! * At 768 (128 threads, two of the four quads used) it is mage-006 with
//!   four loads a thread and a cheaper merge; no gain expected over mage-007.
//!
//! Measured (as the candidate try-ln-held4, in the same session as every
//! stage before it): the predictions held on rows of 4096, where it is the
//! fastest stage by a wide margin over mage-001, and at 1024x2048 it beat
//! the prediction and every other stage. At 768, as predicted, it gains
//! nothing: it is behind mage-006 and mage-007.
//! [`current`](crate::current) runs it on rows from 1028 to 8192 wide.
//! Nsight Compute of one launch at 4096x4096
//! (`results/candidates-1/nsight/layernorm-try-ln-held4-4096x4096.json`)
//! finds the warps waiting on global loads most of the time, with the
//! occupancy held down by registers: what the candidates after it work on.
//! GPU kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=try-ln-held4 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 7.05 | 13.41 |
//! | 8192x768 | 16.39 | 22.43 |
//! | 1024x2048 | 4.01 | 10.37 |
//! | 4096x4096 | 35.36 | 41.74 |
//! | 16384x4096 | 132.04 | 136.93 |
//! <!-- /mage:table -->

use mage_common::device::Cached;

row_entries!(held_rows::<_, _, _, Cached, true>;
    layernorm_held4_128 => (128, 4, 1, 48),
    layernorm_held4_256 => (256, 4, 1, 48),
    layernorm_held4_512 => (512, 4, 1, 48),
);

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-010",
    summary: "block per row (128 to 512 threads), four held quads per thread loaded first, division-free merge",
    kernels: KERNELS,
    supports: |d| crate::held_rows::entries_support(ENTRIES, d),
    plan: |d| crate::held_rows::held_plan(ENTRIES, d),
};
