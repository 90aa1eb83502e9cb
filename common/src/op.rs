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

use crate::emu::{self, Region};
use crate::kernel::{ArgValue, Kernel};
use crate::kernel::{Dim3, LaunchConfig};
use crate::numeric::{Reference, Tolerance};

/// Element type of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Elem {
    F32,
    U32,
}

/// A host buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum HostBuf {
    F32(Vec<f32>),
    U32(Vec<u32>),
}

impl HostBuf {
    pub fn len(&self) -> usize {
        match self {
            HostBuf::F32(v) => v.len(),
            HostBuf::U32(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn elem(&self) -> Elem {
        match self {
            HostBuf::F32(_) => Elem::F32,
            HostBuf::U32(_) => Elem::U32,
        }
    }
    pub fn as_f32(&self) -> &[f32] {
        match self {
            HostBuf::F32(v) => v,
            HostBuf::U32(_) => panic!("expected an f32 buffer"),
        }
    }
    pub fn as_u32(&self) -> &[u32] {
        match self {
            HostBuf::U32(v) => v,
            HostBuf::F32(_) => panic!("expected a u32 buffer"),
        }
    }
    /// An empty buffer of this element type.
    pub fn empty(elem: Elem) -> HostBuf {
        match elem {
            Elem::F32 => HostBuf::F32(vec![]),
            Elem::U32 => HostBuf::U32(vec![]),
        }
    }
    pub fn byte_len(&self) -> usize {
        self.len() * 4
    }
    pub fn as_ptr(&self) -> *const u8 {
        match self {
            HostBuf::F32(v) => v.as_ptr().cast(),
            HostBuf::U32(v) => v.as_ptr().cast(),
        }
    }
    /// Little-endian bytes, the on-disk form of fixtures.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            HostBuf::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            HostBuf::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
    pub fn from_le_bytes(elem: Elem, bytes: &[u8]) -> HostBuf {
        let words = bytes.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]);
        match elem {
            Elem::F32 => HostBuf::F32(words.map(f32::from_le_bytes).collect()),
            Elem::U32 => HostBuf::U32(words.map(u32::from_le_bytes).collect()),
        }
    }
}

/// One axis of a buffer's shape, in terms of the op's dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extent {
    /// Dim number `i`.
    Dim(usize),
    /// Dim number `i`, plus one (a CSR row pointer).
    DimPlus1(usize),
}

impl Extent {
    pub fn of(self, dims: &[u32]) -> usize {
        match self {
            Extent::Dim(i) => dims[i] as usize,
            Extent::DimPlus1(i) => dims[i] as usize + 1,
        }
    }
}

/// Elements of a buffer of this shape.
fn elements(shape: &[Extent], dims: &[u32]) -> usize {
    shape.iter().map(|e| e.of(dims)).product()
}

/// One input of an op: its fixture file stem (`a`, `b`, `c`, `rowptr`,
/// `indices`), what it is, its element type and its shape.
#[derive(Clone, Copy, Debug)]
pub struct Input {
    pub file: &'static str,
    pub role: &'static str,
    pub elem: Elem,
    /// Outermost first.
    pub shape: &'static [Extent],
}

/// A way of drawing an op's inputs for dims and a seed. The first of an
/// op's generators is its default.
pub struct Generator {
    /// `normal`, `uniform`, `power-law`: what `--gen` and a case's `input.json` name.
    pub name: &'static str,
    /// What it draws, for people and for a case's `distribution`.
    pub summary: &'static str,
    pub generate: fn(&[u32], u64) -> Vec<HostBuf>,
}

/// A shape `sweep` and `compare` run, with the generator of its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    pub dims: &'static [u32],
    pub generator: &'static str,
}

impl Workload {
    /// Dims with the op's default generator (`normal`).
    pub const fn new(dims: &'static [u32]) -> Workload {
        Workload { dims, generator: DEFAULT_GENERATOR }
    }
    pub const fn with(dims: &'static [u32], generator: &'static str) -> Workload {
        Workload { dims, generator }
    }
}

