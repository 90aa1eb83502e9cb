//! gelu_erf mage-002: one 128-bit quad per thread.
//!
//! Kernel body: this module (`gelu_erf_quad`); Φ in
//! [`super::normal_cdf`], shared with mage-001.
//!
//! What changed: as gelu's mage-002 did for the tanh form, each thread
//! loads four `x` and their four biases with one `ld.global.nc.v4.f32`
//! each and stores four results with one `st.global.v4.f32`: a quarter of
//! the memory instructions and index arithmetic for the same bytes. Needs
//! `width % 4 == 0` (the dispatcher falls back to mage-001 otherwise). The
//! arithmetic is mage-001's, bit for bit.
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
//! Predicted: near the device copy rate at
//! large shapes, as the tanh form's mage-002 (128.27 µs at 16384x4096).

use super::normal_cdf::normal_cdf_with;
use mage_common::device::*;

pub const THREADS: u32 = 256;

mage_common::kernel! {
    /// Thread `q` of the flat grid writes quad `q` (elements `4q..4q + 4`);
    /// `width` must be a multiple of 4.
    pub unsafe fn gelu_erf_quad(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        let q = block_idx_x() * THREADS + thread_idx_x();
        let i = 4 * q;
        if i < rows * width {
            unsafe {
                // SAFETY: i < rows·width, so width > 0 (drops the division-by-zero check).
                core::hint::assert_unchecked(width > 0);
                let z = ld_nc4(x, i).zip(ld_nc4(bias, i % width), |x, b| x + b);
                st4(y, i, z.map(|z| z * normal_cdf_with(z, ex2_approx).0));
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
    summary: "one 128-bit quad per thread, mage-001's arithmetic",
    kernels: &[&gelu_erf_quad::KERNEL],
    supports,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &gelu_erf_quad::KERNEL,
            grid: Dim3::x((d[0] * d[1] / 4).div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
