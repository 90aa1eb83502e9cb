//! The extension module `mage._C` of the Python package `mage`
//! (`python/mage`, which re-exports every name here): every stage of every
//! Mage op, launched on PyTorch tensors through the same Rust code `run`
//! and `sweep` use ([`mage_runtime::gpu::BoundPlan`]), the op registry
//! (dims, shapes, stages, tolerances, references) for Python code that
//! needs it, and the launch path of the package's PyTorch ops
//! ([`launcher`]: `Launcher`, `GraphInfo`).
//!
//! ```python
//! import torch, mage
//! x = torch.randn(4096, 768, device="cuda")
//! gamma, beta = torch.ones(768, device="cuda"), torch.zeros(768, device="cuda")
//! y = torch.empty_like(x)
//! stage = mage.launch("layernorm", "current", [x, gamma, beta], y)   # "mage-007"
//! ```
//!
//! Launches go on PyTorch's current stream of the tensors' device, in the
//! device's primary context (the one PyTorch uses). Tensors must be CUDA,
//! contiguous, of the input's element type (`float32`; `int32` or `uint32`
//! for index inputs) and shapes from which the op's dims follow; the output
//! must not overlap an input. Every error is a `mage.MageError` with a
//! one-line message, raised before anything is launched; an argument of
//! the wrong kind (a negative dim, a name that is not a str, a device past
//! the count) is one too, naming the argument and its value.
//!
//! # The contents of the inputs
//!
//! Where an op's kernels index memory by the contents of an input, its
//! registry names those inputs (`op_info(op)["content_reads"]`, from
//! [`Op::content_reads`]) and `prepare` checks them before binding, with
//! the CLI's check and message (for neighbor: rowptr starts at 0, never
//! decreases and ends at `edges`; every index is below `n`). A graph the
//! kernels would read out of bounds with is refused, and nothing is
//! launched. There is no switch that skips it. Its cost, for neighbor: a
//! device-to-host copy of rowptr and indices, `4·(n + 1 + edges)` bytes
//! (279 kB at 4096x64x65536, 4.5 MB at 65536x64x1048576), after one
//! synchronisation of PyTorch's current stream, then a linear scan of
//! both. This is why `prepare` (and `launch`) of neighbor synchronises the
//! stream, for every stage; for `current` it already did, to copy rowptr
//! for the dispatcher, and that copy is now the same one (each input is
//! copied once). The other ops read no contents, and their `prepare`
//! copies nothing to the host.
//!
//! A `Call` checks again, before its launch, where torch counts a write to
//! one of those inputs since the last check (an in-place op bumps a
//! tensor's `_version`): the same copy and scan, that call only. A write
//! torch does not count (through `.data`, DLPack, another library's
//! kernel) is not seen: `prepare` again after one. `check_inputs(op, dims,
//! inputs)` runs the same check on host bytes, with no GPU.
//!
//! Nothing here imports torch at module import: the registry functions,
//! `check_inputs` and `read_case` work on a machine with no GPU (the tests
//! run there).

mod args;
mod device;
mod launcher;
mod tensor;

use mage_common::fixtures::{self, Case};
use mage_common::op::{CURRENT, Extent, HostBuf, Op, Picked};
use mage_runtime::gpu::BoundPlan;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::{Mutex, PoisonError};
use tensor::Tensor;

mod check;

pyo3::create_exception!(mage, MageError, pyo3::exceptions::PyException, "A bad argument or a failed launch; the message says which.");

pub(crate) fn error(msg: impl Into<String>) -> PyErr {
    MageError::new_err(msg.into())
}

/// The names of every op.
#[pyfunction]
fn ops() -> Vec<&'static str> {
    mage_runtime::ops::all().iter().map(|o| o.name).collect()
}

fn extent_text(op: &Op, e: &Extent) -> String {
    match *e {
        Extent::Dim(i) => op.dim_names[i].to_string(),
        Extent::DimPlus1(i) => format!("{}+1", op.dim_names[i]),
    }
}

