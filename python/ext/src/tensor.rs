//! PyTorch tensors as the launcher sees them, read by duck typing (no
//! torch at build time): device, element type, shape, address.

use crate::error;
use mage_common::op::{Elem, HostBuf, Op};
use pyo3::prelude::*;

/// The alignment every buffer a kernel reads or writes starts at: the
/// stages' 16-byte vector copies need it, and PyTorch's allocator gives
/// it (a view into another tensor may not have it).
pub const ALIGN: u64 = 16;

/// What a launch needs of one tensor.
pub struct Tensor {
    pub role: String,
    pub device: usize,
    pub elem: Elem,
    pub shape: Vec<usize>,
    pub ptr: u64,
    pub bytes: u64,
}

impl Tensor {
    /// Reads `obj` as a contiguous CUDA tensor of `want` elements (any 4-byte
    /// type if `None`).
    pub fn read(obj: &Bound<'_, PyAny>, role: &str, want: Option<Elem>) -> PyResult<Tensor> {
        let kind = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        if !obj.hasattr("data_ptr")? || !obj.hasattr("is_cuda")? {
            return Err(error(format!("{role} is `{kind}`, not a torch tensor")));
        }
        if !obj.getattr("is_cuda")?.extract::<bool>()? {
            return Err(error(format!("{role} is on the CPU; Mage launches on CUDA tensors (.cuda())")));
        }
        let dtype = obj.getattr("dtype")?.str()?.to_string();
        let elem = match dtype.as_str() {
            "torch.float32" => Elem::F32,
            "torch.int32" | "torch.uint32" => Elem::U32,
            other => {
                let want = match want {
                    Some(Elem::U32) => "torch.int32 or torch.uint32",
                    _ => "torch.float32",
                };
                return Err(error(format!("{role} is {other}; it must be {want}")));
            }
        };
        if let Some(w) = want
            && w != elem
        {
            let want = if w == Elem::F32 { "torch.float32" } else { "torch.int32 or torch.uint32" };
            return Err(error(format!("{role} is {dtype}; it must be {want}")));
        }
        if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
            return Err(error(format!("{role} is not contiguous (.contiguous() makes it so)")));
        }
        let shape: Vec<usize> = obj.getattr("shape")?.try_iter()?.map(|d| d.and_then(|d| d.extract::<usize>())).collect::<PyResult<_>>()?;
        let numel: u64 = obj.call_method0("numel")?.extract()?;
        let device: usize = obj.getattr("device")?.getattr("index")?.extract::<Option<usize>>()?.unwrap_or(0);
        let ptr: u64 = obj.call_method0("data_ptr")?.extract()?;
        if !ptr.is_multiple_of(ALIGN) && numel > 0 {
            return Err(error(format!(
                "{role} starts at an address that is not a multiple of {ALIGN} bytes (a view into another tensor): the kernels' 16-byte copies need it (.clone() makes a tensor of its own)"
            )));
        }
        Ok(Tensor { role: role.into(), device, elem, shape, ptr, bytes: numel * 4 })
    }

    /// This tensor's contents on the host (PyTorch's current stream must
    /// have finished what it holds).
    fn to_host(&self, device: usize) -> PyResult<HostBuf> {
        let words = crate::device::copy_to_host(device, self.ptr, self.bytes as usize / 4).map_err(error)?;
        Ok(match self.elem {
            Elem::U32 => HostBuf::U32(words),
            Elem::F32 => HostBuf::F32(words.into_iter().map(f32::from_bits).collect()),
        })
    }
}

/// The inputs numbered in `which` on the host, once PyTorch's current
/// stream has finished what it holds (one synchronisation for them all);
/// every other input an empty buffer. With `which` empty the device is not
/// touched.
pub fn copy_to_host(py: Python<'_>, device: usize, inputs: &[Tensor], which: &[usize]) -> PyResult<Vec<HostBuf>> {
    let mut host: Vec<HostBuf> = inputs.iter().map(|t| HostBuf::empty(t.elem)).collect();
    if which.is_empty() {
        return Ok(host);
    }
    // The driver first: without one the error says so, before torch is asked.
    crate::device::ready(device).map_err(error)?;
    sync_current_stream(py, device)?;
    for &i in which {
        host[i] = inputs[i].to_host(device)?;
    }
    Ok(host)
}

/// The one device every tensor is on.
pub fn one_device<'a>(tensors: impl Iterator<Item = &'a Tensor>) -> PyResult<usize> {
    let mut device = None;
    for t in tensors {
        match device {
            None => device = Some((t.device, t.role.clone())),
            Some((d, ref first)) if d != t.device => {
                return Err(error(format!("{} is on cuda:{}, {first} on cuda:{d}; every tensor must be on one device", t.role, t.device)));
            }
            _ => {}
        }
    }
    Ok(device.map_or(0, |d| d.0))
}

/// Kernels read inputs through the non-coherent cache: an output that
/// overlaps one is refused.
pub fn check_no_overlap(inputs: &[Tensor], out: &Tensor, op: &Op) -> PyResult<()> {
    for t in inputs.iter().filter(|t| t.bytes > 0 && out.bytes > 0) {
        if t.ptr < out.ptr + out.bytes && out.ptr < t.ptr + t.bytes {
            let out_role = if op.outputs.len() == 1 { "the output".to_string() } else { format!("output {}", out.role) };
            return Err(error(format!("{out_role} overlaps {}; {} writes a separate tensor", t.role, op.name)));
        }
    }
    Ok(())
}

/// `torch.cuda.current_stream(device).cuda_stream`, as a driver stream.
pub fn current_stream(py: Python<'_>, device: usize) -> PyResult<cudarc::driver::sys::CUstream> {
    // `torch._C._cuda_getCurrentRawStream(device)`: the handle with no
    // Stream object made (`torch.cuda.current_stream(device).cuda_stream`
    // where a torch lacks it).
    static RAW: pyo3::sync::PyOnceLock<Option<Py<PyAny>>> = pyo3::sync::PyOnceLock::new();
    let raw = RAW.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("torch._C")?.getattr("_cuda_getCurrentRawStream").ok().map(Bound::unbind))
    })?;
    let handle: usize = match raw {
        Some(f) => f.bind(py).call1((device,))?.extract()?,
        None => py.import("torch")?.getattr("cuda")?.call_method1("current_stream", (device,))?.getattr("cuda_stream")?.extract()?,
    };
    Ok(handle as cudarc::driver::sys::CUstream)
}

fn sync_current_stream(py: Python<'_>, device: usize) -> PyResult<()> {
    let torch = py.import("torch")?;
    torch.getattr("cuda")?.call_method1("current_stream", (device,))?.call_method0("synchronize")?;
    Ok(())
}

/// `torch.empty(max(n, 1), dtype=torch.float32, device=f"cuda:{device}")`.
pub fn empty_f32<'py>(py: Python<'py>, n: usize, device: usize) -> PyResult<Bound<'py, PyAny>> {
    let torch = py.import("torch")?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("dtype", torch.getattr("float32")?)?;
    kwargs.set_item("device", format!("cuda:{device}"))?;
    torch.call_method("empty", (n.max(1),), Some(&kwargs))
}
