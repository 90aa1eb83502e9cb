//! What a registry is made of: host buffers and their element types, the
//! extents of shapes in terms of an op's dims, inputs, generators and
//! workloads, stages and their plans of launches, and the dispatcher.

use super::{CURRENT, DEFAULT_GENERATOR};
use crate::kernel::{Dim3, Kernel, LaunchConfig};
use crate::numeric::Tolerance;

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

/// One output of an op: its file stem where it is written on its own
/// (`c`, `dx`), what it is, and its shape. An op's outputs are checked,
/// poisoned and downloaded as one concatenation, in order; each kernel
/// argument [`Arg::Output(0)`] points at its own part.
#[derive(Clone, Copy, Debug)]
pub struct Output {
    pub file: &'static str,
    pub role: &'static str,
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
    pub(super) reads: &'static [usize],
    pub(super) inputs: &'a [HostBuf],
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
    /// The op's output number `i` (0 for an op with one output).
    Output(usize),
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
    /// Blocks per thread-block cluster ([`Dim3::ONE`]: none).
    pub cluster: Dim3,
    pub args: Vec<Arg>,
}

impl Launch {
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig { grid: self.grid, block: self.block, shared_bytes: self.shared_bytes, cluster: self.cluster }
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

impl Plan {
    /// How many kernel parameters are named `name` (an op's constant, such
    /// as LayerNorm's `eps`) and take an f32.
    pub fn constant_params(&self, name: &str) -> usize {
        self.launches
            .iter()
            .map(|l| l.kernel.params.iter().zip(&l.args).filter(|(p, a)| p.name == name && matches!(a, Arg::F32(_))).count())
            .sum()
    }

    /// The plan with every f32 kernel parameter named `name` set to `value`:
    /// how a caller runs an op at a constant other than its definition's
    /// (the plan passes the op's value). An error where no kernel of the
    /// plan takes that parameter, since the value would be silently lost.
    pub fn with_constant(mut self, name: &str, value: f32) -> Result<Plan, String> {
        if self.constant_params(name) == 0 {
            let kernels: Vec<_> = self.launches.iter().map(|l| l.kernel.name).collect();
            return Err(format!("no kernel of this plan ({}) takes `{name}`: it is fixed at the op's value", kernels.join(", ")));
        }
        for l in &mut self.launches {
            for (p, a) in l.kernel.params.iter().zip(l.args.iter_mut()) {
                if p.name == name && matches!(a, Arg::F32(_)) {
                    *a = Arg::F32(value);
                }
            }
        }
        Ok(self)
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
