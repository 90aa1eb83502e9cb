//! A device opened for `run`, `sweep` and `gpu-check`: what it is, and its
//! clocks (read, never set).

use super::context::{Context, version_text};
use super::cu;
use super::module::Modules;
use cudarc::driver::{CudaContext, CudaStream, DriverError, result, sys};
use serde::Serialize;
use std::process::Command;
use std::sync::Arc;

/// One open device, its [`Context`] (with the op modules loaded into it),
/// and one stream (the legacy default stream).
pub struct Gpu {
    pub(crate) context: Arc<Context>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) info: DeviceInfo,
}

/// What the device is.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    pub name: String,
    /// `GPU-xxxxxxxx-...`, as nvidia-smi prints it.
    pub uuid: String,
    /// (major, minor): (9, 0) on Hopper.
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    /// The newest CUDA the driver supports (`cuDriverGetVersion`), e.g. `13.0`.
    pub driver_version: String,
    pub l2_bytes: i32,
}

/// Clocks and performance state as nvidia-smi reports them right now; every
/// field is `None` where nvidia-smi is absent or fails, with `note` saying why.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Clocks {
    pub sm_mhz: Option<u32>,
    pub mem_mhz: Option<u32>,
    pub pstate: Option<String>,
    pub name: Option<String>,
    /// The kernel driver's version (`580.65.06`), not the CUDA version.
    pub driver_version: Option<String>,
    pub note: Option<String>,
}

pub use super::context::driver_present;

impl Gpu {
    /// Opens device `ordinal` (`cuda:N`) through its [`Context`]. Without a
    /// driver or device the error says so; it never panics.
    pub fn open(ordinal: usize) -> Result<Gpu, String> {
        let context = Context::of(ordinal)?;
        context.bind()?;
        let info = device_info(&context.cuda, context.driver_version).map_err(|e| format!("querying device {ordinal}: {:?}", e.0))?;
        // The legacy default stream: no stream is ever created, so no
        // buffer records or waits on events.
        let stream = context.cuda.default_stream();
        Ok(Gpu { context, stream, info })
    }

    /// The device's context.
    pub fn context(&self) -> &Arc<Context> {
        &self.context
    }

    pub fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    /// Current SM/memory clocks and pstate of this device from nvidia-smi
    /// (read only; clocks are never set).
    pub fn clocks(&self) -> Clocks {
        let query = "--query-gpu=clocks.sm,clocks.mem,pstate,name,driver_version";
        let id = format!("--id={}", self.info.uuid);
        let out = match Command::new("nvidia-smi").args([query, "--format=csv,noheader,nounits", &id]).output() {
            Ok(out) => out,
            Err(e) => return Clocks { note: Some(format!("nvidia-smi did not run: {e}")), ..Clocks::default() },
        };
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("").to_string();
            return Clocks { note: Some(format!("nvidia-smi failed ({}): {why}", out.status)), ..Clocks::default() };
        }
        parse_clocks(&String::from_utf8_lossy(&out.stdout))
    }

    /// JIT-compiles an op's PTX and keeps the module, replacing an earlier
    /// one of the same package. ptxas' error log ends up in the error.
    pub fn load_module(&mut self, package: &str, ptx: &str) -> Result<(), String> {
        self.context.load_module(package, ptx)
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`), so that a
    /// command can refuse work that would not fit before allocating any.
    pub fn memory(&self) -> Result<(u64, u64), String> {
        self.bind()?;
        let (free, total) = result::mem_get_info().map_err(cu("cuMemGetInfo"))?;
        Ok((free as u64, total as u64))
    }

    /// Runs `f` on the modules loaded so far.
    pub fn with_modules<T>(&self, f: impl FnOnce(&mut Modules) -> Result<T, String>) -> Result<T, String> {
        self.context.with_modules(f)
    }

    /// Makes the context current on this thread (raw driver calls need it).
    pub(crate) fn bind(&self) -> Result<(), String> {
        self.context.bind()
    }

    pub(crate) fn sync(&self, what: &str) -> Result<(), String> {
        self.stream.synchronize().map_err(|e| format!("{what}: {:?}", e.0))
    }
}

fn device_info(ctx: &CudaContext, driver: i32) -> Result<DeviceInfo, DriverError> {
    use sys::CUdevice_attribute::{CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT};
    Ok(DeviceInfo {
        name: ctx.name()?,
        uuid: uuid_text(&ctx.uuid()?),
        compute_capability: ctx.compute_capability()?,
        sm_count: ctx.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        driver_version: version_text(driver),
        l2_bytes: ctx.attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
    })
}

/// nvidia-smi's spelling of a device UUID: `GPU-` and 8-4-4-4-12 hex digits.
fn uuid_text(uuid: &sys::CUuuid) -> String {
    let hex = |r: std::ops::Range<usize>| uuid.bytes[r].iter().map(|&b| format!("{:02x}", b as u8)).collect::<String>();
    format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}

/// Parses one line of `clocks.sm,clocks.mem,pstate,name,driver_version` in
/// csv,noheader,nounits form; `[N/A]` and unparsable fields become `None`.
pub(crate) fn parse_clocks(text: &str) -> Clocks {
    let line = text.lines().next().unwrap_or("");
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    let field = |i: usize| fields.get(i).copied().filter(|f| !f.is_empty() && !f.starts_with('['));
    Clocks {
        sm_mhz: field(0).and_then(|f| f.parse().ok()),
        mem_mhz: field(1).and_then(|f| f.parse().ok()),
        pstate: field(2).map(str::to_string),
        name: field(3).map(str::to_string),
        driver_version: field(4).map(str::to_string),
        note: (fields.len() != 5).then(|| format!("unexpected nvidia-smi output `{line}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_line_parses() {
        let c = parse_clocks("1980, 2619, P0, NVIDIA H200, 580.65.06\n");
        assert_eq!((c.sm_mhz, c.mem_mhz, c.pstate.as_deref()), (Some(1980), Some(2619), Some("P0")));
        assert_eq!((c.name.as_deref(), c.driver_version.as_deref(), c.note), (Some("NVIDIA H200"), Some("580.65.06"), None));
        let c = parse_clocks("[N/A], 2619, P0, NVIDIA H200, 580.65.06");
        assert_eq!(c.sm_mhz, None);
        assert!(parse_clocks("").note.is_some());
    }

    #[test]
    fn open_without_a_gpu_is_an_error_not_a_panic() {
        // SAFETY: only probes for libcuda.
        if unsafe { sys::is_culib_present() } {
            return; // a machine with a driver: nothing to check here
        }
        let e = Gpu::open(0).err().expect("no driver, yet Gpu::open succeeded");
        assert!(e.starts_with("no CUDA driver or device:"), "{e}");
    }
}
