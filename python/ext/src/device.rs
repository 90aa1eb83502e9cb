//! The module's side of a device: the runtime's [`Context`] of `cuda:N`
//! (the same one `run` and `sweep` use), made current for each call.

use cudarc::driver::sys;
use mage_common::op::Plan;
use mage_runtime::gpu::{BoundPlan, Context};
use std::sync::Arc;

/// Bytes the eviction memset writes: the runtime's.
pub use mage_runtime::gpu::context::L2_FLUSH_BYTES as EVICT_BYTES;

/// Device `ordinal`'s context, current on this thread. An error names the
/// device the call's tensors are on (`cuda:1: no CUDA driver ...`).
fn context(ordinal: usize) -> Result<Arc<Context>, String> {
    let context = Context::of(ordinal).map_err(|e| if e.starts_with("device ") { e } else { format!("cuda:{ordinal}: {e}") })?;
    context.bind()?;
    Ok(context)
}

/// Opens `ordinal`'s primary context, once: an error where there is no
/// driver or no such device.
pub fn ready(ordinal: usize) -> Result<(), String> {
    context(ordinal).map(|_| ())
}

/// Binds a plan to device addresses, loading the op's PTX first if needed.
pub fn bind(ordinal: usize, package: &str, plan: &Plan, inputs: &[u64], outputs: &[u64], scratch: &[u64]) -> Result<BoundPlan, String> {
    let context = context(ordinal)?;
    context.ensure_module(package, || mage_runtime::ops::ptx(package))?;
    context.with_modules(|m| BoundPlan::bind(m, plan, inputs, outputs, scratch))
}

/// One call of a bound plan on `stream`.
pub fn launch(ordinal: usize, bound: &BoundPlan, stream: sys::CUstream) -> Result<(), String> {
    context(ordinal)?;
    // SAFETY: the `Call` that owns `bound` keeps every tensor it was bound
    // to alive; the stream is PyTorch's on this device's primary context.
    unsafe { bound.launch(stream) }
}

pub fn reset_persisting_l2(ordinal: usize) -> Result<(), String> {
    context(ordinal)?;
    // SAFETY: resets the current context's persisting lines.
    unsafe { sys::cuCtxResetPersistingL2Cache() }.result().map_err(|e| format!("cuCtxResetPersistingL2Cache: {:?}", e.0))
}

pub fn evict_l2(ordinal: usize, stream: sys::CUstream) -> Result<(), String> {
    context(ordinal)?.evict_l2(stream)
}

/// `words` 4-byte words at device address `ptr`, copied to the host.
pub fn copy_to_host(ordinal: usize, ptr: u64, words: usize) -> Result<Vec<u32>, String> {
    context(ordinal)?.copy_to_host(ptr, words)
}
