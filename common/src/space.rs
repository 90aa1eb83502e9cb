//! Parameter spaces: an op's kernel written once over knobs (const
//! generics), instantiated for every configuration that can be built, so a
//! search can move through them at run time from the PTX alone.
//!
//! A [`Space`] names its knobs and their values, says which configurations
//! are built (the shape-independent part of validity: shared-memory budget,
//! whole warps, registers) and which of those run a given shape correctly
//! (alignment, rows that fit what a lane holds, ...), and plans a
//! configuration for a shape as a stage would. Every refusal is a sentence,
//! so whoever prunes can say why.
//!
//! A configuration's id is its knob values' labels joined by `-`, in knob
//! order (`bm64-bn64-tm4-tn4-bk32-at-cp2-sk1`); a label may itself contain
//! `-`, so ids are parsed knob by knob.

use crate::Kernel;
use crate::op::{HostBuf, Op, Plan};

/// One knob: its name, what moving it trades, and its values, in order
/// (neighbouring values are one step apart). A value's label is its part of
/// a configuration's id.
#[derive(Debug)]
pub struct Knob {
    pub name: &'static str,
    pub summary: &'static str,
    pub values: &'static [&'static str],
}

/// A point of a space: the index of one value per knob, in knob order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Config(pub Vec<usize>);

/// A stage whose kernel is a point of the space, and how close the point is.
#[derive(Debug)]
pub struct StagePoint {
    pub stage: &'static str,
    /// The configuration's id.
    pub config: &'static str,
    /// `same bits` where the point computes exactly what the stage does, or
    /// what differs.
    pub likeness: &'static str,
}

/// A change of one knob of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub knob: usize,
    pub config: Config,
}

/// An op's parameter space.
pub struct Space {
    pub op: &'static Op,
    /// One line: what kernel the knobs shape.
    pub summary: &'static str,
    pub knobs: &'static [Knob],
    /// Whether the configuration is built into the op's PTX, or why not.
    pub buildable: fn(&Config) -> Result<(), String>,
    /// For a buildable configuration: whether it computes these dims
    /// correctly, or why not.
    pub fits: fn(&Config, &[u32]) -> Result<(), String>,
    /// The launches of a configuration for dims it fits.
    pub plan: fn(&Config, &[u32]) -> Plan,
    /// Every kernel entry a configuration may launch.
    pub kernels: &'static [&'static Kernel],
    /// Stages that are points of the space.
    pub stages: &'static [StagePoint],
    /// Small shapes the emulator audit runs every configuration at.
    pub audit_dims: &'static [&'static [u32]],
}

impl std::fmt::Debug for Space {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "space of {}", self.op.name)
    }
}

impl Space {
    /// The id of a configuration: its values' labels joined by `-`.
    pub fn id(&self, c: &Config) -> String {
        self.knobs.iter().zip(&c.0).map(|(k, &v)| k.values[v]).collect::<Vec<_>>().join("-")
    }

    /// The configuration with this id.
    pub fn parse(&self, id: &str) -> Result<Config, String> {
        let mut rest = id;
        let mut values = Vec::with_capacity(self.knobs.len());
        for (i, knob) in self.knobs.iter().enumerate() {
            if i > 0 {
                rest = rest.strip_prefix('-').ok_or_else(|| format!("`{id}` ends before knob `{}`", knob.name))?;
            }
            // The longest label that ends where a `-` or the id does.
            let found = knob
                .values
                .iter()
                .enumerate()
                .filter(|(_, v)| rest.starts_with(**v) && (rest.len() == v.len() || rest[v.len()..].starts_with('-')))
                .max_by_key(|(_, v)| v.len())
                .ok_or_else(|| format!("`{id}`: knob `{}` takes {}, not `{rest}`", knob.name, knob.values.join(", ")))?;
            values.push(found.0);
            rest = &rest[found.1.len()..];
        }
        if !rest.is_empty() {
            return Err(format!("`{id}` has `{rest}` after its last knob"));
        }
        Ok(Config(values))
    }

