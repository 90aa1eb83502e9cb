//! What an op crate registers, and running it on the emulator.
//!
//! An op crate exposes one [`Op`]: its dimensions, the shapes of its inputs
//! and output, its generators, f64 reference and tolerance, the registry of
//! its [`Stage`]s and its [`Dispatcher`], `current`. A stage is a name, a
//! doc line, which shapes it supports and a [`Plan`] of kernel launches for
//! a shape; the dispatcher picks a stage from the dims and, where the op
//! needs it, the data. Everything else (property tests, resource snapshots,
//! `run`, `sweep`, the Python module) iterates the registry, so adding a
//! stage is a module plus one registry line.
//!
//! Where things are: [`Op`] and its registry lookups here; the types a
//! registry is made of in `types`; shapes and dims in `shapes`; the checks
//! of a call's inputs in `checks`; the reference on every core in
//! `reference`; running and checking on the emulator in `emulate`.

mod checks;
mod emulate;
mod reference;
mod shapes;
mod types;

pub use emulate::{check_current, check_plan, check_stage, emulate, emulate_plan, fit_last_dim};
pub use types::{
    Arg, Dispatcher, Elem, Extent, Generator, HostBuf, Input, Launch, Output, OutsideContract, Picked, Plan, Readable, Stage, Workload,
};

use crate::numeric::{Reference, Tolerance};

/// The name of the generator ops with only one call theirs.
pub const DEFAULT_GENERATOR: &str = "normal";

/// The name `run`, `sweep`, `compare` and the Python module give the
/// dispatcher.
pub const CURRENT: &str = "current";

/// An operation and its registry of stages.
pub struct Op {
    /// `layernorm`, `matmul`, ...
    pub name: &'static str,
    /// The cargo package holding its kernels (`mage-layernorm`).
    pub package: &'static str,
    /// Names of the dims, in `--dims` order.
    pub dim_names: &'static [&'static str],
    /// The smallest value of each dim (1, or 0 where an empty dim is valid).
    pub min_dims: &'static [u32],
    pub default_dims: &'static [u32],
    /// The workloads `sweep` runs, besides any `--dims` given.
    pub sweep: &'static [Workload],
    pub inputs: &'static [Input],
    /// The outputs, each with its shape (outermost first); most ops have one.
    pub outputs: &'static [Output],
    /// Named constants of the op's definition (LayerNorm's `eps`), for
    /// implementations outside Rust that must compute the same function.
    pub constants: &'static [(&'static str, f64)],
    /// Op-specific checks of the input contents (the CSR of a graph, say).
    pub check_inputs: fn(&[u32], &[HostBuf]) -> Result<(), String>,
    /// Refuses finite inputs whose intermediate values no FP32 kernel can
    /// hold (LayerNorm's squared deviations), naming the input; see
    /// [`Op::check_range`].
    pub check_range: fn(&[u32], &[HostBuf]) -> Result<(), String>,
    /// The inputs (by number) whose contents `check_inputs` reads, so that
    /// a caller whose inputs live on a device copies only these to the host
    /// (see [`Op::check_contents`]).
    pub content_reads: &'static [usize],
    /// Deterministic input generators; the first is the default.
    pub generators: &'static [Generator],
    /// The f64 CPU reference, with each element's magnitude where the
    /// tolerance is scaled by it.
    pub reference: fn(&[u32], &[HostBuf]) -> Reference,
    /// The allowance for an output against the reference, for these inputs
    /// (scaled, element by element, by the reference's magnitudes).
    pub tolerance: fn(&[u32], &[HostBuf]) -> Tolerance,
    /// Fewest bytes one call must move through device memory, and its flops.
    pub cost: fn(&[u32]) -> (u64, u64),
    /// Every stage, oldest first.
    pub stages: &'static [&'static Stage],
    /// Stages outside the op's contract, with their own tolerance.
    pub outside_contract: &'static [OutsideContract],
    pub current: Dispatcher,
}

