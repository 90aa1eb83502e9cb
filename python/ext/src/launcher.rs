//! The launch path of the package's PyTorch ops (`torch.ops.mage.*`):
//! one [`Launcher`] per op, made once when the package registers its ops,
//! so that a call looks nothing up in the registry by name.
//!
//! A call hands over its (contiguous, float32, CUDA) input tensors and
//! torch's current raw stream; the launcher allocates the outputs and the
//! plan's scratch like the first float32 input (`torch.empty_like` or
//! `new_empty`: PyTorch's caching allocator, on that stream), binds the
//! plan and launches it. Nothing is copied to the host
//! and nothing synchronises, so a call may be captured in a CUDA graph.
//! The checks a torch op makes (device, dtype, contiguity, shapes in
//! torch's terms) are the Python side's, before it calls here.
//!
//! Two caches, both exact: the plan (stage, dims, output shapes, scratch)
//! per (stage asked for, input shapes), and the bound launches per (stage,
//! dims, device, every pointer): a [`BoundPlan`] is function handles and
//! argument values, all of which follow from that key, so a hit is the
//! bind it saves. The caching allocator hands the same blocks back for the
//! same sizes, which is what makes the second cache hit in a loop. Each is
//! emptied when it passes [`CACHE_LIMIT`] entries.
//!
//! [`GraphInfo`] is what `mage.Graph` holds: a CSR graph's rowptr and
//! indices copied to the host once, checked once (the module's content
//! check), and rowptr kept on the host, so that the neighbor dispatcher's
//! pick for a width comes from it with no device access.

use crate::{args, error, tensor};
use mage_common::op::{CURRENT, HostBuf, Op, Plan, Stage};
use mage_runtime::gpu::BoundPlan;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Entries a cache holds before it is emptied.
pub const CACHE_LIMIT: usize = 4096;

/// A stage's plan for one set of input shapes.
struct Planned {
    stage: &'static Stage,
    dims: Vec<u32>,
    plan: Plan,
    outputs: Vec<Vec<usize>>,
}

/// A plan cache's key: the stage asked for, the input shapes, the graph,
/// the constants set (name, f32 bits).
type PlanKey = (String, Vec<Vec<usize>>, Option<u64>, Vec<(String, u32)>);

/// Constants a call sets: `(name, value)`, as `Launcher.run` takes them.
type Constants = Option<Vec<(String, f32)>>;

/// What `Launcher.plan` returns: the stage, the dims, the output shapes.
type PlanInfo = (&'static str, Vec<u32>, Vec<Vec<usize>>);

#[derive(Hash, PartialEq, Eq)]
struct BindKey {
    /// A stage's plan is a function of its dims: the two name it.
    stage: &'static str,
    dims: Vec<u32>,
    constants: Vec<(String, u32)>,
    device: usize,
    ptrs: Vec<u64>,
}

/// One op's launch path (see the module doc).
#[pyclass(frozen, module = "mage")]
pub struct Launcher {
    op: &'static Op,
    /// The first float32 input: outputs and scratch are allocated like it.
    f32_input: Option<usize>,
    plans: Mutex<HashMap<PlanKey, Arc<Planned>>>,
    bound: Mutex<HashMap<BindKey, Arc<BoundPlan>>>,
}

static EMPTY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// `{dtype: torch.float32, device: torch.device("cuda", N)}` per device,
/// made once: parsing a device string on every allocation cost more than
/// the allocation.
static EMPTY_KWARGS: PyOnceLock<Mutex<Vec<Option<Py<PyDict>>>>> = PyOnceLock::new();

fn empty_kwargs<'py>(py: Python<'py>, device: usize) -> PyResult<Bound<'py, PyDict>> {
    let cache = EMPTY_KWARGS.get_or_init(py, Mutex::default);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() <= device {
        cache.resize_with(device + 1, || None);
    }
    if let Some(k) = &cache[device] {
        return Ok(k.bind(py).clone());
    }
    let torch = py.import("torch")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", torch.getattr("float32")?)?;
    kwargs.set_item("device", torch.getattr("device")?.call1(("cuda", device))?)?;
    cache[device] = Some(kwargs.clone().unbind());
    Ok(kwargs)
}

/// `torch.empty(shape, dtype=torch.float32, device=device)`.
fn empty<'py>(py: Python<'py>, shape: &[usize], device: usize) -> PyResult<Bound<'py, PyAny>> {
    let empty = EMPTY.get_or_try_init(py, || py.import("torch")?.getattr("empty").map(Bound::unbind))?.bind(py);
    empty.call((PyTuple::new(py, shape)?,), Some(&empty_kwargs(py, device)?))
}