/// The name of the generator ops with only one call theirs.
pub const DEFAULT_GENERATOR: &str = "normal";

/// The name `run`, `sweep`, `compare` and the Python module give the
/// dispatcher.
pub const CURRENT: &str = "current";

/// `current`: picks the stage for a call from its dims and, where the op
/// needs it, the contents of some inputs.
pub struct Dispatcher {
    /// One line: how it picks.
    pub summary: &'static str,
    /// The inputs (by number) whose contents `choose` reads, so that a
    /// caller whose inputs live on a device copies only these to the host.
    pub reads: &'static [usize],
    pub choose: fn(&[u32], &Readable) -> &'static Stage,
}

/// The inputs of a call as a dispatcher sees them: only those its `reads`
/// names.
pub struct Readable<'a> {
    reads: &'static [usize],
    inputs: &'a [HostBuf],
}

impl Readable<'_> {
    /// Input `i`. Panics where `i` is not among the dispatcher's `reads`: a
    /// caller may have left it on the device.
    pub fn input(&self, i: usize) -> &HostBuf {
        assert!(self.reads.contains(&i), "the dispatcher reads input {i}, which its `reads` does not name");
        &self.inputs[i]
    }
}

/// A kernel argument before buffers are placed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// The op's input number `i`.
    Input(usize),
    /// The op's output.
    Output,
    /// Scratch buffer number `i` of the plan (f32 elements).
    Scratch(usize),
    U32(u32),
    F32(f32),
}

/// One kernel launch of a plan.
#[derive(Clone, Debug)]
pub struct Launch {
    pub kernel: &'static Kernel,
    pub grid: Dim3,
    pub block: Dim3,
    pub shared_bytes: u32,
    pub args: Vec<Arg>,
}

impl Launch {
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig { grid: self.grid, block: self.block, shared_bytes: self.shared_bytes }
    }
}

/// The launches one call of a stage makes for a shape, in order, with the
/// scratch buffers they share (f32 element counts).
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub launches: Vec<Launch>,
    pub scratch: Vec<usize>,
}

impl From<Launch> for Plan {
    fn from(l: Launch) -> Plan {
        Plan { launches: vec![l], scratch: vec![] }
    }
}

/// One stage of an op's history.
pub struct Stage {
    /// `mage-001`, `mage-002`, ...
    pub name: &'static str,
    /// One line: what this stage is.
    pub summary: &'static str,
    /// Every kernel entry the stage may launch (for resource snapshots).
    pub kernels: &'static [&'static Kernel],
    /// Whether the stage handles these dims (beyond the op's own validation).
    pub supports: fn(&[u32]) -> bool,
    /// The launches for these dims; only called where `supports` holds.
    pub plan: fn(&[u32]) -> Plan,
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A stage outside the op's numerical contract (a faster, less accurate
/// arithmetic, such as TF32 products for an FP32 op): held to its own
/// tolerance, and never picked by `current`.
pub struct OutsideContract {
    pub stage: &'static str,
    /// What differs, in a few words (`TF32 products`).
    pub why: &'static str,
    pub tolerance: fn(&[u32], &[HostBuf]) -> Tolerance,
}

/// The stage a call runs: one named, or the one `current` picked.
#[derive(Clone, Copy, Debug)]
pub struct Picked {
    pub stage: &'static Stage,
    /// Whether `current` chose it.
    pub by_current: bool,
}

