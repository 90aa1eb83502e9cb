//! Weighted neighbour sum over a graph in CSR form (by destination), FP32,
//! with every stage of its history.
//!
//! `out[i, :] = Σ_{e ∈ rowptr[i]..rowptr[i+1]} w[e]·x[indices[e], :]`.
//! Inputs: `a` = x `[n, width]`, `b` = w `[edges]`, `rowptr` `[n + 1]`
//! (u32), `indices` `[edges]` (u32). Rows with no edges give zeros;
//! repeated edges are summed. [`check_csr`] rejects a malformed graph
//! before any launch.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one thread per output element, walking its row's edges: a heavy row is one long serial chain |
//! | [`mage_002`] | merge-path partition of rows + edges into equal shares, one warp per share, carries of split rows summed by a second kernel |
//! | [`mage_003`] | mage-002's shares, with edges loaded 32 at a time and shuffled out, and 128-bit gathers split over lane groups (`width % 4 == 0`) |
//! | [`mage_004`] | one warp per row, edge batches shuffled to lane groups, 128-bit gathers with 8 in flight per lane, one kernel (`width % 4 == 0`) |
//! | [`mage_005`] | light rows one warp each (several per warp on large graphs, the next row's loads issued early), heavy rows in equal chunks of edges, summed per block and added with `red.global.add.f32` (`width % 4 == 0`) |
//! | [`merge_path`] | mage-002's and mage-003's partition of rows + edges into shares, the carries' fix-up kernel and their two-launch plan |
//! | [`gather`] | mage-004's and mage-005's edge batches, lane groups and 128-bit gather loop |
//! | [`graph`] | the generators' graphs, [`max_degree`], [`check_csr`], and the transpose by source the gradient reads ([`transpose_csr`], [`check_transpose`]) |
//! | [`current`] | the dispatcher: reads the graph's largest row; mage-004 on small graphs without heavy rows, mage-003 (or mage-002) on larger ones, mage-002 where a row is heavy |
//! | [`backward`] | `neighbor_backward`, the gradients dX (the transposed sum) and dw (a dot product per edge): an op of its own with its own stages (mage-001 to mage-003, in its table) |
//!
//! # Generators
//!
//! Deterministic from the seed: x and w are normal(0, 0.25); each edge's
//! destination is drawn from the generator's degree distribution, rowptr is
//! the prefix sum of the degrees, and each edge's source is uniform in
//! `0..n`, repeats allowed. `uniform` draws destinations uniformly over the
//! rows; `power-law` gives the row of rank `r` (ranks assigned by a seeded
//! shuffle) probability `∝ r^-1.2`: at `n = 4096` and 65,536 edges its
//! heaviest row holds about 14,000 edges. The distribution belongs to the
//! generator, not to the op: the dims are `n, width, edges`, and the
//! dispatcher and the tolerance read the graph itself.
//!
//! # Tolerance
//!
//! `|out − ref| ≤ D·2^-126 + γ_(D+2)·Σ_e |w[e]|·|x[indices[e], c]|`, with
//! `γ_n ≈ n·2^-24`, `D` the largest row's edge count ([`largest_degree`])
//! and the sum of magnitudes computed beside the reference from the inputs
//! themselves ([`mage_common::numeric::sum_of_products`] says why it holds
//! for any data). Every stage sums a row's terms in FP32 in some order: a
//! chain (mage-001, mage-004), shares of a row whose carries are added by
//! a second kernel (mage-002, mage-003), or chunk sums added by
//! `red.global.add.f32` in whatever order the chunks finish (mage-005);
//! any of these is a summation of at most `D` terms, under the same bound.
//! Because it reads the data, it holds for graphs and values no generator
//! drew (all weights positive, a hub of 46,000 edges, inputs of 1e15,
//! rows of x scaled by 10^U(-3,3)), and an output of zeros fails wherever
//! a row has a non-zero term (`tests/scale.rs`).
//!
//! It is a worst case over every rounding: the real error is a random walk
//! far below it. One dropped or misplaced edge of average size moves an
//! output by about `Σ |w x| / D` against the allowance's `D·u·Σ |w x|`, so
//! it fails the check in rows of fewer than about `√(1/u)` = 4096 edges
//! (uniform graphs have about 30). In the heaviest power-law row (14,000
//! edges) the allowance is `8.3e-4·Σ |w x|`, larger than one edge's
//! share: there a single dropped edge of average size would pass.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod backward;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_004;
pub mod mage_005;

pub mod gather;
#[cfg(not(target_arch = "nvptx64"))]
pub mod graph;
pub mod merge_path;

pub use gather::{EdgeBatch, GATHERS_IN_FLIGHT, QuadGroups, accumulate};
#[cfg(not(target_arch = "nvptx64"))]
pub use graph::{
    GENERATORS, POWER_LAW_SKEW, Transpose, check_csr, check_transpose, degrees, generate_with_skew, max_degree, rowptr_of, transpose_csr,
};
pub use merge_path::{FIX_THREADS, neighbor_fixup};
#[cfg(not(target_arch = "nvptx64"))]
pub use merge_path::{merge_items, merge_plan, merge_supports};

