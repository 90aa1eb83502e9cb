//! A plan bound to device addresses, and launching it on a stream.
//!
//! [`BoundPlan`] is the one launch path: `run`, `sweep` and `gpu-check` bind
//! a plan to buffers this crate allocated and launch it on the runner's
//! stream; the Python extension binds it to PyTorch tensors and launches on
//! PyTorch's current stream.

use super::buffer::{DeviceBuf, DeviceInputs};
use super::device::Gpu;
use super::module::{Modules, allow_shared};
use cudarc::driver::{result, sys};
use mage_common::kernel::{ArgValue, Dim3, LaunchConfig, ParamKind};
use mage_common::op::{Arg, Op, Plan};
use std::ffi::c_void;
use std::marker::PhantomData;

/// One launch, resolved: the function, its shape and its argument values.
struct Ready {
    kernel: &'static str,
    function: sys::CUfunction,
    config: LaunchConfig,
    args: Vec<ArgValue>,
}

/// Every launch of a plan with its function and argument values, checked
/// against the kernels' parameters. It holds device addresses, not
/// buffers: whoever binds it keeps the buffers alive while it is launched.
pub struct BoundPlan {
    launches: Vec<Ready>,
}

// SAFETY: function handles and argument values are plain data, valid in
// their context from any thread that makes it current.
unsafe impl Send for BoundPlan {}
unsafe impl Sync for BoundPlan {}

impl BoundPlan {
    /// Binds `plan` to these device addresses: resolves every argument,
    /// looks up every function in `modules` and opts it in to the dynamic
    /// shared memory its launch asks for. The modules' context must be
    /// current on this thread.
    /// `outputs` holds one address per output of the op.
    pub fn bind(modules: &Modules, plan: &Plan, inputs: &[u64], outputs: &[u64], scratch: &[u64]) -> Result<BoundPlan, String> {
        let args = resolve_plan(plan, inputs, outputs, scratch)?;
        let mut launches = Vec::with_capacity(plan.launches.len());
        for (launch, args) in plan.launches.iter().zip(args) {
            let function = modules.function(launch.kernel.name)?;
            allow_shared(function, launch.shared_bytes).map_err(|e| format!("kernel `{}`: {e}", launch.kernel.name))?;
            launches.push(Ready { kernel: launch.kernel.name, function, config: launch.config(), args });
        }
        Ok(BoundPlan { launches })
    }

    /// Kernel launches per call.
    pub fn launches(&self) -> usize {
        self.launches.len()
    }

    /// One call: every launch, in order, on `stream`.
    ///
    /// # Safety
    /// The context of the bound modules must be current, `stream` must
    /// belong to it, and every buffer the plan was bound to must be alive
    /// (and large enough) until the launches have run.
    pub unsafe fn launch(&self, stream: sys::CUstream) -> Result<(), String> {
        for ready in &self.launches {
            let mut params: Vec<*mut c_void> = ready.args.iter().map(param_ptr).collect();
            let LaunchConfig { grid: g, block: b, shared_bytes, cluster } = ready.config;
            if cluster == Dim3::ONE {
                // SAFETY: the arguments match the kernel's parameters (checked in
                // `resolve_plan`); the caller keeps the buffers alive.
                unsafe { result::launch_kernel(ready.function, (g.x, g.y, g.z), (b.x, b.y, b.z), shared_bytes, stream, &mut params) }
                    .map_err(|e| format!("launching `{}` (grid {g}, block {b}, {shared_bytes} B shared): {:?}", ready.kernel, e.0))?;
            } else {
                // SAFETY: as above.
                unsafe { launch_clustered(ready.function, &ready.config, stream, &mut params) }.map_err(|e| {
                    format!("launching `{}` (grid {g}, block {b}, {shared_bytes} B shared, clusters {cluster}): {e:?}", ready.kernel)
                })?;
            }
        }
        Ok(())
    }
}

