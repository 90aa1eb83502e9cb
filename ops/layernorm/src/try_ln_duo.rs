//! try-ln-duo (candidate): mage-009's row of two warps in a block of its
//! own, no barrier shared between rows.
//!
//! mage-009 puts four rows in a 256-thread block, so its one barrier waits
//! for all eight warps: a row whose data have arrived and whose two warps
//! have reduced waits for the slowest of the block's four rows before it
//! can merge and store, and at 4096x768 the whole grid is one wave that
//! loads, reduces and stores nearly in step. Here each row gets a 64-thread
//! block of its own ([`held_rows`](crate::held_rows) with one row a block,
//! 32 bytes of shared memory): the barrier joins only the row's two warps,
//! so every row starts its stores as soon as its own data are reduced, and
//! the stores of early rows overlap the loads of late ones. Everything else
//! is mage-009's: three quads per lane at 768 (two up to 512, four up to
//! 1024), loaded before any is used, the division-free merge.
//!
//! Prediction (30 to 38 registers in the snapshot; 32 blocks of two warps
//! per SM, the SM's limit on resident blocks, so 64 warps as in mage-009):
//!
//! * 4096x768: 4096 blocks in one wave of 4224. From mage-009's 5.26 to
//!   about 5.0 µs: what the coupling costs is at most the spread of arrival
//!   and reduction times among four adjacent rows. The 4.7 µs target is
//!   out of its reach unless that spread is larger than it looks. The risk:
//!   four times the blocks to launch, 32 per SM at the start.
//! * 8192x768: two waves, as mage-009; no gain over mage-002's one wave
//!   expected, about 13.5 µs.
//!
//! Not yet measured on the GPU.

use mage_common::device::Cached;

row_entries!(held_rows::<_, _, _, Cached, false>;
    layernorm_duo_2 => (64, 2, 1, 32),
    layernorm_duo_3 => (64, 3, 1, 32),
    layernorm_duo_4 => (64, 4, 1, 40),
);

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-ln-duo",
    summary: "mage-009's two warps per row in a 64-thread block of their own: no barrier shared between rows",
    kernels: KERNELS,
    supports: |d| crate::entries_support(ENTRIES, d),
    plan: |d| crate::held_plan(ENTRIES, d),
};
