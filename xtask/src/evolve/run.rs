//! The loop itself, apart from the GPU: ask the proposer, prune what the
//! space refuses, have the [`Measurer`] measure the rest, decide, and
//! append every step to the ledger. The GPU measurer lives in `measure`;
//! tests drive the loop with a model.

use super::ledger::{Arms, Change, Check, Control, Entry, Generation, Ledger, Pruned, now_utc};
use super::propose::{CONTROL_LIMIT, Decision, Proposal, Proposer, judge};
use mage_common::space::{Config, Space};

/// A candidate's timed part: the rounds, the check after them, the control.
pub struct Timed {
    pub arms: Arms,
    pub check_after: Check,
    pub control: Control,
}

/// What measuring a candidate gave: its check before timing and, if that
/// passed, the timed part.
pub struct Measured {
    pub check_before: Check,
    pub timed: Option<Timed>,
}

/// Measures a candidate against the incumbent (and `current`).
pub trait Measurer {
    fn measure(&mut self, incumbent: &Config, candidate: &Config) -> Result<Measured, String>;
}

/// How a call of [`run`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// It measured the generations asked for.
    Done { measured: u32 },
    /// The proposer had nothing left to try from the incumbent.
    Exhausted { measured: u32, incumbent: String },
}

/// A timed generation's decision: a wrong output after timing, then a
/// control past its limit, then the rule's verdict.
pub fn decide(timed: &Timed) -> (Decision, String) {
    let (keep, why) = judge(&timed.arms.vs_incumbent);
    let (after, control) = (&timed.check_after, &timed.control);
    if !after.passed {
        (Decision::Wrong, format!("the output failed the reference after timing: {}", after.summary))
    } else if !control.within_limit {
        let why = format!(
            "void: the control moved {:+.1}% ({:.2} → {:.2} µs), past {:.0}%; no verdict ({why})",
            control.drift * 100.0,
            control.start_us,
            control.end_us,
            CONTROL_LIMIT * 100.0
        );
        (Decision::Void, why)
    } else if keep {
        (Decision::Kept, why)
    } else {
        (Decision::Rejected, why)
    }
}

/// What a proposal changes in the incumbent, for the ledger.
fn change(space: &Space, incumbent: &Config, p: &Proposal) -> Change {
    let (knob, from, to) = p.change(space, incumbent);
    Change { config: space.id(&p.config), parent: space.id(incumbent), knob, from, to }
}

/// The ledger entry of a measured generation.
pub fn conclude(
    space: &Space,
    incumbent: &Config,
    p: &Proposal,
    measured: Measured,
    number: u32,
    session: u32,
    started_utc: String,
) -> Generation {
    let change = change(space, incumbent, p);
    let (decision, reason) = match &measured.timed {
        None if !measured.check_before.passed => {
            (Decision::Wrong, format!("the output failed the reference before timing: {}", measured.check_before.summary))
        }
        None => (Decision::Wrong, "not timed".into()),
        Some(t) => decide(t),
    };
    let (arms, check_after, control) = match measured.timed {
        Some(t) => (Some(t.arms), Some(t.check_after), Some(t.control)),
        None => (None, None, None),
    };
    Generation {
        generation: number,
        session,
        change,
        proposer: p.by.into(),
        proposed_because: p.reason.clone(),
        check_before: measured.check_before,
        check_after,
        control,
        arms,
        decision,
        reason,
        incumbent: space.id(if decision == Decision::Kept { &p.config } else { incumbent }),
        started_utc,
        finished_utc: now_utc(),
        commit: mage_runtime::BUILD_COMMIT.into(),
    }
}

