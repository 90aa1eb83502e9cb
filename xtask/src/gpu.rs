//! The GPU runner: loads op PTX through the CUDA driver (loaded at run time
//! by `cudarc`), runs a stage's [`Plan`] on device buffers and times it.
//!
//! [`Gpu::run`] is the correctness path: the output and every scratch buffer
//! are filled with [`OUTPUT_POISON`] (a NaN), the plan's launches run in
//! order, and the output comes back, so an element no kernel wrote is NaN.
//!
//! [`Gpu::time`] measures one *call* (every launch of the plan once, into a
//! preallocated output) with three instruments, in this order:
//!
//! 1. **CUDA event span**: an event before and after one call, the GPU idle
//!    at the start, so the span includes the host's launch latency; sampled
//!    in rounds to show run-to-run drift.
//! 2. **back-to-back event span**: many calls between two events, divided by
//!    the count; launch latency hides behind the previous call's work.
//! 3. **CUPTI kernel activity records**: the GPU's own start/end timestamps
//!    of every kernel, summed per call; no launch gaps at all. It runs last
//!    so that CUPTI's instrumentation cannot touch the event measurements.
//!
//! Nothing here changes clocks or device settings. The only per-kernel
//! attribute set is the opt-in to more than 48 KiB of dynamic shared memory
//! that a launch asking for it requires.

use std::alloc::Layout;
use std::any::Any;
use std::ffi::{CStr, CString, c_void};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::cupti::result::{CuptiError, activity};
use cudarc::cupti::sys as cupti_sys;
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DriverError, result, sys};
use mage_common::kernel::LaunchConfig;
use mage_common::kernel::{ArgValue, ParamKind};
use mage_common::op::{Arg, Elem, HostBuf, OUTPUT_POISON, Op, Plan};
use serde::Serialize;

/// Where to go when there is no GPU.
const EMULATE_HINT: &str = "run with --emulate for a CPU check (correctness only); see `cargo xtask doctor`, line `CUDA driver`";

/// The oldest driver (as `cuDriverGetVersion` reports it) whose symbols the
/// CUDA 13.0 bindings call: `cuEventElapsedTime_v2` arrived in 12.8, and a
/// missing symbol would be a panic inside `cudarc`.
const MIN_DRIVER: i32 = 12080;

/// Bytes written to evict L2 (H200's L2 is 50 MiB).
const L2_FLUSH_BYTES: usize = 256 << 20;

/// Back-to-back measurements per timing; the median is reported.
const BACK_TO_BACK_RUNS: usize = 3;

/// Launches asking for more dynamic shared memory than this must opt in.
const DEFAULT_SHARED_LIMIT: u32 = 48 << 10;

