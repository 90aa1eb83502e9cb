//! PTX modules: JIT-loading, finding kernel entries, and the opt-in to more
//! than 48 KiB of dynamic shared memory.

use super::cu;
use cudarc::driver::{result, sys};
use std::ffi::{CStr, CString, c_void};

/// Launches asking for more dynamic shared memory than this must opt in.
const DEFAULT_SHARED_LIMIT: u32 = 48 << 10;

/// A loaded PTX module, unloaded on drop.
struct Module {
    package: String,
    handle: sys::CUmodule,
    /// The `.entry` names its PTX declares.
    entries: Vec<String>,
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: the handle came from cuModuleLoadDataEx and is unloaded once.
        // A failure only leaks the module, so it is ignored.
        let _ = unsafe { result::module::unload(self.handle) };
    }
}

/// The modules loaded into one context. Loading and unloading need that
/// context current on the calling thread; the owner makes it so.
#[derive(Default)]
pub struct Modules {
    loaded: Vec<Module>,
}

// SAFETY: module and function handles are plain driver handles, valid in
// their context from any thread that makes the context current.
unsafe impl Send for Modules {}
unsafe impl Sync for Modules {}

impl Modules {
    /// JIT-compiles an op's PTX into the current context and keeps the
    /// module, replacing an earlier one of the same package. ptxas' error
    /// log ends up in the error.
    pub fn load(&mut self, package: &str, ptx: &str) -> Result<(), String> {
        let image = CString::new(ptx).map_err(|_| format!("the PTX of {package} contains a NUL byte"))?;
        let handle = jit_load(&image).map_err(|e| format!("loading the PTX of {package}: {e}"))?;
        self.loaded.retain(|m| m.package != package);
        self.loaded.push(Module { package: package.to_string(), handle, entries: ptx_entries(ptx) });
        Ok(())
    }

    /// Whether the PTX of `package` is loaded.
    pub fn has(&self, package: &str) -> bool {
        self.loaded.iter().any(|m| m.package == package)
    }

    /// The kernel entry `name` from the loaded module whose PTX declares it
    /// (asking only that module, so no failed driver call is ever made:
    /// compute-sanitizer counts those as errors).
    pub fn function(&self, name: &str) -> Result<sys::CUfunction, String> {
        let c_name = CString::new(name).map_err(|_| format!("kernel name `{name}` contains a NUL byte"))?;
        for module in self.loaded.iter().filter(|m| m.entries.iter().any(|e| e == name)) {
            let mut f = std::ptr::null_mut();
            // SAFETY: the module is loaded; `f` is written on success.
            match unsafe { sys::cuModuleGetFunction(&mut f, module.handle, c_name.as_ptr()) } {
                sys::CUresult::CUDA_SUCCESS => return Ok(f),
                sys::CUresult::CUDA_ERROR_NOT_FOUND => continue,
                e => return Err(format!("looking up kernel `{name}` in {}: {e:?}", module.package)),
            }
        }
        let loaded: Vec<&str> = self.loaded.iter().map(|m| m.package.as_str()).collect();
        Err(format!("no loaded module has kernel `{name}` (loaded: {})", if loaded.is_empty() { "none".into() } else { loaded.join(", ") }))
    }
}

/// The kernel entry names a PTX module declares (`.entry NAME(`).
pub(crate) fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| l.split(".entry ").nth(1))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Loads PTX (a NUL-terminated image) with the JIT's error log captured.
fn jit_load(image: &CStr) -> Result<sys::CUmodule, String> {
    let mut log = vec![0u8; 16 << 10];
    let mut options = [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    // The size option's value is passed in the pointer itself.
    let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
    let mut module = std::ptr::null_mut();
    // SAFETY: the image is NUL-terminated PTX; the log buffer outlives the call.
    let r = unsafe { sys::cuModuleLoadDataEx(&mut module, image.as_ptr().cast(), 2, options.as_mut_ptr(), values.as_mut_ptr()) };
    r.result().map(|()| module).map_err(|e| {
        let text = CStr::from_bytes_until_nul(&log).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
        let text: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if text.is_empty() { format!("{:?}", e.0) } else { format!("{:?}: {}", e.0, text.join("; ")) }
    })
}

/// Opts `f` in to `bytes` of dynamic shared memory where that exceeds the
/// default 48 KiB; never lowers what an earlier launch asked for.
pub(crate) fn allow_shared(f: sys::CUfunction, bytes: u32) -> Result<(), String> {
    use sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYNAMIC_SHARED;
    if bytes <= DEFAULT_SHARED_LIMIT {
        return Ok(());
    }
    // SAFETY: `f` comes from a loaded module.
    let now = unsafe { result::function::get_function_attribute(f, MAX_DYNAMIC_SHARED) }.map_err(cu("reading its shared memory limit"))?;
    if i64::from(now) >= i64::from(bytes) {
        return Ok(());
    }
    let want = i32::try_from(bytes).map_err(|_| format!("{bytes} B of shared memory is out of range"))?;
    // SAFETY: as above.
    unsafe { result::function::set_function_attribute(f, MAX_DYNAMIC_SHARED, want) }
        .map_err(|e| format!("allowing {bytes} B of dynamic shared memory: {:?}", e.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_entry_names_from_ptx() {
        let ptx = ".visible .entry layernorm_row(\n\t.param .u64 a\n)\n{\n}\n.visible .entry probe_mul_add(\n";
        assert_eq!(ptx_entries(ptx), vec!["layernorm_row", "probe_mul_add"]);
    }
}
