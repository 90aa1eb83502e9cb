//! What to try next, and whether to keep it.
//!
//! A [`Proposer`] picks the next configuration to measure against the
//! incumbent from the [`History`] of a run (every configuration measured,
//! pruned or voided, read back from the ledger, so a resumed run continues
//! where it stopped). [`OneKnob`] changes one knob of the incumbent per
//! generation, taking the knobs in turn and each knob's nearest untried
//! value first, and never proposes a configuration tried before. A smarter
//! proposer implements the same trait.
//!
//! [`judge`] is the accept rule: the candidate is kept only if the median
//! of its per-round kernel-time ratios against the incumbent is at most
//! [`KEEP_MEDIAN`] and every round's ratio is below [`KEEP_MAX`].

use mage_common::space::{Config, Space};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The largest median ratio (candidate over incumbent) that keeps a candidate.
pub const KEEP_MEDIAN: f64 = 0.99;
/// Every round's ratio must be below this.
pub const KEEP_MAX: f64 = 1.0;
/// A generation whose control moved more than this (relative) is void.
pub const CONTROL_LIMIT: f64 = 0.03;
/// A candidate voided this many times is not proposed again.
pub const MAX_VOIDS: u32 = 2;

/// What the loop did with a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Kept,
    Rejected,
    /// The control drifted past its limit: no verdict.
    Void,
    /// The output failed the reference check: never timed, or not kept.
    Wrong,
    /// Refused by the space before any launch.
    Pruned,
}

/// What a run has tried so far.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every configuration with a verdict (kept, rejected, wrong) or pruned.
    pub tried: Vec<Config>,
    /// Voided generations per configuration.
    pub voids: HashMap<Config, u32>,
    /// The knob the last proposal changed.
    pub last_knob: Option<usize>,
}

impl History {
    /// Records a proposal's outcome. A pruned proposal cost nothing, so it
    /// does not use up its knob's turn.
    pub fn record(&mut self, config: &Config, knob: usize, decision: Decision) {
        if decision != Decision::Pruned {
            self.last_knob = Some(knob);
        }
        match decision {
            Decision::Void => {
                let n = self.voids.entry(config.clone()).or_default();
                *n += 1;
                if *n >= MAX_VOIDS {
                    self.tried.push(config.clone());
                }
            }
            _ => self.tried.push(config.clone()),
        }
    }

    pub fn tried(&self, c: &Config) -> bool {
        self.tried.contains(c)
    }
}

/// A configuration to measure, the knob it changes and why it was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub config: Config,
    pub knob: usize,
    pub reason: String,
}

/// Chooses the next configuration to measure against the incumbent.
pub trait Proposer {
    /// A name for the ledger.
    fn name(&self) -> &'static str;
    /// The next proposal, or `None` when there is nothing left to try.
    /// The loop checks validity itself: a proposal the space refuses is
    /// recorded as pruned, added to the history, and the proposer is asked
    /// again.
    fn propose(&mut self, space: &Space, incumbent: &Config, history: &History) -> Option<Proposal>;
}

/// One knob of the incumbent per generation: the knobs in turn, starting
/// after the one changed last; within a knob the nearest value not tried.
#[derive(Default)]
pub struct OneKnob;

impl Proposer for OneKnob {
    fn name(&self) -> &'static str {
        "one-knob"
    }

    fn propose(&mut self, space: &Space, incumbent: &Config, history: &History) -> Option<Proposal> {
        let knobs = space.knobs.len();
        let first = history.last_knob.map_or(0, |k| (k + 1) % knobs);
        let steps = space.steps(incumbent);
        for turn in 0..knobs {
            let knob = (first + turn) % knobs;
            let untried: Vec<_> = steps.iter().filter(|s| s.knob == knob && !history.tried(&s.config)).collect();
            if let Some(step) = untried.first() {
                let k = &space.knobs[knob];
                let (from, to) = (k.values[incumbent.0[knob]], k.values[step.config.0[knob]]);
                let reason = format!(
                    "{} {from} → {to}: the nearest untried value of the knob whose turn it is ({} more untried here); {}",
                    k.name,
                    untried.len() - 1,
                    k.summary
                );
                return Some(Proposal { config: step.config.clone(), knob, reason });
            }
        }
        None
    }
}

/// Per-round ratios and their summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    pub per_round: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Ratios {
    pub fn of(per_round: Vec<f64>) -> Ratios {
        let min = per_round.iter().copied().fold(f64::INFINITY, f64::min);
        let max = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ratios { median: mage_runtime::gpu::timing::median(&per_round), min, max, per_round }
    }
}

/// The accept rule on the candidate's per-round ratios against the
/// incumbent: whether to keep it, and the sentence that says why.
pub fn judge(vs_incumbent: &Ratios) -> (bool, String) {
    let (median, max) = (vs_incumbent.median, vs_incumbent.max);
    if median > KEEP_MEDIAN {
        return (false, format!("median ratio {median:.4} > {KEEP_MEDIAN}: not faster by 1% (rounds {:.4}–{max:.4})", vs_incumbent.min));
    }
    if max >= KEEP_MAX {
        let round = vs_incumbent.per_round.iter().position(|&r| r >= KEEP_MAX).map_or(0, |i| i + 1);
        return (
            false,
            format!("median ratio {median:.4} ≤ {KEEP_MEDIAN}, but round {round} at {max:.4} ≥ {KEEP_MAX}: not faster in every round"),
        );
    }
    (true, format!("median ratio {median:.4} ≤ {KEEP_MEDIAN} and every round below {KEEP_MAX} ({:.4}–{max:.4})", vs_incumbent.min))
}

