//! `matmul_tn`: `C[m, n] = A[k, m]ᵀ · B[k, n]`, FP32 row-major, under
//! matmul's FP32 contract: the product of `dB = Aᵀ·dC` in a product's
//! backward pass.
//!
//! Dims are matmul's, `[m, n, k]`. Inputs: `a` = A `[k, m]` (M-contiguous),
//! `b` = B `[k, n]` (as matmul's); the output is C `[m, n]`.
//!
//! An op of its own rather than a layout dim of matmul: its A has another
//! shape, and its stages differ from matmul's in which tile is transposed
//! on its way to shared memory (here A's: TF32 `wgmma` reads its shared
//! operand K-major only, and A arrives M-major), so it has its own stage
//! history, dispatcher and sweep. What it shares with matmul is in the
//! crate root: the f64 reference (matmul's on A transposed back), the
//! generators, the tolerance and the kernel arguments; its 3xTF32 stages
//! run [`crate::tf32x3`]'s body, mage-003 and mage-004 with A's
//! [`crate::tf32x3::AKByM`] layout, mage-005 through matmul mage-011's
//! split ([`crate::k_slices`]) on A transposed into scratch, mage-006
//! through matmul mage-014's clusters ([`crate::cluster_totals`]) with
//! that layout.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | 16x16 shared tiles, one output per thread, each sum one `fma` per term in order |
//! | [`mage_002`] | 3xTF32 (FP32 accuracy) on `wgmma`: A transposed into scratch by a tiled launch, then matmul mage-009's product |
//! | [`mage_003`] | A's transpose inside the product: each K tile copied raw and split into the K-major planes, 64-row tiles, one launch |
//! | [`mage_004`] | split-K: mage-003's product per tile and slice of K into scratch, the slices added in order by a second kernel |
//! | [`mage_005`] | split-K over the transposed product: mage-002's transpose (rows padded to 16 bytes), then matmul mage-011's split product and in-order totals, 64- or 128-row tiles |
//! | [`mage_006`] | split-K in one launch: a tile's K slices one thread-block cluster, mage-004's partials added in slice order through distributed shared memory straight into C; matmul mage-014's totals, its cost model at 64 rows |
//! | [`transpose`] | the kernel body of mage-002's and mage-005's transpose of A into scratch |
//! | [`current`] | the dispatcher |

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_004;
pub mod mage_005;
pub mod mage_006;
pub mod transpose;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::{GENERATORS, SWEEP, as_matmul_inputs, cost, tolerance};
    use mage_common::numeric::Reference;
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Elem, HostBuf, Input, Op, Output, Stage};

    /// matmul's f64 reference ([`crate::reference`]: values and magnitudes
    /// `Σ_p |a[p, i]| |b[p, j]|`) on A transposed back to `[m, k]`.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (m, n, k) = (dims[0] as usize, dims[1] as usize, dims[2] as usize);
        crate::reference(dims, &as_matmul_inputs(inputs, [k, m], true, [k, n], false))
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 6] =
        [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE, &mage_005::STAGE, &mage_006::STAGE];

    /// The op.
    pub static TN: Op = Op {
        name: "matmul_tn",
        package: "mage-matmul",
        dim_names: &["m", "n", "k"],
        min_dims: &[1, 1, 1],
        default_dims: &[1024, 1024, 1024],
        sweep: &SWEEP,
        inputs: &[
            Input { file: "a", role: "a", elem: Elem::F32, shape: &[Dim(2), Dim(0)] },
            Input { file: "b", role: "b", elem: Elem::F32, shape: &[Dim(2), Dim(1)] },
        ],
        outputs: &[Output { file: "c", role: "C", shape: &[Dim(0), Dim(1)] }],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &GENERATORS,
        reference,
        tolerance,
        cost,
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
