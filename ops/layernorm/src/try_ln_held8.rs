//! try-ln-held8 (candidate): eight held quads per thread, half mage-010's
//! threads per row, more rows resident per SM.
//!
//! Nsight Compute of mage-010 at 4096x4096
//! (`results/candidates-1/nsight/layernorm-try-ln-held4-4096x4096.json`)
//! finds the warps stalled on global loads for most of their cycles
//! (long scoreboard), the achieved occupancy near the five 256-thread
//! blocks per SM that its 44 registers allow, and barrier stalls second:
//! each SM holds five rows of 16 KiB, and a row's loads stop while its
//! eight warps reduce, meet behind the barrier and store. Here the same
//! body, [`held_rows`](crate::held_rows), runs with eight quads per thread
//! (all eight loads issued before any is used) and half the threads per
//! row: 128 threads for rows up to 4096, 256 up to 8192, and for narrower
//! rows 64 threads (two rows a block) or 32 (four). Gamma and beta are read
//! a slot at a time at the store: gathering eight slots first would take
//! 64 more registers.
//!
//! Prediction (61 to 62 registers in the snapshot, so 32 warps per SM:
//! eight 128-thread blocks):
//!
//! * 4096x4096 and 16384x4096: eight rows resident per SM instead of five,
//!   128 KiB of loads in flight while they load instead of 80, and the
//!   barrier joins four warps instead of eight. From mage-010's 35.4 to
//!   about 33.0 µs and from 132.0 to about 127.5 µs, the copy's rate being
//!   about 31.6 and 126.3.
//! * Rows of 8192 (256 threads): four rows per SM instead of mage-010's two.
//! * 1024x2048 (64 threads, two rows a block): the whole matrix is resident
//!   either way, with half mage-010's warps per row to cover the
//!   reductions: no gain, about 4.2 µs against 4.0.
//! * Rows up to 1024 (a warp a row, 6 of 8 quads used at 768): a barrier
//!   mage-007 does without; no gain expected.
//!
//! Not yet measured on the GPU.

use mage_common::device::Cached;

row_entries!(held_rows::<_, _, _, Cached, false>;
    layernorm_held8_32 => (32, 8, 4, 64),
    layernorm_held8_64 => (64, 8, 2, 64),
    layernorm_held8_128 => (128, 8, 1, 64),
    layernorm_held8_256 => (256, 8, 1, 64),
);

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-ln-held8",
    summary: "eight held quads per thread: 128 threads per row of 4096, 256 up to 8192, eight rows resident per SM",
    kernels: KERNELS,
    supports: |d| crate::entries_support(ENTRIES, d),
    plan: |d| crate::held_plan(ENTRIES, d),
};