/// `cuLaunchKernelEx` with the cluster dims of `config` as its one
/// attribute (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`): the launch of a
/// plan's clustered kernel. Clusters of at most 8 blocks (the portable
/// size) need no opt-in beyond the dynamic shared memory the binding
/// allowed.
///
/// # Safety
/// As [`BoundPlan::launch`]: `params` matches the kernel's parameters and
/// its buffers are alive.
unsafe fn launch_clustered(
    f: sys::CUfunction,
    config: &LaunchConfig,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<(), sys::CUresult> {
    let LaunchConfig { grid: g, block: b, shared_bytes, cluster: c } = *config;
    // SAFETY: a plain C union of integers; every field is set below or unused.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: c.x, y: c.y, z: c.z };
    let mut attribute = sys::CUlaunchAttribute { id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, pad: [0; 4], value };
    let launch = sys::CUlaunchConfig {
        gridDimX: g.x,
        gridDimY: g.y,
        gridDimZ: g.z,
        blockDimX: b.x,
        blockDimY: b.y,
        blockDimZ: b.z,
        sharedMemBytes: shared_bytes,
        hStream: stream,
        attrs: &mut attribute,
        numAttrs: 1,
    };
    // SAFETY: `launch` and its attribute outlive the call; the caller vouches for the rest.
    unsafe { sys::cuLaunchKernelEx(&launch, f, params.as_mut_ptr(), std::ptr::null_mut()) }.result().map_err(|e| e.0)
}

/// A plan bound to buffers of the runner's own: the output and scratch it
/// writes (kept alive here), and the inputs it borrows.
pub struct Prepared<'a> {
    pub(crate) bound: BoundPlan,
    pub(crate) output: DeviceBuf,
    _scratch: Vec<DeviceBuf>,
    _inputs: PhantomData<&'a DeviceInputs>,
}

impl Gpu {
    /// Allocates and poisons the output and scratch and binds the plan to
    /// them and to the inputs.
    pub fn prepare<'a>(&self, op: &Op, plan: &Plan, dims: &[u32], inputs: &'a DeviceInputs) -> Result<Prepared<'a>, String> {
        op.check_dims(dims)?;
        inputs.check(op, dims)?;
        self.bind()?;
        let output = self.alloc_poisoned(op.output_len(dims))?;
        let scratch = plan.scratch.iter().map(|&n| self.alloc_poisoned(n)).collect::<Result<Vec<_>, _>>()?;
        let scratch_ptrs: Vec<u64> = scratch.iter().map(DeviceBuf::ptr).collect();
        // The outputs are one allocation, each output its part of it.
        let output_ptrs: Vec<u64> = op.output_offsets(dims)[..op.outputs.len()].iter().map(|&at| output.ptr() + at as u64 * 4).collect();
        let bound = self.with_modules(|m| BoundPlan::bind(m, plan, &inputs.ptrs(), &output_ptrs, &scratch_ptrs))?;
        self.sync("preparing device buffers")?;
        Ok(Prepared { bound, output, _scratch: scratch, _inputs: PhantomData })
    }

    /// Runs one call of the plan into a poisoned output and returns it.
    pub fn run(&self, op: &Op, plan: &Plan, dims: &[u32], inputs: &DeviceInputs) -> Result<Vec<f32>, String> {
        let prepared = self.prepare(op, plan, dims, inputs)?;
        self.call(&prepared)?;
        self.sync("running the plan")?;
        self.download(&prepared.output)
    }

    /// Poisons the output again and runs one call, then returns the output.
    pub fn run_prepared(&self, prepared: &Prepared) -> Result<Vec<f32>, String> {
        self.poison(&prepared.output)?;
        self.call(prepared)?;
        self.sync("running the plan")?;
        self.download(&prepared.output)
    }

    /// One call: every launch of the plan, in order, on the stream.
    pub(crate) fn call(&self, prepared: &Prepared) -> Result<(), String> {
        // SAFETY: `prepared` keeps the output and scratch alive and borrows
        // the inputs; the context is this runner's.
        unsafe { prepared.bound.launch(self.stream.cu_stream()) }
    }
}

/// Every launch's argument values, checked against its kernel's parameters:
/// the count, each kind, and each input, output or scratch number.
pub fn resolve_plan(plan: &Plan, inputs: &[u64], outputs: &[u64], scratch: &[u64]) -> Result<Vec<Vec<ArgValue>>, String> {
    plan.launches
        .iter()
        .enumerate()
        .map(|(i, launch)| {
            let kernel = launch.kernel;
            let at = format!("launch {i} (`{}`)", kernel.name);
            if launch.args.len() != kernel.params.len() {
                return Err(format!("{at} passes {} arguments; the kernel takes {}", launch.args.len(), kernel.params.len()));
            }
            kernel
                .params
                .iter()
                .zip(&launch.args)
                .map(|(param, arg)| {
                    let pick = |bufs: &[u64], j: usize, what: &str| {
                        bufs.get(j)
                            .map(|&p| ArgValue::Ptr(p))
                            .ok_or_else(|| format!("{at}: {arg:?} but there are {} {what} buffers", bufs.len()))
                    };
                    let value = match *arg {
                        Arg::Input(j) => pick(inputs, j, "input")?,
                        Arg::Output(j) => pick(outputs, j, "output")?,
                        Arg::Scratch(j) => pick(scratch, j, "scratch")?,
                        Arg::U32(v) => ArgValue::U32(v),
                        Arg::F32(v) => ArgValue::F32(v),
                    };
                    if kind_of(&value) != param.kind {
                        return Err(format!("{at}: parameter `{}` is {} but the plan passes {arg:?}", param.name, kind_name(param.kind)));
                    }
                    Ok(value)
                })
                .collect()
        })
        .collect()
}