/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`: also deliver buffers that are not full.
const FLUSH_FORCED: u32 = cupti_sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32;

/// The one activity kind enabled: kernel records that do not serialize
/// kernels (`CUPTI_ACTIVITY_KIND_KERNEL` would).
const KERNEL_ACTIVITY: cupti_sys::CUpti_ActivityKind = cupti_sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;

/// One open device (ordinal 0) with the op modules loaded into it.
pub struct Gpu {
    // Fields drop in order: modules and the flush buffer before the context.
    modules: Vec<Module>,
    flush: OnceLock<DeviceBuf>,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
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

/// A loaded PTX module, unloaded on drop.
/// The kernel entry names a PTX module declares (`.entry NAME(`).
fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| l.split(".entry ").nth(1))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

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

/// A device buffer of 4-byte elements (f32 or u32 bits).
struct DeviceBuf {
    /// At least one element, so that empty buffers still have an address.
    mem: CudaSlice<u32>,
    len: usize,
    elem: Elem,
}

impl DeviceBuf {
    fn ptr(&self) -> u64 {
        // Event tracking is off, so the returned guard records nothing.
        self.mem.device_ptr(self.mem.stream()).0
    }
}

/// An op's inputs on the device, uploaded once by [`Gpu::upload`].
pub struct DeviceInputs {
    bufs: Vec<DeviceBuf>,
}

impl DeviceInputs {
    /// Checks that these buffers are the op's inputs for `dims`, so that no
    /// kernel reads past one.
    fn check(&self, op: &Op, dims: &[u32]) -> Result<(), String> {
        if self.bufs.len() != op.inputs.len() {
            return Err(format!("{} takes {} inputs, {} were uploaded", op.name, op.inputs.len(), self.bufs.len()));
        }
        for ((spec, buf), want) in op.inputs.iter().zip(&self.bufs).zip((op.input_lens)(dims)) {
            if buf.elem != spec.elem || buf.len != want {
                return Err(format!(
                    "the uploaded {} ({}) holds {} {:?} values; dims {} need {want} {:?}",
                    spec.file,
                    spec.role,
                    buf.len,
                    buf.elem,
                    Op::dims_label(dims),
                    spec.elem
                ));
            }
        }
        Ok(())
    }
}

/// One launch, resolved: the function, its shape and its argument values.
struct Ready {
    kernel: &'static str,
    function: sys::CUfunction,
    config: LaunchConfig,
    args: Vec<ArgValue>,
}

/// A plan bound to device buffers: what one call launches, and the output
/// and scratch it writes (kept alive here). Borrows the inputs it points at.
struct Prepared<'a> {
    launches: Vec<Ready>,
    output: DeviceBuf,
    _scratch: Vec<DeviceBuf>,
    _inputs: PhantomData<&'a DeviceInputs>,
}

/// How [`Gpu::time`] samples. One call = every launch of the plan once.
#[derive(Clone, Debug, Serialize)]
pub struct TimingConfig {
    /// Calls before any measurement.
    pub warmup: usize,
    /// CUDA event span samples, in total.
    pub samples: usize,
    /// Rounds the span samples are split into.
    pub rounds: usize,
    /// Calls between the two events of one back-to-back measurement.
    pub back_to_back: usize,
    /// Calls whose CUPTI kernel records are summed.
    pub kernel_calls: usize,
    /// Flush L2 before each span sample (outside the span). The
    /// back-to-back and CUPTI measurements stay warm.
    pub cold: bool,
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig { warmup: 20, samples: 300, rounds: 3, back_to_back: 100, kernel_calls: 100, cold: false }
    }
}

impl TimingConfig {
    fn check(&self) -> Result<(), String> {
        if self.rounds == 0 || self.samples < self.rounds {
            return Err(format!("timing needs at least one span sample per round; got {} samples in {} rounds", self.samples, self.rounds));
        }
        if self.back_to_back == 0 || self.kernel_calls == 0 {
            return Err("timing needs at least one back-to-back call and one CUPTI call".into());
        }
        Ok(())
    }
}

/// What [`Gpu::time`] measured, in microseconds per call.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub config: TimingConfig,
    /// CUPTI kernel activity records: the sum of (end - start) of every
    /// kernel record over `kernel_calls` calls, divided by the calls.
    /// `None` where CUPTI could not be used; `notes` says why.
    pub kernel_us: Option<f64>,
    /// Kernel records per call (the plan's launch count when all is well).
    pub kernels_per_call: Option<f64>,
    /// CUDA event span around single calls.
    pub span: Span,
    /// Back-to-back event span over many calls.
    pub back_to_back: BackToBack,
    pub notes: Vec<String>,
}

/// CUDA event span: an event recorded before and after one call.
#[derive(Clone, Debug, Serialize)]
pub struct Span {
    /// Median over every sample.
    pub median_us: f64,
    pub round_medians_us: Vec<f64>,
    /// Largest minus smallest round median: the drift between rounds.
    pub round_range_us: f64,
    /// Every sample, round after round.
    pub samples_us: Vec<f64>,
}

impl Span {
    fn from_rounds(rounds: &[Vec<f64>]) -> Span {
        let samples_us: Vec<f64> = rounds.concat();
        let round_medians_us: Vec<f64> = rounds.iter().map(|r| median(r)).collect();
        Span { median_us: median(&samples_us), round_range_us: range(&round_medians_us), round_medians_us, samples_us }
    }
}

/// Back-to-back event span: `calls` calls between two events, per call.
#[derive(Clone, Debug, Serialize)]
pub struct BackToBack {
    pub calls: usize,
    /// Median of the runs.
    pub median_us: f64,
    /// Each run's time per call.
    pub runs_us: Vec<f64>,
}

impl Gpu {
    /// Loads the CUDA driver and opens device 0. Without a driver or device
    /// the error says so and points at `--emulate`; it never panics.
    pub fn open() -> Result<Gpu, String> {
        let no_gpu = |detail: String| format!("no CUDA driver or device: {detail}; {EMULATE_HINT}");
        // SAFETY: only tries to dlopen libcuda under its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err(no_gpu("libcuda could not be loaded".into()));
        }
        // cudarc panics on a missing driver symbol; make that an error too.
        match catch_unwind(Gpu::open_device) {
            Ok(opened) => opened.map_err(no_gpu),
            Err(panic) => Err(no_gpu(panic_text(panic))),
        }
    }

    fn open_device() -> Result<Gpu, String> {
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
        let ctx = CudaContext::new(0).map_err(cu("opening device 0"))?;
        // One stream, so cudarc's per-buffer events would only add work.
        // SAFETY: no buffer is shared between streams.
        unsafe { ctx.disable_event_tracking() };
        let info = device_info(&ctx, version).map_err(cu("querying device 0"))?;
        // The legacy default stream: no stream is ever created, so no
        // buffer records or waits on events.
        let stream = ctx.default_stream();
        Ok(Gpu { modules: Vec::new(), flush: OnceLock::new(), stream, ctx, info })
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
        let image = CString::new(ptx).map_err(|_| format!("the PTX of {package} contains a NUL byte"))?;
        self.bind()?;
        let handle = jit_load(&image).map_err(|e| format!("loading the PTX of {package}: {e}"))?;
        self.modules.retain(|m| m.package != package);
        let entries = ptx_entries(ptx);
        self.modules.push(Module { package: package.to_string(), handle, entries });
        Ok(())
    }

    /// The kernel entry `name` from the loaded module whose PTX declares it
    /// (asking only that module, so no failed driver call is ever made:
    /// compute-sanitizer counts those as errors).
    fn function(&self, name: &str) -> Result<sys::CUfunction, String> {
        let c_name = CString::new(name).map_err(|_| format!("kernel name `{name}` contains a NUL byte"))?;
        for module in self.modules.iter().filter(|m| m.entries.iter().any(|e| e == name)) {
            let mut f = std::ptr::null_mut();
            // SAFETY: the module is loaded; `f` is written on success.
            match unsafe { sys::cuModuleGetFunction(&mut f, module.handle, c_name.as_ptr()) } {
                sys::CUresult::CUDA_SUCCESS => return Ok(f),
                sys::CUresult::CUDA_ERROR_NOT_FOUND => continue,
                e => return Err(format!("looking up kernel `{name}` in {}: {e:?}", module.package)),
            }
        }
        let loaded: Vec<&str> = self.modules.iter().map(|m| m.package.as_str()).collect();
        Err(format!("no loaded module has kernel `{name}` (loaded: {})", if loaded.is_empty() { "none".into() } else { loaded.join(", ") }))
    }

    /// Copies an op's inputs to the device.
    pub fn upload(&self, inputs: &[HostBuf]) -> Result<DeviceInputs, String> {
        self.bind()?;
        let mut bufs = Vec::with_capacity(inputs.len());
        for input in inputs {
            let mut buf = self.alloc(input.elem(), input.len())?;
            let words: &[u32] = match input {
                HostBuf::U32(v) => v,
                // SAFETY: f32 and u32 have the same size and alignment, and
                // every bit pattern is a valid u32.
                HostBuf::F32(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len()) },
            };
            self.stream.memcpy_htod(words, &mut buf.mem).map_err(cu("copying an input to the device"))?;
            bufs.push(buf);
        }
        self.sync("uploading inputs")?;
        Ok(DeviceInputs { bufs })
    }

    /// Runs one call of the plan into a poisoned output and returns it.
    pub fn run(&self, op: &Op, plan: &Plan, dims: &[u32], inputs: &DeviceInputs) -> Result<Vec<f32>, String> {
        let prepared = self.prepare(op, plan, dims, inputs)?;
        self.call(&prepared)?;
        self.sync("running the plan")?;
        self.download(&prepared.output)
    }

    /// Times one call of the plan with the three instruments of the module
    /// docs, after `cfg.warmup` calls.
    pub fn time(&self, op: &Op, plan: &Plan, dims: &[u32], inputs: &DeviceInputs, cfg: &TimingConfig) -> Result<Timing, String> {
        cfg.check()?;
        let prepared = self.prepare(op, plan, dims, inputs)?;
        for _ in 0..cfg.warmup {
            self.call(&prepared)?;
        }
        self.sync("warming up")?;
        let span = self.span(&prepared, cfg)?;
        let back_to_back = self.back_to_back(&prepared, cfg.back_to_back)?;
        let mut notes = Vec::new();
        let (kernel_us, kernels_per_call) = match self.kernel_time(&prepared, cfg.kernel_calls) {
            Ok((us, per_call)) => (Some(us), Some(per_call)),
            Err(e) => {
                notes.push(format!("no CUPTI kernel time: {e}"));
                (None, None)
            }
        };
        if let Some(per_call) = kernels_per_call
            && per_call != plan.launches.len() as f64
        {
            notes.push(format!("CUPTI saw {per_call} kernels per call; the plan launches {}", plan.launches.len()));
        }
        Ok(Timing { config: cfg.clone(), kernel_us, kernels_per_call, span, back_to_back, notes })
    }

    /// Writes a 256 MiB buffer so that L2 holds none of a call's data.
    /// Asynchronous: it runs on the stream ahead of whatever follows.
    pub fn l2_flush(&self) -> Result<(), String> {
        self.bind()?;
        let buf = match self.flush.get() {
            Some(buf) => buf,
            None => {
                let buf = self.alloc(Elem::U32, L2_FLUSH_BYTES / 4)?;
                self.flush.get_or_init(|| buf)
            }
        };
        // SAFETY: the buffer holds `len` words and lives as long as `self`.
        unsafe { sys::cuMemsetD32Async(buf.ptr(), 0, buf.len, self.stream.cu_stream()) }.result().map_err(cu("flushing L2"))
    }

    /// Makes the context current on this thread (raw driver calls need it).
    fn bind(&self) -> Result<(), String> {
        self.ctx.bind_to_thread().map_err(cu("binding the CUDA context"))
    }

    fn sync(&self, what: &str) -> Result<(), String> {
        self.stream.synchronize().map_err(|e| format!("{what}: {:?}", e.0))
    }

    /// An uninitialised buffer of `len` elements.
    fn alloc(&self, elem: Elem, len: usize) -> Result<DeviceBuf, String> {
        // SAFETY: the contents are written (copy or memset) before any read.
        let mem =
            unsafe { self.stream.alloc::<u32>(len.max(1)) }.map_err(|e| format!("allocating {len} elements on the device: {:?}", e.0))?;
        Ok(DeviceBuf { mem, len, elem })
    }

    /// An f32 buffer filled with [`OUTPUT_POISON`].
    fn alloc_poisoned(&self, len: usize) -> Result<DeviceBuf, String> {
        let buf = self.alloc(Elem::F32, len)?;
        // SAFETY: the buffer holds at least `len` words.
        unsafe { sys::cuMemsetD32Async(buf.ptr(), OUTPUT_POISON, len, self.stream.cu_stream()) }
            .result()
            .map_err(cu("poisoning a buffer"))?;
        Ok(buf)
    }

    fn download(&self, buf: &DeviceBuf) -> Result<Vec<f32>, String> {
        let mut host = vec![0u32; buf.len];
        self.stream.memcpy_dtoh(&buf.mem.slice(..buf.len), &mut host).map_err(cu("copying the output back"))?;
        self.sync("copying the output back")?;
        Ok(host.into_iter().map(f32::from_bits).collect())
    }

    /// Allocates and poisons the output and scratch, resolves every
    /// launch's function and arguments, and checks them against the kernels.
    fn prepare<'a>(&self, op: &Op, plan: &Plan, dims: &[u32], inputs: &'a DeviceInputs) -> Result<Prepared<'a>, String> {
        op.check_dims(dims)?;
        inputs.check(op, dims)?;
        self.bind()?;
        let output = self.alloc_poisoned(op.output_len(dims))?;
        let scratch = plan.scratch.iter().map(|&n| self.alloc_poisoned(n)).collect::<Result<Vec<_>, _>>()?;
        let input_ptrs: Vec<u64> = inputs.bufs.iter().map(DeviceBuf::ptr).collect();
        let scratch_ptrs: Vec<u64> = scratch.iter().map(DeviceBuf::ptr).collect();
        let args = resolve_plan(plan, &input_ptrs, output.ptr(), &scratch_ptrs)?;
        let mut launches = Vec::with_capacity(plan.launches.len());
        for (launch, args) in plan.launches.iter().zip(args) {
            let function = self.function(launch.kernel.name)?;
            allow_shared(function, launch.shared_bytes).map_err(|e| format!("kernel `{}`: {e}", launch.kernel.name))?;
            launches.push(Ready { kernel: launch.kernel.name, function, config: launch.config(), args });
        }
        self.sync("preparing device buffers")?;
        Ok(Prepared { launches, output, _scratch: scratch, _inputs: PhantomData })
    }

    /// One call: every launch of the plan, in order, on the stream.
    fn call(&self, prepared: &Prepared) -> Result<(), String> {
        for ready in &prepared.launches {
            let mut params: Vec<*mut c_void> = ready.args.iter().map(param_ptr).collect();
            let LaunchConfig { grid: g, block: b, shared_bytes } = ready.config;
            // SAFETY: the arguments match the kernel's parameters (checked in
            // `resolve_plan`) and point into buffers `prepared` keeps alive.
            unsafe {
                result::launch_kernel(ready.function, (g.x, g.y, g.z), (b.x, b.y, b.z), shared_bytes, self.stream.cu_stream(), &mut params)
            }
            .map_err(|e| format!("launching `{}` (grid {g}, block {b}, {shared_bytes} B shared): {:?}", ready.kernel, e.0))?;
        }
        Ok(())
    }

    /// Two events with timing enabled.
    fn event_pair(&self) -> Result<(CudaEvent, CudaEvent), String> {
        let event = || self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cu("creating an event"));
        Ok((event()?, event()?))
    }

    /// Microseconds between an event recorded before `work` and one after.
    fn timed(&self, (start, end): &(CudaEvent, CudaEvent), work: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
        start.record(&self.stream).map_err(cu("recording an event"))?;
        work()?;
        end.record(&self.stream).map_err(cu("recording an event"))?;
        let ms = start.elapsed_ms(end).map_err(cu("reading an event span"))?;
        Ok(f64::from(ms) * 1e3)
    }

    /// CUDA event span: `cfg.samples` single-call spans in `cfg.rounds`
    /// rounds; in cold mode L2 is flushed before each start event.
    fn span(&self, prepared: &Prepared, cfg: &TimingConfig) -> Result<Span, String> {
        let events = self.event_pair()?;
        let mut rounds = Vec::with_capacity(cfg.rounds);
        for n in round_sizes(cfg.samples, cfg.rounds) {
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                if cfg.cold {
                    self.l2_flush()?;
                }
                samples.push(self.timed(&events, || self.call(prepared))?);
            }
            rounds.push(samples);
        }
        Ok(Span::from_rounds(&rounds))
    }

    /// Back-to-back event span: [`BACK_TO_BACK_RUNS`] runs of `calls` calls
    /// between two events, each divided by `calls`.
    fn back_to_back(&self, prepared: &Prepared, calls: usize) -> Result<BackToBack, String> {
        let events = self.event_pair()?;
        let mut runs_us = Vec::with_capacity(BACK_TO_BACK_RUNS);
        for _ in 0..BACK_TO_BACK_RUNS {
            let us = self.timed(&events, || (0..calls).try_for_each(|_| self.call(prepared)))?;
            runs_us.push(us / calls as f64);
        }
        Ok(BackToBack { calls, median_us: median(&runs_us), runs_us })
    }

    /// Whether CUPTI kernel activity records can be collected: libcupti
    /// loads and accepts the activity buffer callbacks.
    pub fn cupti_available(&self) -> Result<(), String> {
        // SAFETY: only tries to dlopen libcupti under its usual names.
        if !unsafe { cupti_sys::is_culib_present() } {
            return Err("libcupti could not be loaded (put CUDA's extras/CUPTI/lib64 on LD_LIBRARY_PATH)".into());
        }
        // cudarc panics on a missing libcupti symbol; make that an error too.
        catch_unwind(register_cupti_buffers).unwrap_or_else(|panic| Err(panic_text(panic)))
    }

    /// CUPTI kernel activity records over `calls` calls: (kernel µs per
    /// call, kernel records per call). Any failure, a panic inside `cudarc`
    /// included, is an error for the notes.
    fn kernel_time(&self, prepared: &Prepared, calls: usize) -> Result<(f64, f64), String> {
        self.cupti_available()?;
        catch_unwind(AssertUnwindSafe(|| self.collect_kernel_records(prepared, calls))).unwrap_or_else(|panic| Err(panic_text(panic)))
    }

    fn collect_kernel_records(&self, prepared: &Prepared, calls: usize) -> Result<(f64, f64), String> {
        self.sync("before CUPTI")?;
        *lock_tally() = Tally::default();
        activity::enable(KERNEL_ACTIVITY).map_err(cupti("cuptiActivityEnable"))?;
        let ran = (0..calls).try_for_each(|_| self.call(prepared)).and_then(|()| self.sync("running under CUPTI"));
        let flushed = activity::flush_all(FLUSH_FORCED).map_err(cupti("cuptiActivityFlushAll"));
        let disabled = activity::disable(KERNEL_ACTIVITY).map_err(cupti("cuptiActivityDisable"));
        ran.and(flushed).and(disabled)?;
        let mut dropped = 0;
        // SAFETY: a null context asks about every context; writes one usize.
        unsafe { activity::get_num_dropped_records(std::ptr::null_mut(), 0, &mut dropped) }
            .map_err(cupti("cuptiActivityGetNumDroppedRecords"))?;
        let tally = std::mem::take(&mut *lock_tally());
        if let Some(e) = tally.error {
            return Err(e);
        }
        if dropped > 0 {
            return Err(format!("CUPTI dropped {dropped} records"));
        }
        if tally.kernels == 0 {
            return Err("CUPTI delivered no kernel records".into());
        }
        Ok((tally.busy_ns as f64 / 1e3 / calls as f64, tally.kernels as f64 / calls as f64))
    }
}

impl Drop for Gpu {
    /// Makes the context current so that the modules unload in it.
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
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

/// `13000` -> `13.0`.
fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, v % 1000 / 10)
}

/// nvidia-smi's spelling of a device UUID: `GPU-` and 8-4-4-4-12 hex digits.
fn uuid_text(uuid: &sys::CUuuid) -> String {
    let hex = |r: std::ops::Range<usize>| uuid.bytes[r].iter().map(|&b| format!("{:02x}", b as u8)).collect::<String>();
    format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}

/// Parses one line of `clocks.sm,clocks.mem,pstate,name,driver_version` in
/// csv,noheader,nounits form; `[N/A]` and unparsable fields become `None`.
fn parse_clocks(text: &str) -> Clocks {
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
fn allow_shared(f: sys::CUfunction, bytes: u32) -> Result<(), String> {
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

/// Every launch's argument values, checked against its kernel's parameters:
/// the count, each kind, and each input or scratch number.
fn resolve_plan(plan: &Plan, inputs: &[u64], output: u64, scratch: &[u64]) -> Result<Vec<Vec<ArgValue>>, String> {
    plan.launches
        .iter()
        .enumerate()
        .map(|(i, launch)| {
            let kernel = launch.kernel;
            let at = format!("launch {i} (`{}`)", kernel.name);
            if launch.args.len() != kernel.params.len() {
                return Err(format!("{at} passes {} arguments; the kernel takes {}", launch.args.len(), kernel.params.len()));
            }
            kernel
                .params
                .iter()
                .zip(&launch.args)
                .map(|(param, arg)| {
                    let pick = |bufs: &[u64], j: usize, what: &str| {
                        bufs.get(j)
                            .map(|&p| ArgValue::Ptr(p))
                            .ok_or_else(|| format!("{at}: {arg:?} but there are {} {what} buffers", bufs.len()))
                    };
                    let value = match *arg {
                        Arg::Input(j) => pick(inputs, j, "input")?,
                        Arg::Output => ArgValue::Ptr(output),
                        Arg::Scratch(j) => pick(scratch, j, "scratch")?,
                        Arg::U32(v) => ArgValue::U32(v),
                        Arg::F32(v) => ArgValue::F32(v),
                    };
                    if kind_of(&value) != param.kind {
                        return Err(format!("{at}: parameter `{}` is {} but the plan passes {arg:?}", param.name, kind_name(param.kind)));
                    }
                    Ok(value)
                })
                .collect()
        })
        .collect()
}

fn kind_of(v: &ArgValue) -> ParamKind {
    match v {
        ArgValue::Ptr(_) => ParamKind::Ptr,
        ArgValue::U32(_) => ParamKind::U32,
        ArgValue::F32(_) => ParamKind::F32,
    }
}

fn kind_name(k: ParamKind) -> &'static str {
    match k {
        ParamKind::Ptr => "a pointer",
        ParamKind::U32 => "a u32",
        ParamKind::F32 => "an f32",
    }
}

/// What cuLaunchKernel's parameter array holds: the address of each value.
fn param_ptr(v: &ArgValue) -> *mut c_void {
    match v {
        ArgValue::Ptr(p) => std::ptr::from_ref(p).cast_mut().cast(),
        ArgValue::U32(x) => std::ptr::from_ref(x).cast_mut().cast(),
        ArgValue::F32(x) => std::ptr::from_ref(x).cast_mut().cast(),
    }
}

/// `samples` split into `rounds` near-equal rounds (earlier rounds take the
/// remainder).
fn round_sizes(samples: usize, rounds: usize) -> Vec<usize> {
    (0..rounds).map(|r| samples / rounds + usize::from(r < samples % rounds)).collect()
}

/// The median (the mean of the middle two for an even count); NaN if empty.
fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Largest minus smallest; NaN if empty.
fn range(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    if xs.is_empty() { f64::NAN } else { max - min }
}

fn cu(what: &'static str) -> impl Fn(DriverError) -> String {
    move |e| format!("{what}: {:?}", e.0)
}

fn cupti(what: &'static str) -> impl Fn(CuptiError) -> String {
    move |e| format!("{what}: {:?}", e.0)
}

fn panic_text(panic: Box<dyn Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(s) => *s,
        Err(panic) => panic.downcast_ref::<&str>().map_or("a panic inside cudarc", |s| s).to_string(),
    }
}

// CUPTI activity buffers. CUPTI asks for buffers and hands them back full
// (or at a forced flush) through two C callbacks without user data, so what
// they find goes into one process-wide tally.

/// What the completed buffers held since the tally was last reset.
#[derive(Default)]
struct Tally {
    kernels: u64,
    busy_ns: u64,
    error: Option<String>,
}

static TALLY: Mutex<Tally> = Mutex::new(Tally { kernels: 0, busy_ns: 0, error: None });

fn lock_tally() -> std::sync::MutexGuard<'static, Tally> {
    TALLY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// 8 MiB, 8-byte aligned, as CUPTI's samples use.
const CUPTI_BUFFER: Layout = match Layout::from_size_align(8 << 20, 8) {
    Ok(layout) => layout,
    Err(_) => panic!("bad CUPTI buffer layout"),
};

/// Registers the buffer callbacks, once per process.
fn register_cupti_buffers() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            activity::register_callbacks(Some(buffer_requested), Some(buffer_completed)).map_err(cupti("cuptiActivityRegisterCallbacks"))
        })
        .clone()
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    // SAFETY: CUPTI passes valid out-pointers; `buffer_completed` frees the
    // buffer. A failed allocation hands CUPTI an empty buffer.
    unsafe {
        let p = std::alloc::alloc(CUPTI_BUFFER);
        *buffer = p;
        *size = if p.is_null() { 0 } else { CUPTI_BUFFER.size() };
        *max_records = 0;
    }
}

unsafe extern "C" fn buffer_completed(_ctx: sys::CUcontext, _stream: u32, buffer: *mut u8, _size: usize, valid: usize) {
    if buffer.is_null() {
        return;
    }
    let mut tally = lock_tally();
    let mut record = std::ptr::null_mut();
    loop {
        // SAFETY: `buffer` holds `valid` bytes of records from CUPTI.
        match unsafe { activity::get_next_record(buffer, valid, &mut record) } {
            // SAFETY: CUPTI just returned this record from the buffer.
            Ok(()) => unsafe { tally.add(record) },
            Err(CuptiError(cupti_sys::CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED)) => break,
            Err(e) => {
                tally.error = Some(format!("cuptiActivityGetNextRecord: {:?}", e.0));
                break;
            }
        }
    }
    drop(tally);
    // SAFETY: allocated by `buffer_requested` with this layout.
    unsafe { std::alloc::dealloc(buffer, CUPTI_BUFFER) };
}

impl Tally {
    /// Counts a kernel record. CONCURRENT_KERNEL records are
    /// `CUpti_ActivityKernel10` under CUDA 13.0; every kernel record version
    /// has the same fields up to `end`, so reading those is version-proof.
    ///
    /// # Safety
    /// `record` must point at a complete activity record.
    unsafe fn add(&mut self, record: *const cupti_sys::CUpti_Activity) {
        // The kind is read as a plain u32: a kind newer than these bindings
        // must not become an invalid enum value.
        // SAFETY: every record starts with its 4-byte kind.
        if unsafe { record.cast::<u32>().read_unaligned() } != KERNEL_ACTIVITY as u32 {
            return;
        }
        let kernel = record.cast::<cupti_sys::CUpti_ActivityKernel10>();
        // SAFETY: a kernel record; the struct is packed, hence unaligned reads.
        let (start, end) = unsafe { ((&raw const (*kernel).start).read_unaligned(), (&raw const (*kernel).end).read_unaligned()) };
        self.kernels += 1;
        self.busy_ns += end.saturating_sub(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_entry_names_from_ptx() {
        let ptx = ".visible .entry layernorm_row(\n\t.param .u64 a\n)\n{\n}\n.visible .entry probe_mul_add(\n";
        assert_eq!(ptx_entries(ptx), vec!["layernorm_row", "probe_mul_add"]);
    }
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::kernel::Param;
    use mage_common::op::Launch;

    static SCALE: Kernel = Kernel {
        name: "scale",
        params: &[
            Param { name: "x", kind: ParamKind::Ptr },
            Param { name: "y", kind: ParamKind::Ptr },
            Param { name: "n", kind: ParamKind::U32 },
            Param { name: "a", kind: ParamKind::F32 },
        ],
        host: |_| {},
    };

    fn plan(args: Vec<Arg>) -> Plan {
        Launch { kernel: &SCALE, grid: Dim3::x(1), block: Dim3::x(32), shared_bytes: 0, args }.into()
    }

    #[test]
    fn median_and_range() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(range(&[2.0, 5.0, 3.0]), 3.0);
        assert_eq!(range(&[7.0]), 0.0);
    }

    #[test]
    fn span_statistics_per_round_and_overall() {
        let span = Span::from_rounds(&[vec![1.0, 2.0, 3.0], vec![10.0, 11.0, 12.0], vec![4.0, 5.0, 6.0]]);
        assert_eq!(span.round_medians_us, vec![2.0, 11.0, 5.0]);
        assert_eq!(span.round_range_us, 9.0);
        assert_eq!(span.median_us, 5.0);
        assert_eq!(span.samples_us.len(), 9);
    }

    #[test]
    fn rounds_split_samples_evenly() {
        assert_eq!(round_sizes(300, 3), vec![100, 100, 100]);
        assert_eq!(round_sizes(10, 3), vec![4, 3, 3]);
        assert!(TimingConfig { samples: 2, rounds: 3, ..TimingConfig::default() }.check().is_err());
        assert!(TimingConfig::default().check().is_ok());
    }

    #[test]
    fn args_resolve_in_parameter_order() {
        let args = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output, Arg::U32(7), Arg::F32(0.5)]), &[100], 200, &[]).unwrap();
        assert_eq!(args, vec![vec![ArgValue::Ptr(100), ArgValue::Ptr(200), ArgValue::U32(7), ArgValue::F32(0.5)]]);
    }

    #[test]
    fn wrong_arg_kind_is_an_error() {
        let e = resolve_plan(&plan(vec![Arg::U32(1), Arg::Output, Arg::U32(7), Arg::F32(0.5)]), &[100], 200, &[]).unwrap_err();
        assert_eq!(e, "launch 0 (`scale`): parameter `x` is a pointer but the plan passes U32(1)");
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output, Arg::Output, Arg::F32(0.5)]), &[100], 200, &[]).unwrap_err();
        assert!(e.contains("parameter `n` is a u32"), "{e}");
    }

    #[test]
    fn wrong_arg_count_or_buffer_number_is_an_error() {
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output]), &[100], 200, &[]).unwrap_err();
        assert!(e.contains("passes 2 arguments; the kernel takes 4"), "{e}");
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Scratch(1), Arg::U32(7), Arg::F32(0.5)]), &[100], 200, &[300]).unwrap_err();
        assert!(e.contains("Scratch(1) but there are 1 scratch buffers"), "{e}");
    }

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
    fn driver_versions_read_as_cuda_versions() {
        assert_eq!(version_text(13000), "13.0");
        assert_eq!(version_text(12080), "12.8");
    }

    #[test]
    fn open_without_a_gpu_is_an_error_not_a_panic() {
        // SAFETY: only probes for libcuda.
        if unsafe { sys::is_culib_present() } {
            return; // a machine with a driver: nothing to check here
        }
        let e = Gpu::open().err().expect("no driver, yet Gpu::open succeeded");
        assert!(e.starts_with("no CUDA driver or device:") && e.contains("--emulate"), "{e}");
    }
}
