//! `gelu_backward`: the gradients of bias + GELU (tanh form), an op of its
//! own with its own stage history.
//!
//! Inputs: `a` = x `[rows, width]`, `b` = bias `[width]`, `dy` = the
//! gradient of the output `[rows, width]`. Outputs, in order: dx `[rows,
//! width]`, dbias `[width]`. With `z = x + bias`, `u = √(2/π)·(z + 0.044715
//! z³)` and `t = tanh(u)`:
//!
//! * `gelu'(z) = 0.5(1 + t) + 0.5·z·(1 − t²)·√(2/π)·(1 + 3·0.044715·z²)`;
//! * `dx = dy·gelu'(z)`;
//! * `dbias[c] = Σ_r dx[r, c]`: the same bits on every run.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | a thread per element for dx (σ and 1 − σ from one `ex2.approx`), a thread per column for dbias, rows in order |
//! | [`mage_002`] | one pass: a block per column tile and chunk of rows writes dx and its partial dbias row (sums in registers), then the chunks added in order by a short second kernel |
//! | [`mage_003`] | dx from flat 128-bit quads at any width, four-row slabs staged in shared memory for the column sums, then the chunks added in order with a batch of loads in flight |
//! | [`mage_004`] | one launch: a block per strip of eight columns over every row writes dx and adds dbias itself (rows in order, lanes by butterfly, warps in order) |
//! | [`mage_005`] | one launch: a 64-column tile's eight chunks of rows one thread-block cluster (warp loads of 128 contiguous bytes), their partial dbias rows added in chunk order through distributed shared memory |
//! | [`mage_006`] | mage-002 with a lane's four columns 32 apart where the width is not a multiple of 4 (each warp access 128 contiguous bytes) and every load of a totals segment issued together; mage-002's bits |
//! | [`element_gradient`] | the element's arithmetic, `gelu_grad_with` (`TanhGradient`), of mage-001 to mage-006; their kernel bodies are in [`bias_gradient`](crate::bias_gradient), shared with `gelu_erf_backward` |

pub mod element_gradient;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_004;
pub mod mage_005;
pub mod mage_006;

