//! `gelu_erf`: bias + the exact GELU, PyTorch's default form
//! (`F.gelu(x, approximate="none")`), an op of its own with its own
//! stage history.
//!
//! `y[r, c] = z·Φ(z) = 0.5·z·(1 + erf(z/√2))` with `z = x[r, c] +
//! bias[c]`. Inputs and outputs as the tanh form's ([`crate::OP`]): `a` = x
//! `[rows, width]`, `b` = bias `[width]`, `y` `[rows, width]`; the same
//! default dims, sweep shapes and generator.
//!
//! Why an op and not a stage of `gelu`: it is a different function (the
//! tanh form is off from it by up to 4.7e-4·|z|, more than the tolerance),
//! so it has its own reference; a stage of `gelu` must compute `gelu`'s.
//! # Tolerance
//!
//! `|out − ref| ≤ 2^-126 + 1e-4·|ref| + 2e-5·m`, with the magnitude `m =
//! |y| + z²·φ(z)` ([`reference()`]), `φ` the normal density: `|y|` times one plus the
//! condition number of `z·Φ(z)`, `|z·φ(z)/Φ(z)|` (about 0 for z ≫ 0 and
//! z² for z ≪ 0). The stages are within 1.2e-6·|y| of the exact value of
//! their FP32 `z` ([`normal_cdf`]'s error analysis); `z = x + bias` rounded
//! moves y by `u₂₄` times the condition number; both are far inside. Unlike
//! the tanh form's `2e-5·|z|`, nothing here is relative to `z` alone, so
//! an output of zeros fails wherever y is a normal FP32 number, the deep
//! negative tail included.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one element per thread, Φ from an erfc fit with its exponent in two parts (no libm on nvptx) |
//! | [`mage_002`] | one 128-bit quad per thread, mage-001's arithmetic |
//! | [`mage_003`] | the matrix as one flat run of 128-bit quads, any width, the bias column carried along, a thread a quad ([`crate::flat_quads`], shared with gelu's mage-003); mage-001's arithmetic |
//! | [`normal_cdf`] | the kernel body both share: Φ(z) in FP32, and its error against f64 |

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod normal_cdf;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance, erfc_f64};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{DEFAULT_GENERATOR, Dispatcher, Elem, Generator, HostBuf, Input, Op, Output, Stage};

    /// `z·Φ(z)` in f64, `Φ(z) = erfc(−z/√2)/2`.
    pub fn gelu_erf_f64(z: f64) -> f64 {
        z * 0.5 * erfc_f64(-z * core::f64::consts::FRAC_1_SQRT_2)
    }

    /// The f64 reference: `z = x + bias` exactly (in f64), then `z·Φ(z)`;
    /// each element's magnitude is `|y| + z²·φ(z)`, `φ` the normal density:
    /// `|y|·(1 + |z·φ(z)/Φ(z)|)`, y times one plus its condition number,
    /// written without the division (finite where Φ underflows).
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        let (x, bias) = (inputs[0].as_f32(), inputs[1].as_f32());
        let z: Vec<f64> = x[..rows * width].iter().enumerate().map(|(i, v)| *v as f64 + bias[i % width] as f64).collect();
        let density = |z: f64| (-0.5 * z * z).exp() / (2.0 * core::f64::consts::PI).sqrt();
        Reference {
            values: z.iter().map(|&z| gelu_erf_f64(z)).collect(),
            magnitudes: z.iter().map(|&z| gelu_erf_f64(z).abs() + z * z * density(z)).collect(),
        }
    }

    /// `|out − ref| ≤ 2^-126 + 1e-4·|ref| + 2e-5·m` (the module doc says why).
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance { abs: FLUSHED, rel: 1e-4, of_magnitude: 2e-5 }
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 3] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE];

    /// The stage `current` runs for these dims: mage-002 where the width
    /// is a multiple of 4, mage-003 elsewhere (judged FASTER than mage-001
    /// at 1000x1001, `results/backward-7`).
    pub fn choose(d: &[u32]) -> &'static Stage {
        if mage_002::supports(d) { &mage_002::STAGE } else { &mage_003::STAGE }
    }

    pub static ERF: Op = Op {
        name: "gelu_erf",
        package: "mage-gelu",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: crate::DEFAULT_DIMS,
        sweep: crate::SWEEP,
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "bias", elem: Elem::F32, shape: &[Dim(1)] },
        ],
        outputs: &[Output { file: "y", role: "y", shape: &[Dim(0), Dim(1)] }],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate: crate::generate }],
        reference,
        tolerance,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            // x in, y out, bias once; about thirty operations per element.
            (4 * (2 * r * w + w), 30 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: Dispatcher { summary: "mage-002 where width % 4 == 0, else mage-003", reads: &[], choose: |d, _| choose(d) },
    };
}