static EMPTY_LIKE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A float32 tensor of `shape` on the device of `like` (a contiguous
/// float32 input of the call): `torch.empty_like(like)` where the shapes
/// agree, `like.new_empty(shape)` otherwise. Either takes its dtype and
/// device from `like` and parses no keywords, which costs less host time
/// than `torch.empty(shape, dtype=..., device=...)` (`host_time.py`).
fn empty_as<'py>(py: Python<'py>, like: &Bound<'py, PyAny>, like_shape: &[usize], shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    if like_shape == shape {
        let empty_like = EMPTY_LIKE.get_or_try_init(py, || py.import("torch")?.getattr("empty_like").map(Bound::unbind))?.bind(py);
        return empty_like.call1((like,));
    }
    like.call_method1(pyo3::intern!(py, "new_empty"), (PyTuple::new(py, shape)?,))
}

/// What `run_plain` compares a call against, looked up in torch once.
struct PlainTorch {
    tensor: Py<PyAny>,
    parameter: Py<PyAny>,
    float32: Py<PyAny>,
    /// The dtypes a `u32` input may have: int32 and (where torch has it) uint32.
    words: Vec<Py<PyAny>>,
    dispatch_modes: Py<PyAny>,
    function_modes: Py<PyAny>,
    /// functorch's interpreter stack (None outside a transform), where this torch has one.
    transforms: Option<Py<PyAny>>,
    grad_enabled: Py<PyAny>,
    raw_stream: Py<PyAny>,
}

impl PlainTorch {
    /// No dispatch mode, torch-function mode or functorch transform active.
    fn no_mode(&self, py: Python<'_>) -> PyResult<bool> {
        if self.dispatch_modes.bind(py).call0()?.is_truthy()? || self.function_modes.bind(py).call0()?.is_truthy()? {
            return Ok(false);
        }
        match &self.transforms {
            Some(f) => Ok(f.bind(py).call0()?.is_none()),
            None => Ok(true),
        }
    }
}

static PLAIN_TORCH: PyOnceLock<Option<PlainTorch>> = PyOnceLock::new();

/// torch's objects `run_plain` reads; None where this torch lacks one of
/// the functions it calls (no CUDA support: every call takes the full path).
fn plain_torch(py: Python<'_>) -> PyResult<Option<&PlainTorch>> {
    let refs = PLAIN_TORCH.get_or_try_init(py, || -> PyResult<_> {
        let torch = py.import("torch")?;
        let c = torch.getattr("_C")?;
        let get = |m: &Bound<'_, PyAny>, name: &str| m.getattr(name).ok().map(Bound::unbind);
        let functorch = c.getattr("_functorch").ok();
        let (Some(dispatch_modes), Some(function_modes), Some(raw_stream)) =
            (get(&c, "_len_torch_dispatch_stack"), get(&c, "_is_torch_function_mode_enabled"), get(&c, "_cuda_getCurrentRawStream"))
        else {
            return Ok(None);
        };
        let words = ["int32", "uint32"].iter().filter_map(|d| get(torch.as_any(), d)).collect();
        Ok(Some(PlainTorch {
            tensor: torch.getattr("Tensor")?.unbind(),
            parameter: torch.getattr("nn")?.getattr("Parameter")?.unbind(),
            float32: torch.getattr("float32")?.unbind(),
            words,
            dispatch_modes,
            function_modes,
            transforms: functorch.and_then(|f| get(&f, "peek_interpreter_stack")),
            grad_enabled: torch.getattr("is_grad_enabled")?.unbind(),
            raw_stream,
        }))
    })?;
    Ok(refs.as_ref())
}

fn shape_of(t: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    // torch.Size is a tuple of ints.
    t.getattr(pyo3::intern!(t.py(), "shape"))?.extract()
}

