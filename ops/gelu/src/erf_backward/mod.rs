//! `gelu_erf_backward`: the gradients of bias + the exact GELU (erf form,
//! [`gelu_erf`](crate::erf)), an op of its own with its own stage history.
//!
//! Laid out as the crate's other ops: each is a module of the crate root
//! named for what follows `gelu_` in its name (`backward` for
//! `gelu_backward`, `erf` for `gelu_erf`, this one for
//! `gelu_erf_backward`), holding its registry, f64 reference, tolerance,
//! stage modules and the element its stages share (the kernel bodies
//! around it, shared with `gelu_backward`, are the crate root's
//! [`bias_gradient`](crate::bias_gradient)).
//!
//! Inputs: `a` = x `[rows, width]`, `b` = bias `[width]`, `dy` = the
//! gradient of the output `[rows, width]`. Outputs, in order: dx `[rows,
//! width]`, dbias `[width]`. With `z = x + bias`, `Φ` the standard normal
//! distribution function and `φ(z) = e^{−z²/2}/√(2π)` its density:
//!
//! * `gelu'(z) = Φ(z) + z·φ(z)`;
//! * `dx = dy·gelu'(z)`;
//! * `dbias[c] = Σ_r dx[r, c]`: the same bits on every run.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | a thread per element for dx (Φ and φ from one set of two-part exponents), a thread per column for dbias, rows in order |
//! | [`mage_002`] | one pass: a block per column tile and chunk of rows writes dx and its partial dbias row (sums in registers), then the chunks added in order by a short second kernel |
//! | [`mage_003`] | dx from flat 128-bit quads at any width, four-row slabs staged in shared memory for the column sums, then the chunks added in order with a batch of loads in flight |
//! | [`mage_004`] | one launch: a block per strip of eight columns over every row writes dx and adds dbias itself (rows in order, lanes by butterfly, warps in order) |
//! | [`mage_005`] | one launch: a 64-column tile's eight chunks of rows one thread-block cluster (warp loads of 128 contiguous bytes), their partial dbias rows added in chunk order through distributed shared memory |
//! | [`mage_006`] | mage-002 with a lane's four columns 32 apart where the width is not a multiple of 4 (each warp access 128 contiguous bytes) and every load of a totals segment issued together; mage-002's bits |
//! | [`element_gradient`] | the element's arithmetic, `gelu_erf_grad_with` (`ErfGradient`), of mage-001 to mage-006, and its error against f64; their kernel bodies are in [`bias_gradient`](crate::bias_gradient), shared with `gelu_backward` |