/// Whether a control that read `start_us` then `end_us` stayed within
/// [`CONTROL_LIMIT`], and its drift (`end / start - 1`).
pub fn control_drift(start_us: f64, end_us: f64) -> (f64, bool) {
    let drift = end_us / start_us - 1.0;
    (drift, drift.abs() <= CONTROL_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratios(r: &[f64]) -> Ratios {
        Ratios::of(r.to_vec())
    }

    #[test]
    fn the_rule_needs_a_median_gain_and_every_round_faster() {
        let (keep, why) = judge(&ratios(&[0.95, 0.96, 0.97, 0.98, 0.95, 0.96, 0.97, 0.985]));
        assert!(keep, "{why}");
        assert!(why.starts_with("median ratio 0.9650 ≤ 0.99 and every round below 1"), "{why}");
        // One slow round sinks a median gain.
        let (keep, why) = judge(&ratios(&[0.95, 0.96, 0.97, 1.001, 0.95, 0.96, 0.97, 0.98]));
        assert!(!keep);
        assert!(why.contains("round 4 at 1.0010"), "{why}");
        // One boosted round does not carry a candidate.
        let (keep, why) = judge(&ratios(&[0.80, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]));
        assert!(!keep);
        assert!(why.starts_with("median ratio 1.0000 > 0.99"), "{why}");
        // A gain under 1% is not kept even if every round is below 1.
        assert!(!judge(&ratios(&[0.995; 8])).0);
        assert!(judge(&ratios(&[0.99; 8])).0);
    }

    #[test]
    fn the_control_allows_three_percent_either_way() {
        assert!(control_drift(100.0, 102.9).1);
        assert!(control_drift(100.0, 97.1).1);
        let (drift, ok) = control_drift(100.0, 103.5);
        assert!(!ok && (drift - 0.035).abs() < 1e-12);
        assert!(!control_drift(100.0, 96.9).1);
    }

    #[test]
    fn one_knob_takes_the_knobs_in_turn_and_never_repeats() {
        let space = &mage_matmul::space::SPACE;
        let start = space.stage_point("mage-006").unwrap();
        let mut history = History::default();
        let mut p = OneKnob;
        let mut seen = vec![];
        // mage-006's point has 11 neighbours: 3 tiles, 3 K steps, 1 layout, 2 stagings, 2 splits.
        for _ in 0..11 {
            let prop = p.propose(space, &start, &history).unwrap();
            let changed: Vec<usize> = (0..start.0.len()).filter(|&k| prop.config.0[k] != start.0[k]).collect();
            assert_eq!(changed, vec![prop.knob], "one knob per proposal");
            assert!(!seen.contains(&prop.config), "{} proposed twice", space.id(&prop.config));
            seen.push(prop.config.clone());
            history.record(&prop.config, prop.knob, Decision::Rejected);
        }
        // Knobs in turn, skipping a knob with nothing left (the layout after its one change).
        let knobs: Vec<usize> = seen.iter().map(|c| (0..5).find(|&k| c.0[k] != start.0[k]).unwrap()).collect();
        assert_eq!(knobs, [0, 1, 2, 3, 4, 0, 1, 3, 4, 0, 1]);
        // The nearest values first: k step 32 → 64, then 16, then 8.
        let k_steps: Vec<String> = [1, 6, 10].iter().map(|&i| space.value(&seen[i], "k step").to_string()).collect();
        assert_eq!(k_steps, ["bk64", "bk16", "bk8"]);
        assert_eq!(p.propose(space, &start, &history), None);
    }

    #[test]
    fn one_knob_runs_out_when_every_neighbour_is_tried() {
        let space = &mage_layernorm::space::SPACE;
        let start = space.stage_point("mage-002").unwrap();
        let mut history = History::default();
        let neighbours = space.steps(&start).len();
        for _ in 0..neighbours {
            let prop = OneKnob.propose(space, &start, &history).unwrap();
            history.record(&prop.config, prop.knob, Decision::Rejected);
        }
        assert_eq!(OneKnob.propose(space, &start, &history), None);
    }

    #[test]
    fn a_voided_candidate_comes_back_until_its_second_void() {
        let space = &mage_layernorm::space::SPACE;
        let start = space.stage_point("mage-002").unwrap();
        let mut history = History::default();
        let first = OneKnob.propose(space, &start, &history).unwrap();
        history.record(&first.config, first.knob, Decision::Void);
        history.last_knob = None;
        assert_eq!(OneKnob.propose(space, &start, &history).unwrap().config, first.config);
        history.record(&first.config, first.knob, Decision::Void);
        history.last_knob = None;
        assert_ne!(OneKnob.propose(space, &start, &history).unwrap().config, first.config);
    }
}
