//! The numerical contract, measured on the GPU: each probe kernel of
//! `mage_common::probes` runs on the GPU and on the emulator over the same
//! inputs, and the largest relative difference must stay within the bound
//! `mage_common::numeric` states.

use crate::gpu::Gpu;
use mage_common::Kernel;
use mage_common::fixtures::Rng;
use mage_common::kernel::Dim3;
use mage_common::numeric::{EX2_APPROX_REL, RSQRT_APPROX_REL, TANH_APPROX_REL, Tolerance};
use mage_common::op::{Arg, Elem, HostBuf, Input, Launch, Op, Plan};
use mage_common::probes;

const N: u32 = 1 << 16;

fn x_only() -> Vec<usize> {
    vec![N as usize]
}

static UNARY: Op = Op {
    name: "probe",
    package: "mage-common",
    dim_names: &["n"],
    min_dims: &[1],
    default_dims: &[N],
    sweep_dims: &[],
    inputs: &[Input { file: "a", role: "x", elem: Elem::F32 }],
    input_lens: |_| x_only(),
    output_shape: |_| vec![N as usize],
    check_inputs: |_, _| Ok(()),
    generate: |_, _| vec![],
    reference: |_, _| vec![],
    tolerance: |_| Tolerance::new(0.0, 0.0),
    cost: |_| (0, 0),
    stages: &[],
};

static TERNARY: Op = Op {
    inputs: &[
        Input { file: "a", role: "a", elem: Elem::F32 },
        Input { file: "b", role: "b", elem: Elem::F32 },
        Input { file: "c", role: "c", elem: Elem::F32 },
    ],
    input_lens: |_| vec![N as usize; 3],
    ..UNARY
};

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
        args.extend([Arg::Output, Arg::U32(N)]);
        let plan: Plan = Launch { kernel: self.kernel, grid: Dim3::x(N / 256), block: Dim3::x(256), shared_bytes: 0, args }.into();
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

/// Small shapes on which every stage is compared with the emulator.
pub fn differential_shapes(op: &Op) -> Vec<Vec<u32>> {
    match op.name {
        "layernorm" => vec![vec![33, 768], vec![7, 1000], vec![5, 4096], vec![3, 257], vec![9, 128]],
        "matmul" => vec![vec![17, 19, 23], vec![1, 1, 1], vec![130, 70, 200], vec![256, 256, 256], vec![100, 64, 96]],
        "gelu" => vec![vec![3, 257], vec![64, 768], vec![7, 1001]],
        "triangle" => vec![vec![7, 5], vec![33, 12], vec![64, 32]],
        "neighbor" => vec![vec![7, 9, 23, 0], vec![7, 9, 0, 0], vec![1, 5, 9, 0], vec![512, 64, 8192, 1200], vec![1024, 33, 4096, 0]],
        _ => vec![op.default_dims.to_vec()],
    }
}

/// How many multiply-adds feed one output element (for the differential bound).
pub fn contraction_terms(op: &Op, dims: &[u32]) -> u64 {
    match op.name {
        "matmul" => dims[2] as u64,
        "triangle" => dims[0] as u64,
        "neighbor" => dims[2] as u64, // a row may hold every edge
        "layernorm" => dims[1] as u64,
        _ => 1,
    }
}
