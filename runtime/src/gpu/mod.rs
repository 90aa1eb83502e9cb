//! The GPU runner: loads op PTX through the CUDA driver (loaded at run time
//! by `cudarc`), runs a stage's [`Plan`](mage_common::op::Plan) on device
//! buffers and times it.
//!
//! | module | concern |
//! |---|---|
//! | [`context`] | one context per device: opening it, its loaded modules, the L2-eviction buffer, copies to the host |
//! | [`device`] | [`Gpu`]: a device opened for the runner, what it is, its clocks (read only) |
//! | [`module`] | JIT-loading PTX, finding kernel entries, the shared-memory opt-in |
//! | [`buffer`] | device buffers: inputs, poisoned outputs and scratch |
//! | [`bind`] | a plan bound to device addresses ([`BoundPlan`]), and launching it on a stream |
//! | [`timing`] | event spans and back-to-back spans in rounds |
//! | [`cupti`] | CUPTI kernel activity records: GPU kernel time per call |
//!
//! [`Gpu::run`] is the correctness path: the output and every scratch buffer
//! are filled with [`OUTPUT_POISON`](mage_common::op::OUTPUT_POISON) (a NaN),
//! the plan's launches run in order, and the output comes back, so an
//! element no kernel wrote is NaN. [`Gpu::time`] measures one *call* (every
//! launch of the plan once, into a preallocated output) with the three
//! instruments of [`timing`] and [`cupti`].
//!
//! Nothing here changes clocks or device settings. The only per-kernel
//! attribute set is the opt-in to more than 48 KiB of dynamic shared memory
//! that a launch asking for it requires.

pub mod bind;
pub mod buffer;
pub mod context;
pub mod cupti;
pub mod device;
pub mod module;
pub mod timing;

pub use bind::{BoundPlan, Prepared};
pub use buffer::{DeviceBuf, DeviceInputs};
pub use context::Context;
pub use cupti::KernelTimes;
pub use device::{Clocks, DeviceInfo, Gpu};
pub use module::Modules;
pub use timing::{BackToBack, Span, Timing, TimingConfig};

use cudarc::driver::DriverError;

/// A driver error as a message: `what: CUDA_ERROR_...`.
pub(crate) fn cu(what: &'static str) -> impl Fn(DriverError) -> String {
    move |e| format!("{what}: {:?}", e.0)
}

/// The text of a panic caught at the edge of a `cudarc` call.
pub(crate) fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(s) => *s,
        Err(panic) => panic.downcast_ref::<&str>().map_or("a panic inside cudarc", |s| s).to_string(),
    }
}
