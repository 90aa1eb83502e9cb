//! The kernel bodies the two GELU gradient ops share: `gelu_backward` (tanh
//! form) and `gelu_erf_backward` (exact form) differ only in the gradient
//! of one element, `dy·gelu'(x + bias)`, and run the same kernels around
//! it, generic over an [`ElementGradient`]:
//!
//! * [`columns`]: each op's mage-001, a thread per element for dx and a
//!   thread per column for dbias, rows in order;
//! * [`tiles`]: each op's mage-002, a block per column tile and chunk of
//!   rows writing dx and its partial dbias row, then the chunks added in
//!   order;
//! * [`slabs`]: each op's mage-003, a block per chunk of four-row slabs
//!   writing dx from flat quads at any width and its partial dbias row
//!   (column sums from shared memory), then the chunks added in order with
//!   a batch of loads in flight;
//! * [`strips`]: each op's mage-004, one launch, a block per strip of
//!   columns over every row writing dx and adding dbias itself;
//! * [`clusters`]: each op's mage-005, one launch, a column tile's chunks
//!   of rows one thread-block cluster, their partial dbias rows added in
//!   chunk order through distributed shared memory;
//! * [`spread_tiles`]: each op's mage-006, mage-002's tiles with a lane's
//!   four columns 32 apart where the width is not a multiple of 4, then
//!   mage-002's totals with every load of a segment issued together.
//!
//! Each stage declares its own `kernel!` entries (their names are the
//! op's) calling these bodies with its op's element
//! ([`TanhGradient`](crate::backward::element_gradient::TanhGradient),
//! [`ErfGradient`](crate::erf_backward::element_gradient::ErfGradient)).
//! Frozen history: the entries compile to the PTX they had when each
//! stage held its own copy of the body, their ptxas resources pinned by
//! `tests/resources.rs` and their bits by the op's tests; a new stage that
//! changes a body takes a module of its own.

pub mod clusters;
pub mod columns;
pub mod slabs;
pub mod spread_tiles;
pub mod strips;
pub mod tiles;

/// The gradient of one element, `dy·gelu'(z)` with `z = x + bias` as the
/// kernel rounded it: the one thing the shared bodies leave to the op.
pub trait ElementGradient {
    /// `dy·gelu'(z)`, as the op's stages compute it on the GPU.
    fn grad(z: f32, dy: f32) -> f32;
}

/// A block shape: threads and dynamic shared bytes.
#[cfg(not(target_arch = "nvptx64"))]
pub struct Block {
    pub threads: u32,
    pub shared_bytes: u32,
}

/// The two launches every chunked stage plans: `first` over `grid` (x,
/// bias, dy in; dx out; each of the `chunks` chunks of `per` rows or slabs
/// its partial dbias row in scratch, `scratch_floats` of it), then
/// `totals`, a block per `columns` columns, adding the chunks' rows in
/// order into dbias.
#[cfg(not(target_arch = "nvptx64"))]
#[allow(clippy::too_many_arguments)]
pub fn chunked_plan(
    d: &[u32],
    first: (&'static mage_common::kernel::Kernel, mage_common::kernel::Dim3, Block),
    per: u32,
    chunks: u32,
    scratch_floats: u32,
    totals: (&'static mage_common::kernel::Kernel, Block),
    columns: u32,
) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    let (rows, width) = (d[0], d[1]);
    let (kernel, grid, block) = first;
    let (totals_kernel, totals_block) = totals;
    Plan {
        launches: vec![
            Launch {
                kernel,
                grid,
                block: Dim3::x(block.threads),
                shared_bytes: block.shared_bytes,
                cluster: Dim3::ONE,
                args: vec![
                    Arg::Input(0),
                    Arg::Input(1),
                    Arg::Input(2),
                    Arg::Output(0),
                    Arg::Scratch(0),
                    Arg::U32(rows),
                    Arg::U32(width),
                    Arg::U32(per),
                ],
            },
            Launch {
                kernel: totals_kernel,
                grid: Dim3::x(width.div_ceil(columns)),
                block: Dim3::x(totals_block.threads),
                shared_bytes: totals_block.shared_bytes,
                cluster: Dim3::ONE,
                args: vec![Arg::Scratch(0), Arg::Output(1), Arg::U32(chunks), Arg::U32(width)],
            },
        ],
        scratch: vec![scratch_floats as usize],
    }
}

/// The f64 reference of a bias + element gradient, dx then dbias, with
/// each element's magnitude: `element(z, dy)` gives dx's value and
/// magnitude at `z = x + bias`; dbias sums them down each column, its
/// magnitudes times `1 + γ_(rows+2)/of_magnitude` (the rounding of a
/// column sum of `rows` FP32 terms) plus `rows` flushed results.
#[cfg(not(target_arch = "nvptx64"))]
pub fn reference(
    dims: &[u32],
    inputs: &[mage_common::op::HostBuf],
    of_magnitude: f64,
    element: impl Fn(f64, f64) -> (f64, f64),
) -> mage_common::numeric::Reference {
    use mage_common::numeric::{FLUSHED, Reference, U, gamma};
    let (rows, width) = (dims[0] as usize, dims[1] as usize);
    let (x, bias, dy) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_f32());
    let mut values = Vec::with_capacity(rows * width + width);
    let mut magnitudes = Vec::with_capacity(rows * width + width);
    let (mut dbias, mut dbias_mag) = (vec![0f64; width], vec![0f64; width]);
    for r in 0..rows {
        for c in 0..width {
            let i = r * width + c;
            let (v, m) = element(x[i] as f64 + bias[c] as f64, dy[i] as f64);
            values.push(v);
            magnitudes.push(m);
            dbias[c] += v;
            dbias_mag[c] += m;
        }
    }
    let sum_factor = 1.0 + gamma(rows as u64 + 2, U) / of_magnitude;
    let flushed = rows as f64 * FLUSHED / of_magnitude;
    values.extend(dbias);
    magnitudes.extend(dbias_mag.iter().map(|m| m * sum_factor + flushed));
    Reference { values, magnitudes }
}