/// What an op is: `name`, `dim_names`, `min_dims`, `default_dims`,
/// `inputs` (each `{file, role, elem, shape}` with the shape in dim
/// names), `output` (the same), `constants` (`{"eps": 1e-05}`), `stages`
/// (`[{name, summary}]`, oldest first), `current` (`{summary, reads}`),
/// `content_reads` (the roles of the inputs whose contents `prepare`
/// checks on the host, `["rowptr", "indices"]` for neighbor),
/// `generators` (`[{name, summary}]`, the default first), `sweep`
/// (`[{dims, generator}]`).
#[pyfunction]
fn op_info<'py>(py: Python<'py>, op: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let op = args::op(op)?;
    let d = PyDict::new(py);
    d.set_item("name", op.name)?;
    d.set_item("dim_names", op.dim_names.to_vec())?;
    d.set_item("min_dims", op.min_dims.to_vec())?;
    d.set_item("default_dims", op.default_dims.to_vec())?;
    let inputs = PyList::empty(py);
    for i in op.inputs {
        let e = PyDict::new(py);
        e.set_item("file", format!("{}.bin", i.file))?;
        e.set_item("role", i.role)?;
        e.set_item("elem", format!("{:?}", i.elem).to_lowercase())?;
        e.set_item("shape", i.shape.iter().map(|x| extent_text(op, x)).collect::<Vec<_>>())?;
        inputs.append(e)?;
    }
    d.set_item("inputs", inputs)?;
    let outputs = PyList::empty(py);
    for o in op.outputs {
        let e = PyDict::new(py);
        e.set_item("file", o.file)?;
        e.set_item("role", o.role)?;
        e.set_item("shape", o.shape.iter().map(|x| extent_text(op, x)).collect::<Vec<_>>())?;
        outputs.append(e)?;
    }
    // `output`: the shape of an op's one output (None where it has several);
    // `outputs`: each output's file, role and shape.
    match op.outputs {
        [one] => d.set_item("output", one.shape.iter().map(|x| extent_text(op, x)).collect::<Vec<_>>())?,
        _ => d.set_item("output", py.None())?,
    }
    d.set_item("outputs", outputs)?;
    let constants = PyDict::new(py);
    for (k, v) in op.constants {
        constants.set_item(k, v)?;
    }
    d.set_item("constants", constants)?;
    let stages = PyList::empty(py);
    for s in op.stages {
        let e = PyDict::new(py);
        e.set_item("name", s.name)?;
        e.set_item("summary", s.summary)?;
        stages.append(e)?;
    }
    d.set_item("stages", stages)?;
    let outside = PyDict::new(py);
    for o in op.outside_contract {
        outside.set_item(o.stage, o.why)?;
    }
    d.set_item("outside_contract", outside)?;
    let current = PyDict::new(py);
    current.set_item("summary", op.current.summary)?;
    current.set_item("reads", op.current.reads.iter().map(|&i| op.inputs[i].role).collect::<Vec<_>>())?;
    d.set_item("current", current)?;
    d.set_item("content_reads", op.content_reads.iter().map(|&i| op.inputs[i].role).collect::<Vec<_>>())?;
    let generators = PyList::empty(py);
    for g in op.generators {
        let e = PyDict::new(py);
        e.set_item("name", g.name)?;
        e.set_item("summary", g.summary)?;
        generators.append(e)?;
    }
    d.set_item("generators", generators)?;
    let sweep = PyList::empty(py);
    for w in op.sweep {
        let e = PyDict::new(py);
        e.set_item("dims", w.dims.to_vec())?;
        e.set_item("generator", op.generator(Some(w.generator)).map_err(error)?.name)?;
        sweep.append(e)?;
    }
    d.set_item("sweep", sweep)?;
    Ok(d)
}

