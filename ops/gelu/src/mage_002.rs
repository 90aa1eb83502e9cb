//! mage-002: one 128-bit quad per thread, `gelu(z) = z·σ(2u)` without a division.
//!
//! Kernel body: this module (`gelu_quad`); its arithmetic, [`gelu_with`],
//! in [`crate::logistic`] (shared with mage-003), whose constants are the
//! negated [`A0`](crate::A0) and [`A1`](crate::A1) of the crate root,
//! shared with mage-001.
//!
//! What changed, and why it should help:
//!
//! * **Quads.** Each thread loads four consecutive `x` with one
//!   `ld.global.nc.v4.f32`, the matching four biases with another, and
//!   stores four outputs with one `st.global.v4.f32`. The kernel streams
//!   8 bytes per element and does little else, so it is bound by memory
//!   traffic and by how many requests are in flight: a quarter of the load
//!   and store instructions (and of the index arithmetic, including the
//!   integer modulo for the bias column, now once per quad) for the same
//!   bytes, with each request four times larger. Needs `width % 4 == 0`
//!   (so a quad never straddles two rows and the bias quad is aligned);
//!   [`current`](crate::current) falls back to mage-001 otherwise.
//! * **No division.** `0.5·z·(1 + tanh u) = z/(1 + e^{−2u}) = z·σ(2u)`,
//!   and the reciprocal is `rsqrt.approx(d)²`: two multi-function-unit
//!   instructions (`ex2`, `rsqrt`) and a handful of FMA-pipe ones, where
//!   mage-001's IEEE `div.rn.f32` expands to a Newton sequence with a
//!   slow-path branch. The form also has no cancellation at all: every
//!   step is a product or a sum of positive numbers. In a memory-bound
//!   kernel this mostly buys headroom (more warps per SM can stay busy on
//!   loads), not time on its own.
//!
//! ```text
//! s = z·fma(B1, z², B0)      = −2u·log2(e)
//! d = 1 + ex2.approx(s)      = 1 + e^{−2u}
//! r = rsqrt.approx(d)
//! y = z·(r·r)
//! ```
//!
//! Large |u|: z ≫ 0 gives `ex2 → 0`, d = 1, y = z·(1 ± 3e-7); z ≪ 0 gives
//! d = +∞, `rsqrt(+∞) = 0`, y = −0; `z²` or `z³` overflowing takes the same
//! paths. NaN propagates.
//!
//! # Error analysis (u₂₄ = 2^-24 ≈ 6e-8)
//!
//! 1. `e^{−2u}`: relative error ε ≤ 2^-22 (`ex2.approx`) + ln2·|s|·3e-7 (the
//!    five roundings in `s`), i.e. ε ≤ 2.4e-7 + 6e-7·|u|.
//! 2. `d = 1 + E`: relative error ≤ ε·E/(1 + E) + u₂₄.
//! 3. `r·r`: `rsqrt.approx` is within 2^-22.9 = 1.3e-7, squared 2.6e-7, plus
//!    one rounding: σ has relative error ≤ ε·E/(1 + E) + 4e-7.
//! 4. `y = z·σ`: one more rounding; `z = x + bias` rounded in f32 moves y by
//!    a relative (1 + 6|u|(1 − σ))·u₂₄.
//!
//! For z ≥ 0 the weights E/(1 + E) and 1 − σ are at most 1/2 and vanish as
//! z grows: relative error ≤ 1e-6. For z < 0 the relative error grows like
//! 7e-7 + 1e-6·|u|, but |y| = |z|·σ(2u) shrinks like |z|·e^{−2|u|}, so the
//! absolute error stays below 2e-7 (at z ≈ −1.5) and vanishes beyond. The
//! tolerance 1e-4·|ref| + 2e-5·|z| holds with a margin of about 100. The GPU
//! and the emulator differ only through `ex2.approx` and `rsqrt.approx`:
//! at most about 5e-7·|y|.
//!
//! Measured: about half of mage-001's time at every shape, with a quarter
//! of the threads and instructions per byte; at 16384x4096 it runs near the
//! device copy rate. GPU kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-gelu.json stage=mage-002 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 4.62 | 11.04 |
//! | 8192x768 | 12.37 | 18.27 |
//! | 4096x3072 | 25.58 | 29.60 |
//! | 16384x4096 | 128.27 | 131.84 |
//! <!-- /mage:table -->

use mage_common::device::*;

pub use crate::logistic::{B0, B1, gelu_with};

pub const THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `q` of the flat grid writes quad `q` (elements `4q..4q + 4`);
    /// `width` must be a multiple of 4.
    pub unsafe fn gelu_quad(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        let q = block_idx_x() * THREADS + thread_idx_x();
        let i = 4 * q;
        if i < rows * width {
            unsafe {
                // SAFETY: i < rows·width, so width > 0 (drops the division-by-zero check).
                core::hint::assert_unchecked(width > 0);
                let z = ld_nc4(x, i).zip(ld_nc4(bias, i % width), |x, b| x + b);
                st4(y, i, z.map(|z| gelu_with(z, ex2_approx, rsqrt_approx)));
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1].is_multiple_of(4)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-002",
    summary: "one 128-bit quad per thread, z·σ(2u) with σ = rsqrt.approx(1 + e^-2u)², no division",
    kernels: &[&gelu_quad::KERNEL],
    supports,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &gelu_quad::KERNEL,
            grid: Dim3::x((d[0] * d[1] / 4).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