pub mod element_gradient;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_004;
pub mod mage_005;
pub mod mage_006;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::backward::generate;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance, erfc_f64};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{DEFAULT_GENERATOR, Dispatcher, Elem, Generator, HostBuf, Input, Op, Output, Stage};

    /// The per-magnitude allowance of every output (see [`tolerance`]).
    pub const OF_MAGNITUDE: f64 = 1e-4;

    /// `gelu'(z) = Φ(z) + z·φ(z)` in f64, with the sizes the magnitudes are
    /// made of: `(value, Φ(z), |z·φ(z)|, |z·gelu''(z)|)`, where
    /// `z·gelu''(z) = z·φ(z)·(2 − z²)`. `Φ(z) = erfc(−z/√2)/2` from
    /// [`erfc_f64`], with no cancellation in either tail.
    pub fn gelu_erf_grad_f64(z: f64) -> (f64, f64, f64, f64) {
        let phi = 0.5 * erfc_f64(-z * core::f64::consts::FRAC_1_SQRT_2);
        let zd = z * (-0.5 * z * z).exp() / (2.0 * core::f64::consts::PI).sqrt();
        (phi + zd, phi, zd.abs(), (zd * (2.0 - z * z)).abs())
    }

    /// The f64 reference of the two gradients, concatenated in output
    /// order (`z = x + bias` exactly, in f64), with each element's magnitude:
    ///
    /// * dx: `|dy|·(Φ + |z|φ + |z·gelu''(z)|)`: the sizes of the two terms
    ///   of `gelu'`, and what a relative change of z moves it by (the
    ///   kernels round `z = x + bias`: `u₂₄·|z·gelu''|`, up to `u₂₄·z²`
    ///   of the `z·φ` term deep in the tails);
    /// * dbias: `Σ_r` of its column's dx magnitudes times `1 +
    ///   γ_(rows+2)/1e-4`, plus `rows·2^-126/1e-4`: a column sum of `rows`
    ///   FP32 terms rounds by up to `γ_(rows+2)` of its terms' sum, and each
    ///   term may carry the 2^-126 of a dx below FP32's normal range
    ///   (gelu_backward's rule).
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        crate::bias_gradient::reference(dims, inputs, OF_MAGNITUDE, |z, d| {
            let (g, phi, zd, cond) = gelu_erf_grad_f64(z);
            (d * g, d.abs() * (phi + zd + cond))
        })
    }

    /// `|out - ref| <= 2^-126 + 1e-4·m`, `m` each element's magnitude from
    /// [`reference`](fn@reference).
    ///
    /// Why: [`element_gradient`]'s measured bound holds dx, for the FP32 z
    /// the kernels form, within 1.1e-6 of `|dy|·(Φ + |z|φ)`; `z = x +
    /// bias` rounded adds at most `u₂₄·|dy|·|z·gelu''(z)|` (and terms in
    /// `(u₂₄z²)²`, negligible for |z| ≤ 20, past which dx is 0 or dy): in
    /// all below `1.1e-6·m`, held with a margin of about 90. The column
    /// sums add their own `γ_(rows+2)`, carried in their magnitudes.
    /// Scaled by the terms, the bound holds at any scale of x, bias and
    /// dy, and an output of zeros fails wherever the exact dx is a normal
    /// FP32 number, but for z within about 2e-4 of gelu's minimum
    /// (z ≈ −0.7518, where the two terms cancel; there `|gelu'|` is below
    /// 1e-4 of the magnitude).
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance::of_magnitude(FLUSHED, OF_MAGNITUDE)
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 6] =
        [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE, &mage_005::STAGE, &mage_006::STAGE];

    /// The stage `current` runs for these dims: mage-006 where either of
    /// its changes applies (`changes_apply`: a width not a multiple of 4,
    /// or totals segments of two or more chunks), else mage-002 (every
    /// shape). Judged in `results/backward-12` (kernel time, hot L2):
    /// mage-006 FASTER than mage-002 at 1000x1001 (0.864) and 4096x768
    /// (0.905), SAME at 16384x4096 (0.992) and at 512x3072 (1.013, where it
    /// takes mage-002).
    pub fn choose(d: &[u32]) -> &'static Stage {
        if crate::bias_gradient::spread_tiles::changes_apply(d) { &mage_006::STAGE } else { &mage_002::STAGE }
    }

    pub static ERF_BACKWARD: Op = Op {
        name: "gelu_erf_backward",
        package: "mage-gelu",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: crate::DEFAULT_DIMS,
        sweep: crate::SWEEP,
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "bias", elem: Elem::F32, shape: &[Dim(1)] },
            Input { file: "dy", role: "dy", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
        ],
        outputs: &[Output { file: "dx", role: "dx", shape: &[Dim(0), Dim(1)] }, Output { file: "dbias", role: "dbias", shape: &[Dim(1)] }],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "x, bias and dy normal(0, 0.25)", generate }],
        reference,
        tolerance,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            // x and dy read, dx written and read back for dbias, bias read
            // and dbias written; about forty operations per element.
            (4 * (4 * r * w + 2 * w), 40 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        // mage-006 where its changes apply, else mage-002 (see `choose`);
        // mage-002 measured in `results/backward-5`: 0.082x mage-001 at
        // 4096x768.
        current: Dispatcher {
            summary: "mage-006 where the width is not a multiple of 4 or there are more than 32 chunks, else mage-002",
            reads: &[],
            choose: |d, _| choose(d),
        },
    };
}