/// An op and its dims, each a whole number below 2^32, checked as by the
/// CLI's `--dims` (their count, each dim's minimum, every buffer's size).
fn op_and_dims(op: &Bound<'_, PyAny>, dims: &Bound<'_, PyAny>) -> PyResult<(&'static Op, Vec<u32>)> {
    let op = args::op(op)?;
    let dims = args::dims(dims)?;
    op.check_dims(&dims).map_err(error)?;
    Ok((op, dims))
}

/// Each input's shape for these dims, outermost first.
#[pyfunction]
fn input_shapes(op: &Bound<'_, PyAny>, dims: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<usize>>> {
    let (op, dims) = op_and_dims(op, dims)?;
    Ok(op.input_shapes(&dims))
}

/// Each output's shape for these dims, in the op's order.
#[pyfunction]
fn output_shapes(op: &Bound<'_, PyAny>, dims: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<usize>>> {
    let (op, dims) = op_and_dims(op, dims)?;
    Ok(op.output_shapes(&dims))
}

/// The output's shape for these dims (for an op with several outputs,
/// their concatenation as one flat axis).
#[pyfunction]
fn output_shape(op: &Bound<'_, PyAny>, dims: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let (op, dims) = op_and_dims(op, dims)?;
    Ok(op.output_shape(&dims))
}

/// `(bytes, flops)`: the fewest bytes one call must move through device
/// memory (each input read once, the output written once) and its
/// floating-point operations.
#[pyfunction]
fn cost(op: &Bound<'_, PyAny>, dims: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
    let (op, dims) = op_and_dims(op, dims)?;
    Ok((op.cost)(&dims))
}

/// The dims of a call whose inputs have these shapes.
#[pyfunction]
fn dims_from_shapes(op: &Bound<'_, PyAny>, shapes: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    let op = args::op(op)?;
    op.dims_from_shapes(&args::shapes(shapes)?).map_err(error)
}

/// The op's content check (a graph's CSR) on host buffers: the code
/// `prepare` runs on the inputs it copies from the device. Only the inputs
/// of `op_info(op)["content_reads"]` are looked at; the others may be
/// empty.
fn check_contents(op: &Op, dims: &[u32], host: &[HostBuf]) -> PyResult<()> {
    op.check_contents(dims, host).map_err(error)
}

/// Runs the check `prepare` makes of the inputs' contents before binding
/// (for neighbor: rowptr starts at 0, never decreases and ends at `edges`;
/// every index is below `n`) on host bytes: `inputs` holds, in the op's
/// order, each input's little-endian bytes (`case.input_bytes()`), or
/// `None` for an input the check does not read (see `op_info`'s
/// `content_reads`). Raises `MageError` with the message `prepare` gives.
#[pyfunction]
fn check_inputs(op: &Bound<'_, PyAny>, dims: &Bound<'_, PyAny>, inputs: &Bound<'_, PyAny>) -> PyResult<()> {
    let (op, dims) = op_and_dims(op, dims)?;
    let given = args::items(inputs, "inputs", "a list of bytes (or None), one per input")?;
    if given.len() != op.inputs.len() {
        let roles: Vec<_> = op.inputs.iter().map(|i| i.role).collect();
        return Err(error(format!("{} takes {} inputs ({}), got {}", op.name, op.inputs.len(), roles.join(", "), given.len())));
    }
    let mut host = Vec::with_capacity(given.len());
    for (i, (obj, spec)) in given.iter().zip(op.inputs).enumerate() {
        let what = format!("inputs[{i}] ({})", spec.role);
        host.push(match args::input_bytes(obj, &what)? {
            None if op.content_reads.contains(&i) => {
                return Err(error(format!("{what} is None; the content check of {} reads it", op.name)));
            }
            // As in `prepare`, an input the check does not read stays empty.
            _ if !op.content_reads.contains(&i) => HostBuf::empty(spec.elem),
            Some(b) if b.len() % 4 != 0 => {
                return Err(error(format!("{what} holds {} bytes, not a whole number of 4-byte values", b.len())));
            }
            Some(b) => HostBuf::from_le_bytes(spec.elem, &b),
            None => unreachable!("a None the check reads is refused above"),
        });
    }
    check_contents(op, &dims, &host)
}

