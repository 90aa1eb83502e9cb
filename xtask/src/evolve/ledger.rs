//! The ledger of a run: `results/<namespace>/evolve-<op>-<shape>.jsonl`,
//! one JSON object per line, each complete on its own.
//!
//! * `start`: a session begins: the op, dims, starting configuration, the
//!   rule and procedure, the environment, and the incumbent against
//!   `current` before any change;
//! * `generation`: one candidate measured: configuration, parent, the knob
//!   changed, the reference checks, per-round kernel times of the three
//!   arms, ratios against the incumbent and against `current`, the
//!   control's drift, the decision and why;
//! * `pruned`: a proposal the space refused before any launch, and why.
//!
//! Entries are only ever appended: the whole file is written to a temporary
//! name, synced and renamed over the old one, after checking that the old
//! one still holds exactly what this run read. A run into an existing
//! ledger refuses unless told to resume, and then continues from it.

use super::propose::{Decision, History, Ratios, knob_index};
use mage_common::space::{Config, Space};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One line of a ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    Start(Box<Start>),
    Generation(Box<Generation>),
    Pruned(Pruned),
}

/// How a run measures and decides, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Procedure {
    pub instrument: String,
    pub rounds: usize,
    /// The arms' order in each round, rotating (`C I K K I C`, then `I C K K C I`).
    pub round_orders: Vec<String>,
    pub burn_in_pairs: usize,
    pub calls_per_segment: usize,
    pub keep_median_at_most: f64,
    pub keep_max_below: f64,
    pub control: String,
    pub control_limit: f64,
}

/// A session's first line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub session: u32,
    pub op: String,
    pub dims: Vec<u32>,
    /// What `--from` named: a stage or a configuration id.
    pub from: String,
    pub incumbent: String,
    /// `current`'s stage at these dims.
    pub current_stage: String,
    pub proposer: String,
    /// Configurations in the space, and how many fit these dims.
    pub space_configurations: usize,
    pub fitting_configurations: usize,
    pub procedure: Procedure,
    /// Before any change, a generation whose candidate is the incumbent
    /// itself (bound separately): how far apart two copies of one kernel
    /// read, and the incumbent against `current`.
    pub baseline: Option<Arms>,
    /// Device, clocks, commit, toolchain, PTX hashes.
    pub environment: Value,
    pub started_utc: String,
}

/// The reference check of one output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub passed: bool,
    pub max_abs_err: f64,
    pub summary: String,
}

/// Per-round median kernel µs of each arm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub candidate_us: f64,
    pub incumbent_us: f64,
    pub current_us: f64,
}

/// What the rounds measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arms {
    pub rounds: Vec<Round>,
    /// Medians over the rounds.
    pub candidate_us: f64,
    pub incumbent_us: f64,
    pub current_us: f64,
    pub vs_incumbent: Ratios,
    pub vs_current: Ratios,
    /// The incumbent's own ratios against `current`.
    pub incumbent_vs_current: Ratios,
}

/// The control at the start and the end of a generation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Control {
    pub start_us: f64,
    pub end_us: f64,
    pub drift: f64,
    pub within_limit: bool,
}

/// What a proposal changes: the configuration, its parent, and the knob
/// with its old and new values (two knobs, joined by ` + `, for a pair).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub config: String,
    pub parent: String,
    pub knob: String,
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub generation: u32,
    pub session: u32,
    #[serde(flatten)]
    pub change: Change,
    pub proposer: String,
    pub proposed_because: String,
    pub check_before: Check,
    pub check_after: Option<Check>,
    pub control: Option<Control>,
    pub arms: Option<Arms>,
    pub decision: Decision,
    pub reason: String,
    /// The incumbent after this generation.
    pub incumbent: String,
    pub started_utc: String,
    pub finished_utc: String,
    pub commit: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pruned {
    pub session: u32,
    #[serde(flatten)]
    pub change: Change,
    pub reason: String,
    pub at_utc: String,
}

/// `evolve-matmul-1024x1024x1024.jsonl`.
pub fn file_name(op: &str, dims: &[u32]) -> String {
    format!("evolve-{op}-{}.jsonl", mage_common::op::Op::dims_label(dims))
}

/// A ledger file and what it holds.
pub struct Ledger {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    /// The file's bytes as this run last read or wrote them.
    bytes: Vec<u8>,
}