    /// The label of knob `name`'s value in `c`.
    pub fn value(&self, c: &Config, name: &str) -> &'static str {
        let i = self.knobs.iter().position(|k| k.name == name).unwrap_or_else(|| panic!("{self:?} has no knob `{name}`"));
        self.knobs[i].values[c.0[i]]
    }

    /// Every combination of knob values, built or not, in id order of the
    /// knobs (the last knob fastest).
    pub fn product(&self) -> Vec<Config> {
        let mut all = vec![Config(vec![])];
        for knob in self.knobs {
            all = all.into_iter().flat_map(|c| (0..knob.values.len()).map(move |v| Config([c.0.clone(), vec![v]].concat()))).collect();
        }
        all
    }

    /// Every configuration that is built: what a search can reach.
    pub fn configs(&self) -> Vec<Config> {
        self.product().into_iter().filter(|c| (self.buildable)(c).is_ok()).collect()
    }

    /// Whether `c` is built and computes `dims` correctly, or why not.
    pub fn valid(&self, c: &Config, dims: &[u32]) -> Result<(), String> {
        (self.buildable)(c)?;
        (self.fits)(c, dims)
    }

    /// The configuration of a stage that is a point of the space.
    pub fn stage_point(&self, stage: &str) -> Result<Config, String> {
        let want = stage.replace('_', "-");
        let point = self.stages.iter().find(|p| p.stage == want).ok_or_else(|| {
            let names: Vec<_> = self.stages.iter().map(|p| p.stage).collect();
            format!("no stage `{stage}` is a point of the {} space; these are: {}", self.op.name, names.join(", "))
        })?;
        self.parse(point.config)
    }

    /// A stage name or a configuration id.
    pub fn resolve(&self, stage_or_id: &str) -> Result<Config, String> {
        if self.stages.iter().any(|p| p.stage == stage_or_id.replace('_', "-")) {
            self.stage_point(stage_or_id)
        } else {
            let c = self.parse(stage_or_id)?;
            (self.buildable)(&c).map_err(|e| format!("{stage_or_id} is not built: {e}"))?;
            Ok(c)
        }
    }

    /// Every configuration one knob away from `c`, knob by knob; within a
    /// knob the nearest values first (the next value before the one below).
    pub fn steps(&self, c: &Config) -> Vec<Step> {
        let mut out = vec![];
        for (knob, k) in self.knobs.iter().enumerate() {
            let now = c.0[knob] as isize;
            for d in 1..k.values.len() as isize {
                for v in [now + d, now - d] {
                    if (0..k.values.len() as isize).contains(&v) {
                        let mut next = c.clone();
                        next.0[knob] = v as usize;
                        out.push(Step { knob, config: next });
                    }
                }
            }
        }
        out
    }

    /// Every configuration at every case (dims and inputs) it fits, run by
    /// `run(case, plan)` and compared with the reference under the op's
    /// tolerance (both computed once per case): one row per (case,
    /// configuration), case by case.
    pub fn audit(
        &self,
        cases: &[(Vec<u32>, Vec<HostBuf>)],
        mut run: impl FnMut(usize, &Plan) -> Result<Vec<f32>, String>,
    ) -> Result<Vec<AuditRow>, String> {
        let configs = self.configs();
        let mut rows = vec![];
        for (i, (dims, inputs)) in cases.iter().enumerate() {
            self.op.check_inputs(dims, inputs)?;
            let reference = self.op.reference_on_all_cores(dims, inputs);
            let tolerance = (self.op.tolerance)(dims, inputs);
            for c in &configs {
                let outcome = match (self.fits)(c, dims) {
                    Err(why) => Outcome::Unfit { why },
                    Ok(()) => match run(i, &(self.plan)(c, dims)) {
                        Err(error) => Outcome::Failed { error },
                        Ok(out) => {
                            let cmp = crate::numeric::compare(&out, &reference, tolerance);
                            if cmp.passed() {
                                Outcome::Passed { max_abs_err: cmp.max_abs_err }
                            } else {
                                Outcome::Failed { error: self.op.summarize(&cmp, dims) }
                            }
                        }
                    },
                };
                rows.push(AuditRow { config: self.id(c), dims: dims.clone(), outcome });
            }
        }
        Ok(rows)
    }

    /// [`Space::audit`] on the emulator, at `shapes` with the default
    /// generator's inputs.
    pub fn audit_on_emulator(&self, shapes: &[&[u32]], seed: u64) -> Result<Vec<AuditRow>, String> {
        let cases: Vec<(Vec<u32>, Vec<HostBuf>)> = shapes.iter().map(|d| (d.to_vec(), self.op.generate(d, seed))).collect();
        self.audit(&cases, |i, plan| crate::op::emulate_plan(self.op, plan, &cases[i].0, &cases[i].1))
    }

    /// The emulator audit at the space's own small shapes, as CI runs it:
    /// every configuration must pass at every shape it fits, and fit at
    /// least one. Returns how many (configuration, shape) pairs passed, or
    /// an error naming every failure.
    pub fn check_on_emulator(&self, seed: u64) -> Result<usize, String> {
        let rows = self.audit_on_emulator(self.audit_dims, seed)?;
        let mut problems: Vec<String> = rows
            .iter()
            .filter_map(|r| match &r.outcome {
                Outcome::Failed { error } => Some(format!("{} at {}: {error}", r.config, Op::dims_label(&r.dims))),
                _ => None,
            })
            .collect();
        let passed = |id: &str| rows.iter().any(|r| r.config == id && matches!(r.outcome, Outcome::Passed { .. }));
        problems.extend(self.configs().iter().map(|c| self.id(c)).filter(|id| !passed(id)).map(|id| format!("{id} fits no audit shape")));
        if problems.is_empty() {
            Ok(rows.iter().filter(|r| matches!(r.outcome, Outcome::Passed { .. })).count())
        } else {
            Err(format!("{} problems:\n{}", problems.len(), problems.join("\n")))
        }
    }
}

