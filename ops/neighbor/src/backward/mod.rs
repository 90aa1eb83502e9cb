//! `neighbor_backward`: the gradients of the weighted neighbour sum, an op
//! of its own with its own stage history.
//!
//! Inputs: the forward's `a` = x `[n, width]`, `b` = w `[edges]`, `rowptr`
//! `[n + 1]` (u32) and `indices` `[edges]` (u32), under the same CSR
//! checks ([`check_csr`]), `dy` = dY `[n, width]`, the gradient of the
//! forward's output, and the graph's transpose by source
//! ([`transpose_csr`]): `t_rowptr` `[n + 1]`, each node's out-edge
//! offsets, `t_rows` `[edges]`, the row of each, and `t_edges` `[edges]`,
//! their edge numbers, each node's in increasing order (u32 all three).
//! The transpose is a property of the graph alone, so a caller builds it
//! once per graph, not per call; [`check_transpose`] checks it against
//! rowptr and indices in `O(n + edges)` before any launch, so a kernel
//! that walks it reads in bounds and in order whatever a caller passes.
//! Outputs, in order: dX `[n, width]`, dw `[edges]`.
//! With `row(e)` the row holding edge `e` (`rowptr[row(e)] <= e <
//! rowptr[row(e) + 1]`):
//!
//! * `dX[s, c] = Σ_{e : indices[e] = s} w[e]·dY[row(e), c]`, the forward
//!   transposed: a sum over the edges of which `s` is the source (its
//!   out-edges, in the forward's terms, where a row's edges are its
//!   in-edges; its row of the transpose). A node that is no edge's source
//!   gets zeros;
//! * `dw[e] = Σ_c dY[row(e), c]·x[indices[e], c]`, a dot product per edge.
//!
//! Both are the same bits on every run: no floating-point atomics, each
//! node's out-edges summed in increasing edge order as one chain, each
//! dot product in an order its stage documents (mage-001: columns in
//! order; mage-002 and mage-003: fixed trees over lanes).
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | the transpose built on the GPU with integer atomics (counts), a scan and ranks by edge number; a thread per dX element over its node's out-edges in order, a thread per edge for dw (ignores the transpose passed in) |
//! | [`mage_002`] | one launch over the transpose passed in: a group of lanes per source node, x held in registers, its out-edges walked in order with 8 dY rows gathered at once (128-bit where `width % 4 == 0`), dX and dw in one pass |
//! | [`mage_003`] | mage-002's pass in rounds of 16 out-edges: one transpose entry a lane with the next round's loaded early, all 16 dY rows gathered before the first is used, the round's 16 dot products summed by one reduce-scatter over the group (15 shuffles, one store) |
//!
//! `current` is mage-003 always: judged FASTER than mage-002 at every
//! sweep shape, uniform and power-law (`results/backward-7`,
//! `results/backward-8`, CUPTI kernel time, hot L2):
//!
//! <!-- mage:table verdicts results/backward-7/comparison.json a=mage-003 ops=neighbor_backward -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | neighbor_backward | 4096x64x65536 | hot | kernel time | rust mage-003 | rust mage-002 | 0.584 [0.584, 0.587] | FASTER |
//! | neighbor_backward | 4096x64x65536 power-law | hot | kernel time | rust mage-003 | rust mage-002 | 0.499 [0.497, 0.500] | FASTER |
//! | neighbor_backward | 7x9x23 | hot | kernel time | rust mage-003 | rust mage-002 | – | not measured |
//! | neighbor_backward | 65536x64x1048576 | hot | kernel time | rust mage-003 | rust mage-002 | 0.838 [0.835, 0.838] | FASTER |
//! | neighbor_backward | 65536x64x1048576 power-law | hot | kernel time | rust mage-003 | rust mage-002 | 0.744 [0.743, 0.745] | FASTER |
//! <!-- /mage:table -->
//! <!-- mage:table verdicts results/backward-8/comparison.json a=mage-003 ops=neighbor_backward -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | neighbor_backward | 7x9x23 | hot | kernel time | rust mage-003 | rust mage-002 | 0.692 [0.692, 0.692] | FASTER |
//! <!-- /mage:table -->
//!
//! Before it, mage-002 held every graph: it reads each dY row once per edge and
//! x, dX and the transpose once, where mage-001 also rebuilds the
//! transpose in six launches and walks each node's list with one
//! dependent chain of loads per edge per element. A node that is the
//! source of very many edges is one group's serial walk in mage-002 (8
//! edges in flight at a time); in mage-001 it is the same walk with one
//! edge in flight, after ranks quadratic in its out-degree. So mage-002 is
//! ahead on every graph, and the dispatcher has nothing in the graph to
//! read. (A split of a very long out-edge list over several groups, its
//! partial sums added in a fixed order by a second kernel, would make such
//! a node fast too; it is not built, and then the dispatcher would read
//! the largest out-degree from `t_rowptr`.) mage-003 walks the same
//! lists in rounds of 16 edges, one dependent round trip a round; it
//! predicted about 5.5 µs at 4096x64x65536 against mage-002's 12.7 and
//! took 7.41 against 12.45 (`results/backward-7`).
//!
//! The transpose is built on the host. A build on the GPU once per graph
//! is mage-001's count, scan, fill and order kernels (`colptr` is
//! `t_rowptr` and `order` is `t_edges`) and one gather (`t_rows[k] =
//! row[order[k]]`); registering it as an op of its own
//! (`neighbor_transpose`: rowptr, indices → t_rowptr, t_rows, t_edges)
//! needs u32 outputs, which the registry does not have: [`Output`](mage_common::op::Output) carries
//! no element type, and every output is poisoned, downloaded and compared
//! as f32 against an f64 reference under a tolerance. An exact comparison,
//! a u32 poison and download in the runner, and the Python module's output
//! dtypes would come first.
//!
//! # Generators
//!
//! The forward's `uniform` and `power-law` graphs, x and w as there, and
//! dY normal(0, 0.25) from a stream of its own. Both draw sources
//! uniformly, so the out-degrees (the lengths of dX's sums) are about
//! `edges / n` on either; `power-law` makes some rows heavy: their rows
//! of dY are read by many of dw's dot products. The transpose is built
//! from the graph by [`transpose_csr`] ([`with_transpose`]).
//!
//! # Tolerance
//!
//! `|out − ref| ≤ T·2^-126 + γ_(T+2)·m`, `m` each element's sum of the
//! sizes of its terms (dX: `Σ_e |w[e]|·|dY[row(e), c]|`, dw: `Σ_c |dY[row(e),
//! c]|·|x[indices[e], c]|`), computed beside the reference, and `T` the
//! longest sum either output is: the largest out-degree or `width`,
//! whichever is larger ([`largest_sum`]). The bound grows with the
//! length, so the longer of the two holds for both outputs. Every element is one FP32 chain
//! of at most `T` products, so [`sum_of_products`] holds for any data (it
//! says why); it reads the data, so an output of zeros fails wherever the
//! gradient is not zero.
//!
//! [`check_csr`]: crate::graph::check_csr
//! [`check_transpose`]: crate::graph::check_transpose
//! [`transpose_csr`]: crate::graph::transpose_csr
//! [`sum_of_products`]: mage_common::numeric::sum_of_products

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::graph::{POWER_LAW_SKEW, check_csr, check_transpose, generate_with_skew, transpose_csr};
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::{Reference, Tolerance, sum_of_products};
    use mage_common::op::Extent::{Dim, DimPlus1};
    use mage_common::op::{Dispatcher, Elem, Generator, HostBuf, Input, Op, Output, Stage, Workload};

    /// The arguments of the one-launch stages over the transpose passed in
    /// (mage-002, mage-003): x, w, dY, the transpose (t_rowptr, t_rows,
    /// t_edges), dX, dw, `n`, `width`.
    pub fn transpose_pass_args(n: u32, width: u32) -> Vec<mage_common::op::Arg> {
        use mage_common::op::Arg;
        vec![
            Arg::Input(0),
            Arg::Input(1),
            Arg::Input(4),
            Arg::Input(5),
            Arg::Input(6),
            Arg::Input(7),
            Arg::Output(0),
            Arg::Output(1),
            Arg::U32(n),
            Arg::U32(width),
        ]
    }

    /// The f64 reference of dX and dw, concatenated in output order, with
    /// each element's magnitude: the sum of its terms' sizes.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (n, width) = (dims[0] as usize, dims[1] as usize);
        let (x, w, rowptr, indices, dy) =
            (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_u32(), inputs[3].as_u32(), inputs[4].as_f32());
        let (mut dx, mut dx_mag) = (vec![0f64; n * width], vec![0f64; n * width]);
        let (mut dw, mut dw_mag) = (vec![0f64; indices.len()], vec![0f64; indices.len()]);
        for r in 0..n {
            let g = &dy[r * width..][..width];
            for e in rowptr[r] as usize..rowptr[r + 1] as usize {
                let s = indices[e] as usize;
                let (src, wv) = (&x[s * width..][..width], w[e] as f64);
                for c in 0..width {
                    let t = wv * g[c] as f64;
                    dx[s * width + c] += t;
                    dx_mag[s * width + c] += t.abs();
                    let p = g[c] as f64 * src[c] as f64;
                    dw[e] += p;
                    dw_mag[e] += p.abs();
                }
            }
        }
        let mut values = dx;
        values.extend(dw);
        let mut magnitudes = dx_mag;
        magnitudes.extend(dw_mag);
        Reference { values, magnitudes }
    }

    /// The most edges any node is the source of (`indices[e] = s`): the
    /// longest sum in dX.
    pub fn largest_out_degree(dims: &[u32], inputs: &[HostBuf]) -> u64 {
        let mut deg = vec![0u64; dims[0] as usize];
        for &s in inputs[3].as_u32() {
            deg[s as usize] += 1;
        }
        deg.into_iter().max().unwrap_or(0)
    }

    /// The longest sum of products any output element is: the largest
    /// out-degree (dX) or `width` (dw).
    pub fn largest_sum(dims: &[u32], inputs: &[HostBuf]) -> u64 {
        largest_out_degree(dims, inputs).max(dims[1] as u64)
    }

    /// See the module doc.
    pub fn tolerance(dims: &[u32], inputs: &[HostBuf]) -> Tolerance {
        sum_of_products(largest_sum(dims, inputs))
    }

    /// The forward's inputs for this graph, dY, and the graph's transpose.
    fn generate(dims: &[u32], seed: u64, skew: u32) -> Vec<HostBuf> {
        let mut inputs = generate_with_skew(dims, seed, skew);
        inputs.push(HostBuf::F32(normal_input(seed, 4, dims[0] as usize * dims[1] as usize)));
        with_transpose(dims, inputs)
    }

    /// `inputs` (x, w, rowptr, indices, dY) with the graph's transpose
    /// appended ([`transpose_csr`]): the op's eight inputs. The graph must
    /// pass [`check_csr`].
    pub fn with_transpose(dims: &[u32], mut inputs: Vec<HostBuf>) -> Vec<HostBuf> {
        let t = transpose_csr(dims[0], inputs[2].as_u32(), inputs[3].as_u32());
        inputs.extend([HostBuf::U32(t.t_rowptr), HostBuf::U32(t.t_rows), HostBuf::U32(t.t_edges)]);
        inputs
    }

    /// The forward's CSR checks ([`check_csr`]), then the transpose against
    /// the graph ([`check_transpose`]). Reads inputs 2, 3, 5, 6 and 7 only
    /// (the op's `content_reads`).
    pub fn check_graph(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        check_csr(dims, inputs)?;
        check_transpose(dims[0], inputs[2].as_u32(), inputs[3].as_u32(), inputs[5].as_u32(), inputs[6].as_u32(), inputs[7].as_u32())
    }

    pub static GENERATORS: [Generator; 2] = [
        Generator {
            name: "uniform",
            summary: "the forward's uniform graph, x and w normal(0, 0.25), dY normal(0, 0.25), the graph's transpose",
            generate: |d, seed| generate(d, seed, 0),
        },
        Generator {
            name: "power-law",
            summary: "the forward's power-law graph, x and w normal(0, 0.25), dY normal(0, 0.25), the graph's transpose",
            generate: |d, seed| generate(d, seed, POWER_LAW_SKEW),
        },
    ];

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 3] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE];

    pub static BACKWARD: Op = Op {
        name: "neighbor_backward",
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
            Input { file: "dy", role: "dY", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "t_rowptr", role: "t_rowptr", elem: Elem::U32, shape: &[DimPlus1(0)] },
            Input { file: "t_rows", role: "t_rows", elem: Elem::U32, shape: &[Dim(2)] },
            Input { file: "t_edges", role: "t_edges", elem: Elem::U32, shape: &[Dim(2)] },
        ],
        outputs: &[Output { file: "dx", role: "dX", shape: &[Dim(0), Dim(1)] }, Output { file: "dw", role: "dw", shape: &[Dim(2)] }],
        constants: &[],
        check_inputs: check_graph,
        check_range: |_, _| Ok(()),
        content_reads: &[2, 3, 5, 6, 7],
        generators: &GENERATORS,
        reference,
        tolerance,
        cost: |d| {
            let (n, w, e) = (d[0] as u64, d[1] as u64, d[2] as u64);
            // x and dY read, dX written; w and indices read, dw written; rowptr;
            // the transpose (t_rowptr, t_rows, t_edges).
            (4 * (3 * n * w + 5 * e + 2 * (n + 1)), 4 * e * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: Dispatcher { summary: "mage-003 always", reads: &[], choose: |_, _| &mage_003::STAGE },
    };
}