impl Ledger {
    /// Reads a ledger (every line must parse).
    pub fn read(path: &Path) -> Result<Ledger, String> {
        // Only a regular file: a FIFO would block.
        let bytes = crate::outputs::read_text(path, None)?.into_bytes();
        let text = std::str::from_utf8(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let entries = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1)))
            .collect::<Result<Vec<Entry>, String>>()?;
        Ok(Ledger { path: path.to_path_buf(), entries, bytes })
    }

    /// The ledger of a run: a new one, or with `resume` the existing one,
    /// which must be for the same op and dims. Without `resume` an existing
    /// ledger is refused, never overwritten.
    pub fn open(path: &Path, resume: bool, op: &str, dims: &[u32]) -> Result<Ledger, String> {
        if !path.exists() {
            return Ok(Ledger { path: path.to_path_buf(), entries: vec![], bytes: vec![] });
        }
        if !resume {
            return Err(format!("{} already holds a ledger; pass --resume to continue it (it is never overwritten)", path.display()));
        }
        let ledger = Ledger::read(path)?;
        let mismatch = match ledger.starts().next() {
            Some(s) if s.op == op && s.dims == dims => None,
            Some(s) => Some(format!("{} is a ledger of {} at {:?}, not {op} at {dims:?}", path.display(), s.op, s.dims)),
            None => Some(format!("{} has no start entry", path.display())),
        };
        mismatch.map_or(Ok(ledger), Err)
    }

    pub fn starts(&self) -> impl Iterator<Item = &Start> {
        self.entries.iter().filter_map(|e| if let Entry::Start(s) = e { Some(s.as_ref()) } else { None })
    }

    pub fn generations(&self) -> impl Iterator<Item = &Generation> {
        self.entries.iter().filter_map(|e| if let Entry::Generation(g) = e { Some(g.as_ref()) } else { None })
    }

    /// The next session's number.
    pub fn next_session(&self) -> u32 {
        self.starts().count() as u32 + 1
    }

    /// Appends one entry: the old bytes plus the new line, written
    /// atomically over the ledger; refuses if the file changed since this
    /// run read it.
    pub fn append(&mut self, entry: Entry) -> Result<(), String> {
        let on_disk =
            if self.path.exists() { std::fs::read(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))? } else { vec![] };
        if on_disk != self.bytes {
            return Err(format!("{} changed while this run held it; not writing over it", self.path.display()));
        }
        let mut bytes = self.bytes.clone();
        bytes.extend(serde_json::to_string(&entry).map_err(|e| e.to_string())?.as_bytes());
        bytes.push(b'\n');
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        mage_common::fixtures::write_atomic(&self.path, &bytes)?;
        self.bytes = bytes;
        self.entries.push(entry);
        Ok(())
    }

    /// Where a run stands: the incumbent, what has been tried, and the
    /// generations so far.
    pub fn state(&self, space: &Space) -> Result<State, String> {
        let start = self.starts().next().ok_or("the ledger has no start entry")?;
        let mut state = State { incumbent: space.parse(&start.incumbent)?, history: History::default(), generations: 0 };
        state.history.tried.push(state.incumbent.clone());
        for e in &self.entries {
            state.apply(space, e)?;
        }
        Ok(state)
    }
}

/// Where a run stands.
#[derive(Clone, Debug)]
pub struct State {
    pub incumbent: Config,
    pub history: History,
    pub generations: u32,
}

impl State {
    /// The state after `entry`: how a live run moves, and how reading a
    /// ledger replays it.
    pub fn apply(&mut self, space: &Space, entry: &Entry) -> Result<(), String> {
        match entry {
            Entry::Start(_) => {}
            Entry::Pruned(p) => self.history.record(&space.parse(&p.change.config)?, knob_index(space, &p.change.knob)?, Decision::Pruned),
            Entry::Generation(g) => {
                let (config, parent) = (space.parse(&g.change.config)?, space.parse(&g.change.parent)?);
                self.generations += 1;
                self.history.record(&config, knob_index(space, &g.change.knob)?, g.decision);
                if let (Some(a), Decision::Kept | Decision::Rejected) = (&g.arms, g.decision) {
                    self.history.read(&config, &parent, a.vs_incumbent.median);
                }
                self.incumbent = space.parse(&g.incumbent)?;
            }
        }
        Ok(())
    }
}

