//! mage-009: two warps per row, four rows per 256-thread block, three or
//! four held quads per lane.
//!
//! Kernel body: [`crate::held_rows`] (shared with mage-010; frozen: ptxas
//! resources pinned by `tests/resources.rs`).
//!
//! mage-007 gives a row of 768 to one warp: six quads (24 floats) per lane
//! and 56 registers, so four blocks of eight warps per SM (48% achieved
//! occupancy, long-scoreboard stalls dominating). Here a row goes to 64
//! threads through [`held_rows`](crate::held_rows::held_rows): three quads per lane at
//! 768 (four up to 1024, two up to 512), all loaded before any is used,
//! about half mage-007's registers. The two warps of a row meet once in 32
//! bytes of shared memory behind the block's one barrier, merged without a
//! division. mage-003 also paired warps, but merged Chan moments with a
//! division per quad and read the row twice (7.28 µs).
//!
//! Prediction (32 registers in the snapshot: eight blocks, 64 warps, per
//! SM; gamma and beta are read one quad at a time at the store, since
//! gathering them first would take 40 registers and a quarter of the
//! warps):
//!
//! * 4096x768: 1024 blocks in one wave of 1056, 96 KiB of loads in flight
//!   per SM as with mage-007, but twice the warps to cover the reductions
//!   and half the work per lane after its data arrive. 5.69 → about 5.0 µs.
//! * 8192x768: two waves at full occupancy, one read (mage-002, the
//!   fastest here, reads each row three times at 32 registers). 12.2 →
//!   about 11.6 µs.
//!
//! Measured (as the candidate try-ln-pair, in the same session as every
//! stage before it): the fastest stage at 4096x768, ahead of mage-007 but
//! short of the predicted gain. The second prediction was wrong: at
//! 8192x768 it is level with mage-007 and well behind mage-002, which keeps
//! the whole grid in one wave of 32-register warps at the cost of reading
//! each row three times.
//! [`current`](crate::current) runs it on rows up to 1024 wide when there
//! are at most 4096 of them. GPU kernel time per call (CUPTI) and event
//! span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=try-ln-pair -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 5.26 | 11.94 |
//! | 8192x768 | 13.77 | 20.26 |
//! <!-- /mage:table -->

use mage_common::device::Cached;

row_entries!(held_rows::<_, _, _, Cached, false>;
    layernorm_pair_held_2 => (64, 2, 4, 32),
    layernorm_pair_held_3 => (64, 3, 4, 32),
    layernorm_pair_held_4 => (64, 4, 4, 40),
);

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-009",
    summary: "two warps per row, four rows per block, up to four held quads per lane, one barrier",
    kernels: KERNELS,
    supports: |d| crate::held_rows::entries_support(ENTRIES, d),
    plan: |d| crate::held_rows::held_plan(ENTRIES, d),
};
