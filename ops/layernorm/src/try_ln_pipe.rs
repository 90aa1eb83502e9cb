//! try-ln-pipe (candidate): persistent row groups streaming rows through a
//! `cp.async` ring in shared memory.
//!
//! Every held-row stage keeps a row's loads in registers, so the bytes in
//! flight per SM are capped by registers and occupancy, and a block's loads
//! stop while it reduces and stores. Here one wave of blocks stays resident
//! ([`pipe_rows`](crate::pipe_rows)): each row group walks rows `g`,
//! `g + G`, ... and copies each row into a four-row ring in shared memory
//! with `cp.async.cg` (L2 only) three rows before normalising it, so the
//! loads of the next rows are in flight while the current one is reduced
//! and written, and the amount in flight is set by shared memory, not
//! registers. Rows up to 1024 go to a warp (no barrier at all, two to eight
//! quads per lane, four warps per block); rows up to 2048 and 4096 to a
//! block of 128 or 256 threads with four quads each and one barrier a row.
//! The plan gives every group the same number of rows, give or take one,
//! for one wave of the H200's 132 SMs.
//!
//! Prediction (shared memory sets the residency: 3 blocks per SM at 4096,
//! 6 at 2048, 4 at 768; the 40 to 80 registers of the snapshot would allow
//! more, and the plan sizes its grid by the smaller of the two):
//!
//! * 4096x4096: 373 blocks of 11 rows, 144 KiB in flight per SM at all
//!   times, four times what DRAM needs, with no gap between rows. 51.9 →
//!   about 33 µs; 16384x4096: 391 blocks of 42 rows, 176.5 → about 128 µs
//!   (the copy's rate).
//! * 1024x2048: 512 blocks of two rows, both requested at once: about 4.6 µs.
//! * 4096x768: 2048 warps of two rows, 8192x768: 2048 warps of four rows,
//!   three in flight each: 5.69 → about 5.2 µs and 12.2 → about 11.5 µs.
//!
//! Not yet measured on the GPU.

use mage_common::device::Cached;

row_entries!(pipe_rows::<_, _, _, Cached>;
    layernorm_pipe_warp_2 => (32, 2, 4, 40),
    layernorm_pipe_warp_4 => (32, 4, 4, 64),
    layernorm_pipe_warp_6 => (32, 6, 4, 64),
    layernorm_pipe_warp_8 => (32, 8, 4, 80),
    layernorm_pipe_block_128 => (128, 4, 1, 56),
    layernorm_pipe_block_256 => (256, 4, 1, 72),
);

/// The plan with at most `max_blocks` blocks (tests use a few, so that
/// every group walks many rows and the ring wraps).
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan_within(d: &[u32], max_blocks: u32) -> mage_common::op::Plan {
    crate::pipe_plan_within(ENTRIES, d, max_blocks)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-ln-pipe",
    summary: "persistent row groups (a warp up to 1024, a block up to 4096), rows streamed through a 4-row cp.async ring",
    kernels: KERNELS,
    supports: |d| crate::entries_support(ENTRIES, d),
    plan: |d| crate::pipe_plan(ENTRIES, d),
};