/// `2026-12-01T22:09:25Z` for a Unix time.
pub fn utc(unix: u64) -> String {
    let (days, secs) = ((unix / 86400) as i64, unix % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// Now, as [`utc`].
pub fn now_utc() -> String {
    utc(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::evolve::propose::Ratios;

    pub fn start(op: &str, dims: &[u32], incumbent: &str) -> Entry {
        Entry::Start(Box::new(Start {
            session: 1,
            op: op.into(),
            dims: dims.to_vec(),
            from: "mage-002".into(),
            incumbent: incumbent.into(),
            current_stage: "mage-007".into(),
            proposer: "one-knob".into(),
            space_configurations: 84,
            fitting_configurations: 60,
            procedure: Procedure {
                instrument: "CUPTI".into(),
                rounds: 2,
                round_orders: vec!["C I K K I C".into()],
                burn_in_pairs: 4,
                calls_per_segment: 100,
                keep_median_at_most: 0.99,
                keep_max_below: 1.0,
                control: "copy".into(),
                control_limit: 0.03,
            },
            baseline: Some(arms(6.9, 6.9, 5.6)),
            environment: serde_json::json!({"device": "test"}),
            started_utc: utc(0),
        }))
    }

    pub fn arms(candidate: f64, incumbent: f64, current: f64) -> Arms {
        let rounds = vec![Round { candidate_us: candidate, incumbent_us: incumbent, current_us: current }; 2];
        Arms {
            rounds,
            candidate_us: candidate,
            incumbent_us: incumbent,
            current_us: current,
            vs_incumbent: Ratios::of(vec![candidate / incumbent; 2]),
            vs_current: Ratios::of(vec![candidate / current; 2]),
            incumbent_vs_current: Ratios::of(vec![incumbent / current; 2]),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn generation(n: u32, config: &str, parent: &str, knob: &str, decision: Decision, incumbent: &str, us: (f64, f64, f64)) -> Entry {
        let check = Check { passed: true, max_abs_err: 1e-6, summary: "ok".into() };
        Entry::Generation(Box::new(Generation {
            generation: n,
            session: 1,
            change: Change { config: config.into(), parent: parent.into(), knob: knob.into(), from: "a".into(), to: "b".into() },
            proposer: "one-knob".into(),
            proposed_because: "its turn".into(),
            check_before: check.clone(),
            check_after: Some(check),
            control: Some(Control { start_us: 100.0, end_us: 101.0, drift: 0.01, within_limit: true }),
            arms: Some(arms(us.0, us.1, us.2)),
            decision,
            reason: "because".into(),
            incumbent: incumbent.into(),
            started_utc: utc(0),
            finished_utc: utc(1),
            commit: "abc".into(),
        }))
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mage-ledger-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join(file_name("layernorm", &[4096, 768]))
    }

    #[test]
    fn entries_round_trip_and_append_keeps_every_earlier_byte() {
        let path = temp("append");
        let mut ledger = Ledger::open(&path, false, "layernorm", &[4096, 768]).unwrap();
        ledger.append(start("layernorm", &[4096, 768], "warp-t256-stream-f1")).unwrap();
        let first = std::fs::read(&path).unwrap();
        let g = generation(
            1,
            "lanes16-t256-stream-f1",
            "warp-t256-stream-f1",
            "rows",
            Decision::Rejected,
            "warp-t256-stream-f1",
            (7.0, 6.9, 5.6),
        );
        ledger.append(g.clone()).unwrap();
        let both = std::fs::read(&path).unwrap();
        assert!(both.starts_with(&first));
        assert_eq!(String::from_utf8(both).unwrap().lines().count(), 2);
        let back = Ledger::read(&path).unwrap();
        assert_eq!(back.entries.len(), 2);
        assert_eq!(back.entries[1], g);
        assert!(!path.with_extension(format!("jsonl.tmp{}", std::process::id())).exists());
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn an_existing_ledger_is_refused_or_resumed_never_overwritten() {
        let path = temp("refuse");
        let mut ledger = Ledger::open(&path, false, "layernorm", &[4096, 768]).unwrap();
        ledger.append(start("layernorm", &[4096, 768], "warp-t256-stream-f1")).unwrap();
        let before = std::fs::read(&path).unwrap();
        let e = Ledger::open(&path, false, "layernorm", &[4096, 768]).err().unwrap();
        assert!(e.contains("pass --resume"), "{e}");
        let e = Ledger::open(&path, true, "layernorm", &[4096, 4096]).err().unwrap();
        assert!(e.contains("not layernorm at [4096, 4096]"), "{e}");
        let mut resumed = Ledger::open(&path, true, "layernorm", &[4096, 768]).unwrap();
        assert_eq!(resumed.next_session(), 2);
        // A write behind the run's back is not written over.
        std::fs::write(&path, b"{}\n").unwrap();
        let e = resumed.append(start("layernorm", &[4096, 768], "warp-t256-stream-f1")).unwrap_err();
        assert!(e.contains("changed while this run held it"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        std::fs::write(&path, &before).unwrap();
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn the_state_follows_kept_generations_and_remembers_every_try() {
        let space = &mage_layernorm::space::SPACE;
        let path = temp("state");
        let mut ledger = Ledger::open(&path, false, "layernorm", &[4096, 768]).unwrap();
        ledger.append(start("layernorm", &[4096, 768], "warp-t256-stream-f1")).unwrap();
        let (a, b) = ("warp-t256-hold8-f1", "warp-t128-hold8-f1");
        ledger.append(generation(1, a, "warp-t256-stream-f1", "held", Decision::Kept, a, (6.0, 6.9, 5.6))).unwrap();
        ledger
            .append(Entry::Pruned(Pruned {
                session: 1,
                change: Change {
                    config: "warp-t256-hold4-f1".into(),
                    parent: a.into(),
                    knob: "held".into(),
                    from: "hold8".into(),
                    to: "hold4".into(),
                },
                reason: "too narrow".into(),
                at_utc: utc(2),
            }))
            .unwrap();
        ledger.append(generation(2, b, a, "threads", Decision::Rejected, a, (6.1, 6.0, 5.6))).unwrap();
        let state = ledger.state(space).unwrap();
        assert_eq!(space.id(&state.incumbent), a);
        assert_eq!(state.generations, 2);
        for id in ["warp-t256-stream-f1", a, b, "warp-t256-hold4-f1"] {
            assert!(state.history.tried(&space.parse(id).unwrap()), "{id}");
        }
        assert_eq!(state.history.last_knob, Some(1));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_163_565), "2026-12-01T22:19:25Z");
    }
}
