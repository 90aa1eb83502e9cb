//! What to try next, and whether to keep it.
//!
//! A [`Proposer`] picks the next configuration to measure against the
//! incumbent from the [`History`] of a run (every configuration measured,
//! pruned or voided, and the ratios read, from the ledger, so a resumed run
//! continues where it stopped). [`OneKnob`] changes one knob of the
//! incumbent per generation, taking the knobs in turn and each knob's
//! nearest untried value first, and never proposes a configuration tried
//! before. Once every one-knob change of the incumbent has been tried,
//! [`Pairs`] combines two of them from different knobs, the pair whose
//! single ratios multiply to the lowest first: what the pair would read if
//! the knobs did not interact, so its reading shows whether they do.
//! [`Search`] is the two in that order. A smarter proposer implements the
//! same trait.
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

/// A verdict's median ratio of a configuration against its parent.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub config: Config,
    pub parent: Config,
    pub vs_parent: f64,
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
    /// The median ratios of generations kept or rejected.
    pub readings: Vec<Reading>,
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

    /// Remembers a verdict's median ratio against the parent.
    pub fn read(&mut self, config: &Config, parent: &Config, vs_parent: f64) {
        self.readings.push(Reading { config: config.clone(), parent: parent.clone(), vs_parent });
    }
}

/// A configuration to measure, the knob it changes (and a second one for
/// a pair), which proposer chose it and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub config: Config,
    pub knob: usize,
    pub also: Option<usize>,
    pub by: &'static str,
    pub reason: String,
}

impl Proposal {
    /// The knobs' names, their values in the incumbent and in the
    /// proposal, each joined by ` + ` for a pair.
    pub fn change(&self, space: &Space, incumbent: &Config) -> (String, String, String) {
        let knobs: Vec<usize> = std::iter::once(self.knob).chain(self.also).collect();
        let join = |f: &dyn Fn(usize) -> &'static str| knobs.iter().map(|&k| f(k)).collect::<Vec<_>>().join(" + ");
        (
            join(&|k| space.knobs[k].name),
            join(&|k| space.knobs[k].values[incumbent.0[k]]),
            join(&|k| space.knobs[k].values[self.config.0[k]]),
        )
    }
}

/// The knob index of a ledger's knob text (the first of a pair).
pub fn knob_index(space: &Space, text: &str) -> Result<usize, String> {
    let name = text.split(" + ").next().unwrap_or(text);
    space.knobs.iter().position(|k| k.name == name).ok_or(format!("the space has no knob `{name}`"))
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
                return Some(Proposal { config: step.config.clone(), knob, also: None, by: self.name(), reason });
            }
        }
        None
    }
}

/// Two one-knob changes of the incumbent together, from different knobs,
/// both read against this incumbent (kept or rejected), lowest product of
/// their ratios first.
#[derive(Default)]
pub struct Pairs;

impl Proposer for Pairs {
    fn name(&self) -> &'static str {
        "pairs"
    }

    fn propose(&mut self, space: &Space, incumbent: &Config, history: &History) -> Option<Proposal> {
        let singles: Vec<(usize, &Reading)> = history
            .readings
            .iter()
            .filter(|r| r.parent == *incumbent)
            .filter_map(|r| {
                let changed: Vec<usize> = (0..incumbent.0.len()).filter(|&k| r.config.0[k] != incumbent.0[k]).collect();
                (changed.len() == 1).then(|| (changed[0], r))
            })
            .collect();
        let mut pairs = vec![];
        for (i, (ka, a)) in singles.iter().enumerate() {
            for (kb, b) in &singles[i + 1..] {
                if ka != kb {
                    let mut config = incumbent.clone();
                    config.0[*ka] = a.config.0[*ka];
                    config.0[*kb] = b.config.0[*kb];
                    pairs.push((a.vs_parent * b.vs_parent, *ka, *kb, a.vs_parent, b.vs_parent, config));
                }
            }
        }
        pairs.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (predicted, ka, kb, ra, rb, config) = pairs.into_iter().find(|p| !history.tried(&p.5))?;
        let (knob_a, knob_b) = (&space.knobs[ka], &space.knobs[kb]);
        let reason = format!(
            "every one-knob change of the incumbent has been tried; {} {} (read {ra:.3}) with {} {} (read {rb:.3}): {predicted:.3} if the two knobs do not interact",
            knob_a.name, knob_a.values[config.0[ka]], knob_b.name, knob_b.values[config.0[kb]],
        );
        Some(Proposal { config, knob: ka, also: Some(kb), by: self.name(), reason })
    }
}

/// [`OneKnob`], then [`Pairs`] once every one-knob change has been tried.
#[derive(Default)]
pub struct Search {
    one: OneKnob,
    pairs: Pairs,
}

impl Proposer for Search {
    fn name(&self) -> &'static str {
        "one-knob, then pairs of one-knob changes"
    }

    fn propose(&mut self, space: &Space, incumbent: &Config, history: &History) -> Option<Proposal> {
        self.one.propose(space, incumbent, history).or_else(|| self.pairs.propose(space, incumbent, history))
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
    fn a_pruned_proposal_keeps_its_knobs_turn() {
        let space = &mage_layernorm::space::SPACE;
        let start = space.stage_point("mage-002").unwrap();
        let mut history = History::default();
        let first = OneKnob.propose(space, &start, &history).unwrap();
        history.record(&first.config, first.knob, Decision::Pruned);
        let second = OneKnob.propose(space, &start, &history).unwrap();
        assert_eq!((first.knob, second.knob), (0, 0));
        assert_ne!(first.config, second.config);
        history.record(&second.config, second.knob, Decision::Rejected);
        assert_eq!(OneKnob.propose(space, &start, &history).unwrap().knob, 1);
    }

    #[test]
    fn pairs_combine_the_best_single_changes_of_different_knobs() {
        let space = &mage_layernorm::space::SPACE;
        let start = space.parse("warp-t256-stream-f1").unwrap();
        let mut history = History::default();
        let mut search = Search::default();
        // Every one-knob change reads 1.02 but two: rows → warps2 0.96 and in flight → f2 0.95.
        while let Some(p) = search.propose(space, &start, &history) {
            if p.also.is_some() {
                let (knob, from, to) = p.change(space, &start);
                assert_eq!(p.by, "pairs");
                assert_eq!((knob.as_str(), from.as_str(), to.as_str()), ("rows + in flight", "warp + f1", "warps2 + f2"), "{}", p.reason);
                assert!(p.reason.ends_with("0.912 if the two knobs do not interact"), "{}", p.reason);
                return;
            }
            let ratio = match (p.knob, space.id(&p.config).as_str()) {
                (0, "warps2-t256-stream-f1") => 0.96,
                (3, "warp-t256-stream-f2") => 0.95,
                _ => 1.02,
            };
            history.record(&p.config, p.knob, Decision::Rejected);
            history.read(&p.config, &start, ratio);
        }
        panic!("no pair was proposed");
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
