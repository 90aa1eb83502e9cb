//! try-gelu-stream (candidate): try-gelu-stride with streaming cache hints
//! on x and y.
//!
//! The same body, grid and plan as try-gelu-stride; x is read with
//! `ld.global.nc.L1::no_allocate.L2::256B` and y written with
//! `st.global.cs` (evict first), the bias keeps plain cached loads.
//! Measured beside try-gelu-stride in one sweep, the difference is the
//! hints' effect alone.
//!
//! Prediction: at 16384x4096 (512 MiB, DRAM-bound) 1 to 2% below
//! try-gelu-stride, from whole 256-byte DRAM fetches and y's lines leaving
//! L2 first: about 125 µs. At 4096x768 (25 MB, resident in the 50 MB L2)
//! no difference expected. In a pipeline, evict-first on y may cost the
//! kernel that reads it next.
//!
//! Not yet measured on the GPU.

use mage_common::device::Streamed;

mage_common::kernel! {
    /// One wave of blocks; `width` a multiple of 4.
    pub unsafe fn gelu_stride_streamed(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        unsafe { crate::gelu_stride::<Streamed>(x, bias, y, rows, width) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-gelu-stream",
    summary: "try-gelu-stride with x read L1::no_allocate.L2::256B and y written st.global.cs",
    kernels: &[&gelu_stride_streamed::KERNEL],
    supports: crate::supports_quads,
    plan: |d| crate::stride_plan_within(&gelu_stride_streamed::KERNEL, d, crate::SMS * crate::RESIDENT_BLOCKS),
};
