//! `layernorm_backward`: the gradients of LayerNorm, an op of its own with
//! its own stage history.
//!
//! Inputs: `a` = x `[rows, width]`, `b` = gamma `[width]`, `dy` = the
//! gradient of the output `[rows, width]`. Outputs, in order: dx `[rows,
//! width]`, dgamma `[width]`, dbeta `[width]`. With `x̂ = (x - mean)·rstd`
//! (the forward's statistics: biased variance, eps 1e-5) and `g = dy·gamma`:
//!
//! * `dx = rstd·(g - mean_c(g) - x̂·mean_c(g·x̂))`;
//! * `dgamma[c] = Σ_r dy·x̂`, `dbeta[c] = Σ_r dy`: the same bits on every run.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | a block per row for dx (statistics recomputed), a thread per column for dgamma and dbeta |
//! | [`mage_002`] | mage-001's dx; the column sums split over chunks of rows, then the chunks summed in order |
//! | [`mage_003`] | one pass: a block per chunk of rows, rows held in registers (statistics recomputed), dgamma and dbeta partials in registers, then the chunks added in order by a short second kernel |
//! | [`mage_005`] | mage-003's one pass, rows streamed through a three-row `cp.async` ring in shared memory (two to four rows in flight an SM), the statistics and both row sums from one merge of the warps' centred parts: one barrier a row; widths up to 8192; `current` for rows wider than 768 or more than 4096 of them (measured in `results/backward-5`) |
//! | [`row_gradient`] | the kernel body of mage-001's and mage-002's dx: a block per row |
//! | [`held_gradient`] | the kernel body of mage-003's gradient (its `SAVED` path, statistics read instead of recomputed, is the removed mage-004's: see `docs/attempts.md`) |
//! | [`quads`] | a thread's quads of a row (mage-003's and mage-005's): loads, stores and masks, 16-byte where the width allows |
//! | [`totals`] | the second kernel of mage-003 and mage-005: each column's partials added over the chunks, in order |

