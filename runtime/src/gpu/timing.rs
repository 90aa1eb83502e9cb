//! Timing one call of a plan: CUDA event spans in rounds, back-to-back
//! spans, and (from [`cupti`](super::cupti)) GPU kernel time.
//!
//! [`Gpu::time`] measures with three instruments, in this order:
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
//! Only the third says which kernel is faster; the first two measure the
//! launch path as much as the kernel.

use super::bind::Prepared;
use super::cu;
use super::device::Gpu;
use cudarc::driver::{CudaEvent, sys};
use mage_common::op::{Op, Plan};
use serde::Serialize;

/// Back-to-back measurements per timing; the median is reported.
const BACK_TO_BACK_RUNS: usize = 3;

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
    /// The median over calls of each call's summed kernel time.
    pub kernel_median_us: Option<f64>,
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
    /// Times one call of the plan with the three instruments of the module
    /// docs, after `cfg.warmup` calls.
    pub fn time(&self, op: &Op, plan: &Plan, dims: &[u32], inputs: &super::DeviceInputs, cfg: &TimingConfig) -> Result<Timing, String> {
        cfg.check()?;
        let prepared = self.prepare(op, plan, dims, inputs)?;
        self.warm(&prepared, cfg.warmup)?;
        let span = self.span(&prepared, cfg)?;
        let back_to_back = self.back_to_back(&prepared, cfg.back_to_back)?;
        let mut notes = Vec::new();
        let kernel = match self.kernel_times(&prepared, cfg.kernel_calls, false) {
            Ok(k) => Some(k),
            Err(e) => {
                notes.push(format!("no CUPTI kernel time: {e}"));
                None
            }
        };
        if let Some(k) = &kernel
            && k.kernels_per_call != plan.launches.len() as f64
        {
            notes.push(format!("CUPTI saw {} kernels per call; the plan launches {}", k.kernels_per_call, plan.launches.len()));
        }
        Ok(Timing {
            config: cfg.clone(),
            kernel_us: kernel.as_ref().map(|k| k.mean_us),
            kernel_median_us: kernel.as_ref().and_then(|k| k.median_us),
            kernels_per_call: kernel.as_ref().map(|k| k.kernels_per_call),
            span,
            back_to_back,
            notes,
        })
    }

    /// `calls` unmeasured calls, then a synchronisation.
    pub fn warm(&self, prepared: &Prepared, calls: usize) -> Result<(), String> {
        for _ in 0..calls {
            self.call(prepared)?;
        }
        self.sync("warming up")
    }

    /// Two events with timing enabled.
    fn event_pair(&self) -> Result<(CudaEvent, CudaEvent), String> {
        let event = || self.context.cuda.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cu("creating an event"));
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
}

/// `samples` split into `rounds` near-equal rounds (earlier rounds take the
/// remainder).
pub(crate) fn round_sizes(samples: usize, rounds: usize) -> Vec<usize> {
    (0..rounds).map(|r| samples / rounds + usize::from(r < samples % rounds)).collect()
}

/// The median (the mean of the middle two for an even count); NaN if empty.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Largest minus smallest; NaN if empty.
pub(crate) fn range(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    if xs.is_empty() { f64::NAN } else { max - min }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
