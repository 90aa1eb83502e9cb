//! GPU kernel time from CUPTI activity records (kind CONCURRENT_KERNEL):
//! the GPU's own start and end timestamps of every kernel, with no launch
//! path in them. This is the instrument kernel-time verdicts read.
//!
//! CUPTI asks for buffers and hands them back full (or at a forced flush)
//! through two C callbacks without user data, so what they find goes into
//! one process-wide tally.

use super::bind::Prepared;
use super::device::Gpu;
use super::panic_text;
use super::timing::median;
use cudarc::cupti::result::{CuptiError, activity};
use cudarc::cupti::sys as cupti_sys;
use cudarc::driver::sys;
use serde::Serialize;
use std::alloc::Layout;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, OnceLock, PoisonError};

/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`: also deliver buffers that are not full.
const FLUSH_FORCED: u32 = cupti_sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32;

/// The one activity kind enabled: kernel records that do not serialize
/// kernels (`CUPTI_ACTIVITY_KIND_KERNEL` would).
const KERNEL_ACTIVITY: cupti_sys::CUpti_ActivityKind = cupti_sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;

/// Kernel time of `calls` calls, from CUPTI.
#[derive(Clone, Debug, Serialize)]
pub struct KernelTimes {
    pub calls: usize,
    /// Kernel records per call.
    pub kernels_per_call: f64,
    /// All kernel durations summed, divided by the calls.
    pub mean_us: f64,
    /// The median of the per-call sums (`None` where the records do not
    /// split into equal calls).
    pub median_us: Option<f64>,
    /// Each call's kernel durations summed, in call order (empty where the
    /// records do not split into equal calls).
    pub per_call_us: Vec<f64>,
}

impl KernelTimes {
    /// From kernel records (start, end in ns) of `calls` calls in order.
    pub fn from_records(mut records: Vec<(u64, u64)>, calls: usize) -> KernelTimes {
        records.sort_unstable();
        let busy: u64 = records.iter().map(|(s, e)| e.saturating_sub(*s)).sum();
        let per_call_us = match records.len() {
            n if calls > 0 && n > 0 && n % calls == 0 => {
                records.chunks(n / calls).map(|c| c.iter().map(|(s, e)| e.saturating_sub(*s)).sum::<u64>() as f64 / 1e3).collect()
            }
            _ => vec![],
        };
        KernelTimes {
            calls,
            kernels_per_call: records.len() as f64 / calls.max(1) as f64,
            mean_us: busy as f64 / 1e3 / calls.max(1) as f64,
            median_us: (!per_call_us.is_empty()).then(|| median(&per_call_us)),
            per_call_us,
        }
    }
}

impl Gpu {
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

    /// CUPTI kernel records over `calls` calls of `prepared` (with L2
    /// evicted before each call where `cold`; the eviction is a memset, not
    /// a kernel, so no record counts it). Any failure, a panic inside
    /// `cudarc` included, is an error.
    pub fn kernel_times(&self, prepared: &Prepared, calls: usize, cold: bool) -> Result<KernelTimes, String> {
        self.cupti_available()?;
        let run = || {
            (0..calls).try_for_each(|_| {
                if cold {
                    self.l2_flush()?;
                }
                self.call(prepared)
            })
        };
        let records = catch_unwind(AssertUnwindSafe(|| self.collect_kernel_records(run))).unwrap_or_else(|panic| Err(panic_text(panic)))?;
        Ok(KernelTimes::from_records(records, calls))
    }

    fn collect_kernel_records(&self, work: impl FnOnce() -> Result<(), String>) -> Result<Vec<(u64, u64)>, String> {
        self.sync("before CUPTI")?;
        *lock_tally() = Tally::default();
        activity::enable(KERNEL_ACTIVITY).map_err(cupti("cuptiActivityEnable"))?;
        let ran = work().and_then(|()| self.sync("running under CUPTI"));
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
        if tally.kernels.is_empty() {
            return Err("CUPTI delivered no kernel records".into());
        }
        Ok(tally.kernels)
    }
}

fn cupti(what: &'static str) -> impl Fn(CuptiError) -> String {
    move |e| format!("{what}: {:?}", e.0)
}

/// What the completed buffers held since the tally was last reset.
#[derive(Default)]
struct Tally {
    /// (start, end) in ns of every kernel record.
    kernels: Vec<(u64, u64)>,
    error: Option<String>,
}

static TALLY: Mutex<Tally> = Mutex::new(Tally { kernels: Vec::new(), error: None });

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
    /// Keeps a kernel record's times. CONCURRENT_KERNEL records are
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
        self.kernels.push((start, end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_into_calls_in_start_order() {
        // Two calls of two kernels each, delivered out of order.
        let k = KernelTimes::from_records(vec![(300, 340), (100, 110), (120, 150), (200, 230)], 2);
        assert_eq!(k.kernels_per_call, 2.0);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(k.per_call_us[0], 0.04) && close(k.per_call_us[1], 0.07), "{:?}", k.per_call_us);
        assert!(close(k.mean_us, 0.055) && close(k.median_us.unwrap(), 0.055), "{k:?}");
        // Records that do not split evenly keep the mean and no per-call times.
        let k = KernelTimes::from_records(vec![(0, 10), (20, 30), (40, 50)], 2);
        assert_eq!((k.per_call_us.len(), k.median_us), (0, None));
        assert!(close(k.mean_us, 0.015), "{k:?}");
    }
}
