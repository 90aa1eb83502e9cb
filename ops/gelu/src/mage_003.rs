//! mage-003: the matrix as one flat run of quads, any width; mage-002's
//! arithmetic.
//!
//! Kernel body: [`crate::flat_quads`] (`flat_quads`, shared with gelu_erf
//! mage-003), of which this module declares the entry `gelu_flat`; the
//! element's arithmetic, [`gelu_with`](crate::logistic::gelu_with()), in
//! [`crate::logistic`], shared with mage-002.
//!
//! What changed: mage-002's quads need `width % 4 == 0`, so every other
//! width runs mage-001: a thread an element, 4-byte accesses, a 32-bit
//! modulo an element for the bias column and an IEEE division in the
//! tanh. Here the quads are those of the flat run of `rows·width`
//! elements, not of a row: `4q..4q + 4` is 16-byte aligned wherever the
//! tensor is, so it is one 128-bit load and one 128-bit store even where
//! it straddles two rows; its four biases are scalar loads at columns
//! `c, c + 1, ...` wrapped at the width, the column carried from quad to
//! quad (two divisions a thread, none an element); the last `rows·width
//! mod 4` elements are scalar. The grid is mage-002's, a thread a quad (a
//! grid of one resident wave striding over the quads lost 5-10% to it at
//! three sweep shapes: try-gelu-stride, `docs/attempts.md`). The arithmetic is
//! mage-002's `z·σ(2u)` (no division), so at any width the output is
//! mage-002's bits for the same z; its error analysis (mage-002's doc)
//! holds unchanged. Where x or y is not 16-byte aligned every element is a
//! scalar access (`tests/flat.rs` runs both).
//!
//! Prediction (H200, CUPTI kernel time, hot L2), before any measurement.
//! At 1000x1001: 1,001,000 elements, 250,250 quads, 978 blocks (under the
//! 1056 that eight blocks an SM hold at once on 132 SMs: one wave), one
//! quad a thread; 8.0 MB moved. Against mage-001's
//! 3911 blocks (3.7 waves) of a thread an element, the instructions an
//! element fall from about 45 (a 20-instruction modulo, the division's
//! Newton steps, a load and a store each) to about 15 (mage-002's
//! element, three integer ops of the column, a quarter of a load and a
//! store): at 132 SMs × 128 lanes that is about 1.4 µs of issue against
//! 0.45. A line through the measured times of one-kernel GELUs,
//! torch.compile's 5.21 µs at 4096x768 (25.2 MB) and 3.10 at 1000x1001
//! (8.0 MB), has a slope of 0.123 µs/MB; through mage-002's 4.67 µs at
//! 4096x768 with that slope it starts at 1.57 µs. mage-003 at 1000x1001
//! moves mage-002's kind of accesses: 1.57 + 8.0 × 0.123 ≈ 2.55 µs, about
//! 0.65x mage-001's 3.89 and 0.82x torch.compile's 3.10
//! (`results/mage-012`). At widths that are a multiple of 4 it is
//! mage-002's grid and accesses but for the four scalar bias loads a quad
//! (from L1) in place of one vector load and a modulo: within a few
//! percent of mage-002 (4.67 µs at 4096x768, 128.27 at 16384x4096), which
//! keeps those shapes. The entry's 29 registers (`tests/resources.rs`)
//! let eight blocks share an SM.
//!
//! Measured (`results/backward-7`, CUPTI kernel time, hot L2, medians):
//! 2.88 µs at 1000x1001 against mage-001's 3.88 and torch.compile's 3.09,
//! judged FASTER than mage-001: `current` takes it where the width is not
//! a multiple of 4.

use crate::flat_quads::{Activation, flat_quads};
pub use crate::flat_quads::{THREADS, blocks};
use crate::logistic::gelu_with;
use mage_common::device::{ex2_approx, rsqrt_approx};

/// The tanh form as mage-002 computes it, for [`flat_quads`].
pub struct Logistic;

impl Activation for Logistic {
    #[inline(always)]
    fn y(z: f32) -> f32 {
        gelu_with(z, ex2_approx, rsqrt_approx)
    }
}

mage_common::kernel! {
    /// Quads of the flat run, then its scalar tail (see `flat_quads`).
    pub unsafe fn gelu_flat(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        unsafe { flat_quads::<Logistic>(x, bias, y, rows, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "the matrix as one flat run of 128-bit quads, any width, the bias column carried along; mage-002's z·σ(2u)",
    kernels: &[&gelu_flat::KERNEL],
    supports: |_| true,
    plan: |d| crate::flat_quads::plan(d, &gelu_flat::KERNEL),
};
