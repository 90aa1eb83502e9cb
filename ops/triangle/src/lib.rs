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
//! | [`mage_004`] | a GEMM per channel through shared memory (8-channel block tiles, a `cp.async` ring transposing to rows), the block tile by shape: 64x32 where it fills the SMs, else 32x16 |
//! | [`mage_005`] | the 32x16 warp-per-channel tile with each chunk's `k` split over two groups of 256 threads, added at the end |
//! | [`channel_tiles`] | the kernel body of mage-004 and mage-005, and of triangle_backward mage-002: [`ChannelTiles`], [`Operand`], the tile shapes and their `kernel!` entries |
//! | [`current`] | the dispatcher: mage-001 on the smallest shapes, mage-005 where its split of `k` fills the SMs (2^17 up to 2^21 outputs), mage-004 elsewhere |
//! | [`backward`] | `triangle_backward`, the gradients dA and dB: an op of its own with its own stages |
//!
//! Every stage accumulates each output in the same order (k = 0, 1, ...,
//! one `fma.rn.f32` per term), so the GPU and the emulator agree bit for
//! bit and every stage agrees with every other; except the stages of
//! `OTHER_ORDER` (a split `k`), whose fixed order the emulator follows as
//! well, so that they too agree with the GPU bit for bit.
//!
//! # Tolerance
//!
//! Every stage sums each output's `n` terms in FP32, one `fma` rounding
//! per term, in one order or (mage-005) two partial sums added: any such
//! sum satisfies `|out − ref| ≤ γ_(n+2)·Σ_k |A||B|` for every input, with
//! `γ_n ≈ n·2^-24` and `Σ_k |A||B|` computed beside the reference from the
//! inputs themselves ([`mage_common::numeric::sum_of_products`] says why).
//! Nothing in the bound depends on how the inputs were drawn: inputs of
//! 1e-6 or 1e15 are held to the same relative bound of their own terms,
//! and an output of zeros fails wherever a term is not zero
//! (`tests/scale.rs`). It stays small against what an indexing bug does:
//! one wrong or missing term moves an output by about `Σ |A||B| / n`,
//! against the allowance's `n·2^-24·Σ |A||B|` (4000 times smaller at n =
//! 256); a wrong channel or row by the output's own size.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod backward;
#[cfg(not(target_arch = "nvptx64"))]
pub mod current;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
#[cfg(not(target_arch = "nvptx64"))]
pub mod mage_004;
#[cfg(not(target_arch = "nvptx64"))]
pub mod mage_005;

pub mod channel_tiles;
pub use channel_tiles::{ChannelTiles, GROUP, Operand, TILES_32X16, TILES_32X16_SPLIT, TILES_64X32, same_order};
#[cfg(not(target_arch = "nvptx64"))]
pub use channel_tiles::{channel_tiles_launch, gradient_tiles_launch};
pub use channel_tiles::{triangle_backward_tiles_32x16, triangle_backward_tiles_64x32};
pub use channel_tiles::{triangle_tiles_32x16, triangle_tiles_32x16_split, triangle_tiles_64x32};

#[cfg(not(target_arch = "nvptx64"))]
pub use backward::BACKWARD;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{Reference, Tolerance, sum_of_products};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Op, Output, Stage, Workload};

    /// The kernel arguments every triangle kernel takes, in order.
    pub fn args(n: u32, c: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Output(0), Arg::U32(n), Arg::U32(c)]
    }

    /// The f64 reference, with each output's magnitude `Σ_k |A||B|` in the
    /// same pass.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (n, c) = (dims[0] as usize, dims[1] as usize);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let (mut out, mut mag) = (vec![0f64; n * n * c], vec![0f64; n * n * c]);
        for i in 0..n {
            for j in 0..n {
                let (o, g) = (&mut out[(i * n + j) * c..][..c], &mut mag[(i * n + j) * c..][..c]);
                for k in 0..n {
                    let (ar, br) = (&a[(i * n + k) * c..][..c], &b[(j * n + k) * c..][..c]);
                    for ch in 0..c {
                        let t = ar[ch] as f64 * br[ch] as f64;
                        o[ch] += t;
                        g[ch] += t.abs();
                    }
                }
            }
        }
        Reference { values: out, magnitudes: mag }
    }

    /// The allowance for contraction length `n`, per unit of each output's
    /// `Σ_k |A||B|` (see the crate doc).
    pub fn tolerance(dims: &[u32], _: &[HostBuf]) -> Tolerance {
        sum_of_products(dims[0] as u64)
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let len = dims[0] as usize * dims[0] as usize * dims[1] as usize;
        vec![HostBuf::F32(normal_input(seed, 0, len)), HostBuf::F32(normal_input(seed, 1, len))]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 5] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE, &mage_005::STAGE];

    /// The stages that sum each output in another order than `k = 0, 1,
    /// ...` (a split `k`): inside the tolerance and exact on small
    /// integers like every stage, but not bit for bit the others.
    pub static OTHER_ORDER: [&Stage; 1] = [&mage_005::STAGE];

    /// The op's default dims, and its gradient's ([`BACKWARD`]).
    pub const DEFAULT_DIMS: &[u32] = &[128, 32];

    /// The shapes `sweep` and `compare --sweep` measure, the gradient's too.
    pub const SWEEP: &[Workload] = &[
        Workload::new(&[64, 8]),
        Workload::new(&[128, 32]),
        Workload::new(&[256, 32]),
        Workload::new(&[128, 64]),
        Workload::new(&[256, 64]),
        Workload::new(&[512, 32]),
        Workload::new(&[7, 5]),
    ];

    pub static OP: Op = Op {
        name: "triangle",
        package: "mage-triangle",
        dim_names: &["n", "c"],
        min_dims: &[1, 1],
        default_dims: DEFAULT_DIMS,
        sweep: SWEEP,
        inputs: &[
            Input { file: "a", role: "A", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
            Input { file: "b", role: "B", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
        ],
        outputs: &[Output { file: "o", role: "O", shape: &[Dim(0), Dim(0), Dim(1)] }],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        tolerance,
        cost: |d| {
            let (n, c) = (d[0] as u64, d[1] as u64);
            (4 * 3 * n * n * c, 2 * n * n * n * c)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