fn kind_of(v: &ArgValue) -> ParamKind {
    match v {
        ArgValue::Ptr(_) => ParamKind::Ptr,
        ArgValue::U32(_) => ParamKind::U32,
        ArgValue::F32(_) => ParamKind::F32,
    }
}

fn kind_name(k: ParamKind) -> &'static str {
    match k {
        ParamKind::Ptr => "a pointer",
        ParamKind::U32 => "a u32",
        ParamKind::F32 => "an f32",
    }
}

/// What cuLaunchKernel's parameter array holds: the address of each value.
fn param_ptr(v: &ArgValue) -> *mut c_void {
    match v {
        ArgValue::Ptr(p) => std::ptr::from_ref(p).cast_mut().cast(),
        ArgValue::U32(x) => std::ptr::from_ref(x).cast_mut().cast(),
        ArgValue::F32(x) => std::ptr::from_ref(x).cast_mut().cast(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mage_common::Kernel;
    use mage_common::kernel::Param;
    use mage_common::op::Launch;

    static SCALE: Kernel = Kernel {
        name: "scale",
        params: &[
            Param { name: "x", kind: ParamKind::Ptr },
            Param { name: "y", kind: ParamKind::Ptr },
            Param { name: "n", kind: ParamKind::U32 },
            Param { name: "a", kind: ParamKind::F32 },
        ],
        host: |_| {},
    };

    fn plan(args: Vec<Arg>) -> Plan {
        Launch { kernel: &SCALE, grid: Dim3::x(1), block: Dim3::x(32), shared_bytes: 0, cluster: Dim3::ONE, args }.into()
    }

    #[test]
    fn args_resolve_in_parameter_order() {
        let args = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output(0), Arg::U32(7), Arg::F32(0.5)]), &[100], &[200], &[]).unwrap();
        assert_eq!(args, vec![vec![ArgValue::Ptr(100), ArgValue::Ptr(200), ArgValue::U32(7), ArgValue::F32(0.5)]]);
    }

    #[test]
    fn wrong_arg_kind_is_an_error() {
        let e = resolve_plan(&plan(vec![Arg::U32(1), Arg::Output(0), Arg::U32(7), Arg::F32(0.5)]), &[100], &[200], &[]).unwrap_err();
        assert_eq!(e, "launch 0 (`scale`): parameter `x` is a pointer but the plan passes U32(1)");
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output(0), Arg::Output(0), Arg::F32(0.5)]), &[100], &[200], &[]).unwrap_err();
        assert!(e.contains("parameter `n` is a u32"), "{e}");
    }

    #[test]
    fn wrong_arg_count_or_buffer_number_is_an_error() {
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output(0)]), &[100], &[200], &[]).unwrap_err();
        assert!(e.contains("passes 2 arguments; the kernel takes 4"), "{e}");
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Scratch(1), Arg::U32(7), Arg::F32(0.5)]), &[100], &[200], &[300]).unwrap_err();
        assert!(e.contains("Scratch(1) but there are 1 scratch buffers"), "{e}");
        let e = resolve_plan(&plan(vec![Arg::Input(0), Arg::Output(1), Arg::U32(7), Arg::F32(0.5)]), &[100], &[200], &[]).unwrap_err();
        assert!(e.contains("Output(1) but there are 1 output buffers"), "{e}");
    }

    #[test]
    fn an_unknown_kernel_is_an_error_before_any_launch() {
        let e =
            BoundPlan::bind(&Modules::default(), &plan(vec![Arg::Input(0), Arg::Output(0), Arg::U32(7), Arg::F32(0.5)]), &[1], &[2], &[])
                .err()
                .unwrap();
        assert_eq!(e, "no loaded module has kernel `scale` (loaded: none)");
    }
}
