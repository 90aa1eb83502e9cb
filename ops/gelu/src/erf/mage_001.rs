//! gelu_erf mage-001: one fused kernel, one element per thread, Φ from
//! [`normal_cdf`](super::normal_cdf).
//!
//! Kernel body: this module (`gelu_erf_scalar`); Φ in
//! [`super::normal_cdf`], shared with mage-002.
//!
//! The plain form: thread `i` of a flat grid reads `x[i]` and its column's
//! bias, and writes `z·Φ(z)`. Any width. Its error is Φ's (at most 1.1e-6
//! relative, see [`super::normal_cdf`]) and one rounding of the product:
//! within 1.2e-6·|y|, held by the op's tolerance with a margin of about 80.
//!
//! Measured (`results/backward-3`, one H200, CUPTI kernel time, hot L2;
//! every stage at the default dims, `current` at the sweep shapes; the
//! verdicts against PyTorch are in its `comparison.md`):
//!
//! <!-- mage:table compare results/backward-3/comparison.json ops=gelu_erf -->
//! | op | workload | Mage current | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|
//! | gelu_erf | 4096x768 | **7.09** mage-002 | 15.06 (2) | 7.47 | 13.75 | 0.52 |
//! | gelu_erf | 8192x768 | **15.14** mage-002 | 32.70 (2) | 16.03 | 16.40 | 0.92 |
//! | gelu_erf | 4096x3072 | 29.08 mage-002 | 64.00 (2) | **25.38** | 29.56 | 0.98 |
//! | gelu_erf | 16384x4096 | 145.35 mage-002 | 325.07 (2) | **127.08** | 129.34 | 1.12 |
//! | gelu_erf | 1000x1001 | 4.45 mage-001 | 6.51 (2) | **2.91** | 9.95 | 0.45 |
//! <!-- /mage:table -->
//!
//! Predicted: a memory-bound stream of 8
//! bytes per element like gelu's mage-001 (its tanh form at 4096x768:
//! 7.6 µs), with about twice the arithmetic per element (two `ex2.approx`,
//! a division, ten FMAs of the fit) still under the memory time.

use super::normal_cdf::normal_cdf_with;
use mage_common::device::*;

pub const THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `i` of the flat grid writes element `i`.
    pub unsafe fn gelu_erf_scalar(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        let i = block_idx_x() * THREADS + thread_idx_x();
        if i < rows * width {
            unsafe {
                // SAFETY: i < rows·width, so width > 0 (drops the division-by-zero check).
                core::hint::assert_unchecked(width > 0);
                let z = ld_nc(x, i) + ld_nc(bias, i % width);
                st(y, i, z * normal_cdf_with(z, ex2_approx).0);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "one fused kernel, one element per thread, Φ from an erfc fit with a two-part exponent",
    kernels: &[&gelu_erf_scalar::KERNEL],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &gelu_erf_scalar::KERNEL,
            grid: Dim3::x((d[0] * d[1]).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