impl Launcher {
    /// The plan for these shapes; `graph` gives the contents `current`
    /// reads where the op's dispatcher reads some (neighbor's rowptr).
    fn planned(&self, stage: &str, shapes: Vec<Vec<usize>>, graph: Option<&GraphInfo>, constants: &Constants) -> PyResult<Arc<Planned>> {
        let set: Vec<(String, u32)> = constants.iter().flatten().map(|(n, v)| (n.clone(), v.to_bits())).collect();
        let key = (stage.to_string(), shapes, graph.map(|g| g.id), set);
        if let Some(p) = self.plans.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return Ok(p.clone());
        }
        let op = self.op;
        let dims = op.dims_from_shapes(&key.1).map_err(error)?;
        let host = match graph {
            Some(g) => g.host_for(op)?,
            None if !op.current.reads.is_empty() && stage == CURRENT => {
                let reads: Vec<_> = op.current.reads.iter().map(|&i| op.inputs[i].role).collect();
                return Err(error(format!("{}'s `current` reads {}: it needs the graph (a mage.Graph)", op.name, reads.join(", "))));
            }
            None => op.inputs.iter().map(|i| HostBuf::empty(i.elem)).collect(),
        };
        if let Some(g) = graph
            && (dims.first() != Some(&g.n) || dims.last() != Some(&g.edges))
        {
            return Err(error(format!(
                "{} {} is not a call on the graph of {} nodes and {} edges",
                op.name,
                Op::dims_label(&dims),
                g.n,
                g.edges
            )));
        }
        let picked = op.pick(stage, &dims, &host).map_err(error)?;
        let mut plan = op.plan_for(picked.stage, &dims).map_err(error)?;
        for (name, value) in constants.iter().flatten() {
            if op.constant(name).is_none() {
                let names: Vec<_> = op.constants.iter().map(|(n, _)| *n).collect();
                return Err(error(format!(
                    "{} has no constant `{name}` (its constants: {})",
                    op.name,
                    if names.is_empty() { "none".into() } else { names.join(", ") }
                )));
            }
            plan = plan.with_constant(name, *value).map_err(|e| error(format!("{} {}: {e}", op.name, picked.stage.name)))?;
        }
        let outputs = op.output_shapes(&dims);
        let planned = Arc::new(Planned { stage: picked.stage, dims, plan, outputs });
        let mut plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
        if plans.len() >= CACHE_LIMIT {
            plans.clear();
        }
        plans.insert(key, planned.clone());
        Ok(planned)
    }
}

impl Launcher {
    /// Allocates the outputs and the plan's scratch like the first float32
    /// input, binds the plan (or finds its binding) and launches it on
    /// `stream`: the tail of `run` and `run_plain`.
    #[allow(clippy::too_many_arguments)]
    fn launch_planned<'py>(
        &self,
        py: Python<'py>,
        inputs: &[Bound<'py, PyAny>],
        like_shape: Option<Vec<usize>>,
        mut ptrs: Vec<u64>,
        planned: &Planned,
        constants: &Constants,
        device: usize,
        stream: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let op = self.op;
        let like = self.f32_input.zip(like_shape).map(|(i, shape)| (&inputs[i], shape));
        let alloc = |shape: &[usize]| match &like {
            Some((t, t_shape)) => empty_as(py, t, t_shape, shape),
            None => empty(py, shape, device),
        };
        let outputs = PyList::empty(py);
        let mut output_ptrs = Vec::with_capacity(planned.outputs.len());
        for shape in &planned.outputs {
            let t = alloc(shape)?;
            output_ptrs.push(t.call_method0(pyo3::intern!(py, "data_ptr"))?.extract::<u64>()?);
            outputs.append(t)?;
        }
        let mut scratch = Vec::with_capacity(planned.plan.scratch.len());
        let mut scratch_ptrs = Vec::with_capacity(planned.plan.scratch.len());
        for &n in &planned.plan.scratch {
            let t = alloc(&[n.max(1)])?;
            scratch_ptrs.push(t.call_method0(pyo3::intern!(py, "data_ptr"))?.extract::<u64>()?);
            scratch.push(t);
        }
        let n_inputs = ptrs.len();
        ptrs.extend(&output_ptrs);
        ptrs.extend(&scratch_ptrs);
        let constants = constants.iter().flatten().map(|(n, v)| (n.clone(), v.to_bits())).collect();
        let key = BindKey { stage: planned.stage.name, dims: planned.dims.clone(), constants, device, ptrs };
        let hit = self.bound.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
        let bound = match hit {
            Some(b) => b,
            None => {
                let b = crate::device::bind(device, op.package, &planned.plan, &key.ptrs[..n_inputs], &output_ptrs, &scratch_ptrs)
                    .map_err(error)?;
                let b = Arc::new(b);
                let mut cache = self.bound.lock().unwrap_or_else(PoisonError::into_inner);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(key, b.clone());
                b
            }
        };
        crate::device::launch(device, &bound, stream as cudarc::driver::sys::CUstream).map_err(error)?;
        // The scratch goes back to the caching allocator now: its blocks are
        // reused only by work queued after this launch on the same stream.
        drop(scratch);
        Ok(outputs)
    }
}

