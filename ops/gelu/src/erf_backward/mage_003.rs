//! gelu_erf_backward mage-003: dx from flat 128-bit quads at any width,
//! four rows a slab staged in shared memory for dbias's column sums, then
//! a second pass whose loads are all in flight at once.
//!
//! Kernel body: [`crate::bias_gradient::slabs`] (`slabs` and `totals`,
//! shared with gelu_backward mage-003), of which this module declares the
//! entries `gelu_erf_backward_slabs` and
//! `gelu_erf_backward_totals_batched`; the element's arithmetic,
//! [`gelu_erf_grad_with`](super::element_gradient::gelu_erf_grad_with) (as
//! [`ErfGradient`]), in [`element_gradient`](super::element_gradient),
//! shared with mage-001 and mage-002.
//!
//! What changed: gelu_backward mage-003's structure on the exact form's
//! element (its doc has the reasons): a block per chunk of four-row slabs,
//! each slab `width` whole quads of the flat run (16-byte loads of x and
//! dy and a 16-byte store of dx at any width, four quads' loads in flight
//! a thread), its dx staged in shared memory and each column's rows added
//! in order by one thread, then each column's partials added in chunk
//! order with a batch of eight loads issued before the adds. dx is
//! mage-001's and mage-002's bits; dbias a fixed order, within the
//! tolerance's `γ_(rows+2)` for any order. The same chunk rule and shapes
//! as gelu_backward mage-003.
//!
//! Prediction (H200, CUPTI kernel time, hot L2), before any measurement.
//! At 1000x1001 the bytes and grid are gelu_backward mage-003's (about 5.0
//! µs predicted there); the element's extra arithmetic cost this op's
//! mage-002 0.44 µs over gelu_backward's at that shape (tile kernels 5.37
//! against 4.93 µs, `results/backward-6`), and the accesses here hide it
//! no better: about 5.5 µs, 0.73x mage-002's 7.52 and 0.82x
//! torch.compile's 6.73 (3 kernels).
//!
//! Measured (`results/backward-7`, CUPTI kernel time, hot L2, medians):
//! 11.23 µs at 1000x1001 against mage-002's 7.57 and torch.compile's
//! 6.74, judged SLOWER than mage-002 (1.49x): `current` keeps mage-002
//! (`docs/attempts.md`).

use super::element_gradient::ErfGradient;
pub use crate::bias_gradient::slabs::{
    BATCH, LOADS, MAX_WIDTH, SEGMENTS, SLAB_ROWS, TARGET_BLOCKS, THREADS, TOTALS_COLUMNS, shared_bytes, slabs_per_chunk, supports,
};
use crate::bias_gradient::slabs::{slabs, totals};

mage_common::kernel! {
    /// Block `chunk`: dx for the rows of its slabs, and their partial dbias
    /// into `partials[chunk][..]` (row stride `width`). Needs
    /// `shared_bytes(width)` of shared memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gelu_erf_backward_slabs(x: *const f32, bias: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, per: u32) {
        unsafe { slabs::<ErfGradient>(x, bias, dy, dx, partials, rows, width, per) }
    }
}

mage_common::kernel! {
    /// dbias: each column's partials added in chunk order, a batch of
    /// loads in flight before the adds. Needs `TOTALS_SHARED_BYTES`.
    pub unsafe fn gelu_erf_backward_totals_batched(partials: *const f32, dbias: *mut f32, chunks: u32, width: u32) {
        unsafe { totals(partials, dbias, chunks, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "dx from flat 128-bit quads at any width, four-row slabs staged in shared memory for dbias's column sums (rows in order), then the chunks added in order with every load of a batch in flight",
    kernels: &[&gelu_erf_backward_slabs::KERNEL, &gelu_erf_backward_totals_batched::KERNEL],
    supports,
    plan: |d| crate::bias_gradient::slabs::plan(d, &gelu_erf_backward_slabs::KERNEL, &gelu_erf_backward_totals_batched::KERNEL),
};
