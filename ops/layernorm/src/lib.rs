//! LayerNorm over the rows of an FP32 matrix, with every stage of its history.
//!
//! `y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + 1e-5) * gamma[c] + beta[c]`,
//! biased variance. Inputs: `a` = x `[rows, width]`, `b` = gamma `[width]`,
//! `c` = beta `[width]`.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | a 256-thread block per row, partial sums through shared memory and a tree of barriers, three passes |
//! | [`mage_002`] | one warp per row, 128-bit quads, shuffle reductions |
//! | [`mage_003`] | two warps per row meeting once in shared memory behind one barrier |
//! | [`mage_006`] | one 128-thread block per row, the row held in registers, one read, one barrier, `rsqrt.approx` |
//! | [`mage_007`] | one warp per row, the row held in registers: one read, no shared memory, no barrier |
//! | [`mage_008`] | mage-006's held row in 256- or 512-thread blocks, rows up to 4096 |
//! | [`current`] | the dispatcher: the stage measured fastest for the shape |
//!
//! Every stage computes the variance soundly: values are shifted by the
//! row's first element (exact where the row's values are close together)
//! and either reduced in two passes or merged as [`Moments`](mage_common::stats::Moments),
//! so a row with mean 1e3 and spread 1e-2 normalises correctly.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_006;
pub mod mage_007;
pub mod mage_008;
pub mod space;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

/// Added to the variance before the square root.
pub const EPS: f32 = 1e-5;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::Tolerance;
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Op, Stage, Workload};

    /// The kernel arguments every LayerNorm kernel takes, in order.
    pub fn args(rows: u32, width: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output, Arg::U32(rows), Arg::U32(width)]
    }

    /// The f64 reference.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Vec<f64> {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        let (x, gamma, beta) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_f32());
        let mut out = Vec::with_capacity(rows * width);
        for row in x.chunks_exact(width).take(rows) {
            let mean = row.iter().map(|v| *v as f64).sum::<f64>() / width as f64;
            let var = row.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / width as f64;
            let rstd = 1.0 / (var + EPS as f64).sqrt();
            out.extend(row.iter().enumerate().map(|(c, v)| (*v as f64 - mean) * rstd * gamma[c] as f64 + beta[c] as f64));
        }
        out
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        vec![
            HostBuf::F32(normal_input(seed, 0, rows * width)),
            HostBuf::F32(normal_input(seed, 1, width)),
            HostBuf::F32(normal_input(seed, 2, width)),
        ]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 6] =
        [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_006::STAGE, &mage_007::STAGE, &mage_008::STAGE];

    pub static OP: Op = Op {
        name: "layernorm",
        package: "mage-layernorm",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: &[4096, 768],
        sweep: &[Workload::new(&[4096, 768]), Workload::new(&[8192, 768]), Workload::new(&[1024, 2048]), Workload::new(&[4096, 4096])],
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "gamma", elem: Elem::F32, shape: &[Dim(1)] },
            Input { file: "c", role: "beta", elem: Elem::F32, shape: &[Dim(1)] },
        ],
        output: &[Dim(0), Dim(1)],
        constants: &[("eps", EPS as f64)],
        check_inputs: |_, _| Ok(()),
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        tolerance: |_, _| Tolerance::new(1e-4, 1e-4),
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            (4 * (2 * r * w + 2 * w), 8 * r * w)
        },
        stages: &STAGES,
        current: current::DISPATCHER,
    };
}