/// A case directory read and checked (input.json, every input's length and
/// sha256, the op's own checks such as a graph's CSR), with what the
/// registry says about it.
#[pyclass(frozen, module = "mage")]
struct CaseDir {
    op: &'static Op,
    case: Case,
}

#[pymethods]
impl CaseDir {
    #[getter]
    fn op(&self) -> &'static str {
        self.op.name
    }
    #[getter]
    fn dims(&self) -> Vec<u32> {
        self.case.spec.dims.clone()
    }
    /// The generator named in input.json (the op's default if none).
    #[getter]
    fn generator(&self) -> PyResult<&'static str> {
        Ok(self.op.generator(Some(&self.case.spec.generator)).map_err(error)?.name)
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.case.spec.seed
    }
    /// `{file: sha256 hex}` as verified.
    #[getter]
    fn sha256(&self) -> std::collections::BTreeMap<String, String> {
        self.case.sha256.clone()
    }
    /// `4096x768`, or `4096x64x65536 power-law`.
    #[getter]
    fn label(&self) -> PyResult<String> {
        Ok(self.op.workload_label(&self.case.spec.dims, self.generator()?))
    }
    /// Every input's little-endian bytes, in order (the bytes verified).
    fn input_bytes<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.case.inputs.iter().map(|b| PyBytes::new(py, &b.to_le_bytes())).collect()
    }
    /// The tolerance for these inputs: `{"abs", "rel", "of_magnitude"}`,
    /// passing where `|out - ref| <= abs + rel·|ref| + of_magnitude·m`
    /// element by element (`m` from `magnitudes()`); the op's, or with
    /// `stage` that stage's (its own where it is outside the op's contract).
    #[pyo3(signature = (stage = None))]
    fn tolerance<'py>(&self, py: Python<'py>, stage: Option<&Bound<'_, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
        let stage = stage.filter(|s| !s.is_none()).map(args::stage).transpose()?;
        if let Some(s) = &stage {
            self.op.check_stage_name(s).map_err(error)?;
        }
        let t = self.op.tolerance_for(stage.as_deref().unwrap_or(CURRENT), &self.case.spec.dims, &self.case.inputs);
        let d = PyDict::new(py);
        d.set_item("abs", t.abs)?;
        d.set_item("rel", t.rel)?;
        d.set_item("of_magnitude", t.of_magnitude)?;
        Ok(d)
    }
    /// The stage `current` picks for these inputs.
    fn current(&self) -> &'static str {
        self.op.dispatch(&self.case.spec.dims, &self.case.inputs).name
    }
    /// The f64 reference from the Rust registry, as little-endian f64 bytes.
    fn reference<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let r = (self.op.reference)(&self.case.spec.dims, &self.case.inputs);
        PyBytes::new(py, &r.values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }
    /// Each output element's magnitude, which the tolerance's
    /// `of_magnitude` scales (for a sum of products, `Σ |terms|`), from the
    /// Rust registry as little-endian f64 bytes; empty where the op's
    /// tolerance uses none.
    fn magnitudes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let r = (self.op.reference)(&self.case.spec.dims, &self.case.inputs);
        PyBytes::new(py, &r.magnitudes.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }
    fn __repr__(&self) -> String {
        format!("<mage case {} {} at {}>", self.op.name, Op::dims_label(&self.case.spec.dims), self.case.dir.display())
    }
}

/// Reads and checks the case directory `path` of `op`.
#[pyfunction]
fn read_case(op: &Bound<'_, PyAny>, path: &Bound<'_, PyAny>) -> PyResult<CaseDir> {
    let op = args::op(op)?;
    let case = fixtures::read_case(&args::path(path)?, op).map_err(error)?;
    Ok(CaseDir { op, case })
}

