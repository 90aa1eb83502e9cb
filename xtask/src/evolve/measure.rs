//! Measuring on the GPU: arms bound once to the same uploaded inputs,
//! per-call kernel time from CUPTI in rotating A-B-B-A rounds, outputs
//! checked against the f64 reference, and the control copy.
//!
//! A round runs each arm twice, in mirrored order (`C I K K I C`, the next
//! round `I C K K C I`), each segment a number of calls whose per-call
//! kernel times CUPTI reports; an arm's round value is the median of its
//! calls in both segments, and the ratios are taken round by round (the
//! candidate's median over the incumbent's, and over `current`'s), so that
//! a drift of the GPU's clocks during a round lands on both sides of a
//! ratio.

use super::ledger::{Arms, Check, Control, Round};
use super::propose::{Ratios, control_drift};
use super::run::{Measured, Measurer, Timed};
use mage_common::numeric::{Reference, Tolerance, compare};
use mage_common::op::{Op, Plan};
use mage_common::space::{Config, Space};
use mage_runtime::gpu::timing::median;
use mage_runtime::gpu::{DeviceInputs, Gpu, Prepared};

/// Unrecorded (candidate, incumbent) segment pairs before the rounds.
pub const BURN_IN_PAIRS: usize = 4;
/// Recorded rounds per generation.
pub const ROUNDS: usize = 8;
/// The arms' order in even and odd rounds.
pub const ROUND_ORDERS: [[Arm; 6]; 2] = [
    [Arm::Candidate, Arm::Incumbent, Arm::Current, Arm::Current, Arm::Incumbent, Arm::Candidate],
    [Arm::Incumbent, Arm::Candidate, Arm::Current, Arm::Current, Arm::Candidate, Arm::Incumbent],
];
/// Aim for this much kernel time per segment ...
const SEGMENT_TARGET_US: f64 = 50_000.0;
/// ... within these many calls.
const MIN_CALLS: usize = 10;
const MAX_CALLS: usize = 500;
/// Calls of the control per reading; the median is its value.
const CONTROL_CALLS: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    Candidate,
    Incumbent,
    Current,
}

impl Arm {
    fn letter(self) -> &'static str {
        match self {
            Arm::Candidate => "C",
            Arm::Incumbent => "I",
            Arm::Current => "K",
        }
    }
}

/// `C I K K I C`.
pub fn order_text(order: &[Arm; 6]) -> String {
    order.iter().map(|a| a.letter()).collect::<Vec<_>>().join(" ")
}

/// Calls per segment for a kernel of `us` µs per call.
pub fn calls_per_segment(us: f64) -> usize {
    if us.is_nan() || us <= 0.0 {
        return MIN_CALLS;
    }
    ((SEGMENT_TARGET_US / us).ceil() as usize).clamp(MIN_CALLS, MAX_CALLS)
}

/// What the rounds of a generation add up to.
pub fn arms_of(rounds: Vec<Round>) -> Arms {
    let ratios = |f: &dyn Fn(&Round) -> f64| Ratios::of(rounds.iter().map(f).collect());
    let med = |f: &dyn Fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    Arms {
        candidate_us: med(&|r| r.candidate_us),
        incumbent_us: med(&|r| r.incumbent_us),
        current_us: med(&|r| r.current_us),
        vs_incumbent: ratios(&|r| r.candidate_us / r.incumbent_us),
        vs_current: ratios(&|r| r.candidate_us / r.current_us),
        incumbent_vs_current: ratios(&|r| r.incumbent_us / r.current_us),
        rounds,
    }
}

/// One session's measuring bench: the op's inputs on the device, their
/// reference, and the control.
pub struct Bench<'a> {
    pub gpu: &'a Gpu,
    pub op: &'static Op,
    pub dims: &'a [u32],
    pub inputs: &'a DeviceInputs,
    pub reference: &'a Reference,
    pub tolerance: Tolerance,
    pub control: Prepared<'a>,
    pub calls: usize,
}

