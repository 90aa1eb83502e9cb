//! try-gelu-pair (candidate): two quads per thread, both loads issued
//! before any math.
//!
//! mage-002 gives a thread one quad: one 128-bit load of x in flight, then
//! the arithmetic, then the store, and 3072 blocks at 4096x768 (2.9 waves
//! of the 1056 that fit on 132 SMs at eight 256-thread blocks each). Here
//! thread `t` of block `b` takes quads `2·256·b + t` and `2·256·b + 256 + t`
//! (each warp's accesses stay 512 contiguous bytes), loads both x quads and
//! both bias quads before computing either, then stores both
//! ([`gelu_quads`](crate::gelu_quads)): twice the bytes in flight per thread
//! for the same occupancy, half the blocks. The arithmetic is mage-002's.
//!
//! Prediction (28 registers in the snapshot, still eight blocks per SM):
//! 64 KiB of x in flight per SM instead of 32 KiB, 1536 blocks at
//! 4096x768: 4.62 → about 4.45 µs. At 16384x4096 (DRAM-bound, mage-002
//! already at 4.2 TB/s) no change beyond a percent.
//!
//! Not yet measured on the GPU.

use crate::THREADS;
use mage_common::device::*;

mage_common::kernel! {
    /// Block `b` writes quads `512 b .. 512 b + 512`; `width` a multiple of 4.
    pub unsafe fn gelu_pair(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        let quads = rows * width / 4;
        let q = block_idx_x() * 2 * THREADS + thread_idx_x();
        unsafe {
            // SAFETY: the grid is empty unless quads > 0, so width > 0.
            core::hint::assert_unchecked(width > 0);
            if q + THREADS < quads {
                crate::gelu_quads::<2, Cached>(x, bias, y, [q, q + THREADS], [4 * q % width, 4 * (q + THREADS) % width]);
            } else if q < quads {
                crate::gelu_quads::<1, Cached>(x, bias, y, [q], [4 * q % width]);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-gelu-pair",
    summary: "two 128-bit quads per thread, both loads issued before any math",
    kernels: &[&gelu_pair::KERNEL],
    supports: crate::supports_quads,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &gelu_pair::KERNEL,
            grid: Dim3::x((d[0] * d[1] / 4).div_ceil(2 * THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
