//! gelu_backward mage-003: dx from flat 128-bit quads at any width, four
//! rows a slab staged in shared memory for dbias's column sums, then a
//! second pass whose loads are all in flight at once.
//!
//! Kernel body: [`crate::bias_gradient::slabs`] (`slabs` and `totals`,
//! shared with gelu_erf_backward mage-003), of which this module declares
//! the entries `gelu_backward_slabs` and `gelu_backward_totals_batched`; the
//! element's arithmetic,
//! [`gelu_grad_with`](super::element_gradient::gelu_grad_with) (as
//! [`TanhGradient`]), in [`element_gradient`](super::element_gradient),
//! shared with mage-001 and mage-002.
//!
//! What changed, against mage-002 (`current` at every shape), at widths
//! that are not a multiple of 4, where its lanes fall back to four scalar
//! accesses of x, dy and dx each and its grid at 1000x1001 is 8 tiles ×
//! 125 chunks of 8 rows (4.93 µs for the tile kernel, 2.15 for the totals
//! kernel, `results/backward-6`):
//!
//! * **Flat quads.** Four rows are `4·width` elements, exactly `width`
//!   quads of the flat run, starting on a quad: each is one 16-byte load
//!   of x, one of dy and one 16-byte store of dx at any width, a quad
//!   straddling two rows included; a thread issues the loads of up to four
//!   quads before it computes any. dx is mage-001's and mage-002's bits.
//! * **Column sums from shared memory.** A block owns a chunk of such
//!   slabs; each slab's dx goes to a shared tile at its flat place, and
//!   after one barrier each thread adds its columns' four rows, in row
//!   order, onto running sums; the chunk's sums are one partial row.
//! * **A second pass of one round trip.** mage-002's totals thread adds its
//!   segment's partials one load after another below eight (4 at 125
//!   chunks: four round trips to L2 in a row); here every load of a batch
//!   of eight is issued (predicated) before the first add.
//!
//! dbias is summed in another order than mage-002's (rows in order within
//! a chunk, chunks in order), fixed by the shape, so the same bits on
//! every run; the op's tolerance holds any order (`γ_(rows+2)` of the
//! column's magnitudes, [`reference`](super::reference)).
//!
//! The chunk rule ([`slabs_per_chunk`]): as few slabs a chunk as keep the
//! chunks to about [`TARGET_BLOCKS`] = 528 (four 256-thread blocks an SM
//! on 132 SMs: one wave). At the sweep shapes: 1000x1001 250 chunks of 1
//! slab (20,020 shared bytes a block); 4096x768 512 of 2; 8192x768 512 of
//! 4; 4096x3072 512 of 2; 16384x4096 512 of 8 (81,920 shared bytes, two
//! blocks an SM). Widths up to [`MAX_WIDTH`] = 8192.
//!
//! Prediction (H200, CUPTI kernel time, hot L2), before any measurement.
//! At 1000x1001: 250 blocks, each thread 3 or 4 quads in one batch (8
//! loads of 16 bytes in flight), 12.0 MB of x, dy and dx and 1.0 MB of
//! partials. The one-kernel GELUs' line (1.57 µs + 0.123 µs/MB, gelu
//! mage-003's doc) with mage-002's backward rate instead (its tile kernel:
//! 8.14 µs for 38.3 MB at 4096x768, 0.172 µs/MB over the same start) and
//! ~0.3 µs for the barrier and the column sums: 1.57 + 0.3 + 13 × (0.123 to
//! 0.172) = 3.5 to 4.1 µs, against the tile kernel's 4.93. The totals
//! kernel, 32 blocks of 1024 threads each loading 8 partials at once: one
//! round trip where mage-002's makes four; its 2.15 µs less three trips of
//! ~0.3 µs, about 1.25 µs (torch.compile's last reduction is 0.98). In all
//! about 5.0 µs (4.7 to 5.4), 0.71x mage-002's 7.08 and 0.77x
//! torch.compile's 6.54 (3 kernels). At the widths that are a multiple of
//! 4 the first pass makes two to eight slabs a block in a row, one barrier
//! pair each: about mage-002's times (10.74 µs at 4096x768), not the
//! shapes this stage is for.
//!
//! Measured (`results/backward-7`, CUPTI kernel time, hot L2, medians):
//! 10.64 µs at 1000x1001 against mage-002's 7.10 and torch.compile's
//! 6.53, judged SLOWER than mage-002 (1.50x); at 7x9 SLOWER too (3.22
//! against 2.69, `results/backward-8`). The prediction (about 5.0) was
//! wrong by 2x, all of it in the slab kernel (8.94 µs against mage-002's
//! tile kernel's 4.94; the batched totals took 1.69 against 2.16):
//! `current` keeps mage-002 (`docs/attempts.md`).

use super::element_gradient::TanhGradient;
pub use crate::bias_gradient::slabs::{
    BATCH, LOADS, MAX_WIDTH, SEGMENTS, SLAB_ROWS, TARGET_BLOCKS, THREADS, TOTALS_COLUMNS, shared_bytes, slabs_per_chunk, supports,
};
use crate::bias_gradient::slabs::{slabs, totals};

mage_common::kernel! {
    /// Block `chunk`: dx for the rows of its slabs, and their partial dbias
    /// into `partials[chunk][..]` (row stride `width`). Needs
    /// `shared_bytes(width)` of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_backward_slabs(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, per: u32) {
        unsafe { slabs::<TanhGradient>(x, bias, dy, dx, partials, rows, width, per) }
    }
}

mage_common::kernel! {
    /// dbias: each column's partials added in chunk order, a batch of
    /// loads in flight before the adds. Needs `TOTALS_SHARED_BYTES`.
    pub unsafe fn gelu_backward_totals_batched(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
        unsafe { totals(partials, dbias, chunks, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "dx from flat 128-bit quads at any width, four-row slabs staged in shared memory for dbias's column sums (rows in order), then the chunks added in order with every load of a batch in flight",
    kernels: &[&gelu_backward_slabs::KERNEL, &gelu_backward_totals_batched::KERNEL],
    supports,
    plan: |d| crate::bias_gradient::slabs::plan(d, &gelu_backward_slabs::KERNEL, &gelu_backward_totals_batched::KERNEL),
};
