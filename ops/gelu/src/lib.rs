//! Bias + GELU (tanh form) over the rows of an FP32 matrix, with every
//! stage of its history.
//!
//! `y[r, c] = gelu(z) = 0.5·z·(1 + tanh(√(2/π)·(z + 0.044715·z³)))` with
//! `z = x[r, c] + bias[c]`. Inputs: `a` = x `[rows, width]`, `b` = bias
//! `[width]`.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one fused kernel, one element per thread, `tanh(u) = 1 − 2/(e^{2u} + 1)` from `ex2.approx` and a division |
//! | [`mage_002`] | one 128-bit quad per thread, `gelu(z) = z·σ(2u)` with `σ = rsqrt.approx(1 + e^{−2u})²`: no division |
//! | [`mage_003`] | the matrix as one flat run of 128-bit quads, any width (a quad may straddle two rows), the bias column carried along, a thread a quad; mage-002's arithmetic |
//! | [`logistic`] | the arithmetic mage-002 and mage-003 share, `z·σ(2u)` |
//! | [`flat_quads`] | the kernel body mage-003 and gelu_erf's mage-003 share |
//! | [`current`] | the dispatcher: mage-002 where the width is a multiple of 4, else mage-003 |
//! | [`backward`] | `gelu_backward`, the gradients dx and dbias: an op of its own with its own stages |
//! | [`erf`] | `gelu_erf`, bias + the exact GELU (erf form, PyTorch's default): an op of its own with its own stages |
//! | [`erf_backward`] | `gelu_erf_backward`, the exact GELU's gradients dx and dbias: an op of its own with its own stages |
//!
//! # Why not `tanh.approx`
//!
//! `tanh.approx.f32` is allowed a relative error of 2^-10.987 ≈ 4.9e-4
//! ([`TANH_APPROX_REL`](mage_common::numeric::TANH_APPROX_REL)); in
//! `0.5·z·(1 + t)` that is an absolute error up to `0.5·|z|·4.9e-4`,
//! 2.5e-4·|z|, against a tolerance of 1e-4·|ref| + 2e-5·|z| ([`tolerance`]):
//! it breaks the contract on positive z (ref ≈ z) and on negative z
//! (ref ≈ 0). The emulator computes `tanh_approx` exactly, so
//! no emulator test would see it. Every stage here builds the exponential
//! from `ex2.approx.ftz.f32` (relative error 2^-22) instead; each stage's
//! doc carries its error analysis, and `tests/stages.rs` replays the
//! arithmetic with `ex2`/`rsqrt` pushed to the edges of their contract.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod backward;
pub mod bias_gradient;
pub mod erf;
pub mod erf_backward;
pub mod flat_quads;
pub mod logistic;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

/// `√(2/π)`.
pub const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the tanh form.
pub const CUBIC: f64 = 0.044_715;
/// `2·log2(e)·√(2/π)`: `s = z·(A0 + A1·z²) = 2u·log2(e)` (mage-001's
/// exponent; mage-002's is `−s`).
pub const A0: f32 = (2.0 * core::f64::consts::LOG2_E * SQRT_2_OVER_PI) as f32;
/// `A0 · 0.044715`.
pub const A1: f32 = (2.0 * core::f64::consts::LOG2_E * SQRT_2_OVER_PI * CUBIC) as f32;

#[cfg(not(target_arch = "nvptx64"))]
pub use backward::BACKWARD;
#[cfg(not(target_arch = "nvptx64"))]
pub use erf::ERF;
#[cfg(not(target_arch = "nvptx64"))]
pub use erf_backward::ERF_BACKWARD;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Op, Output, Stage, Workload};

    /// The kernel arguments every GELU kernel takes, in order.
    pub fn args(rows: u32, width: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Output(0), Arg::U32(rows), Arg::U32(width)]
    }

    /// `gelu_tanh(z)` in f64, the formula as written.
    pub fn gelu_f64(z: f64) -> f64 {
        0.5 * z * (1.0 + (SQRT_2_OVER_PI * (z + CUBIC * z * z * z)).tanh())
    }

    /// The f64 reference: `z = x + bias` exactly (in f64), then the tanh
    /// form; each element's magnitude is `|z|`.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        let (x, bias) = (inputs[0].as_f32(), inputs[1].as_f32());
        let z: Vec<f64> = x[..rows * width].iter().enumerate().map(|(i, v)| *v as f64 + bias[i % width] as f64).collect();
        Reference { values: z.iter().map(|&z| gelu_f64(z)).collect(), magnitudes: z.iter().map(|z| z.abs()).collect() }
    }

    /// `|out - ref| <= 2^-126 + 1e-4·|ref| + 2e-5·|z|`.
    ///
    /// Why: each stage's error analysis (module docs of [`mage_001`] and
    /// [`mage_002`]) bounds its error by `4.2e-7·|z| + 1.2e-7·|y|` for every
    /// input: a bound relative to the data, which this holds with a margin
    /// of about 50. Nothing in it is absolute, so inputs of 1e-6 are held
    /// to their own scale and an output of zeros fails wherever `z` is not
    /// far below zero (where the reference itself is below 1e-7·|z|).
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance { abs: FLUSHED, rel: 1e-4, of_magnitude: 2e-5 }
    }

    pub(crate) fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        vec![HostBuf::F32(normal_input(seed, 0, rows * width)), HostBuf::F32(normal_input(seed, 1, width))]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 3] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE];

    /// The op's default dims, and its gradient's ([`BACKWARD`]).
    pub const DEFAULT_DIMS: &[u32] = &[4096, 768];

    /// The shapes `sweep` and `compare --sweep` measure, the gradient's too.
    pub const SWEEP: &[Workload] = &[
        Workload::new(&[4096, 768]),
        Workload::new(&[8192, 768]),
        Workload::new(&[4096, 3072]),
        Workload::new(&[16384, 4096]),
        Workload::new(&[1000, 1001]),
    ];

    pub static OP: Op = Op {
        name: "gelu",
        package: "mage-gelu",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: DEFAULT_DIMS,
        sweep: SWEEP,
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "bias", elem: Elem::F32, shape: &[Dim(1)] },
        ],
        outputs: &[Output { file: "y", role: "y", shape: &[Dim(0), Dim(1)] }],
        constants: &[("sqrt_2_over_pi", SQRT_2_OVER_PI), ("cubic", CUBIC)],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        // Every stage is within about 1e-6·max(1, |z|) of the exact value
        // (see their docs); the allowance leaves room for nothing else.
        tolerance,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            // x in, y out, bias once; about ten operations per element.
            (4 * (2 * r * w + w), 10 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