#[pymethods]
impl Launcher {
    #[new]
    fn new(op: &Bound<'_, PyAny>) -> PyResult<Launcher> {
        let op = args::op(op)?;
        let f32_input = op.inputs.iter().position(|i| i.elem == mage_common::op::Elem::F32);
        Ok(Launcher { op, f32_input, plans: Mutex::default(), bound: Mutex::default() })
    }

    #[getter]
    fn op(&self) -> &'static str {
        self.op.name
    }

    /// The roles of the op's inputs, in order.
    #[getter]
    fn inputs(&self) -> Vec<&'static str> {
        self.op.inputs.iter().map(|i| i.role).collect()
    }

    /// The roles of the op's outputs, in order.
    #[getter]
    fn outputs(&self) -> Vec<&'static str> {
        self.op.outputs.iter().map(|o| o.role).collect()
    }

    /// `(stage, dims, output shapes)` of a call on inputs of these shapes
    /// (`stage` a stage name, or `current` where the op's dispatcher reads
    /// no contents), with no device.
    #[pyo3(signature = (shapes, stage = CURRENT, graph = None, constants = None))]
    fn plan(
        &self,
        shapes: &Bound<'_, PyAny>,
        stage: &str,
        graph: Option<PyRef<'_, GraphInfo>>,
        constants: Constants,
    ) -> PyResult<PlanInfo> {
        let p = self.planned(stage, args::shapes(shapes)?, graph.as_deref(), &constants)?;
        Ok((p.stage.name, p.dims.clone(), p.outputs.clone()))
    }

    /// Launches `stage` on `inputs` (torch tensors, in the op's order, a
    /// list or a tuple, contiguous and on `cuda:{device}`) on the raw
    /// stream `stream`, and returns its outputs, new float32 tensors from
    /// PyTorch's caching allocator (a list, one per output of the op).
    /// `graph`: the `GraphInfo` of a graph op's rowptr and indices, from
    /// which `current` picks (no device access). `constants`: `[(name,
    /// value)]` of the op's constants set for this call (LayerNorm's
    /// `eps`), an error where the stage's kernels fix it. A non-contiguous
    /// input is refused: the kernels read rows as they lie. An input that
    /// starts off a 16-byte boundary (a view into another tensor) is
    /// copied first (`clone`), as the kernels' 16-byte copies need.
    #[pyo3(signature = (inputs, device, stream, stage = CURRENT, graph = None, constants = None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        device: usize,
        stream: usize,
        stage: &str,
        graph: Option<PyRef<'py, GraphInfo>>,
        constants: Constants,
    ) -> PyResult<Bound<'py, PyList>> {
        let op = self.op;
        let inputs: Vec<Bound<'py, PyAny>> = match inputs.cast::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => args::items(inputs, "inputs", "a list or tuple of tensors, one per input of the op")?,
        };
        if inputs.len() != op.inputs.len() {
            let roles: Vec<_> = op.inputs.iter().map(|i| i.role).collect();
            return Err(error(format!("{} takes {} inputs ({}), got {}", op.name, op.inputs.len(), roles.join(", "), inputs.len())));
        }
        let mut inputs = inputs;
        let mut shapes = Vec::with_capacity(inputs.len());
        let mut ptrs = Vec::with_capacity(inputs.len() + 4);
        for (t, spec) in inputs.iter_mut().zip(op.inputs) {
            if !t.call_method0(pyo3::intern!(py, "is_contiguous"))?.is_truthy()? {
                return Err(error(format!("{}: input {} is not contiguous (.contiguous() first)", op.name, spec.role)));
            }
            let mut ptr = t.call_method0(pyo3::intern!(py, "data_ptr"))?.extract::<u64>()?;
            if !ptr.is_multiple_of(tensor::ALIGN) {
                // A view starting inside another tensor's storage: copied to
                // a block of its own, as the kernels' 16-byte copies need.
                *t = t.call_method0(pyo3::intern!(py, "clone"))?;
                ptr = t.call_method0(pyo3::intern!(py, "data_ptr"))?.extract::<u64>()?;
            }
            shapes.push(shape_of(t)?);
            ptrs.push(ptr);
        }
        let like_shape = self.f32_input.map(|i| shapes[i].clone());
        let planned = self.planned(stage, shapes, graph.as_deref(), &constants)?;
        self.launch_planned(py, &inputs, like_shape, ptrs, &planned, &constants, device, stream)
    }

    /// `run` of `current` where nothing stands between the call and the
    /// kernels: every input a `torch.Tensor` or `torch.nn.Parameter` (no
    /// subclass), of the op's element type, on one CUDA device, contiguous,
    /// 16-byte aligned and not empty, no gradient wanted of it (or grad
    /// mode off), no dispatch or torch-function mode and no functorch
    /// transform active, and shapes the op takes. Then it launches on
    /// torch's current stream of that device and returns the outputs, as
    /// `run` does; otherwise it returns None, having launched and allocated
    /// nothing, and the caller takes its full path (torch's checks, the
    /// dispatcher, autograd). One call into the module, with no Python
    /// layer in front of it: the package's eager fast path.
    #[pyo3(signature = (inputs, constants = None))]
    fn run_plain<'py>(&self, py: Python<'py>, inputs: &Bound<'py, PyTuple>, constants: Constants) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(torch) = plain_torch(py)? else { return Ok(None) };
        let op = self.op;
        if inputs.len() != op.inputs.len() || !torch.no_mode(py)? {
            return Ok(None);
        }
        let grad = torch.grad_enabled.bind(py).call0()?.is_truthy()?;
        let inputs: Vec<Bound<'py, PyAny>> = inputs.iter().collect();
        let mut shapes = Vec::with_capacity(inputs.len());
        let mut ptrs = Vec::with_capacity(inputs.len() + 4);
        let mut device = -1i64;
        for (t, spec) in inputs.iter().zip(op.inputs) {
            let ty = t.get_type();
            if !(ty.is(torch.tensor.bind(py)) || ty.is(torch.parameter.bind(py))) {
                return Ok(None);
            }
            let dtype = t.getattr(pyo3::intern!(py, "dtype"))?;
            let of_elem = match spec.elem {
                mage_common::op::Elem::F32 => dtype.is(torch.float32.bind(py)),
                mage_common::op::Elem::U32 => torch.words.iter().any(|w| dtype.is(w.bind(py))),
            };
            if !of_elem || grad && t.getattr(pyo3::intern!(py, "requires_grad"))?.is_truthy()? {
                return Ok(None);
            }
            let d: i64 = t.call_method0(pyo3::intern!(py, "get_device"))?.extract()?;
            if d < 0 || (device >= 0 && d != device) || !t.call_method0(pyo3::intern!(py, "is_contiguous"))?.is_truthy()? {
                return Ok(None);
            }
            device = d;
            let ptr = t.call_method0(pyo3::intern!(py, "data_ptr"))?.extract::<u64>()?;
            let shape = shape_of(t)?;
            if !ptr.is_multiple_of(tensor::ALIGN) || shape.contains(&0) {
                return Ok(None);
            }
            shapes.push(shape);
            ptrs.push(ptr);
        }
        let like_shape = self.f32_input.map(|i| shapes[i].clone());
        let Ok(planned) = self.planned(CURRENT, shapes, None, &constants) else { return Ok(None) };
        let device = device as usize;
        let stream: usize = torch.raw_stream.bind(py).call1((device,))?.extract()?;
        self.launch_planned(py, &inputs, like_shape, ptrs, &planned, &constants, device, stream).map(Some)
    }

    /// Entries in the plan and bind caches (for tests and measurements).
    fn cache_sizes(&self) -> (usize, usize) {
        (self.plans.lock().unwrap_or_else(PoisonError::into_inner).len(), self.bound.lock().unwrap_or_else(PoisonError::into_inner).len())
    }

    fn __repr__(&self) -> String {
        format!("<mage launcher {}>", self.op.name)
    }
}