/// One stage bound to PyTorch tensors: calling it launches every kernel of
/// its plan on PyTorch's current stream. It keeps the tensors (and its
/// scratch) alive.
#[pyclass(frozen, module = "mage")]
struct Call {
    op: &'static Op,
    picked: Picked,
    dims: Vec<u32>,
    bound: BoundPlan,
    plan: mage_common::op::Plan,
    device: usize,
    /// The plan's scratch tensors (allocated here), which it writes.
    scratch: Vec<Py<PyAny>>,
    /// The inputs as read at `prepare`.
    tensors: Vec<Tensor>,
    /// The torch version counters (`_version`) of the inputs the content
    /// check reads, when they were last checked.
    checked: Mutex<Vec<Option<i64>>>,
    /// The inputs, then the output.
    keep: Vec<Py<PyAny>>,
}

/// A tensor's torch version counter (`None` for an object without one, or
/// an inference tensor). Read before the inputs are copied for the check:
/// torch may release the GIL while the stream synchronises, and a write
/// from another thread then must count as after the check.
fn version(obj: &Bound<'_, PyAny>) -> Option<i64> {
    obj.getattr("_version").ok().and_then(|v| v.extract().ok())
}

impl Call {
    /// Checks the contents again where torch counts a write to an input the
    /// content check reads since it last ran (an in-place op bumps a
    /// tensor's `_version`).
    fn recheck_written(&self, py: Python<'_>) -> PyResult<()> {
        if self.op.content_reads.is_empty() {
            return Ok(());
        }
        let now: Vec<_> = self.op.content_reads.iter().map(|&i| version(self.keep[i].bind(py))).collect();
        // Not held across Python calls: torch may release the GIL there.
        if now == *self.checked.lock().unwrap_or_else(PoisonError::into_inner) {
            return Ok(());
        }
        let host = tensor::copy_to_host(py, self.device, &self.tensors, self.op.content_reads)?;
        check_contents(self.op, &self.dims, &host)?;
        *self.checked.lock().unwrap_or_else(PoisonError::into_inner) = now;
        Ok(())
    }
}

#[pymethods]
impl Call {
    /// Launches the plan once on PyTorch's current stream (asynchronous),
    /// after checking the contents again where torch counts a write to an
    /// input the content check reads (a graph's rowptr or indices) since
    /// `prepare`.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        self.recheck_written(py)?;
        let stream = tensor::current_stream(py, self.device)?;
        device::launch(self.device, &self.bound, stream).map_err(error)
    }
    /// The stage that runs (`current`'s pick, for `current`).
    #[getter]
    fn stage(&self) -> &'static str {
        self.picked.stage.name
    }
    /// Whether `current` picked the stage.
    #[getter]
    fn by_current(&self) -> bool {
        self.picked.by_current
    }
    #[getter]
    fn op(&self) -> &'static str {
        self.op.name
    }
    #[getter]
    fn dims(&self) -> Vec<u32> {
        self.dims.clone()
    }
    /// The plan's scratch tensors (float32), for a caller that poisons
    /// every buffer a call writes before checking it.
    #[getter]
    fn scratch(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.scratch.iter().map(|t| t.clone_ref(py)).collect()
    }
    /// Kernel launches per call.
    #[getter]
    fn launches_per_call(&self) -> usize {
        self.bound.launches()
    }
    /// Every launch: `{kernel, grid, block, shared_bytes}`, and the
    /// plan's scratch sizes.
    fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let launches = PyList::empty(py);
        for l in &self.plan.launches {
            let e = PyDict::new(py);
            e.set_item("kernel", l.kernel.name)?;
            e.set_item("grid", vec![l.grid.x, l.grid.y, l.grid.z])?;
            e.set_item("block", vec![l.block.x, l.block.y, l.block.z])?;
            e.set_item("shared_bytes", l.shared_bytes)?;
            launches.append(e)?;
        }
        d.set_item("launches", launches)?;
        d.set_item("scratch", self.plan.scratch.clone())?;
        d.set_item("stage", self.picked.stage.name)?;
        d.set_item("by_current", self.picked.by_current)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!("<mage call {} {} at {}>", self.op.name, self.picked.label(), Op::dims_label(&self.dims))
    }
}