/// Runs up to `generations` measured generations from where the ledger
/// stands (it must hold a start entry), appending every pruned proposal
/// and every generation as it happens.
pub fn run(
    space: &Space,
    dims: &[u32],
    session: u32,
    ledger: &mut Ledger,
    proposer: &mut dyn Proposer,
    measurer: &mut dyn Measurer,
    generations: u32,
) -> Result<Ended, String> {
    let mut state = ledger.state(space)?;
    let mut measured = 0;
    while measured < generations {
        let Some(p) = proposer.propose(space, &state.incumbent, &state.history) else {
            return Ok(Ended::Exhausted { measured, incumbent: space.id(&state.incumbent) });
        };
        let (knob, from, to) = p.change(space, &state.incumbent);
        if let Err(reason) = space.valid(&p.config, dims) {
            let _ = crate::stdout::line(&format!("pruned {} ({knob} {from} → {to}): {reason}", space.id(&p.config)));
            let change = change(space, &state.incumbent, &p);
            let entry = Entry::Pruned(Pruned { session, change, reason, at_utc: now_utc() });
            state.apply(space, &entry)?;
            ledger.append(entry)?;
            continue;
        }
        let number = state.generations + 1;
        eprintln!("generation {number}: {} ({knob} {from} → {to})", space.id(&p.config));
        let started = now_utc();
        let m = measurer.measure(&state.incumbent, &p.config)?;
        let g = conclude(space, &state.incumbent, &p, m, number, session, started);
        let _ = crate::stdout::line(&format!("generation {number}: {:?}: {}", g.decision, g.reason));
        let entry = Entry::Generation(Box::new(g));
        state.apply(space, &entry)?;
        ledger.append(entry)?;
        measured += 1;
    }
    Ok(Ended::Done { measured })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolve::ledger::Round;
    use crate::evolve::ledger::tests::start;
    use crate::evolve::measure::arms_of;
    use crate::evolve::propose::{OneKnob, Search, control_drift};
    use mage_layernorm::space::{SPACE, decode};

    /// A model of the GPU: kernel µs from the configuration, one
    /// configuration wrong, one generation's control drifting.
    struct Model {
        wrong: String,
        drift_on: u32,
        calls: u32,
        measured: Vec<String>,
    }

    fn model_us(c: &Config) -> f64 {
        let s = decode(c);
        // Held rows read once; a warp per row is best; 256 threads best.
        10.0 - if s.held > 0 { 3.0 } else { 0.0 } - if s.lanes == 32 { 1.0 } else { 0.0 } - if s.threads == 256 { 0.5 } else { 0.0 }
            + 0.1 * s.in_flight as f64
    }

    impl Measurer for Model {
        fn measure(&mut self, incumbent: &Config, candidate: &Config) -> Result<Measured, String> {
            self.calls += 1;
            let id = SPACE.id(candidate);
            self.measured.push(id.clone());
            let ok = |passed| Check { passed, max_abs_err: 0.0, summary: if passed { "ok" } else { "5 of 10 elements outside" }.into() };
            if id == self.wrong {
                return Ok(Measured { check_before: ok(false), timed: None });
            }
            let (c, i) = (model_us(candidate), model_us(incumbent));
            let rounds = (0..8).map(|r| Round { candidate_us: c + 0.001 * r as f64, incumbent_us: i, current_us: 5.6 }).collect();
            let end = if self.calls == self.drift_on { 105.0 } else { 100.5 };
            let (drift, within_limit) = control_drift(100.0, end);
            let control = Control { start_us: 100.0, end_us: end, drift, within_limit };
            Ok(Measured { check_before: ok(true), timed: Some(Timed { arms: arms_of(rounds), check_after: ok(true), control }) })
        }
    }

    fn fresh_ledger(name: &str) -> Ledger {
        let dir = std::env::temp_dir().join(format!("mage-evolve-run-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut l = Ledger::open(&dir.join("evolve-layernorm-4096x768.jsonl"), false, "layernorm", &[4096, 768]).unwrap();
        l.append(start("layernorm", &[4096, 768], "warp-t256-stream-f1")).unwrap();
        l
    }

    #[test]
    fn the_loop_prunes_measures_keeps_and_writes_everything_down() {
        let mut ledger = fresh_ledger("loop");
        let mut model = Model { wrong: "warps2-t256-stream-f1".into(), drift_on: 2, calls: 0, measured: vec![] };
        let ended = run(&SPACE, &[4096, 768], 1, &mut ledger, &mut Search::default(), &mut model, 6).unwrap();
        assert_eq!(ended, Ended::Done { measured: 6 });
        let gens: Vec<&Generation> = ledger.generations().collect();
        assert_eq!(gens.len(), 6);
        assert_eq!(gens.iter().map(|g| g.generation).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
        // Generation 1 changes the rows knob first, to the next value: two warps a row, the wrong one.
        assert_eq!((gens[0].change.config.as_str(), gens[0].decision), ("warps2-t256-stream-f1", Decision::Wrong));
        assert!(gens[0].reason.contains("before timing: 5 of 10 elements outside"), "{}", gens[0].reason);
        // Generation 2 (threads 256 → 512) is void: its control moved 5%.
        assert_eq!(gens[1].decision, Decision::Void);
        // Holding the row pays 3 µs: hold1, hold2 and hold4 do not fit 768 over 32 lanes (pruned
        // without using up the knob's turn), hold8 does.
        let pruned: Vec<&Pruned> = ledger.entries.iter().filter_map(|e| if let Entry::Pruned(p) = e { Some(p) } else { None }).collect();
        assert!(pruned.iter().any(|p| p.change.config == "warp-t256-hold1-f1" && p.reason.contains("these lanes hold 1")), "{pruned:?}");
        assert_eq!((gens[2].change.config.as_str(), gens[2].decision), ("warp-t256-hold8-f1", Decision::Kept));
        assert_eq!(gens[2].incumbent, "warp-t256-hold8-f1");
        assert_eq!(gens.iter().filter(|g| g.decision == Decision::Kept).count(), 1);
        // Later generations start from the new incumbent.
        let after = gens.iter().position(|g| g.change.config == "warp-t256-hold8-f1").unwrap();
        assert!(gens[after + 1..].iter().all(|g| g.change.parent == "warp-t256-hold8-f1"));
        // Nothing pruned is ever measured, nothing is measured twice except a void.
        for p in &pruned {
            assert!(!model.measured.contains(&p.change.config));
        }
        let state = ledger.state(&SPACE).unwrap();
        assert_eq!(SPACE.id(&state.incumbent), "warp-t256-hold8-f1");
        let _ = std::fs::remove_dir_all(ledger.path.parent().unwrap());
    }

    #[test]
    fn a_resumed_run_continues_and_ends_when_the_neighbourhood_is_exhausted() {
        let mut ledger = fresh_ledger("resume");
        let mut model = Model { wrong: String::new(), drift_on: 0, calls: 0, measured: vec![] };
        run(&SPACE, &[4096, 768], 1, &mut ledger, &mut OneKnob, &mut model, 3).unwrap();
        let mut resumed = Ledger::open(&ledger.path, true, "layernorm", &[4096, 768]).unwrap();
        let ended = run(&SPACE, &[4096, 768], 2, &mut resumed, &mut OneKnob, &mut model, 100).unwrap();
        let Ended::Exhausted { measured, incumbent } = ended else { panic!("{ended:?}") };
        assert!(measured > 3, "{measured}");
        // The model's optimum: held, a warp per row, 256 threads, one load in flight.
        assert_eq!(incumbent, "warp-t256-hold8-f1");
        // Pairs of the one-knob changes read against the last incumbent come next.
        let before = resumed.generations().count();
        let ended = run(&SPACE, &[4096, 768], 3, &mut resumed, &mut Search::default(), &mut model, 2).unwrap();
        assert_eq!(ended, Ended::Done { measured: 2 });
        let pairs: Vec<&Generation> = resumed.generations().skip(before).collect();
        assert!(pairs.iter().all(|g| g.proposer == "pairs" && g.change.knob.contains(" + ")), "{pairs:?}");
        let numbers: Vec<u32> = resumed.generations().map(|g| g.generation).collect();
        assert_eq!(numbers, (1..=numbers.len() as u32).collect::<Vec<_>>());
        let mut seen = model.measured.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), model.measured.len(), "a configuration was measured twice: {:?}", model.measured);
        let _ = std::fs::remove_dir_all(ledger.path.parent().unwrap());
    }

    #[test]
    fn a_wrong_output_then_a_drifting_control_overrule_the_verdict() {
        let check = |passed| Check { passed, max_abs_err: 0.0, summary: "1 of 4 elements outside".into() };
        let timed = |passed, end_us: f64, candidate_us: f64| {
            let (drift, within_limit) = control_drift(100.0, end_us);
            let rounds = vec![Round { candidate_us, incumbent_us: 10.0, current_us: 9.0 }; 8];
            Timed { arms: arms_of(rounds), check_after: check(passed), control: Control { start_us: 100.0, end_us, drift, within_limit } }
        };
        assert_eq!(decide(&timed(true, 101.0, 9.0)).0, Decision::Kept);
        assert_eq!(decide(&timed(true, 101.0, 9.95)).0, Decision::Rejected);
        let (d, why) = decide(&timed(true, 104.0, 9.0));
        assert_eq!(d, Decision::Void);
        assert!(why.starts_with("void: the control moved +4.0% (100.00 → 104.00 µs), past 3%; no verdict (median ratio 0.9000"), "{why}");
        let (d, why) = decide(&timed(false, 104.0, 9.0));
        assert_eq!(d, Decision::Wrong);
        assert!(why.contains("after timing: 1 of 4 elements outside"), "{why}");
    }
}