impl<'a> Bench<'a> {
    /// A plan bound to the inputs, with an output of its own.
    pub fn prepare(&self, plan: &Plan) -> Result<Prepared<'a>, String> {
        self.gpu.prepare(self.op, plan, self.dims, self.inputs)
    }

    /// One call into a poisoned output, checked against the reference.
    pub fn check(&self, p: &Prepared) -> Result<Check, String> {
        self.check_under(p, self.tolerance)
    }

    /// [`Bench::check`] under another tolerance (a stage's own).
    pub fn check_under(&self, p: &Prepared, tolerance: Tolerance) -> Result<Check, String> {
        let out = self.gpu.run_prepared(p)?;
        let cmp = compare(&out, self.reference, tolerance);
        Ok(Check { passed: cmp.passed(), max_abs_err: cmp.max_abs_err, summary: self.op.summarize(&cmp, self.dims) })
    }

    /// Per-call kernel µs of `calls` calls.
    pub fn segment(&self, p: &Prepared, calls: usize) -> Result<Vec<f64>, String> {
        let k = self.gpu.kernel_times(p, calls, false)?;
        if k.per_call_us.len() != calls {
            return Err(format!("CUPTI saw {} kernels per call over {calls} calls; they do not split into calls", k.kernels_per_call));
        }
        Ok(k.per_call_us)
    }

    /// The control's kernel µs: the median of [`CONTROL_CALLS`] calls.
    pub fn control_us(&self) -> Result<f64, String> {
        Ok(median(&self.segment(&self.control, CONTROL_CALLS)?))
    }

    /// The median kernel µs of a few warm calls (to size segments).
    pub fn quick_us(&self, p: &Prepared) -> Result<f64, String> {
        self.gpu.warm(p, 3)?;
        Ok(median(&self.segment(p, 5)?))
    }

    /// Burn-in pairs, then the recorded rounds.
    pub fn rounds(&self, candidate: &Prepared, incumbent: &Prepared, current: &Prepared) -> Result<Arms, String> {
        for _ in 0..BURN_IN_PAIRS {
            self.segment(candidate, self.calls)?;
            self.segment(incumbent, self.calls)?;
        }
        self.segment(current, self.calls)?;
        let mut rounds = Vec::with_capacity(ROUNDS);
        for r in 0..ROUNDS {
            let mut times: [Vec<f64>; 3] = Default::default();
            for arm in ROUND_ORDERS[r % 2] {
                let (p, slot) = match arm {
                    Arm::Candidate => (candidate, 0),
                    Arm::Incumbent => (incumbent, 1),
                    Arm::Current => (current, 2),
                };
                times[slot].extend(self.segment(p, self.calls)?);
            }
            rounds.push(Round { candidate_us: median(&times[0]), incumbent_us: median(&times[1]), current_us: median(&times[2]) });
        }
        Ok(arms_of(rounds))
    }
}

/// The measurer of a GPU session: the bench, and `current` bound once.
pub struct OnGpu<'a> {
    pub bench: &'a Bench<'a>,
    pub current: &'a Prepared<'a>,
    pub space: &'a Space,
}

impl Measurer for OnGpu<'_> {
    /// The candidate checked; the control read; burn-in and rounds of the
    /// candidate, the incumbent and `current`; the candidate checked again;
    /// the control read again.
    fn measure(&mut self, incumbent: &Config, candidate: &Config) -> Result<Measured, String> {
        let b = self.bench;
        let c = b.prepare(&(self.space.plan)(candidate, b.dims))?;
        let i = b.prepare(&(self.space.plan)(incumbent, b.dims))?;
        let check_before = b.check(&c)?;
        if !check_before.passed {
            return Ok(Measured { check_before, timed: None });
        }
        let start_us = b.control_us()?;
        let arms = b.rounds(&c, &i, self.current)?;
        let check_after = b.check(&c)?;
        let end_us = b.control_us()?;
        let (drift, within_limit) = control_drift(start_us, end_us);
        let control = Control { start_us, end_us, drift, within_limit };
        Ok(Measured { check_before, timed: Some(Timed { arms, check_after, control }) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_add_up_to_per_round_ratios_and_medians() {
        let r = |c: f64, i: f64, k: f64| Round { candidate_us: c, incumbent_us: i, current_us: k };
        let arms = arms_of(vec![r(90.0, 100.0, 80.0), r(99.0, 110.0, 88.0), r(95.0, 100.0, 80.0)]);
        assert_eq!(arms.vs_incumbent.per_round, vec![0.9, 0.9, 0.95]);
        assert_eq!((arms.vs_incumbent.median, arms.vs_incumbent.max), (0.9, 0.95));
        assert_eq!(arms.vs_current.per_round, vec![1.125, 1.125, 1.1875]);
        assert_eq!(arms.incumbent_vs_current.median, 1.25);
        assert_eq!((arms.candidate_us, arms.incumbent_us, arms.current_us), (95.0, 100.0, 80.0));
    }

    #[test]
    fn rounds_mirror_and_rotate_the_arms() {
        assert_eq!(order_text(&ROUND_ORDERS[0]), "C I K K I C");
        assert_eq!(order_text(&ROUND_ORDERS[1]), "I C K K C I");
        for order in ROUND_ORDERS {
            for arm in [Arm::Candidate, Arm::Incumbent, Arm::Current] {
                let at: Vec<usize> = (0..6).filter(|&i| order[i] == arm).collect();
                assert_eq!(at.len(), 2);
                assert_eq!(at[0] + at[1], 5, "{arm:?} sits symmetrically in {}", order_text(&order));
            }
        }
    }

    #[test]
    fn segments_aim_at_fifty_milliseconds() {
        assert_eq!(calls_per_segment(84.0), 500);
        assert_eq!(calls_per_segment(200.0), 250);
        assert_eq!(calls_per_segment(4600.0), 11);
        assert_eq!(calls_per_segment(30_000.0), 10);
        assert_eq!(calls_per_segment(f64::NAN), 10);
    }
}