/// Binds `stage` of `op` (`current`, or a stage such as `mage-006`) to
/// CUDA tensors: `inputs` in the op's order, `output` written (for an op
/// with several outputs, a list of tensors in the op's order). The dims
/// follow from the inputs' shapes; the inputs the op's content check
/// reads (a graph's rowptr and indices) are copied to the host and
/// checked, and `current` picks its stage from the dims (and, where the
/// op's dispatcher reads data, from those inputs, copied to the host in
/// the same pass: each input once). Returns a callable `Call`.
#[pyfunction]
fn prepare(
    py: Python<'_>,
    op: &Bound<'_, PyAny>,
    stage: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
    output: Bound<'_, PyAny>,
) -> PyResult<Call> {
    let op = args::op(op)?;
    let stage = args::stage(stage)?;
    op.check_stage_name(&stage).map_err(error)?;
    let inputs = args::items(inputs, "inputs", "a list of tensors, one per input")?;
    if inputs.len() != op.inputs.len() {
        let roles: Vec<_> = op.inputs.iter().map(|i| i.role).collect();
        return Err(error(format!("{} takes {} inputs ({}), got {}", op.name, op.inputs.len(), roles.join(", "), inputs.len())));
    }
    let tensors: Vec<Tensor> =
        inputs.iter().zip(op.inputs).map(|(t, spec)| Tensor::read(t, spec.role, Some(spec.elem))).collect::<PyResult<_>>()?;
    // One tensor for an op with one output; a list or tuple, in order, for several.
    let output_objs: Vec<Bound<'_, PyAny>> = if op.outputs.len() == 1 {
        vec![output.clone()]
    } else {
        let roles: Vec<_> = op.outputs.iter().map(|o| o.role).collect();
        let must = format!("a list of {} tensors ({})", op.outputs.len(), roles.join(", "));
        let items = args::items(&output, "output", &must)?;
        if items.len() != op.outputs.len() {
            return Err(error(format!("{} writes {} outputs ({}), got {}", op.name, op.outputs.len(), roles.join(", "), items.len())));
        }
        items
    };
    let outs: Vec<Tensor> = output_objs
        .iter()
        .zip(op.outputs)
        .map(|(t, o)| Tensor::read(t, if op.outputs.len() == 1 { "output" } else { o.role }, Some(mage_common::op::Elem::F32)))
        .collect::<PyResult<_>>()?;
    let device = tensor::one_device(tensors.iter().chain(&outs))?;
    let dims = op.dims_from_shapes(&tensors.iter().map(|t| t.shape.clone()).collect::<Vec<_>>()).map_err(error)?;
    for ((out, shape), o) in outs.iter().zip(op.output_shapes(&dims)).zip(op.outputs) {
        if out.shape != shape {
            let what = if op.outputs.len() == 1 { "output".to_string() } else { format!("output {}", o.role) };
            return Err(error(format!("{what} is {:?}; {} {} writes {shape:?}", out.shape, op.name, Op::dims_label(&dims))));
        }
    }
    for (i, out) in outs.iter().enumerate() {
        tensor::check_no_overlap(&tensors, out, op)?;
        tensor::check_no_overlap(&outs[i + 1..], out, op)?;
    }
    // On the host: the inputs the content check reads and, for `current`,
    // those the dispatcher reads, each copied once; the others stay empty.
    let mut reads = op.content_reads.to_vec();
    if stage == CURRENT {
        reads.extend(op.current.reads);
    }
    reads.sort_unstable();
    reads.dedup();
    let checked = Mutex::new(op.content_reads.iter().map(|&i| version(&inputs[i])).collect());
    let host = tensor::copy_to_host(py, device, &tensors, &reads)?;
    check_contents(op, &dims, &host)?;
    let picked = op.pick(&stage, &dims, &host).map_err(error)?;
    let plan = op.plan_for(picked.stage, &dims).map_err(error)?;
    let scratch: Vec<Bound<'_, PyAny>> = plan.scratch.iter().map(|&n| tensor::empty_f32(py, n, device)).collect::<PyResult<_>>()?;
    let scratch_ptrs: Vec<u64> = scratch.iter().map(|s| Tensor::read(s, "scratch", None).map(|t| t.ptr)).collect::<PyResult<_>>()?;
    let input_ptrs: Vec<u64> = tensors.iter().map(|t| t.ptr).collect();
    let output_ptrs: Vec<u64> = outs.iter().map(|t| t.ptr).collect();
    let bound = device::bind(device, op.package, &plan, &input_ptrs, &output_ptrs, &scratch_ptrs).map_err(error)?;
    let mut keep: Vec<Py<PyAny>> = inputs.iter().map(|t| t.clone().unbind()).collect();
    keep.extend(output_objs.iter().map(|t| t.clone().unbind()));
    let scratch = scratch.into_iter().map(Bound::unbind).collect();
    Ok(Call { op, picked, dims, bound, plan, device, scratch, tensors, checked, keep })
}

