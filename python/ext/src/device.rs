//! Per-device state of the module: the primary context (PyTorch's), the
//! op modules loaded into it, and the L2 eviction buffer.

use cudarc::driver::{CudaContext, sys};
use mage_common::op::Plan;
use mage_runtime::gpu::{BoundPlan, Modules};
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes the eviction memset writes: the runtime's.
pub use mage_runtime::gpu::buffer::L2_FLUSH_BYTES as EVICT_BYTES;

struct Device {
    // Drop order: modules before the context.
    modules: Modules,
    evict: Option<sys::CUdeviceptr>,
    ctx: Arc<CudaContext>,
}

// SAFETY: the handles are used only with the context bound to the calling
// thread, under the lock.
unsafe impl Send for Device {}

static DEVICES: Mutex<Vec<(usize, Device)>> = Mutex::new(Vec::new());

/// Runs `f` with `ordinal`'s primary context opened (once) and current.
fn with_device<T>(ordinal: usize, f: impl FnOnce(&mut Device) -> Result<T, String>) -> Result<T, String> {
    let mut devices = DEVICES.lock().unwrap_or_else(PoisonError::into_inner);
    if !devices.iter().any(|(o, _)| *o == ordinal) {
        // The count first: asking the driver for a device past it is an API
        // error that compute-sanitizer reports, even when it is refused here.
        if let Some(e) = past_the_count(ordinal) {
            return Err(e);
        }
        let (ctx, _) = mage_runtime::gpu::device::open_context(ordinal)?;
        devices.push((ordinal, Device { modules: Modules::default(), evict: None, ctx }));
    }
    let device = &mut devices.iter_mut().find(|(o, _)| *o == ordinal).expect("just added").1;
    device.ctx.bind_to_thread().map_err(|e| format!("binding the CUDA context of device {ordinal}: {:?}", e.0))?;
    f(device)
}

/// Where opening `ordinal` failed because the machine has fewer devices,
/// a message saying so (the driver's own is `CUDA_ERROR_INVALID_DEVICE`).
fn past_the_count(ordinal: usize) -> Option<String> {
    // SAFETY: only tries to dlopen libcuda under its usual names.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    let count = std::panic::catch_unwind(|| {
        cudarc::driver::result::init()?;
        CudaContext::device_count()
    })
    .ok()?
    .ok()?;
    let count = usize::try_from(count).ok().filter(|&c| c > 0 && ordinal >= c)?;
    let names =
        if count == 1 { "1 CUDA device (cuda:0)".to_string() } else { format!("{count} CUDA devices (cuda:0 to cuda:{})", count - 1) };
    Some(format!("device {ordinal} is past the device count: this machine has {names}"))
}

/// Opens `ordinal`'s primary context, once: an error where there is no
/// driver or no such device.
pub fn ready(ordinal: usize) -> Result<(), String> {
    with_device(ordinal, |_| Ok(()))
}

/// Binds a plan to device addresses, loading the op's PTX first if needed.
pub fn bind(ordinal: usize, package: &str, plan: &Plan, inputs: &[u64], output: u64, scratch: &[u64]) -> Result<BoundPlan, String> {
    with_device(ordinal, |d| {
        if !d.modules.has(package) {
            d.modules.load(package, mage_runtime::ops::ptx(package)?)?;
        }
        BoundPlan::bind(&d.modules, plan, inputs, output, scratch)
    })
}

/// One call of a bound plan on `stream`.
pub fn launch(ordinal: usize, bound: &BoundPlan, stream: sys::CUstream) -> Result<(), String> {
    // SAFETY: the `Call` that owns `bound` keeps every tensor it was bound
    // to alive; the stream is PyTorch's on this device's primary context.
    with_device(ordinal, |_| unsafe { bound.launch(stream) })
}

pub fn reset_persisting_l2(ordinal: usize) -> Result<(), String> {
    // SAFETY: resets the current context's persisting lines.
    with_device(ordinal, |_| {
        unsafe { sys::cuCtxResetPersistingL2Cache() }.result().map_err(|e| format!("cuCtxResetPersistingL2Cache: {:?}", e.0))
    })
}

pub fn evict_l2(ordinal: usize, stream: sys::CUstream) -> Result<(), String> {
    with_device(ordinal, |d| {
        let ptr = match d.evict {
            Some(p) => p,
            None => {
                let mut p = 0;
                // SAFETY: allocates device memory kept for the process.
                unsafe { sys::cuMemAlloc_v2(&mut p, EVICT_BYTES) }
                    .result()
                    .map_err(|e| format!("allocating the eviction buffer: {:?}", e.0))?;
                d.evict = Some(p);
                p
            }
        };
        // SAFETY: the buffer holds EVICT_BYTES.
        unsafe { sys::cuMemsetD32Async(ptr, 0, EVICT_BYTES / 4, stream) }.result().map_err(|e| format!("evicting L2: {:?}", e.0))
    })
}

/// `words` 4-byte words at device address `ptr`, copied to the host.
pub fn copy_to_host(ordinal: usize, ptr: u64, words: usize) -> Result<Vec<u32>, String> {
    with_device(ordinal, |_| {
        let mut host = vec![0u32; words];
        if words > 0 {
            // SAFETY: the tensor at `ptr` holds `words` 4-byte elements.
            unsafe { sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), ptr, words * 4) }
                .result()
                .map_err(|e| format!("copying an input to the host: {:?}", e.0))?;
        }
        Ok(host)
    })
}
