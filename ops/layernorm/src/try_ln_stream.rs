//! try-ln-stream (candidate): try-ln-held4 with streaming cache hints on x
//! and y.
//!
//! The same kernel body, geometry and plan as try-ln-held4; only the
//! instructions that touch x and y change: x is read with
//! `ld.global.nc.L1::no_allocate.L2::256B` (a row is read once, so it
//! should not displace gamma and beta in L1, and each DRAM access fetches
//! a whole 256-byte group), y is written with `st.global.cs` (evict first:
//! the output is not read again by the launch). gamma and beta keep plain
//! cached loads. Measured beside try-ln-held4 in one sweep, the difference
//! between the two is the hints' effect alone.
//!
//! Prediction: at 16384x4096 (512 MiB, DRAM-bound whatever the cache
//! does) 1 to 3% below try-ln-held4, from fewer partial DRAM bursts and
//! less write-back pressure in L2. At 4096x4096 under the hot-L2 protocol
//! (x and y 64 MiB each against 50 MB of L2) more of x may survive from
//! one call to the next when y's lines go first: up to 10% below
//! try-ln-held4 (about 35 → 32 µs). At 768 and 2048 (everything fits in
//! L2) no difference expected. Caution for a pipeline: evict-first on y
//! helps this benchmark and may cost the next kernel, which reads y.
//!
//! Not yet measured on the GPU.

use mage_common::device::Streamed;

row_entries!(held_rows::<_, _, _, Streamed, true>;
    layernorm_stream_128 => (128, 4, 1, 48),
    layernorm_stream_256 => (256, 4, 1, 48),
    layernorm_stream_512 => (512, 4, 1, 48),
);

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-ln-stream",
    summary: "try-ln-held4 with x read L1::no_allocate.L2::256B and y written st.global.cs",
    kernels: KERNELS,
    supports: |d| crate::entries_support(ENTRIES, d),
    plan: |d| crate::held_plan(ENTRIES, d),
};