/// `prepare(...)` then one call; returns the name of the stage that ran.
#[pyfunction]
fn launch(
    py: Python<'_>,
    op: &Bound<'_, PyAny>,
    stage: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
    output: Bound<'_, PyAny>,
) -> PyResult<&'static str> {
    let call = prepare(py, op, stage, inputs, output)?;
    call.__call__(py)?;
    Ok(call.picked.stage.name)
}

/// Resets the persisting L2 lines of `device`'s primary context
/// (`cuCtxResetPersistingL2Cache`); no access-policy window is ever set.
#[pyfunction]
#[pyo3(signature = (device = None))]
fn reset_persisting_l2(device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    device::reset_persisting_l2(device_arg(device)?).map_err(error)
}

/// A `device=` argument: 0 if left out; its context opened here, so that a
/// device past the count is refused before torch is asked for its stream.
fn device_arg(device: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    let ordinal = device.filter(|d| !d.is_none()).map(args::device).transpose()?.unwrap_or(0);
    device::ready(ordinal).map_err(error)?;
    Ok(ordinal)
}

/// Enqueues, on PyTorch's current stream, a memset of a 256 MiB buffer, so
/// that L2 holds none of what follows. A memset, not a kernel: kernel
/// records never count it.
#[pyfunction]
#[pyo3(signature = (device = None))]
fn evict_l2(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let device = device_arg(device)?;
    let stream = tensor::current_stream(py, device)?;
    device::evict_l2(device, stream).map_err(error)
}

/// The extension module `mage._C`; the package `mage` re-exports every
/// name here.
#[pymodule]
#[pyo3(name = "_C")]
fn extension(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MageError", m.py().get_type::<MageError>())?;
    m.add("CURRENT", CURRENT)?;
    m.add("POISON", mage_common::op::OUTPUT_POISON)?;
    m.add("EVICT_BYTES", device::EVICT_BYTES)?;
    m.add("COMMIT", mage_runtime::BUILD_COMMIT)?;
    m.add_function(wrap_pyfunction!(ops, m)?)?;
    m.add_function(wrap_pyfunction!(check::compare_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(op_info, m)?)?;
    m.add_function(wrap_pyfunction!(input_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(output_shape, m)?)?;
    m.add_function(wrap_pyfunction!(output_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(dims_from_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(cost, m)?)?;
    m.add_function(wrap_pyfunction!(check_inputs, m)?)?;
    m.add_function(wrap_pyfunction!(read_case, m)?)?;
    m.add_function(wrap_pyfunction!(prepare, m)?)?;
    m.add_function(wrap_pyfunction!(launch, m)?)?;
    m.add_function(wrap_pyfunction!(reset_persisting_l2, m)?)?;
    m.add_function(wrap_pyfunction!(evict_l2, m)?)?;
    m.add_class::<CaseDir>()?;
    m.add_class::<Call>()?;
    m.add_class::<launcher::Launcher>()?;
    m.add_class::<launcher::GraphInfo>()?;
    Ok(())
}
