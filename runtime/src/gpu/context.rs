//! One device context per GPU of the process: its device number, its
//! primary context (the one PyTorch uses too), the op modules loaded into
//! it, the L2-eviction buffer, and copies between it and the host. [`Gpu`]
//! (`run`, `sweep`, `gpu-check`, `evolve`) and the Python module both take
//! theirs from [`Context::of`], so a device is opened, its PTX loaded and
//! its eviction buffer allocated once, whoever asks.
//!
//! [`Gpu`]: super::Gpu

use super::module::Modules;
use super::{cu, panic_text};
use cudarc::driver::{CudaContext, result, sys};
use std::panic::catch_unwind;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The oldest driver (as `cuDriverGetVersion` reports it) whose symbols the
/// CUDA 13.0 bindings call: `cuEventElapsedTime_v2` arrived in 12.8, and a
/// missing symbol would be a panic inside `cudarc`.
const MIN_DRIVER: i32 = 12080;

/// Bytes written to evict L2 (H200's L2 is 50 MiB).
pub const L2_FLUSH_BYTES: usize = 256 << 20;

/// One device's context and what lives in it.
pub struct Context {
    ordinal: usize,
    /// `cuDriverGetVersion`.
    pub(crate) driver_version: i32,
    modules: Mutex<Modules>,
    /// The eviction buffer, allocated at the first eviction.
    evict: OnceLock<sys::CUdeviceptr>,
    pub(crate) cuda: Arc<CudaContext>,
}

// SAFETY: the module handles are used under the lock, and every driver call
// on this context first makes it current on the calling thread (`bind`);
// the eviction buffer is a plain device address.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

/// Every context opened so far, by device number. Never closed: a primary
/// context lives as long as the process (PyTorch's does too).
static CONTEXTS: Mutex<Vec<Arc<Context>>> = Mutex::new(Vec::new());

impl Context {
    /// Device `ordinal`'s context, opened at the first call and the same
    /// one afterwards. Errors say where there is no driver, or no such
    /// device (the count is asked first: asking the driver for a device past
    /// it is an API error that compute-sanitizer reports).
    pub fn of(ordinal: usize) -> Result<Arc<Context>, String> {
        let mut open = CONTEXTS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = open.iter().find(|c| c.ordinal == ordinal) {
            return Ok(c.clone());
        }
        let count = device_count()?;
        if ordinal >= count {
            let names = if count == 1 {
                "1 CUDA device (cuda:0)".to_string()
            } else {
                format!("{count} CUDA devices (cuda:0 to cuda:{})", count - 1)
            };
            return Err(format!("device {ordinal} is past the device count: this machine has {names}"));
        }
        let (cuda, driver_version) = open_context(ordinal)?;
        let context = Arc::new(Context { ordinal, driver_version, modules: Mutex::default(), evict: OnceLock::new(), cuda });
        open.push(context.clone());
        Ok(context)
    }

    /// The device number (`cuda:N`).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Makes the context current on this thread (raw driver calls need it).
    pub fn bind(&self) -> Result<(), String> {
        self.cuda.bind_to_thread().map_err(|e| format!("binding the CUDA context of device {}: {:?}", self.ordinal, e.0))
    }

