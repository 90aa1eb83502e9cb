//! Triangle multiplication (the "outgoing edges" contraction of
//! AlphaFold-style models), channels last, FP32, with every stage of its
//! history.
//!
//! `O[i, j, c] = Σ_k A[i, k, c]·B[j, k, c]`: for every channel `c` an
//! `n × n` matrix product `A_c·B_cᵀ`, with the channel the innermost
//! (contiguous) index of all three tensors. Inputs: `a` = A `[n, n, c]`,
//! `b` = B `[n, n, c]`; output `[n, n, c]`.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one output per thread, two loads per FMA straight from global memory |
//! | [`mage_002`] | a 4×4 register tile of (i, j) per thread for one channel: 8 loads per 16 FMAs |
//! | [`mage_003`] | a 4×4 (i, j) tile of channel quads per thread: 128-bit loads, 8 per 64 FMAs (`c % 4 == 0`) |
//! | [`current`] | the dispatcher: the most-tiled stage that supports the shape and still fills the GPU |
//!
//! Every stage accumulates each output in the same order (k = 0, 1, ...,
//! one `fma.rn.f32` per term), so the GPU and the emulator agree bit for
//! bit and every stage agrees with every other.
//!
//! # Tolerance
//!
//! Recursive summation with one rounding per term satisfies
//! `|out − ref| ≤ γ_n·Σ_k |A||B|` with `γ_n ≈ n·2^-24`. For the generator's
//! inputs (normal(0, 0.25), σ² = 1/16) `Σ_k |A||B|` is about
//! `(2/π)·σ²·n`; allowing four times `n·σ²` for the spread of that sum
//! gives `abs = 2^-24·n·4nσ² = 2^-24·n²/4` (9.8e-4 at n = 256, 7.3e-7 at
//! n = 7), plus `rel = 2·2^-24·n` for outputs whose terms all share a sign.
//! That is a worst-case bound; the real error is a random walk far below
//! it. It stays small against what an indexing bug does: one wrong or
//! missing term moves an output by about `(2/π)σ² ≈ 0.04` (the allowance
//! at n = 256 is 1/40 of that), a wrong channel or row by the output's own
//! size, about `σ²·√n`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::Tolerance;
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Op, Stage, Workload};

    /// The variance of the generator's inputs, which the tolerance assumes.
    pub const INPUT_VARIANCE: f64 = 0.0625;

    /// The kernel arguments every triangle kernel takes, in order.
    pub fn args(n: u32, c: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Output, Arg::U32(n), Arg::U32(c)]
    }

    /// The f64 reference.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Vec<f64> {
        let (n, c) = (dims[0] as usize, dims[1] as usize);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let mut out = vec![0f64; n * n * c];
        for i in 0..n {
            for j in 0..n {
                let o = &mut out[(i * n + j) * c..][..c];
                for k in 0..n {
                    let (ar, br) = (&a[(i * n + k) * c..][..c], &b[(j * n + k) * c..][..c]);
                    for ch in 0..c {
                        o[ch] += ar[ch] as f64 * br[ch] as f64;
                    }
                }
            }
        }
        out
    }

    /// The allowance for contraction length `n` (see the crate doc).
    pub fn tolerance(dims: &[u32], _: &[HostBuf]) -> Tolerance {
        let (n, u) = (dims[0] as f64, f32::EPSILON as f64 / 2.0);
        Tolerance::new(u * n * 4.0 * n * INPUT_VARIANCE, 2.0 * u * n)
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let len = dims[0] as usize * dims[0] as usize * dims[1] as usize;
        vec![HostBuf::F32(normal_input(seed, 0, len)), HostBuf::F32(normal_input(seed, 1, len))]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 3] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE];

    pub static OP: Op = Op {
        name: "triangle",
        package: "mage-triangle",
        dim_names: &["n", "c"],
        min_dims: &[1, 1],
        default_dims: &[128, 32],
        sweep: &[
            Workload::new(&[64, 8]),
            Workload::new(&[128, 32]),
            Workload::new(&[256, 32]),
            Workload::new(&[128, 64]),
            Workload::new(&[256, 64]),
            Workload::new(&[512, 32]),
            Workload::new(&[7, 5]),
        ],
        inputs: &[
            Input { file: "a", role: "A", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
            Input { file: "b", role: "B", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
        ],
        output: &[Dim(0), Dim(0), Dim(1)],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        tolerance,
        cost: |d| {
            let (n, c) = (d[0] as u64, d[1] as u64);
            (4 * 3 * n * n * c, 2 * n * n * n * c)
        },
        stages: &STAGES,
        current: current::DISPATCHER,
    };
}
