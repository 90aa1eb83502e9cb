//! gelu_erf mage-003: the matrix as one flat run of quads, any width;
//! mage-001's arithmetic.
//!
//! Kernel body: [`crate::flat_quads`] (`flat_quads`, shared with gelu
//! mage-003), of which this module declares the entry `gelu_erf_flat`; Φ
//! in [`super::normal_cdf`], shared with mage-001 and mage-002.
//!
//! What changed: as gelu's mage-003 did for the tanh form. mage-002's
//! quads need `width % 4 == 0`, so every other width runs mage-001 (a
//! thread an element, 4-byte accesses, a 32-bit modulo an element); here
//! the quads are those of the flat run of `rows·width` elements, 16-byte
//! loads and stores even where a quad straddles two rows, four scalar
//! biases a quad at columns carried from quad to quad, a scalar tail, a
//! grid of a thread a quad. The arithmetic is mage-001's
//! `z·Φ(z)`, bit for bit, at any width.
//!
//! Prediction (H200, CUPTI kernel time, hot L2), before any measurement.
//! At 1000x1001 the accesses are gelu mage-003's (978 blocks, a quad a
//! thread, 8.0 MB, about 2.55 µs predicted there), and the element is
//! about three times as long: the fit's ten FMAs, its exponent in two
//! parts, two `ex2.approx` and an IEEE division, about 45 instructions.
//! At 132 SMs × 128 lanes, 1,001,000 × 45 is about 1.35 µs of issue; the
//! measured gap between this op's mage-002 and gelu's at 4096x768 (7.09
//! against 4.67 µs for 3.1 M elements, `results/backward-3` and
//! `results/mage-012`) scales to +0.8 µs at 1 M. So about 2.55 + 0.8 ≈ 3.3
//! µs, 0.75x mage-001's 4.45, and about 1.1x torch.compile's 2.91 (whose
//! erf is shorter): this stage closes most of the gap to mage-001 but,
//! by this estimate, not the one to torch.compile; the element's
//! division (not the accesses) is then what is left.
//!
//! The entry's 32 registers (`tests/resources.rs`) let eight blocks share
//! an SM, so the 978 blocks at 1000x1001 are one wave.
//!
//! Measured (`results/backward-7`, CUPTI kernel time, hot L2, medians):
//! 3.65 µs at 1000x1001 against mage-001's 4.43 and torch.compile's 2.90:
//! FASTER than mage-001 (`current` takes it where the width is not a
//! multiple of 4), and as estimated still behind torch.compile.

use super::normal_cdf::normal_cdf_with;
use crate::flat_quads::{Activation, flat_quads};
pub use crate::flat_quads::{THREADS, blocks};
use mage_common::device::ex2_approx;

/// The exact GELU as mage-001 computes it, for [`flat_quads`].
pub struct Exact;

impl Activation for Exact {
    #[inline(always)]
    fn y(z: f32) -> f32 {
        z * normal_cdf_with(z, ex2_approx).0
    }
}

mage_common::kernel! {
    /// Quads of the flat run, then its scalar tail (see `flat_quads`).
    pub unsafe fn gelu_erf_flat(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        unsafe { flat_quads::<Exact>(x, bias, y, rows, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-003",
    summary: "the matrix as one flat run of 128-bit quads, any width, the bias column carried along; mage-001's z·Φ(z)",
    kernels: &[&gelu_erf_flat::KERNEL],
    supports: |_| true,
    plan: |d| crate::flat_quads::plan(d, &gelu_erf_flat::KERNEL),
};