    /// Runs `f` on the loaded modules, with the context current.
    pub fn with_modules<T>(&self, f: impl FnOnce(&mut Modules) -> Result<T, String>) -> Result<T, String> {
        self.bind()?;
        f(&mut self.modules.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// JIT-compiles an op's PTX and keeps the module, replacing an earlier
    /// one of the same package.
    pub fn load_module(&self, package: &str, ptx: &str) -> Result<(), String> {
        self.with_modules(|m| m.load(package, ptx))
    }

    /// Loads an op's PTX unless it is loaded already.
    pub fn ensure_module(&self, package: &str, ptx: impl FnOnce() -> Result<&'static str, String>) -> Result<(), String> {
        self.with_modules(|m| if m.has(package) { Ok(()) } else { m.load(package, ptx()?) })
    }

    /// Enqueues on `stream` a memset of [`L2_FLUSH_BYTES`], so that L2
    /// holds none of what follows. A memset, not a kernel: kernel records
    /// never count it.
    pub fn evict_l2(&self, stream: sys::CUstream) -> Result<(), String> {
        self.bind()?;
        let ptr = match self.evict.get() {
            Some(p) => *p,
            None => {
                let mut p = 0;
                // SAFETY: allocates device memory, freed when the process ends.
                unsafe { sys::cuMemAlloc_v2(&mut p, L2_FLUSH_BYTES) }.result().map_err(cu("allocating the eviction buffer"))?;
                *self.evict.get_or_init(|| p)
            }
        };
        // SAFETY: the buffer holds L2_FLUSH_BYTES.
        unsafe { sys::cuMemsetD32Async(ptr, 0, L2_FLUSH_BYTES / 4, stream) }.result().map_err(cu("evicting L2"))
    }

    /// `words` 4-byte words at device address `ptr`, copied to the host
    /// (synchronously, after the work queued before it on the legacy
    /// stream).
    pub fn copy_to_host(&self, ptr: u64, words: usize) -> Result<Vec<u32>, String> {
        self.bind()?;
        let mut host = vec![0u32; words];
        if words > 0 {
            // SAFETY: the caller's buffer at `ptr` holds `words` 4-byte elements.
            unsafe { sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), ptr, words * 4) }.result().map_err(cu("copying to the host"))?;
        }
        Ok(host)
    }
}

/// How many devices the driver sees; an error where there is no driver.
pub fn device_count() -> Result<usize, String> {
    let no_gpu = |detail: String| format!("no CUDA driver or device: {detail}");
    // SAFETY: only tries to dlopen libcuda under its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(no_gpu("libcuda could not be loaded".into()));
    }
    let counted = catch_unwind(|| -> Result<usize, String> {
        result::init().map_err(cu("cuInit"))?;
        result::device::get_count().map(|n| n.max(0) as usize).map_err(cu("cuDeviceGetCount"))
    });
    match counted {
        Ok(r) => r.map_err(no_gpu),
        Err(panic) => Err(no_gpu(panic_text(panic))),
    }
}

/// Whether a CUDA driver is there and sees a device, without opening a
/// context (what a command checks before it waits for the GPU lock): the
/// error is the one [`Context::of`] gives.
pub fn driver_present() -> Result<(), String> {
    match device_count()? {
        0 => Err("no CUDA driver or device: the driver sees no device".into()),
        _ => Ok(()),
    }
}

/// Loads the CUDA driver and opens device `ordinal`'s primary context.
/// Without a driver or device the error says so; it never panics.
fn open_context(ordinal: usize) -> Result<(Arc<CudaContext>, i32), String> {
    let no_gpu = |detail: String| format!("no CUDA driver or device: {detail}");
    // SAFETY: only tries to dlopen libcuda under its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(no_gpu("libcuda could not be loaded".into()));
    }
    // cudarc panics on a missing driver symbol; make that an error too.
    let opened = catch_unwind(|| -> Result<(Arc<CudaContext>, i32), String> {
        result::init().map_err(cu("cuInit"))?;
        let mut version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(cu("cuDriverGetVersion"))?;
        if version < MIN_DRIVER {
            return Err(format!(
                "the driver supports CUDA {}; the runner needs {} or newer",
                version_text(version),
                version_text(MIN_DRIVER)
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(cu("opening the device"))?;
        // One stream per user of the context, so cudarc's per-buffer events
        // would only add work. SAFETY: no buffer is shared between streams.
        unsafe { ctx.disable_event_tracking() };
        Ok((ctx, version))
    });
    match opened {
        Ok(r) => r.map_err(no_gpu),
        Err(panic) => Err(no_gpu(panic_text(panic))),
    }
}

/// `13000` -> `13.0`.
pub(crate) fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, v % 1000 / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_read_as_cuda_versions() {
        assert_eq!(version_text(13000), "13.0");
        assert_eq!(version_text(12080), "12.8");
    }

    #[test]
    fn without_a_driver_every_device_is_an_error_not_a_panic() {
        // SAFETY: only probes for libcuda.
        if unsafe { sys::is_culib_present() } {
            return; // a machine with a driver: the GPU checks cover it
        }
        for ordinal in [0, 3] {
            let e = Context::of(ordinal).err().expect("no driver, yet a context opened");
            assert_eq!(e, "no CUDA driver or device: libcuda could not be loaded");
        }
        assert!(CONTEXTS.lock().unwrap().is_empty());
    }
}