use mage_common::device::{block_idx_x, warp_id};

/// Warps per block of the stages that give each warp its own piece of work.
pub const WARPS_PER_BLOCK: u32 = 8;
/// The number of warps the stages' work splits aim at: 32 per SM of the H200.
pub const TARGET_WARPS: u32 = 132 * 32;
/// This warp's number in the grid, for blocks of [`WARPS_PER_BLOCK`] warps.
#[inline(always)]
pub fn warp_in_grid() -> u32 {
    block_idx_x() * WARPS_PER_BLOCK + warp_id()
}

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

#[cfg(not(target_arch = "nvptx64"))]
pub use backward::BACKWARD;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::numeric::{Reference, Tolerance, sum_of_products};
    use mage_common::op::Extent::{Dim, DimPlus1};
    use mage_common::op::{Arg, Elem, HostBuf, Input, Launch, Op, Output, Stage, Workload};

    /// A launch of `warps` warps in blocks of [`WARPS_PER_BLOCK`], without
    /// shared memory.
    pub fn warp_launch(kernel: &'static Kernel, warps: u32, args: Vec<Arg>) -> Launch {
        warp_launch_shared(kernel, warps, 0, args)
    }

    /// A launch of `warps` warps in blocks of [`WARPS_PER_BLOCK`], with
    /// `shared_bytes` of shared memory per block.
    pub fn warp_launch_shared(kernel: &'static Kernel, warps: u32, shared_bytes: u32, args: Vec<Arg>) -> Launch {
        Launch {
            kernel,
            grid: Dim3::x(warps.div_ceil(WARPS_PER_BLOCK)),
            block: Dim3::x(WARPS_PER_BLOCK * 32),
            shared_bytes,
            cluster: Dim3::ONE,
            args,
        }
    }

    /// The arguments of a kernel that takes the graph and the output, then
    /// `n` and `width`: `x, w, rowptr, indices, out, n, width`.
    pub fn graph_args(d: &[u32]) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Output(0), Arg::U32(d[0]), Arg::U32(d[1])]
    }

    /// The f64 reference, with each output's magnitude `Σ_e |w[e]|
    /// |x[indices[e], c]|` in the same pass.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (n, width) = (dims[0] as usize, dims[1] as usize);
        let (x, w, rowptr, indices) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_u32(), inputs[3].as_u32());
        let (mut out, mut mag) = (vec![0f64; n * width], vec![0f64; n * width]);
        for (i, (row, row_mag)) in out.chunks_exact_mut(width).zip(mag.chunks_exact_mut(width)).enumerate() {
            for e in rowptr[i] as usize..rowptr[i + 1] as usize {
                let (wv, src) = (w[e] as f64, &x[indices[e] as usize * width..][..width]);
                for ((o, g), v) in row.iter_mut().zip(row_mag.iter_mut()).zip(src) {
                    let t = wv * *v as f64;
                    *o += t;
                    *g += t.abs();
                }
            }
        }
        Reference { values: out, magnitudes: mag }
    }

    /// The most edges any row has: the longest sum an output is.
    pub fn largest_degree(dims: &[u32], inputs: &[HostBuf]) -> u64 {
        let rowptr = inputs[2].as_u32();
        (0..dims[0] as usize).map(|i| (rowptr[i + 1] - rowptr[i]) as u64).max().unwrap_or(0)
    }

    /// See the crate doc.
    pub fn tolerance(dims: &[u32], inputs: &[HostBuf]) -> Tolerance {
        sum_of_products(largest_degree(dims, inputs))
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 5] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE, &mage_005::STAGE];

    pub static OP: Op = Op {
        name: "neighbor",
        package: "mage-neighbor",
        dim_names: &["n", "width", "edges"],
        min_dims: &[1, 1, 0],
        default_dims: &[4096, 64, 65536],
        sweep: &[
            Workload::with(&[4096, 64, 65536], "uniform"),
            Workload::with(&[4096, 64, 65536], "power-law"),
            Workload::with(&[65536, 64, 1048576], "uniform"),
            Workload::with(&[65536, 64, 1048576], "power-law"),
            Workload::with(&[7, 9, 23], "uniform"),
        ],
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "w", elem: Elem::F32, shape: &[Dim(2)] },
            Input { file: "rowptr", role: "rowptr", elem: Elem::U32, shape: &[DimPlus1(0)] },
            Input { file: "indices", role: "indices", elem: Elem::U32, shape: &[Dim(2)] },
        ],
        outputs: &[Output { file: "y", role: "Y", shape: &[Dim(0), Dim(1)] }],
        constants: &[],
        check_inputs: check_csr,
        check_range: |_, _| Ok(()),
        content_reads: &[2, 3],
        generators: &GENERATORS,
        reference,
        tolerance,
        cost: |d| {
            let (n, w, e) = (d[0] as u64, d[1] as u64, d[2] as u64);
            // x read once, out written once, w and indices, rowptr.
            (4 * (2 * n * w + 2 * e + n + 1), 2 * e * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