/// What an audit found for one configuration at one shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Passed {
        max_abs_err: f64,
    },
    Failed {
        error: String,
    },
    /// The configuration does not take these dims.
    Unfit {
        why: String,
    },
}

/// One (configuration, dims) of an audit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditRow {
    pub config: String,
    pub dims: Vec<u32>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{Dispatcher, Stage};

    static STAGE: Stage = Stage { name: "s", summary: "", kernels: &[], supports: |_| true, plan: |_| Plan::default() };
    static OP: Op = Op {
        name: "toy",
        package: "none",
        dim_names: &["n"],
        min_dims: &[1],
        default_dims: &[4],
        sweep: &[],
        inputs: &[],
        outputs: &[],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[],
        reference: |_, _| crate::numeric::Reference::default(),
        tolerance: |_, _| crate::numeric::Tolerance::new(0.0, 0.0),
        cost: |_| (0, 0),
        stages: &[&STAGE],
        outside_contract: &[],
        current: Dispatcher { summary: "", reads: &[], choose: |_, _| &STAGE },
    };
    static SPACE: Space = Space {
        op: &OP,
        summary: "toy",
        knobs: &[
            Knob { name: "tile", summary: "", values: &["bm64-bn64", "bm128-bn64", "bm64"] },
            Knob { name: "step", summary: "", values: &["k8", "k16", "k32"] },
        ],
        buildable: |c| if c.0 == [1, 2] { Err("too much shared memory".into()) } else { Ok(()) },
        fits: |_, d| if d[0] % 4 == 0 { Ok(()) } else { Err("n % 4".into()) },
        plan: |_, _| Plan::default(),
        kernels: &[],
        stages: &[StagePoint { stage: "mage-001", config: "bm64-k16", likeness: "same bits" }],
        audit_dims: &[],
    };

    #[test]
    fn ids_round_trip_even_where_labels_hold_dashes() {
        for c in SPACE.product() {
            assert_eq!(SPACE.parse(&SPACE.id(&c)).unwrap(), c);
        }
        assert_eq!(SPACE.id(&Config(vec![0, 1])), "bm64-bn64-k16");
        assert_eq!(SPACE.parse("bm64-k32").unwrap(), Config(vec![2, 2]));
        assert!(SPACE.parse("bm64-bn64").unwrap_err().contains("ends before knob `step`"));
        assert!(SPACE.parse("bm64-k64").unwrap_err().contains("takes k8, k16, k32"));
        assert!(SPACE.parse("bm64-k8-x").unwrap_err().contains("`-x` after its last knob"));
    }

    #[test]
    fn configs_are_the_buildable_part_of_the_product() {
        assert_eq!(SPACE.product().len(), 9);
        assert_eq!(SPACE.configs().len(), 8);
        assert!(!SPACE.configs().contains(&Config(vec![1, 2])));
        assert_eq!(SPACE.valid(&Config(vec![1, 2]), &[4]).unwrap_err(), "too much shared memory");
        assert_eq!(SPACE.valid(&Config(vec![0, 0]), &[5]).unwrap_err(), "n % 4");
    }

    #[test]
    fn steps_change_one_knob_nearest_value_first() {
        let steps = SPACE.steps(&Config(vec![0, 1]));
        let ids: Vec<String> = steps.iter().map(|s| SPACE.id(&s.config)).collect();
        assert_eq!(ids, ["bm128-bn64-k16", "bm64-k16", "bm64-bn64-k32", "bm64-bn64-k8"]);
        assert_eq!(steps.iter().map(|s| s.knob).collect::<Vec<_>>(), [0, 0, 1, 1]);
    }

    #[test]
    fn the_emulator_check_fails_where_a_configuration_is_never_run() {
        let e = SPACE.check_on_emulator(1).unwrap_err();
        assert!(e.starts_with("8 problems:") && e.contains("bm64-bn64-k8 fits no audit shape"), "{e}");
    }

    #[test]
    fn stages_and_ids_resolve() {
        assert_eq!(SPACE.resolve("mage-001").unwrap(), Config(vec![2, 1]));
        assert_eq!(SPACE.resolve("mage_001").unwrap(), Config(vec![2, 1]));
        assert_eq!(SPACE.resolve("bm64-bn64-k8").unwrap(), Config(vec![0, 0]));
        assert!(SPACE.resolve("bm128-bn64-k32").unwrap_err().contains("not built: too much shared memory"));
        assert!(SPACE.stage_point("mage-002").unwrap_err().contains("these are: mage-001"));
    }
}
