//! `triangle_backward`: the gradients of the triangle multiplication, an op
//! of its own with its own stage history.
//!
//! Inputs: `a` = A `[n, n, c]`, `b` = B `[n, n, c]`, `do` = dO, the
//! gradient of the forward's output `O[i, j, c] = Σ_k A[i, k, c]·B[j, k,
//! c]`, `[n, n, c]`. Outputs, in order: dA `[n, n, c]`, dB `[n, n, c]`,
//! channels last as in the forward:
//!
//! * `dA[i, k, c] = Σ_j dO[i, j, c]·B[j, k, c]` (per channel, `dO_c·B_c`);
//! * `dB[j, k, c] = Σ_i dO[i, j, c]·A[i, k, c]` (per channel, `dO_cᵀ·A_c`).
//!
//! Each is, like the forward, a sum of `n` products per output element.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one output element per thread for each gradient (a kernel each), `j` or `i` in order: the same bits on every run |
//! | [`mage_002`] | both gradients as forward mage-004's channel-tiled GEMMs in one launch (dO, B and A read by rows or by columns), 64x32 block tiles where the grid fills the SMs, else 32x16; mage-001's bits |
//! | [`choose`] | the dispatcher: mage-002 at every shape (its kernel-time verdicts against mage-001 and PyTorch: `results/backward-3`) |

pub mod mage_001;
#[cfg(not(target_arch = "nvptx64"))]
pub mod mage_002;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{Reference, Tolerance, sum_of_products};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{DEFAULT_GENERATOR, Dispatcher, Elem, Generator, HostBuf, Input, Op, Output, Stage};

    /// The f64 reference of the two gradients, concatenated in output order
    /// (dA, then dB), with each element's magnitude: `Σ_j |dO[i, j, c]|·|B[j,
    /// k, c]|` for dA and `Σ_i |dO[i, j, c]|·|A[i, k, c]|` for dB, the sizes
    /// of the `n` terms each sums.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (n, c) = (dims[0] as usize, dims[1] as usize);
        let (a, b, d) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_f32());
        let len = n * n * c;
        let (mut values, mut magnitudes) = (vec![0f64; 2 * len], vec![0f64; 2 * len]);
        let (da, db) = values.split_at_mut(len);
        let (da_mag, db_mag) = magnitudes.split_at_mut(len);
        // dO[i, j, :] meets B[j, k, :] in dA[i, k, :] and A[i, k, :] in dB[j, k, :].
        for i in 0..n {
            for j in 0..n {
                let dr = &d[(i * n + j) * c..][..c];
                for k in 0..n {
                    let (ar, br) = (&a[(i * n + k) * c..][..c], &b[(j * n + k) * c..][..c]);
                    let (ik, jk) = ((i * n + k) * c, (j * n + k) * c);
                    for ch in 0..c {
                        let (ta, tb) = (dr[ch] as f64 * br[ch] as f64, dr[ch] as f64 * ar[ch] as f64);
                        da[ik + ch] += ta;
                        da_mag[ik + ch] += ta.abs();
                        db[jk + ch] += tb;
                        db_mag[jk + ch] += tb.abs();
                    }
                }
            }
        }
        Reference { values, magnitudes }
    }

    /// The forward's allowance, for the same contraction length `n`:
    /// `|out − ref| ≤ n·2^-126 + γ_(n+2)·m`, `m` each element's magnitude
    /// from [`reference`].
    ///
    /// Why: every element of dA and of dB is a sum of `n` products of two
    /// FP32 inputs, each formed and added with one rounding (`fma`), which
    /// is what [`sum_of_products`] bounds, in any order and for any inputs.
    /// Scaled by the element's own terms, the bound holds at any scale of
    /// A, B and dO, and an output of zeros fails wherever the gradient is
    /// not zero; one wrong or missing term moves an element by about `m /
    /// n`, far more than `γ_(n+2)·m`.
    pub fn tolerance(dims: &[u32], _: &[HostBuf]) -> Tolerance {
        sum_of_products(dims[0] as u64)
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let len = dims[0] as usize * dims[0] as usize * dims[1] as usize;
        vec![HostBuf::F32(normal_input(seed, 0, len)), HostBuf::F32(normal_input(seed, 1, len)), HostBuf::F32(normal_input(seed, 2, len))]
    }

    /// The stage `current` runs: mage-002 at every shape (`results/backward-3`:
    /// FASTER than mage-001 at 128x32 and than PyTorch at every sweep shape,
    /// on kernel time). It was chosen by the prediction in [`mage_002`] (from the rates the
    /// forward's tiles reached) it is faster than mage-001 everywhere, by
    /// 3 to 7 times from 128x32 up, and also at the smallest shapes, where
    /// the forward's tiles lose to forward mage-001 (at 7x5 2.08 µs against
    /// 1.45): mage-001 here is two launches (3.36 µs at 7x5, 7.58 at 64x8,
    /// `results/backward-1`) against mage-002's one of the forward's tile
    /// blocks (about 2.1 and 6 µs).
    pub fn choose(_: &[u32]) -> &'static Stage {
        &mage_002::STAGE
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 2] = [&mage_001::STAGE, &mage_002::STAGE];

    pub static BACKWARD: Op = Op {
        name: "triangle_backward",
        package: "mage-triangle",
        dim_names: &["n", "c"],
        min_dims: &[1, 1],
        // The forward's.
        default_dims: crate::DEFAULT_DIMS,
        sweep: crate::SWEEP,
        inputs: &[
            Input { file: "a", role: "A", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
            Input { file: "b", role: "B", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
            Input { file: "do", role: "dO", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
        ],
        outputs: &[
            Output { file: "da", role: "dA", shape: &[Dim(0), Dim(0), Dim(1)] },
            Output { file: "db", role: "dB", shape: &[Dim(0), Dim(0), Dim(1)] },
        ],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "A, B and dO normal(0, 0.25)", generate }],
        reference,
        tolerance,
        cost: |d| {
            let (n, c) = (d[0] as u64, d[1] as u64);
            // A, B and dO read, dA and dB written; two contractions of the forward's size.
            (4 * 5 * n * n * c, 4 * n * n * n * c)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: Dispatcher { summary: "mage-002 always", reads: &[], choose: |d, _| choose(d) },
    };
}
