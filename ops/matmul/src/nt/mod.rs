//! `matmul_nt`: `C[m, n] = A[m, k] · B[n, k]ᵀ`, FP32 row-major, under
//! matmul's FP32 contract: the product of `dA = dC·Bᵀ` in a product's
//! backward pass, and of PyTorch's `linear` (`x·Wᵀ`, W stored `[out,
//! in]`).
//!
//! Dims are matmul's, `[m, n, k]`. Inputs: `a` = A `[m, k]`, `b` = B `[n,
//! k]` (both K-contiguous); the output is C `[m, n]`.
//!
//! An op of its own rather than a layout dim of matmul: its B has another
//! shape, and its stages differ from matmul's in which tile is transposed
//! on its way to shared memory (here none: both operands arrive K-major,
//! as TF32 `wgmma` wants its shared operand), so it has its own stage
//! history, dispatcher and sweep. What it shares with matmul is in the
//! crate root: the f64 reference (matmul's on B transposed back), the
//! generators, the tolerance and the kernel arguments; its 3xTF32 stage is
//! [`crate::tf32x3`]'s body with B's [`crate::tf32x3::NByK`] layout, and
//! its split-K stage matmul mage-011's split ([`crate::k_slices`]) over
//! that body with [`crate::tf32x3::NSliceByK`].
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | 16x16 shared tiles, one output per thread, each sum one `fma` per term in order |
//! | [`mage_002`] | 3xTF32 (FP32 accuracy) on `wgmma`: matmul mage-009's product with B's tile K-major and swizzled like A's |
//! | [`mage_003`] | split-K: mage-002's product per tile and slice of K into scratch, the slices added in order by a second kernel; matmul mage-011's slice rule |
//! | [`mage_004`] | split-K in one launch: a tile's K slices one thread-block cluster, mage-003's partials added in slice order through distributed shared memory straight into C; matmul mage-014's body and rule |
//! | [`current`] | the dispatcher |

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_004;

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
    /// `Σ_p |a[i, p]| |b[j, p]|`) on B transposed back to `[k, n]`.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (m, n, k) = (dims[0] as usize, dims[1] as usize, dims[2] as usize);
        crate::reference(dims, &as_matmul_inputs(inputs, [m, k], false, [n, k], true))
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 4] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE];

    /// The op.
    pub static NT: Op = Op {
        name: "matmul_nt",
        package: "mage-matmul",
        dim_names: &["m", "n", "k"],
        min_dims: &[1, 1, 1],
        default_dims: &[1024, 1024, 1024],
        sweep: &SWEEP,
        inputs: &[
            Input { file: "a", role: "a", elem: Elem::F32, shape: &[Dim(0), Dim(2)] },
            Input { file: "b", role: "b", elem: Elem::F32, shape: &[Dim(1), Dim(2)] },
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