/// The bit pattern outputs are filled with before a run: a NaN, so an
/// element no kernel wrote fails every comparison.
pub const OUTPUT_POISON: u32 = 0x7FC0_BEEF;

impl Op {
    /// A history stage by name (`mage-006`, or `mage_006`); `current` is not
    /// a stage: see [`Op::pick`].
    pub fn stage(&self, name: &str) -> Result<&'static Stage, String> {
        let want = name.replace('_', "-");
        self.stages.iter().copied().find(|s| s.name == want).ok_or_else(|| {
            let names: Vec<_> = self.stages.iter().map(|s| s.name).collect();
            format!("{} has no stage `{name}`; its stages are {}, and `{CURRENT}` picks one", self.name, names.join(", "))
        })
    }

    /// Why `stage` is outside the op's contract, or `None` for a stage
    /// inside it.
    pub fn outside_contract(&self, stage: &str) -> Option<&'static OutsideContract> {
        self.outside_contract.iter().find(|o| o.stage == stage)
    }

    /// The tolerance `stage`'s output is held to for these inputs: the
    /// op's, or the stage's own where it is outside the contract.
    pub fn tolerance_for(&self, stage: &str, dims: &[u32], inputs: &[HostBuf]) -> Tolerance {
        match self.outside_contract(stage) {
            Some(o) => (o.tolerance)(dims, inputs),
            None => (self.tolerance)(dims, inputs),
        }
    }

    /// Whether `name` is a stage of this op or `current`.
    pub fn check_stage_name(&self, name: &str) -> Result<(), String> {
        if name == CURRENT { Ok(()) } else { self.stage(name).map(|_| ()) }
    }

    /// The stage `current` picks for these inputs. Only the inputs its
    /// dispatcher reads are looked at: the others may be empty.
    pub fn dispatch(&self, dims: &[u32], inputs: &[HostBuf]) -> &'static Stage {
        (self.current.choose)(dims, &Readable { reads: self.current.reads, inputs })
    }

    /// The stage a call of `name` runs: that stage, or for `current` the
    /// one it picks for these inputs.
    pub fn pick(&self, name: &str, dims: &[u32], inputs: &[HostBuf]) -> Result<Picked, String> {
        if name == CURRENT {
            Ok(Picked { stage: self.dispatch(dims, inputs), by_current: true })
        } else {
            Ok(Picked { stage: self.stage(name)?, by_current: false })
        }
    }

    /// `stage`'s plan for `dims`, where it supports them.
    pub fn plan_for(&self, stage: &Stage, dims: &[u32]) -> Result<Plan, String> {
        if !(stage.supports)(dims) {
            return Err(format!("{} {} does not support dims {}", self.name, stage.name, Op::dims_label(dims)));
        }
        Ok((stage.plan)(dims))
    }

    /// The generator called `name` (`None`: the default).
    pub fn generator(&self, name: Option<&str>) -> Result<&'static Generator, String> {
        match name {
            None | Some("") => Ok(&self.generators[0]),
            Some(n) => self.generators.iter().find(|g| g.name == n).ok_or_else(|| {
                let names: Vec<_> = self.generators.iter().map(|g| g.name).collect();
                format!("{} has no generator `{n}`; its generators are {}", self.name, names.join(", "))
            }),
        }
    }

    /// Inputs from the default generator.
    pub fn generate(&self, dims: &[u32], seed: u64) -> Vec<HostBuf> {
        (self.generators[0].generate)(dims, seed)
    }

    /// `4096x768`, or `4096x64x65536 power-law` for a generator other than
    /// the op's default.
    pub fn workload_label(&self, dims: &[u32], generator: &str) -> String {
        if generator.is_empty() || generator == self.generators[0].name {
            Op::dims_label(dims)
        } else {
            format!("{} {generator}", Op::dims_label(dims))
        }
    }

    /// The value of a named constant of the op's definition.
    pub fn constant(&self, name: &str) -> Option<f64> {
        self.constants.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}