pub mod held_gradient;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_005;
pub mod quads;
pub mod row_gradient;
pub mod totals;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::EPS;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance, U, gamma};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{DEFAULT_GENERATOR, Dispatcher, Elem, Generator, HostBuf, Input, Op, Output, Stage};

    /// The per-magnitude allowance of every output (see [`tolerance`]).
    pub const OF_MAGNITUDE: f64 = 1e-4;

    /// The f64 reference of the three gradients, concatenated in output
    /// order, with each element's magnitude:
    ///
    /// * dx: `rstd·(|g| + mean_c|g| + (1 + |x̂|)·mean_c(|g|·(1 + |x̂|)))`, the
    ///   sizes of the terms `dx` sums, each with the error `x̂` carries
    ///   relative to `1 + |x̂|` (as in the forward's bound);
    /// * dgamma: `Σ_r |dy|·(1 + |x̂|)`, dbeta: `Σ_r |dy|`, each times
    ///   `1 + γ_(rows+2)/1e-4`: a column sum of `rows` FP32 terms rounds by
    ///   up to `γ_(rows+2)` of its terms' sum, which at 4096 rows is more
    ///   than the 1e-4 the other terms need.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        reference_at(dims, inputs, EPS)
    }

    /// [`reference`] at another `eps`, the kernels' parameter a caller may
    /// set ([`Plan::with_constant`](mage_common::op::Plan::with_constant)).
    pub fn reference_at(dims: &[u32], inputs: &[HostBuf], eps: f32) -> Reference {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        let (x, gam, dy) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_f32());
        let mut dx = Vec::with_capacity(rows * width);
        let mut dx_mag = Vec::with_capacity(rows * width);
        let (mut dgamma, mut dgamma_mag) = (vec![0f64; width], vec![0f64; width]);
        let (mut dbeta, mut dbeta_mag) = (vec![0f64; width], vec![0f64; width]);
        let n = width as f64;
        for r in 0..rows {
            let row = &x[r * width..(r + 1) * width];
            let d = &dy[r * width..(r + 1) * width];
            let mean = row.iter().map(|v| *v as f64).sum::<f64>() / n;
            let var = row.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n;
            let rstd = 1.0 / (var + eps as f64).sqrt();
            let xhat: Vec<f64> = row.iter().map(|v| (*v as f64 - mean) * rstd).collect();
            let g: Vec<f64> = d.iter().zip(gam).map(|(d, w)| *d as f64 * *w as f64).collect();
            let mean_g = g.iter().sum::<f64>() / n;
            let mean_gx = g.iter().zip(&xhat).map(|(g, h)| g * h).sum::<f64>() / n;
            let mean_abs_g = g.iter().map(|g| g.abs()).sum::<f64>() / n;
            let mean_abs_gx = g.iter().zip(&xhat).map(|(g, h)| g.abs() * (1.0 + h.abs())).sum::<f64>() / n;
            for c in 0..width {
                dx.push(rstd * (g[c] - mean_g - xhat[c] * mean_gx));
                dx_mag.push(rstd * (g[c].abs() + mean_abs_g + (1.0 + xhat[c].abs()) * mean_abs_gx));
                dgamma[c] += d[c] as f64 * xhat[c];
                dgamma_mag[c] += (d[c] as f64).abs() * (1.0 + xhat[c].abs());
                dbeta[c] += d[c] as f64;
                dbeta_mag[c] += (d[c] as f64).abs();
            }
        }
        let sum_factor = 1.0 + gamma(rows as u64 + 2, U) / OF_MAGNITUDE;
        let mut values = dx;
        values.extend(dgamma);
        values.extend(dbeta);
        let mut magnitudes = dx_mag;
        magnitudes.extend(dgamma_mag.iter().chain(&dbeta_mag).map(|m| m * sum_factor));
        Reference { values, magnitudes }
    }

    /// `|out - ref| <= 2^-126 + 1e-4·m`, `m` each element's magnitude from
    /// [`reference`].
    ///
    /// Why: every term of the gradients is built from `x̂`, whose error is
    /// relative to `1 + |x̂|` (the statistics' rounding, as in the forward's
    /// bound, about 1e-6 at the widths met), then a few roundings relative
    /// to the terms; the column sums add their own `γ_(rows+2)`, carried in
    /// their magnitudes. Scaled by the terms, the bound holds at any scale
    /// of x, gamma and dy, and an output of zeros fails wherever the
    /// gradient is not zero.
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance::of_magnitude(FLUSHED, OF_MAGNITUDE)
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        vec![
            HostBuf::F32(normal_input(seed, 0, rows * width)),
            HostBuf::F32(normal_input(seed, 1, width)),
            HostBuf::F32(normal_input(seed, 3, rows * width)),
        ]
    }

    /// The stage `current` runs for these dims (see the dispatcher's note).
    pub fn choose(d: &[u32]) -> &'static Stage {
        let (rows, width) = (d[0], d[1]);
        if (width > 768 || rows > 4096) && (mage_005::STAGE.supports)(d) {
            &mage_005::STAGE
        } else if (mage_003::STAGE.supports)(d) {
            &mage_003::STAGE
        } else {
            &mage_002::STAGE
        }
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 4] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_005::STAGE];

    pub static BACKWARD: Op = Op {
        name: "layernorm_backward",
        package: "mage-layernorm",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: crate::DEFAULT_DIMS,
        sweep: crate::SWEEP,
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "gamma", elem: Elem::F32, shape: &[Dim(1)] },
            Input { file: "dy", role: "dy", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
        ],
        outputs: &[
            Output { file: "dx", role: "dx", shape: &[Dim(0), Dim(1)] },
            Output { file: "dgamma", role: "dgamma", shape: &[Dim(1)] },
            Output { file: "dbeta", role: "dbeta", shape: &[Dim(1)] },
        ],
        constants: &[("eps", EPS as f64)],
        check_inputs: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "x, gamma and dy normal(0, 0.25)", generate }],
        reference,
        tolerance,
        check_range: crate::check_range,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            // x and dy read, dx written, gamma read and dgamma, dbeta written.
            (4 * (3 * r * w + 3 * w), 14 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        // mage-005 for rows wider than 768 or more than 4096 of them, up to
        // width 8192; mage-003 elsewhere; mage-002 beyond 8192. Measured
        // (`results/backward-5`, kernel-time verdicts): mage-005 against
        // mage-003 FASTER at 8192x768 (0.838), 1024x2048 (0.792),
        // 4096x4096 (0.509) and 16384x4096 (0.495), SAME at 4096x768
        // (1.019), where mage-003 stays.
        current: Dispatcher {
            summary: "mage-005 for width > 768 or rows > 4096 (to width 8192), else mage-003; mage-002 beyond",
            reads: &[],
            choose: |d, _| choose(d),
        },
    };
}