/// `2·√(2/π)`: `w = z·(W0 + W1·z²) = z·d(2u)/dz`.
pub const W0: f32 = (2.0 * crate::SQRT_2_OVER_PI) as f32;
/// `W0 · 3 · 0.044715`.
pub const W1: f32 = (2.0 * crate::SQRT_2_OVER_PI * 3.0 * crate::CUBIC) as f32;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::{CUBIC, SQRT_2_OVER_PI};
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{DEFAULT_GENERATOR, Dispatcher, Elem, Generator, HostBuf, Input, Op, Output, Stage};

    /// The per-magnitude allowance of every output (see [`tolerance`]).
    pub const OF_MAGNITUDE: f64 = 1e-4;

    /// `gelu'(z)` in f64, with the sizes of its two terms, `(value, |0.5(1
    /// + t)|, |0.5·z·(1 − t²)·√(2/π)(1 + 3·0.044715 z²)|, (1 − t²)/4, 2|u|)`.
    ///
    /// The formula as written, with f64 `tanh`; `1 − t²` as `sech²u` and,
    /// where t < 0, `1 + t` as `sech²u/(1 − t)`: the same values, without
    /// the cancellation that would leave them 0 where `|u|` passes 19 while
    /// `dy·gelu'` is still a normal FP32 number.
    pub fn gelu_grad_f64(z: f64) -> (f64, f64, f64, f64, f64) {
        let u = SQRT_2_OVER_PI * (z + CUBIC * z * z * z);
        let t = u.tanh();
        let sech = 1.0 / u.cosh();
        let one_minus_t2 = sech * sech;
        let one_plus_t = if t < 0.0 { one_minus_t2 / (1.0 - t) } else { 1.0 + t };
        let a = 0.5 * one_plus_t;
        let b = 0.5 * z * one_minus_t2 * SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * z * z);
        (a + b, a.abs(), b.abs(), one_minus_t2 / 4.0, 2.0 * u.abs())
    }

    /// The f64 reference of the two gradients, concatenated in output
    /// order (`z = x + bias` exactly, in f64), with each element's magnitude:
    ///
    /// * dx: `|dy|·(|a| + (1 + 2|u|)·((1 − t²)/4 + |b|))`, `a` and `b` the
    ///   two terms of `gelu'` (`σ` and `w·σ(1 − σ)`, with `σ(1 − σ) = (1 −
    ///   t²)/4`): the sizes of the terms, the part that rides on the
    ///   exponential scaled by `1 + 2|u|`, since an exponent rounded
    ///   relative to itself makes `e^{−2|u|}` off relative to `2|u|` (the
    ///   bound in [`mage_001`]'s doc);
    /// * dbias: `Σ_r` of its column's dx magnitudes times `1 +
    ///   γ_(rows+2)/1e-4`, plus `rows·2^-126/1e-4`: a column sum of `rows`
    ///   FP32 terms rounds by up to `γ_(rows+2)` of its terms' sum (more
    ///   than the 1e-4 the terms need at 4096 rows), and each term may
    ///   carry the 2^-126 of a dx below FP32's normal range.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        crate::bias_gradient::reference(dims, inputs, OF_MAGNITUDE, |z, d| {
            let (g, a, b, s, two_u) = gelu_grad_f64(z);
            (d * g, d.abs() * (a + (1.0 + two_u) * (s + b)))
        })
    }

    /// `|out - ref| <= 2^-126 + 1e-4·m`, `m` each element's magnitude from
    /// [`reference`](fn@reference).
    ///
    /// Why: [`mage_001`]'s error analysis bounds dx by `|dy|·(6e-7·σ +
    /// 3.3e-6·(1 + |2u|)(1 + |w|)·σ(1 − σ))`: `z = x + bias` rounded, the
    /// exponent `s` rounded five times and `ex2.approx` (2^-22, twice) give
    /// `e^{−2|u|}` an error relative to `1 + 2|u|`, the rest are a few
    /// roundings relative to the terms. That is below `3.3e-6·m`, held with
    /// a margin of about 30; the column sums add their own `γ_(rows+2)`,
    /// carried in their magnitudes. Scaled by the terms, the bound holds at
    /// any scale of x, bias and dy, and an output of zeros fails wherever
    /// the gradient is not zero, but for z within about 1e-3 of gelu's
    /// minimum (z ≈ −0.7518, where the two terms cancel) and where `dx` is
    /// below FP32's normal range.
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance::of_magnitude(FLUSHED, OF_MAGNITUDE)
    }

    /// x, bias and dy normal(0, 0.25), each its own stream (also
    /// `gelu_erf_backward`'s generator).
    pub(crate) fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        vec![
            HostBuf::F32(normal_input(seed, 0, rows * width)),
            HostBuf::F32(normal_input(seed, 1, width)),
            HostBuf::F32(normal_input(seed, 3, rows * width)),
        ]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 6] =
        [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE, &mage_005::STAGE, &mage_006::STAGE];

    /// The stage `current` runs for these dims: mage-006 where either of
    /// its changes applies (`changes_apply`: a width not a multiple of 4,
    /// or totals segments of two or more chunks), else mage-002, which
    /// reads x and dy once and sums dbias from registers at every shape.
    /// Judged in `results/backward-12` (kernel time, hot L2): mage-006
    /// FASTER than mage-002 at 1000x1001 (0.824) and 4096x768 (0.903), SAME
    /// at 16384x4096 (0.994, 33 chunks) and at 512x3072 (1.020, 32 chunks,
    /// where it takes mage-002).
    pub fn choose(d: &[u32]) -> &'static Stage {
        if crate::bias_gradient::spread_tiles::changes_apply(d) { &mage_006::STAGE } else { &mage_002::STAGE }
    }

    pub static BACKWARD: Op = Op {
        name: "gelu_backward",
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
        constants: &[("sqrt_2_over_pi", SQRT_2_OVER_PI), ("cubic", CUBIC)],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "x, bias and dy normal(0, 0.25)", generate }],
        reference,
        tolerance,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            // x and dy read, dx written and read back for dbias, bias read
            // and dbias written; about twenty operations per element.
            (4 * (4 * r * w + 2 * w), 20 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        // mage-006 where its changes apply, else mage-002 (see `choose`).
        current: Dispatcher {
            summary: "mage-006 where the width is not a multiple of 4 or there are more than 32 chunks, else mage-002",
            reads: &[],
            choose: |d, _| choose(d),
        },
    };
}
