//! The numerical contract, measured on the GPU: each probe kernel of
//! `mage_common::probes` runs on the GPU and on the emulator over the same
//! inputs, and the largest relative difference must stay within the bound
//! `mage_common::numeric` states.

use mage_common::Kernel;
use mage_common::fixtures::Rng;
use mage_common::kernel::Dim3;
use mage_common::numeric::{EX2_APPROX_REL, RSQRT_APPROX_REL, TANH_APPROX_REL, Tolerance};
use mage_common::op::Extent::Dim;
use mage_common::op::{Arg, Dispatcher, Elem, HostBuf, Input, Launch, Op, Output, Plan};
use mage_common::probes;
use mage_runtime::gpu::Gpu;

const N: u32 = 1 << 16;

/// An op of `n` elements whose inputs are made here, not by a generator;
/// probes launch by plan, not by stage.
const fn probe_op(inputs: &'static [Input]) -> Op {
    Op {
        name: "probe",
        package: "mage-common",
        dim_names: &["n"],
        min_dims: &[1],
        default_dims: &[N],
        sweep: &[],
        inputs,
        outputs: &[Output { file: "y", role: "y", shape: &[Dim(0)] }],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[],
        reference: |_, _| mage_common::numeric::Reference::default(),
        tolerance: |_, _| Tolerance::new(0.0, 0.0),
        cost: |_| (0, 0),
        stages: &[],
        outside_contract: &[],
        current: Dispatcher { summary: "none: probes launch by plan", reads: &[], choose: |_, _| unreachable!("probes have no stages") },
    }
}

static UNARY: Op = probe_op(&[Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0)] }]);

static TERNARY: Op = probe_op(&[
    Input { file: "a", role: "a", elem: Elem::F32, shape: &[Dim(0)] },
    Input { file: "b", role: "b", elem: Elem::F32, shape: &[Dim(0)] },
    Input { file: "c", role: "c", elem: Elem::F32, shape: &[Dim(0)] },
]);

pub struct Probe {
    pub name: &'static str,
    kernel: &'static Kernel,
    op: &'static Op,
    inputs: fn(&mut Rng) -> Vec<HostBuf>,
    bound: f64,
}

#[derive(serde::Serialize)]
pub struct ProbeResult {
    pub name: &'static str,
    pub max_rel_err: f64,
    pub bound: f64,
    pub within_bound: bool,
    pub bit_identical: usize,
    pub elements: usize,
}

fn uniform(r: &mut Rng, lo: f64, hi: f64) -> Vec<f32> {
    (0..N).map(|_| (lo + (hi - lo) * r.uniform()) as f32).collect()
}

pub fn all() -> Vec<Probe> {
    vec![
        Probe {
            name: "rsqrt.approx.f32",
            kernel: &probes::probe_rsqrt_approx::KERNEL,
            op: &UNARY,
            inputs: |r| vec![HostBuf::F32(uniform(r, -3.0, 3.0).iter().map(|e| 10f32.powf(*e)).collect())],
            bound: RSQRT_APPROX_REL,
        },
        Probe {
            name: "tanh.approx.f32",
            kernel: &probes::probe_tanh_approx::KERNEL,
            op: &UNARY,
            inputs: |r| vec![HostBuf::F32(uniform(r, -8.0, 8.0))],
            bound: TANH_APPROX_REL,
        },
        Probe {
            name: "ex2.approx.ftz.f32",
            kernel: &probes::probe_ex2_approx::KERNEL,
            op: &UNARY,
            inputs: |r| vec![HostBuf::F32(uniform(r, -20.0, 20.0))],
            bound: EX2_APPROX_REL,
        },
        Probe {
            name: "a*b+c (no contraction)",
            kernel: &probes::probe_mul_add::KERNEL,
            op: &TERNARY,
            inputs: |r| (0..3).map(|_| HostBuf::F32(r.normal_vec(N as usize, 0.0, 1.0))).collect(),
            bound: 0.0,
        },
    ]
}