impl Picked {
    /// `mage-007`, or `current → mage-007`.
    pub fn label(&self) -> String {
        if self.by_current { format!("{CURRENT} → {}", self.stage.name) } else { self.stage.name.to_string() }
    }
}

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
    /// The output's shape, outermost first.
    pub output: &'static [Extent],
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
    /// Element counts of each input.
    pub fn input_lens(&self, dims: &[u32]) -> Vec<usize> {
        self.inputs.iter().map(|i| elements(i.shape, dims)).collect()
    }

    /// Each input's shape, outermost first.
    pub fn input_shapes(&self, dims: &[u32]) -> Vec<Vec<usize>> {
        self.inputs.iter().map(|i| i.shape.iter().map(|e| e.of(dims)).collect()).collect()
    }

    /// The output's shape, outermost first.
    pub fn output_shape(&self, dims: &[u32]) -> Vec<usize> {
        self.output.iter().map(|e| e.of(dims)).collect()
    }

    /// Elements of the output.
    pub fn output_len(&self, dims: &[u32]) -> usize {
        elements(self.output, dims)
    }

    /// The dims of a call whose inputs have these shapes (outermost first),
    /// checked for consistency and then as by [`Op::check_dims`].
    pub fn dims_from_shapes(&self, shapes: &[Vec<usize>]) -> Result<Vec<u32>, String> {
        if shapes.len() != self.inputs.len() {
            return Err(format!("{} takes {} inputs ({}), got {}", self.name, self.inputs.len(), self.roles(), shapes.len()));
        }
        let mut dims: Vec<Option<u64>> = vec![None; self.dim_names.len()];
        for (input, shape) in self.inputs.iter().zip(shapes) {
            if shape.len() != input.shape.len() {
                return Err(format!(
                    "{} ({}) has {} axes {:?}; {} takes it with {} ({})",
                    input.role,
                    input.file,
                    shape.len(),
                    shape,
                    self.name,
                    input.shape.len(),
                    self.shape_text(input.shape)
                ));
            }
            for (extent, &len) in input.shape.iter().zip(shape) {
                let (i, value) = match *extent {
                    Extent::Dim(i) => (i, len as u64),
                    Extent::DimPlus1(i) if len >= 1 => (i, len as u64 - 1),
                    Extent::DimPlus1(_) => return Err(format!("{} is empty; it must hold at least one value", input.role)),
                };
                match dims[i] {
                    Some(d) if d != value => {
                        return Err(format!(
                            "{} is {shape:?}, which makes `{}` {value}; an earlier input made it {d}",
                            input.role, self.dim_names[i]
                        ));
                    }
                    _ => dims[i] = Some(value),
                }
            }
        }
        let dims = dims
            .iter()
            .zip(self.dim_names)
            .map(|(d, name)| {
                let d = d.ok_or_else(|| format!("no input of {} gives dim `{name}`", self.name))?;
                u32::try_from(d).map_err(|_| format!("{} dim `{name}` is {d}, more than 2^32 - 1", self.name))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        self.check_dims(&dims)?;
        Ok(dims)
    }

    fn roles(&self) -> String {
        self.inputs.iter().map(|i| i.role).collect::<Vec<_>>().join(", ")
    }

    /// `[rows, width]`.
    fn shape_text(&self, shape: &[Extent]) -> String {
        let axes: Vec<String> = shape
            .iter()
            .map(|e| match *e {
                Extent::Dim(i) => self.dim_names[i].to_string(),
                Extent::DimPlus1(i) => format!("{} + 1", self.dim_names[i]),
            })
            .collect();
        format!("[{}]", axes.join(", "))
    }

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

    /// The threads [`Op::reference_on_all_cores`] splits the rows of `dims`
    /// over: 1 unless the output and first input are split into independent
    /// rows by dim 0 and the other inputs do not depend on it. Each thread
    /// past the first holds a copy of the other inputs, so the threads are
    /// fewer where those copies would pass 1 GiB in all.
    fn reference_threads(&self, dims: &[u32]) -> usize {
        let on_dim0 = |e: &Extent| matches!(e, Extent::Dim(0) | Extent::DimPlus1(0));
        let by_rows = self.output.first() == Some(&Extent::Dim(0))
            && self.inputs[0].elem == Elem::F32
            && self.inputs[0].shape.first() == Some(&Extent::Dim(0))
            && self.inputs[1..].iter().all(|i| !i.shape.iter().any(on_dim0));
        if !by_rows {
            return 1;
        }
        let others: usize = self.input_lens(dims)[1..].iter().map(|n| n * 4).sum();
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(dims[0] as usize).min(1 + (1 << 30) / others.max(1)).max(1)
    }

    /// Host bytes [`Op::reference_on_all_cores`] copies the inputs into.
    pub fn reference_copy_bytes(&self, dims: &[u32]) -> u64 {
        let threads = self.reference_threads(dims) as u64;
        if threads < 2 {
            return 0;
        }
        let lens = self.input_lens(dims);
        let others: u64 = lens[1..].iter().map(|&n| n as u64 * 4).sum();
        lens[0] as u64 * 4 + (threads - 1) * others
    }

    /// The f64 reference on every core (fewer where the copies of the inputs
    /// would pass 1 GiB), each thread computing a block of rows; the op's
    /// reference as it is where the rows cannot be split.
    pub fn reference_on_all_cores(&self, dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let threads = self.reference_threads(dims);
        if threads < 2 {
            return (self.reference)(dims, inputs);
        }
        let rows = dims[0] as usize;
        let (in_row, out_row) = (self.input_lens(dims)[0] / rows, self.output_len(dims) / rows);
        let per = rows.div_ceil(threads);
        let x = inputs[0].as_f32();
        std::thread::scope(|s| {
            let parts: Vec<_> = (0..rows)
                .step_by(per)
                .map(|r0| {
                    let n = per.min(rows - r0);
                    s.spawn(move || {
                        let mut d = dims.to_vec();
                        d[0] = n as u32;
                        let mut part = vec![HostBuf::F32(x[r0 * in_row..(r0 + n) * in_row].to_vec())];
                        part.extend(inputs[1..].iter().cloned());
                        let out = (self.reference)(&d, &part);
                        assert_eq!(out.len(), n * out_row);
                        out
                    })
                })
                .collect();
            let mut all = Reference::default();
            for p in parts {
                all.extend(p.join().expect("a reference thread panicked"));
            }
            all
        })
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

    /// `4096x768` style.
    pub fn dims_label(dims: &[u32]) -> String {
        dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
    }

    /// The dims of `--dims TEXT`, or the op's default without it.
    pub fn dims_or_default(&self, text: Option<&str>) -> Result<Vec<u32>, String> {
        text.map_or(Ok(self.default_dims.to_vec()), |t| self.parse_dims(t))
    }

    /// Parses `4096,768` (or `4096x768`) and checks the count, that no dim
    /// is zero and that every buffer's element count fits a u32 index.
    pub fn parse_dims(&self, text: &str) -> Result<Vec<u32>, String> {
        let dims = text
            .split([',', 'x'])
            .map(|d| d.trim().parse::<u32>().map_err(|_| format!("`{d}` in --dims {text} is not a whole number below 2^32")))
            .collect::<Result<Vec<_>, _>>()?;
        self.check_dims(&dims)?;
        Ok(dims)
    }

    pub fn check_dims(&self, dims: &[u32]) -> Result<(), String> {
        if dims.len() != self.dim_names.len() {
            return Err(format!("{} takes {} dims ({}), got {}", self.name, self.dim_names.len(), self.dim_names.join(","), dims.len()));
        }
        for ((name, d), min) in self.dim_names.iter().zip(dims).zip(self.min_dims) {
            if d < min {
                return Err(format!("{} dim `{name}` is {d}; it must be at least {min}", self.name));
            }
        }
        let shapes = self
            .inputs
            .iter()
            .map(|i| (format!("input {} ({}.bin)", i.role, i.file), i.shape))
            .chain(std::iter::once(("the output".to_string(), self.output)));
        for (what, shape) in shapes {
            // In u128: a product of u32 dims cannot wrap there.
            let n: u128 = shape.iter().map(|e| e.of(dims) as u128).product();
            if n > (1u128 << 30) {
                return Err(format!("dims {} overflow: {what} would hold {n} elements (at most 2^30)", Op::dims_label(dims)));
            }
        }
        Ok(())
    }

    /// Checks that `inputs` fit `dims`: counts, element types, contents.
    pub fn check_inputs(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        self.check_dims(dims)?;
        let lens = self.input_lens(dims);
        if inputs.len() != self.inputs.len() {
            return Err(format!("{} takes {} inputs, got {}", self.name, self.inputs.len(), inputs.len()));
        }
        for ((spec, buf), want) in self.inputs.iter().zip(inputs).zip(&lens) {
            if buf.elem() != spec.elem || buf.len() != *want {
                return Err(format!(
                    "{}.bin ({}) holds {} {:?} values; dims {} need {want}",
                    spec.file,
                    spec.role,
                    buf.len(),
                    buf.elem(),
                    Op::dims_label(dims)
                ));
            }
        }
        (self.check_inputs)(dims, inputs)
    }

    /// The op's content check on only the inputs its `content_reads` names
    /// (the others may be empty): the dims are checked, then the count of
    /// inputs and each read input's element type and length, and only then
    /// its contents.
    pub fn check_contents(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        self.check_dims(dims)?;
        if inputs.len() != self.inputs.len() {
            return Err(format!("{} takes {} inputs, got {}", self.name, self.inputs.len(), inputs.len()));
        }
        let lens = self.input_lens(dims);
        for &i in self.content_reads {
            let (spec, buf) = (&self.inputs[i], &inputs[i]);
            if buf.elem() != spec.elem || buf.len() != lens[i] {
                return Err(format!(
                    "{}.bin ({}) holds {} {:?} values; dims {} need {}",
                    spec.file,
                    spec.role,
                    buf.len(),
                    buf.elem(),
                    Op::dims_label(dims),
                    lens[i]
                ));
            }
        }
        (self.check_inputs)(dims, inputs)
    }
}

impl Op {
    /// Refuses a NaN or an infinity in an f32 input: the error names the
    /// file, the first offending flat index and where that lies in the
    /// input's shape.
    pub fn check_finite(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        for ((spec, buf), shape) in self.inputs.iter().zip(inputs).zip(self.input_shapes(dims)) {
            let HostBuf::F32(values) = buf else { continue };
            if let Some(i) = values.iter().position(|x| !x.is_finite()) {
                return Err(format!(
                    "{}.bin ({}) holds {} at index {i} ({:?} of shape {shape:?})",
                    spec.file,
                    spec.role,
                    values[i],
                    crate::numeric::unravel(i, &shape)
                ));
            }
        }
        Ok(())
    }
}

impl Op {
    /// Refuses finite inputs outside what the op computes in FP32: the
    /// op's own range check, then any output whose magnitude (or value)
    /// passes FP32's range ([`Reference::check_fp32_range`]). Called after
    /// [`Op::check_finite`], with the reference of these inputs: the error
    /// blames the input's range, not a stage.
    pub fn check_range(&self, dims: &[u32], inputs: &[HostBuf], reference: &Reference) -> Result<(), String> {
        (self.check_range)(dims, inputs)?;
        reference.check_fp32_range("the inputs are out of FP32's range", &self.output_shape(dims))
    }
}

/// Runs one stage on the emulator: the output is poisoned, every launch of
/// the plan runs in order, and the output comes back.
pub fn emulate(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<Vec<f32>, String> {
    op.check_inputs(dims, inputs)?;
    emulate_plan(op, &op.plan_for(stage, dims)?, dims, inputs)
}

/// Runs a plan on the emulator without asking whether the stage supports
/// the shape (tests use this to show what a missing guard would do).
pub fn emulate_plan(op: &Op, plan: &Plan, dims: &[u32], inputs: &[HostBuf]) -> Result<Vec<f32>, String> {
    let mut out = vec![f32::from_bits(OUTPUT_POISON); op.output_len(dims)];
    let mut scratch: Vec<Vec<f32>> = plan.scratch.iter().map(|n| vec![f32::from_bits(OUTPUT_POISON); *n]).collect();
    let mut regions: Vec<Region> = op
        .inputs
        .iter()
        .zip(inputs)
        .map(|(spec, b)| Region { name: spec.role.to_string(), start: b.as_ptr() as usize, bytes: b.byte_len(), writable: false })
        .collect();
    regions.push(Region { name: "output".into(), start: out.as_mut_ptr() as usize, bytes: out.len() * 4, writable: true });
    for (i, s) in scratch.iter_mut().enumerate() {
        regions.push(Region { name: format!("scratch{i}"), start: s.as_mut_ptr() as usize, bytes: s.len() * 4, writable: true });
    }
    for launch in &plan.launches {
        let args: Vec<ArgValue> = launch
            .args
            .iter()
            .map(|a| match *a {
                Arg::Input(i) => ArgValue::Ptr(inputs[i].as_ptr() as u64),
                Arg::Output => ArgValue::Ptr(out.as_ptr() as u64),
                Arg::Scratch(i) => ArgValue::Ptr(scratch[i].as_ptr() as u64),
                Arg::U32(v) => ArgValue::U32(v),
                Arg::F32(v) => ArgValue::F32(v),
            })
            .collect();
        emu::launch_kernel(launch.kernel, &launch.config(), &args, &regions).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Runs a plan on the emulator and compares the output with the op's f64
/// reference under its tolerance; the error names the worst element.
pub fn check_plan(op: &Op, plan: &Plan, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    check_plan_with(op, plan, dims, inputs, (op.tolerance)(dims, inputs))
}

fn check_plan_with(
    op: &Op,
    plan: &Plan,
    dims: &[u32],
    inputs: &[HostBuf],
    tolerance: crate::numeric::Tolerance,
) -> Result<crate::numeric::Comparison, String> {
    let out = emulate_plan(op, plan, dims, inputs)?;
    let cmp = crate::numeric::compare(&out, &(op.reference)(dims, inputs), tolerance);
    if cmp.passed() { Ok(cmp) } else { Err(cmp.summary(&op.output_shape(dims))) }
}

/// Runs a stage on the emulator and compares its output with the op's f64
/// reference under the stage's tolerance (the op's, or its own where it is
/// outside the contract), after checking it supports the dims.
pub fn check_stage(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    op.check_inputs(dims, inputs)?;
    check_checked_inputs(op, stage, dims, inputs)
}

/// [`check_stage`] for inputs [`Op::check_inputs`] has passed.
fn check_checked_inputs(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    let plan = op.plan_for(stage, dims)?;
    check_plan_with(op, &plan, dims, inputs, op.tolerance_for(stage.name, dims, inputs))
        .map_err(|e| format!("{} {} at {}: {e}", op.name, stage.name, Op::dims_label(dims)))
}

/// The nearest dims to `dims` that `stage` supports, changing only the
/// last dim (searching up, then down, within `max`): lets one generated
/// shape exercise every stage.
pub fn fit_last_dim(stage: &Stage, dims: &[u32], max: u32) -> Option<Vec<u32>> {
    let mut d = dims.to_vec();
    let last = d.len() - 1;
    let start = d[last];
    for w in (start..=max).chain((1..start).rev()) {
        d[last] = w;
        if (stage.supports)(&d) {
            return Some(d);
        }
    }
    None
}

/// [`check_stage`] for the stage `current` picks for these inputs.
pub fn check_current(op: &Op, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    op.check_inputs(dims, inputs)?;
    let stage = op.dispatch(dims, inputs);
    check_checked_inputs(op, stage, dims, inputs).map_err(|e| format!("{CURRENT} → {e}"))
}
