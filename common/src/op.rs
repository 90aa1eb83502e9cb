//! What an op crate registers, and running it on the emulator.
//!
//! An op crate exposes one [`Op`]: its dimensions, inputs, generator, f64
//! reference, tolerance and the registry of its [`Stage`]s. A stage is a
//! name, a doc line, which shapes it supports and a [`Plan`] of kernel
//! launches for a shape. Everything else (property tests, resource
//! snapshots, `run`, `sweep`) iterates the registry, so adding a stage is a
//! module plus one registry line.

use crate::emu::{self, Region};
use crate::kernel::{ArgValue, Kernel};
use crate::kernel::{Dim3, LaunchConfig};
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

/// One input of an op: its fixture file stem (`a`, `b`, `c`, `rowptr`,
/// `indices`), what it is, and its element type.
#[derive(Clone, Copy, Debug)]
pub struct Input {
    pub file: &'static str,
    pub role: &'static str,
    pub elem: Elem,
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

/// One stage of an op's history (or `current`, the dispatcher).
pub struct Stage {
    /// `mage-001`, ..., `current`.
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
    /// The shapes `sweep` runs, besides any `--dims` given.
    pub sweep_dims: &'static [&'static [u32]],
    pub inputs: &'static [Input],
    /// Element counts of each input for dims (already validated).
    pub input_lens: fn(&[u32]) -> Vec<usize>,
    /// The output's shape, outermost first.
    pub output_shape: fn(&[u32]) -> Vec<usize>,
    /// Op-specific checks of the input contents (the CSR of a graph, say).
    pub check_inputs: fn(&[u32], &[HostBuf]) -> Result<(), String>,
    /// Deterministic inputs for dims and a seed.
    pub generate: fn(&[u32], u64) -> Vec<HostBuf>,
    /// The f64 CPU reference.
    pub reference: fn(&[u32], &[HostBuf]) -> Vec<f64>,
    pub tolerance: fn(&[u32]) -> Tolerance,
    /// Fewest bytes one call must move through device memory, and its flops.
    pub cost: fn(&[u32]) -> (u64, u64),
    pub stages: &'static [&'static Stage],
}

/// The bit pattern outputs are filled with before a run: a NaN, so an
/// element no kernel wrote fails every comparison.
pub const OUTPUT_POISON: u32 = 0x7FC0_BEEF;

impl Op {
    /// Elements of the output.
    pub fn output_len(&self, dims: &[u32]) -> usize {
        (self.output_shape)(dims).iter().product()
    }

    pub fn stage(&self, name: &str) -> Result<&'static Stage, String> {
        let want = name.replace('_', "-");
        self.stages.iter().copied().find(|s| s.name == want).ok_or_else(|| {
            let names: Vec<_> = self.stages.iter().map(|s| s.name).collect();
            format!("{} has no stage `{name}`; its stages are {}", self.name, names.join(", "))
        })
    }

    pub fn current(&self) -> &'static Stage {
        self.stages.iter().copied().find(|s| s.name == "current").expect("every op registers `current`")
    }

    /// `4096x768` style.
    pub fn dims_label(dims: &[u32]) -> String {
        dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
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
        let mut lens = (self.input_lens)(dims);
        lens.push(self.output_len(dims));
        for (i, n) in lens.iter().enumerate() {
            if *n as u64 > u32::MAX as u64 / 4 || *n as u64 > (1u64 << 30) {
                let what = self.inputs.get(i).map_or("output", |b| b.role);
                return Err(format!("dims {} overflow: the {what} would hold {n} elements (at most 2^30)", Op::dims_label(dims)));
            }
        }
        Ok(())
    }

    /// Checks that `inputs` fit `dims`: counts, element types, contents.
    pub fn check_inputs(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        self.check_dims(dims)?;
        let lens = (self.input_lens)(dims);
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
}

/// Runs one stage on the emulator: the output is poisoned, every launch of
/// the plan runs in order, and the output comes back.
pub fn emulate(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<Vec<f32>, String> {
    op.check_inputs(dims, inputs)?;
    if !(stage.supports)(dims) {
        return Err(format!("{} {} does not support dims {}", op.name, stage.name, Op::dims_label(dims)));
    }
    emulate_plan(op, &(stage.plan)(dims), dims, inputs)
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
    let out = emulate_plan(op, plan, dims, inputs)?;
    let cmp = crate::numeric::compare(&out, &(op.reference)(dims, inputs), (op.tolerance)(dims));
    if cmp.passed() { Ok(cmp) } else { Err(cmp.summary(dims)) }
}

/// [`check_plan`] for a stage, after checking it supports the dims.
pub fn check_stage(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    op.check_inputs(dims, inputs)?;
    if !(stage.supports)(dims) {
        return Err(format!("{} {} does not support dims {}", op.name, stage.name, Op::dims_label(dims)));
    }
    check_plan(op, &(stage.plan)(dims), dims, inputs).map_err(|e| format!("{} {} at {}: {e}", op.name, stage.name, Op::dims_label(dims)))
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