impl Probe {
    pub fn measure(&self, gpu: &Gpu) -> Result<ProbeResult, String> {
        let inputs = (self.inputs)(&mut Rng::new(0x5EED));
        let mut args: Vec<Arg> = (0..inputs.len()).map(Arg::Input).collect();
        args.extend([Arg::Output(0), Arg::U32(N)]);
        let plan: Plan =
            Launch { kernel: self.kernel, grid: Dim3::x(N / 256), block: Dim3::x(256), shared_bytes: 0, cluster: Dim3::ONE, args }.into();
        let host = mage_common::op::emulate_plan(self.op, &plan, &[N], &inputs)?;
        let dev = gpu.run(self.op, &plan, &[N], &gpu.upload(&inputs)?)?;
        let rel = |a: f32, b: f32| if a == b { 0.0 } else { ((a as f64 - b as f64) / b as f64).abs() };
        let max_rel_err =
            dev.iter().zip(&host).map(|(d, h)| rel(*d, *h)).fold(0.0, |m: f64, e| if e.is_nan() { f64::INFINITY } else { m.max(e) });
        Ok(ProbeResult {
            name: self.name,
            max_rel_err,
            bound: self.bound,
            within_bound: max_rel_err <= self.bound,
            bit_identical: dev.iter().zip(&host).filter(|(d, h)| d.to_bits() == h.to_bits()).count(),
            elements: dev.len(),
        })
    }
}

/// Small shapes (with the generator of their inputs) on which every stage
/// is compared with the emulator.
pub fn differential_shapes(op: &Op) -> Vec<(Vec<u32>, &'static str)> {
    let normal = |shapes: &[&[u32]]| shapes.iter().map(|d| (d.to_vec(), mage_common::op::DEFAULT_GENERATOR)).collect();
    match op.name {
        "layernorm" => normal(&[&[33, 768], &[7, 1000], &[5, 4096], &[3, 257], &[9, 128]]),
        "matmul" => normal(&[&[17, 19, 23], &[1, 1, 1], &[130, 70, 200], &[256, 256, 256], &[100, 64, 96]]),
        "gelu" | "gelu_erf" => normal(&[&[3, 257], &[64, 768], &[7, 1001]]),
        "matmul_nt" | "matmul_tn" => normal(&[&[17, 19, 23], &[1, 1, 1], &[130, 70, 200], &[256, 256, 256], &[100, 64, 96]]),
        "triangle" => normal(&[&[7, 5], &[33, 12], &[64, 32]]),
        "layernorm_backward" => normal(&[&[33, 768], &[7, 1000], &[3, 257], &[300, 64]]),
        "triangle_backward" => normal(&[&[7, 5], &[33, 12], &[64, 32]]),
        "gelu_backward" | "gelu_erf_backward" => normal(&[&[3, 257], &[64, 768], &[300, 5]]),
        "neighbor_backward" => vec![
            (vec![7, 9, 23], "uniform"),
            (vec![7, 9, 0], "uniform"),
            (vec![512, 64, 8192], "power-law"),
            (vec![1024, 33, 4096], "uniform"),
        ],
        "neighbor" => vec![
            (vec![7, 9, 23], "uniform"),
            (vec![7, 9, 0], "uniform"),
            (vec![1, 5, 9], "uniform"),
            (vec![512, 64, 8192], "power-law"),
            (vec![1024, 33, 4096], "uniform"),
        ],
        _ => vec![(op.default_dims.to_vec(), mage_common::op::DEFAULT_GENERATOR)],
    }
}

/// How many multiply-adds feed one output element (for the differential bound).
pub fn contraction_terms(op: &Op, dims: &[u32]) -> u64 {
    match op.name {
        "matmul" | "matmul_nt" | "matmul_tn" => dims[2] as u64,
        "triangle" => dims[0] as u64,
        "neighbor" => dims[2] as u64, // a row may hold every edge
        "layernorm" => dims[1] as u64,
        // dx sums over the row, dgamma and dbeta over the rows.
        "layernorm_backward" => dims[0].max(dims[1]) as u64,
        "triangle_backward" => dims[0] as u64,
        // dbias sums over the rows.
        "gelu_backward" | "gelu_erf_backward" => dims[0] as u64,
        "neighbor_backward" => dims[2] as u64,
        _ => 1,
    }
}