/// A CSR graph checked and analysed once (see the module doc).
#[pyclass(frozen, module = "mage")]
pub struct GraphInfo {
    /// Unique in the process: the plan caches key on it.
    id: u64,
    op: &'static Op,
    n: u32,
    edges: u32,
    /// rowptr on the host, as the dispatcher reads it.
    host: Vec<HostBuf>,
    picks: Mutex<HashMap<u32, &'static str>>,
}

static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);

impl GraphInfo {
    /// The host buffers of a call of `op` on this graph: rowptr where `op`
    /// takes one (by role), every other input empty.
    fn host_for(&self, op: &Op) -> PyResult<Vec<HostBuf>> {
        let rowptr = self.rowptr();
        if !op.inputs.iter().any(|i| i.role == "rowptr") {
            return Err(error(format!("{} takes no graph", op.name)));
        }
        Ok(op.inputs.iter().map(|i| if i.role == "rowptr" { HostBuf::U32(rowptr.to_vec()) } else { HostBuf::empty(i.elem) }).collect())
    }

    fn rowptr(&self) -> &[u32] {
        self.host.iter().find_map(|b| if let HostBuf::U32(v) = b { Some(v.as_slice()) } else { None }).unwrap_or(&[])
    }
}

#[pymethods]
impl GraphInfo {
    /// Copies `rowptr` (`num_nodes + 1` values) and `indices` (one per
    /// edge; int32 or uint32 CUDA tensors) to the host after one
    /// synchronisation of torch's current stream, and checks them with the
    /// content check of `op` (`neighbor`): rowptr starts at 0, never
    /// decreases and ends at the edge count; every index is below
    /// `num_nodes`.
    #[new]
    #[pyo3(signature = (rowptr, indices, num_nodes, op = "neighbor"))]
    fn new(
        py: Python<'_>,
        rowptr: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        num_nodes: &Bound<'_, PyAny>,
        op: &str,
    ) -> PyResult<GraphInfo> {
        let op = mage_runtime::ops::find(op).map_err(error)?;
        let n: u32 = num_nodes
            .extract()
            .ok()
            .filter(|_| !num_nodes.is_instance_of::<pyo3::types::PyBool>())
            .ok_or_else(|| error(format!("num_nodes is {}; it must be a whole number from 1 to 2^32 - 1", args::shown(num_nodes))))?;
        let roles: Vec<_> = op.inputs.iter().map(|i| i.role).collect();
        let (Some(ri), Some(ii)) = (roles.iter().position(|r| *r == "rowptr"), roles.iter().position(|r| *r == "indices")) else {
            return Err(error(format!("{} takes no rowptr and indices", op.name)));
        };
        let r = tensor::Tensor::read(rowptr, "rowptr", Some(op.inputs[ri].elem))?;
        let i = tensor::Tensor::read(indices, "indices", Some(op.inputs[ii].elem))?;
        if r.shape.len() != 1 || i.shape.len() != 1 {
            return Err(error(format!("rowptr is {:?} and indices {:?}; each must be one axis", r.shape, i.shape)));
        }
        if r.shape[0] != n as usize + 1 {
            return Err(error(format!("rowptr holds {} values; a graph of num_nodes = {n} needs {}", r.shape[0], n as usize + 1)));
        }
        let edges = u32::try_from(i.shape[0]).map_err(|_| error(format!("indices holds {} values; at most 2^32 - 1", i.shape[0])))?;
        let device = tensor::one_device([&r, &i].into_iter())?;
        let mut tensors: Vec<tensor::Tensor> = vec![];
        let mut which = vec![];
        for (k, spec) in op.inputs.iter().enumerate() {
            if k == ri {
                tensors.push(tensor::Tensor::read(rowptr, "rowptr", None)?);
                which.push(k);
            } else if k == ii {
                tensors.push(tensor::Tensor::read(indices, "indices", None)?);
                which.push(k);
            } else {
                tensors.push(tensor::Tensor { role: spec.role.into(), device, elem: spec.elem, shape: vec![], ptr: 0, bytes: 0 });
            }
        }
        let host = tensor::copy_to_host(py, device, &tensors, &which)?;
        // The CSR check needs dims; the width is not part of it.
        let dims = vec![n, 1, edges];
        op.check_contents(&dims, &host).map_err(error)?;
        let host = host.into_iter().enumerate().map(|(k, b)| if k == ri { b } else { HostBuf::empty(op.inputs[k].elem) }).collect();
        Ok(GraphInfo { id: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed), op, n, edges, host, picks: Mutex::default() })
    }

    #[getter]
    fn num_nodes(&self) -> u32 {
        self.n
    }

    #[getter]
    fn edges(&self) -> u32 {
        self.edges
    }

    /// The stage the op's `current` picks for this graph and `width`
    /// features, from rowptr on the host (no device access).
    fn stage(&self, width: u32) -> &'static str {
        let mut picks = self.picks.lock().unwrap_or_else(PoisonError::into_inner);
        picks.entry(width).or_insert_with(|| self.op.dispatch(&[self.n, width, self.edges], &self.host).name)
    }

    /// The largest in-degree (edges of the heaviest row).
    fn max_degree(&self) -> u32 {
        self.rowptr().windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
    }

    /// Unique in the process.
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    fn __repr__(&self) -> String {
        format!("<mage graph of {} nodes, {} edges>", self.n, self.edges)
    }
}
