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
//! | [`mage_009`] | two warps per row, four rows per block, two to four held quads per lane, merged without a division |
//! | [`mage_010`] | a block per row (128 to 512 threads), four quads per thread loaded before any is used, merged without a division |
//! | [`block_tree`] | the kernel body mage-001 shares with layernorm_backward's mage-001: a block per row, a shared-memory tree, the row's statistics in two passes |
//! | [`row_held`] | the kernel body of mage-006 and mage-008: a block per row, two held quads per thread |
//! | [`held_rows`] | the kernel body of mage-009 and mage-010: `R` rows per block, `Q` held quads per thread, the division-free merge, the entry tables |
//! | [`current`] | the dispatcher: the stage measured fastest for the shape |
//! | [`backward`] | `layernorm_backward`, the gradients dx, dgamma and dbeta: an op of its own with its own stages |
//!
//! Every stage computes the variance soundly: values are shifted by the
//! row's first element (exact where the row's values are close together)
//! and either reduced in two passes or merged as [`Moments`](mage_common::stats::Moments),
//! so a row with mean 1e3 and spread 1e-2 normalises correctly.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod backward;
pub mod block_tree;
#[macro_use]
pub mod held_rows;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_006;
pub mod mage_007;
pub mod mage_008;
pub mod mage_009;
pub mod mage_010;
pub mod row_held;
pub mod space;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

/// Added to the variance before the square root.
pub const EPS: f32 = 1e-5;

#[cfg(not(target_arch = "nvptx64"))]
pub use backward::BACKWARD;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Op, Output, Stage, Workload};

    /// The kernel arguments every LayerNorm kernel takes, in order.
    pub fn args(rows: u32, width: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output(0), Arg::U32(rows), Arg::U32(width), Arg::F32(EPS)]
    }

    /// The f64 reference, with each element's magnitude `|gamma[c]|·(1 +
    /// |x̂|) + |beta[c]|` (`x̂` the exact normalised value) in the same pass.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        reference_at(dims, inputs, EPS)
    }

    /// [`reference`] at another `eps` (the kernels' `eps` parameter, which
    /// a caller may set: [`Plan::with_constant`](mage_common::op::Plan::with_constant)).
    pub fn reference_at(dims: &[u32], inputs: &[HostBuf], eps: f32) -> Reference {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        let (x, gamma, beta) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_f32());
        let mut out = Vec::with_capacity(rows * width);
        let mut mag = Vec::with_capacity(rows * width);
        for row in x.chunks_exact(width).take(rows) {
            let mean = row.iter().map(|v| *v as f64).sum::<f64>() / width as f64;
            let var = row.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / width as f64;
            let rstd = 1.0 / (var + eps as f64).sqrt();
            for (c, v) in row.iter().enumerate() {
                let (xhat, g, b) = ((*v as f64 - mean) * rstd, gamma[c] as f64, beta[c] as f64);
                out.push(xhat * g + b);
                mag.push(g.abs() * (1.0 + xhat.abs()) + b.abs());
            }
        }
        Reference { values: out, magnitudes: mag }
    }

    /// `|out - ref| <= 2^-126 + 1e-4·(|gamma[c]|·(1 + |x̂|) + |beta[c]|)`.
    ///
    /// Why: every stage computes `x̂·gamma + beta` from a normalised value
    /// whose error is relative to `1 + |x̂|` (the mean's and the variance's
    /// rounding, shifted by the row's first element, and `rsqrt.approx`,
    /// 1.5e-7: about 1e-6 at a width of 4096 even in the worst case met),
    /// then one multiply-add, whose rounding is relative to `|x̂ gamma| +
    /// |beta|`. Scaling the allowance by those magnitudes, not by `|ref|`,
    /// keeps it sound where `x̂ gamma` and `beta` cancel, where gamma and
    /// beta are 1e6 or 1e-6, and where an output of zeros would otherwise
    /// pass: at gamma = beta = 0 the output must be exactly 0, and anywhere
    /// else zeros fail. 1e-4 is a hundred times the largest error measured
    /// (`tests/scale.rs`: rows of mean 1e4 and spread 1, values of 1e-20,
    /// variance below eps, x up to the range [`check_range`] allows).
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance::of_magnitude(FLUSHED, 1e-4)
    }

    /// The largest `Σ_c (x[r, c] - x[r, 0])²` a row may have: the kernels
    /// shift each row by its first element and sum squares of the shifted
    /// values in FP32, so past this a partial sum may overflow. A quarter
    /// of FP32's largest value leaves room for the merges of partial
    /// moments.
    pub const LARGEST_SQUARES: f64 = f32::MAX as f64 / 4.0;

    /// Refuses a row whose squared deviations pass FP32's range
    /// ([`LARGEST_SQUARES`]): no FP32 kernel can normalise it, so the input
    /// is out of range, not the stage wrong.
    pub fn check_range(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        let width = dims[1] as usize;
        for (r, row) in inputs[0].as_f32().chunks_exact(width).enumerate() {
            let first = row[0] as f64;
            let squares: f64 = row.iter().map(|v| (*v as f64 - first).powi(2)).sum();
            if squares > LARGEST_SQUARES {
                let largest = row.iter().fold(0f32, |m, v| m.max(v.abs()));
                return Err(format!(
                    "a.bin (x) row {r} spreads too far for FP32: the sum of its squared deviations is {squares:.3e} \
                     (values up to {largest:.3e}), beyond {LARGEST_SQUARES:.3e}; scale the input down"
                ));
            }
        }
        Ok(())
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
    pub static STAGES: [&Stage; 8] = [
        &mage_001::STAGE,
        &mage_002::STAGE,
        &mage_003::STAGE,
        &mage_006::STAGE,
        &mage_007::STAGE,
        &mage_008::STAGE,
        &mage_009::STAGE,
        &mage_010::STAGE,
    ];

    /// The op's default dims, and its gradient's ([`BACKWARD`]).
    pub const DEFAULT_DIMS: &[u32] = &[4096, 768];

    /// The shapes `sweep` and `compare --sweep` measure, the gradient's too.
    pub const SWEEP: &[Workload] = &[
        Workload::new(&[4096, 768]),
        Workload::new(&[8192, 768]),
        Workload::new(&[1024, 2048]),
        Workload::new(&[4096, 4096]),
        Workload::new(&[16384, 4096]),
    ];

    pub static OP: Op = Op {
        name: "layernorm",
        package: "mage-layernorm",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: DEFAULT_DIMS,
        sweep: SWEEP,
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "gamma", elem: Elem::F32, shape: &[Dim(1)] },
            Input { file: "c", role: "beta", elem: Elem::F32, shape: &[Dim(1)] },
        ],
        outputs: &[Output { file: "y", role: "y", shape: &[Dim(0), Dim(1)] }],
        constants: &[("eps", EPS as f64)],
        check_inputs: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        tolerance,
        check_range,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            (4 * (2 * r * w + 2 * w), 8 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
