//! try-gelu-stride (candidate): one resident wave of blocks striding over
//! the quads, two in flight per thread, one modulo per thread.
//!
//! mage-002 launches a block per 256 quads (3072 at 4096x768, 2.9 waves:
//! blocks start and retire all through the kernel, and the last wave is
//! nine tenths full) and computes each quad's bias column with an integer
//! modulo. Here the grid is one wave of the H200 (132 SMs × 8 blocks =
//! 1056) and thread `g` of the grid's `G` takes quads `g`, `g + G`, ...,
//! two per step with both loads issued first
//! ([`gelu_stride`](crate::gelu_stride)): every SM gets the same number of
//! quads (give or take one per thread), no block is launched after the
//! first wave, and the column advances by the constant `4G mod width`, one
//! modulo per thread. The arithmetic is mage-002's.
//!
//! Prediction (31 registers in the snapshot): at 4096x768 each thread takes
//! 2 or 3 quads, 64 KiB of x in flight per SM, no tail wave: 4.62 → about
//! 4.4 µs. At 16384x4096, 62 or 63 quads per thread in 32 steps: 128.4 →
//! about 127 µs (the copy's rate; the target is within 3% of it, cold).
//!
//! Not yet measured on the GPU.

use mage_common::device::Cached;

mage_common::kernel! {
    /// One wave of blocks; `width` a multiple of 4.
    pub unsafe fn gelu_stride_cached(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        unsafe { crate::gelu_stride::<Cached>(x, bias, y, rows, width) }
    }
}

/// The plan with at most `max_blocks` blocks (tests use a few, so that each
/// thread walks many quads and the column wraps).
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan_within(d: &[u32], max_blocks: u32) -> mage_common::op::Plan {
    crate::stride_plan_within(&gelu_stride_cached::KERNEL, d, max_blocks)
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-gelu-stride",
    summary: "one resident wave of 256-thread blocks striding over quads, two in flight per thread",
    kernels: &[&gelu_stride_cached::KERNEL],
    supports: crate::supports_quads,
    plan: |d| plan_within(d, crate::SMS * crate::RESIDENT_BLOCKS),
};
