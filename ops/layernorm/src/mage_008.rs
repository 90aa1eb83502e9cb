//! mage-008: mage-006's held row in wider blocks, for rows up to 4096.
//!
//! Kernel body: [`crate::row_held`] (shared with mage-006; frozen: ptxas
//! resources pinned by `tests/resources.rs`).
//!
//! mage-006 covers rows of up to 1024 (128 threads, two quads each); wider
//! rows fell back to the two-warp mage-003, which reads a row's quads in
//! 32-lane steps and merges Chan moments with a division per quad. Here the
//! block grows with the row (256 threads up to 2048, 512 up to 4096), each
//! thread still holding two quads, so the row is read once and reduced with
//! two butterflies and one barrier whatever its width.
//!
//! Measured: faster than mage-003 at 1024x2048; on 4096-wide rows it does
//! not pay against mage-001: two quads per thread leave too few loads in
//! flight there. GPU kernel time per call (CUPTI) and event span, hot L2:
//!
//! <!-- mage:table stage results/candidates-1/sweep-layernorm.json stage=mage-008 -->
//! | shape | kernel µs | span µs |
//! |---|---|---|
//! | 4096x768 | 14.17 | 20.32 |
//! | 8192x768 | 27.89 | 33.60 |
//! | 1024x2048 | 5.46 | 11.98 |
//! | 4096x4096 | 53.19 | 58.64 |
//! | 16384x4096 | 200.13 | 200.96 |
//! <!-- /mage:table -->

use crate::row_held::row_held;

mage_common::kernel! {
    /// Rows of up to 2048: 256 threads, 64 bytes of shared memory.
    pub unsafe fn layernorm_row_256(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
        let _ = rows;
        unsafe { row_held::<256>(x, gamma, beta, y, width, eps) }
    }
}

mage_common::kernel! {
    /// Rows of up to 4096: 512 threads, 128 bytes of shared memory.
    pub unsafe fn layernorm_row_512(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
        let _ = rows;
        unsafe { row_held::<512>(x, gamma, beta, y, width, eps) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    d[1] % 4 == 0 && d[1] <= 4096
}

#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32]) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    let (kernel, threads): (&'static mage_common::Kernel, u32) =
        if d[1] <= 2048 { (&layernorm_row_256::KERNEL, 256) } else { (&layernorm_row_512::KERNEL, 512) };
    mage_common::op::Launch {
        kernel,
        grid: Dim3::x(d[0]),
        block: Dim3::x(threads),
        shared_bytes: threads / 32 * 8,
        cluster: Dim3::ONE,
        args: crate::args(d[0], d[1]),
    }
    .into()
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-008",
    summary: "block per row (256 or 512 threads), two held quads per thread, rows up to 4096",
    kernels: &[&layernorm_row_256::KERNEL, &layernorm_row_512::KERNEL],
    supports,
    plan,
};
