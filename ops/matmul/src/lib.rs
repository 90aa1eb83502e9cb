//! Matrix multiply `C[m, n] = A[m, k] · B[k, n]`, FP32 row-major, IEEE FP32
//! arithmetic, with every stage of its history; and stages whose products
//! are TF32's, outside that contract (the op's `outside_contract`, never
//! picked by `current`).
//!
//! Dims are `[m, n, k]`. Inputs: `a` = A `[m, k]`, `b` = B `[k, n]`; the
//! output is C `[m, n]`.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | 16x16 shared tiles, one output per thread, 256 threads |
//! | [`mage_002`] | 64x64 block tile, a 4x4 register tile per thread, K step 32, 128-bit global loads |
//! | [`mage_003`] | 128-bit shared reads: the A tile stored transposed (row stride 68 floats), K step 64 |
//! | [`mage_006`] | two shared buffers, the next K tile copied by `cp.async` while the multiply-adds run |
//! | [`mage_007`] | 128x128 block tile, an 8x8 register tile per thread in 32x64 warp tiles, K step 16, one barrier per K step |
//! | [`mage_008`] | TF32, outside the FP32 contract: one `cvt.rna` product per term on `wgmma` tensor cores (sm_90a), 64x64 tiles, one warpgroup |
//! | [`mage_009`] | FP32 accuracy on TF32 tensor cores: three products per term (3xTF32), A in registers, two warpgroups, four `cp.async` stages, 128x128 or 64x128 tiles |
//! | [`mage_010`] | mage-009's product with 16-byte copies on any shape: rows not a multiple of 4 floats padded in scratch first |
//! | [`mage_011`] | split-K: mage-009's product per tile and slice of K into scratch, the slices added in order by a second kernel; slice count and tile rows from a cost model |
//! | [`mage_012`] | small k on CUDA cores: a 4x4 register tile per thread straight from global memory, no shared memory or barrier, exactly `k` terms |
//! | [`mage_014`] | split-K in one launch: the K slices of a tile are one thread-block cluster, mage-011's partials added in slice order through distributed shared memory straight into C; at most 8 slices |
//! | [`tf32x3`] | the kernel body of mage-009, mage-010 and mage-011: the 3xTF32 product on `wgmma` (generic over the operands' layout, for [`nt`] and [`tn`] too) |
//! | [`k_slices`] | mage-011's split of K over that product on 16-byte rows (shared with [`tn`]'s mage-005 and [`nt`]'s mage-003, B `[k, n]` or `[n, k]`): the slice body, the totals of padded partials, the cost model, the slice rule and the plan |
//! | [`cluster_totals`] | mage-014's body (shared with [`nt`]'s mage-004, B `[n, k]`, and [`tn`]'s mage-006, A `[k, m]` at 64 rows): mage-011's slice product with its accumulators stored into shared memory, and the cluster's in-order totals of those partials into C; its rule (k_slices' capped at 8 slices; at 64 rows for [`tn`]) and plan |
//! | [`split_k`] | the second pass of a split-K product (mage-011's, [`tn`]'s mage-004's and mage-005's, [`nt`]'s mage-003's): each element's partials over the K slices added in slice order |
//! | [`current`] | the dispatcher: picks a stage for the shape |
//!
//! Beside it, two ops of their own with the same dims `[m, n, k]`, for the
//! backward passes of a product (`dA = dC·Bᵀ`, `dB = Aᵀ·dC`) and PyTorch's
//! `linear` (`x·Wᵀ`): [`nt`] (`matmul_nt`, `C = A·Bᵀ`, B stored `[n, k]`)
//! and [`tn`] (`matmul_tn`, `C = Aᵀ·B`, A stored `[k, m]`). Their inputs'
//! shapes differ from matmul's, and their stages differ in which tile must
//! be transposed on its way to shared memory, so each has its own stage
//! history, dispatcher and sweep; a layout dim of matmul would make every
//! stage above refuse two of its three layouts. What the three share lives
//! here: the f64 reference (theirs is matmul's on the operand transposed
//! back, [`transpose`]), the generators, the tolerance ([`tolerance`], a
//! function of `k` alone), the kernel arguments and launches, and the
//! 3xTF32 body ([`tf32x3`], generic over where B lies).
//!
//! Every stage handles every shape with `m, n, k >= 1`: each global access
//! is guarded, and tile elements past an edge of A or B are zero-filled in
//! shared memory (a zero term leaves the sum's bits unchanged). 128-bit
//! global accesses need 16-byte aligned addresses, so rows must hold a
//! multiple of 4 floats: stages with vector loads have two entries, `_v4`
//! where the rows they read and write allow it and `_scalar` otherwise,
//! and the plan picks one (see [`vector_rows`]).
//!
//! Every stage through mage-007, and mage-012 ([`FMA_STAGES`]),
//! accumulates each output as `acc = fma(a[i, p], b[p, j], acc)` for `p =
//! 0, 1, ..., k - 1` in that order, so all of them give the same bits on
//! the emulator, and the GPU gives those bits too (explicit `fma`, nothing
//! left to contraction).
//! mage-009 sums three TF32 products per term on tensor cores: other bits,
//! under the same tolerance ([`tolerance`]; its error analysis is in
//! [`mage_009`]). The TF32 stage is checked under its own tolerance
//! ([`tf32_tolerance`], through `Op::tolerance_for`).
//!
//! The crate's PTX targets sm_90a (`[package.metadata.mage]` in its
//! `Cargo.toml`), which `wgmma` needs; the FP32 stages use nothing that
//! sm_90 lacks.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod cluster_totals;
pub mod k_slices;
pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_006;
pub mod mage_007;
pub mod mage_008;
pub mod mage_009;
pub mod mage_010;
pub mod mage_011;
pub mod mage_012;
pub mod mage_014;
pub mod nt;
pub mod space;
pub mod split_k;
pub mod tf32x3;
pub mod tile16;
pub mod tn;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

use mage_common::device::*;

/// The quad `p[row * cols + col ..][..4]` of a row-major matrix of `rows` x
/// `cols`, with elements outside the matrix read as zero. With `VEC` it is
/// one 128-bit load, which needs `cols % 4 == 0` and `col % 4 == 0` (the quad
/// is then entirely inside or entirely outside); otherwise four guarded
/// scalar loads. No index is formed for an element outside the matrix.
///
/// # Safety
/// `p` must hold the `rows * cols` matrix.
#[inline(always)]
pub(crate) unsafe fn load_quad<const VEC: bool>(p: *const f32, row: u32, rows: u32, col: u32, cols: u32) -> F32x4 {
    if row >= rows {
        return F32x4::ZERO;
    }
    if VEC {
        if col < cols { unsafe { ld_nc4(p, row * cols + col) } } else { F32x4::ZERO }
    } else {
        let e = |j: u32| if col + j < cols { unsafe { ld_nc(p, row * cols + col + j) } } else { 0.0 };
        F32x4::new(e(0), e(1), e(2), e(3))
    }
}

/// Copies the quad `p[row * cols + col ..][..4]` of a row-major `rows` x
/// `cols` matrix to shared byte `dst` with `cp.async`, zero-filling what
/// lies outside the matrix (the source index then clamped to 0). `VEC`:
/// one 16-byte copy, which needs `cols % 4 == 0` (the quad is then wholly
/// inside or outside); otherwise four 4-byte copies.
///
/// # Safety
/// `p` must hold the `rows * cols` matrix.
#[inline(always)]
pub(crate) unsafe fn cp_async_quad<const VEC: bool>(dst: u32, p: *const f32, row: u32, rows: u32, col: u32, cols: u32) {
    unsafe { cp_async_quad_strided::<VEC>(dst, p, row, rows, col, cols, cols) }
}

/// [`cp_async_quad`] in a window of `cols` columns of a matrix whose rows
/// are `stride` floats apart (`stride >= cols`): the quad at `p[row *
/// stride + col ..]`, zero-filled past `rows` and `cols`. `VEC` needs
/// `stride`, `cols` and `p`'s offset multiples of 4 floats.
///
/// # Safety
/// `p` must hold `rows` rows of `stride` floats, the last `cols` long.
#[inline(always)]
pub(crate) unsafe fn cp_async_quad_strided<const VEC: bool>(
    dst: u32,
    p: *const f32,
    row: u32,
    rows: u32,
    col: u32,
    cols: u32,
    stride: u32,
) {
    if VEC {
        let ok = row < rows && col < cols;
        let src = if ok { row * stride + col } else { 0 };
        unsafe { cp_async_ca_16_zfill(dst, p, src, if ok { 16 } else { 0 }) };
    } else {
        for j in 0..4 {
            let ok = row < rows && col + j < cols;
            let src = if ok { row * stride + col + j } else { 0 };
            unsafe { cp_async_ca_4_zfill(dst + 4 * j, p, src, if ok { 4 } else { 0 }) };
        }
    }
}

/// Stores the quad `v` at `p[row * cols + col ..][..4]`, skipping elements
/// outside the `rows` x `cols` matrix; `VEC` as in [`load_quad`].
///
/// # Safety
/// `p` must hold the `rows * cols` matrix, and no other thread write there.
#[inline(always)]
pub(crate) unsafe fn store_quad<const VEC: bool>(p: *mut f32, row: u32, rows: u32, col: u32, cols: u32, v: F32x4) {
    if row >= rows {
        return;
    }
    if VEC {
        if col < cols {
            unsafe { st4(p, row * cols + col, v) }
        }
    } else {
        let v = v.to_array();
        for j in 0..4 {
            if col + j < cols {
                unsafe { st(p, row * cols + col + j, v[j as usize]) }
            }
        }
    }
}

/// `acc[i][j] += a[i] * b[j]` with one rounding each: the rank-1 update of a
/// thread's 4x4 register tile by one `k` step.
#[inline(always)]
pub(crate) fn rank1_update(acc: &mut [[f32; 4]; 4], a: [f32; 4], b: [f32; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
    }
}

/// Writes a thread's 4x4 register tile, rows `row..row + 4` and columns
/// `col..col + 4` of C, skipping what lies outside `m` x `n`.
///
/// # Safety
/// `c` must hold the `m * n` output; no other thread writes this tile.
#[inline(always)]
pub(crate) unsafe fn store_tile<const VEC: bool>(c: *mut f32, acc: &[[f32; 4]; 4], row: u32, col: u32, m: u32, n: u32) {
    for (i, r) in acc.iter().enumerate() {
        unsafe { store_quad::<VEC>(c, row + i as u32, m, col, n, F32x4::new(r[0], r[1], r[2], r[3])) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
#[cfg(not(target_arch = "nvptx64"))]
pub use nt::NT;
#[cfg(not(target_arch = "nvptx64"))]
pub use tn::TN;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::fixtures::{Rng, normal_input};
    use mage_common::kernel::Dim3;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance, U, gamma, sum_of_products};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{
        Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Launch, Op, Output, OutsideContract, Plan, Stage, Workload,
    };

    /// The kernel arguments every matmul kernel takes, in order:
    /// `a, b, c, m, n, k`.
    pub fn args(d: &[u32]) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Output(0), Arg::U32(d[0]), Arg::U32(d[1]), Arg::U32(d[2])]
    }

    /// One launch of `kernel` over the output in `tile_m` x `tile_n` block
    /// tiles (a 1-D grid), `threads` per block: every stage's plan.
    pub fn tiled_launch(d: &[u32], kernel: &'static Kernel, tile_m: u32, tile_n: u32, threads: u32, shared_bytes: u32) -> Plan {
        Launch {
            kernel,
            grid: Dim3::x(d[0].div_ceil(tile_m) * d[1].div_ceil(tile_n)),
            block: Dim3::x(threads),
            shared_bytes,
            cluster: Dim3::ONE,
            args: args(d),
        }
        .into()
    }

    /// Whether 128-bit accesses to the rows of A (`k` floats), B and C (`n`
    /// floats each) are 16-byte aligned: both `k` and `n` multiples of 4.
    pub fn vector_rows(d: &[u32]) -> bool {
        d[1].is_multiple_of(4) && d[2].is_multiple_of(4)
    }

    /// Whether 128-bit accesses to the rows of B and C (`n` floats each)
    /// are 16-byte aligned: `n` a multiple of 4. The `_v4` test of the
    /// stages that copy A by element (mage-006, mage-007), where `k` does
    /// not matter; weaker than [`vector_rows`], which needs `k` too.
    pub fn vector_b_rows(d: &[u32]) -> bool {
        d[1].is_multiple_of(4)
    }

    /// The f64 reference: each output a sum of `k` exact products, and its
    /// magnitude `Σ_p |a[i, p]| |b[p, j]|`, in the same pass.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (m, n, k) = (dims[0] as usize, dims[1] as usize, dims[2] as usize);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let (mut out, mut mag) = (vec![0f64; m * n], vec![0f64; m * n]);
        for i in 0..m {
            let (row, row_mag) = (&mut out[i * n..(i + 1) * n], &mut mag[i * n..(i + 1) * n]);
            for p in 0..k {
                let x = a[i * k + p] as f64;
                for ((o, g), y) in row.iter_mut().zip(row_mag.iter_mut()).zip(&b[p * n..(p + 1) * n]) {
                    let t = x * *y as f64;
                    *o += t;
                    *g += t.abs();
                }
            }
        }
        Reference { values: out, magnitudes: mag }
    }

    /// The `cols` x `rows` transpose of the row-major `rows` x `cols` matrix `x`.
    pub fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        assert_eq!(x.len(), rows * cols);
        let mut out = vec![0f32; x.len()];
        for r in 0..rows {
            for (c, v) in x[r * cols..(r + 1) * cols].iter().enumerate() {
                out[c * rows + r] = *v;
            }
        }
        out
    }

    /// Both inputs as matmul takes them, A `[m, k]` and B `[k, n]`, from A
    /// stored as `a_rows` x `a_cols` and B as `b_rows` x `b_cols`, each
    /// transposed where `transpose_a` or `transpose_b` says: the operands of
    /// `matmul_nt` and `matmul_tn` put back to matmul's layout, for the
    /// reference and for the tests.
    pub fn as_matmul_inputs(inputs: &[HostBuf], a: [usize; 2], transpose_a: bool, b: [usize; 2], transpose_b: bool) -> Vec<HostBuf> {
        let put = |x: &HostBuf, [rows, cols]: [usize; 2], t: bool| {
            if t { HostBuf::F32(transpose(x.as_f32(), rows, cols)) } else { x.clone() }
        };
        vec![put(&inputs[0], a, transpose_a), put(&inputs[1], b, transpose_b)]
    }

    /// Inputs of `m * k` and `k * n` normal(0, 0.25) values: matmul's, and
    /// `matmul_nt`'s and `matmul_tn`'s (the same lengths, in another layout).
    pub fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (m, n, k) = (dims[0] as usize, dims[1] as usize, dims[2] as usize);
        vec![HostBuf::F32(normal_input(seed, 0, m * k)), HostBuf::F32(normal_input(seed, 1, k * n))]
    }

    /// What a 3xTF32 term errs by, in units of `u |a b|`, with the
    /// rounding of its tile's partial sum: 38 (module doc of [`mage_009`]),
    /// rounded up.
    pub const TF32X3_TERM_ULPS: f64 = 40.0;

    /// `|out - ref| <= k·2^-126 + max(γ_(k+2), 40 u + γ_(⌈k/32⌉+2))·m`,
    /// `m = Σ_p |a_p b_p|` of that output (the reference's magnitude).
    ///
    /// Why: the FMA stages sum each output by `k` fused multiply-adds, one
    /// rounding each, which [`sum_of_products`] bounds for any data. The
    /// 3xTF32 stages (mage-009, mage-010, mage-011) err per term by at most
    /// `38 u |a b|` (the split's roundings, the dropped `a_lo b_lo` and the
    /// tensor core's truncating partial sums of 12 instructions) and then
    /// add `⌈k/32⌉` tile sums in FP32 (module doc of [`mage_009`]; split
    /// over slices of K, in a tree no deeper than that chain: [`mage_011`]);
    /// from k ≈ 40
    /// the FP32 chain's bound is the larger. Both are worst cases over
    /// every rounding and scale with the data: inputs of 1e-6 or 1e15, rows
    /// scaled by 10^U(-3,3), constant matrices and cancelling sums are all
    /// held to the same relative bound of their own terms, and an output of
    /// zeros fails wherever a term is not zero (`tests/scale.rs`).
    ///
    /// The worst case sits far above the typical error, which grows like
    /// `√k` (simulated FP32 fma chains at k = 4096 err by about 2e-6 of
    /// `m` at the median against the bound's 2.4e-4), and still far below
    /// what an indexing bug does: one misplaced term moves an output by
    /// about `m / k`, more than the bound's `k u m` up to k ≈ 4000.
    pub fn tolerance(dims: &[u32], _: &[HostBuf]) -> Tolerance {
        let k = dims[2] as u64;
        let fp32 = sum_of_products(k);
        let tf32x3 = TF32X3_TERM_ULPS * U + gamma(k.div_ceil(32) + 2, U);
        Tolerance::of_magnitude(fp32.abs, fp32.of_magnitude.max(tf32x3))
    }

    /// Uniform integers in -8..=8: every product and every partial sum of
    /// up to 2^18 terms is an integer below 2^24, exact in FP32, and each
    /// input is exact in TF32, so every stage, TF32 included, must give
    /// the reference's value exactly, on the emulator and on the GPU.
    pub fn generate_integers(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (m, n, k) = (dims[0] as usize, dims[1] as usize, dims[2] as usize);
        let draw = |stream, len| {
            let mut r = Rng::stream(seed, stream);
            HostBuf::F32((0..len).map(|_| r.below(17) as f32 - 8.0).collect())
        };
        vec![draw(0, m * k), draw(1, k * n)]
    }

    /// `2^-10 + 2^-22`: the largest relative error of a product of two
    /// values each rounded to TF32 (`(1 + 2^-11)^2 - 1`).
    pub const TF32_PRODUCT_ERROR: f64 = 1.0 / 1024.0 + 1.0 / (1u64 << 22) as f64;

    /// The tolerance of the TF32 stages: `|out - ref| <= k·2^-126 + (p +
    /// γ'_(k+2) (1 + p))·m`, with `p` = [`TF32_PRODUCT_ERROR`], `m = Σ |a
    /// b|` the reference's magnitude and `γ'_n = 2 n u / (1 - 2 n u)`.
    ///
    /// Why: each input is rounded to TF32 (`cvt.rna`, 11 significant bits,
    /// relative error at most 2^-11), so each product `â b̂` (exact in the
    /// tensor core) is `a b (1 + π)` with `|π| <= p`: `p m` in all. The ISA
    /// leaves the tensor core's order and rounding of the FP32 sum
    /// unspecified ("at least single precision"); allowing each of the `k`
    /// additions, and the comparison with an f32 `expected.bin`, an error
    /// of a whole unit in the last place (truncation) rather than half
    /// gives `γ'_(k+2) Σ |â b̂|`. The first term dominates: at k = 1024 the
    /// bound is 2^-10 m against FP32's 2^-14 m, so it is about 16 times
    /// looser, and like FP32's it is a worst case. The tests also hold
    /// these stages to a tighter check, against the f64 product of the
    /// TF32-rounded inputs (`tests/stages.rs`).
    pub fn tf32_tolerance(dims: &[u32], inputs: &[HostBuf]) -> Tolerance {
        let sum = tf32_sum_tolerance(dims, inputs);
        Tolerance::of_magnitude(sum.abs, sum.of_magnitude + TF32_PRODUCT_ERROR)
    }

    /// The summation part of [`tf32_tolerance`], `k·2^-126 + γ'_(k+2) (1 +
    /// p)·m`: what a TF32 stage may differ from the exact sum of the
    /// products of its TF32-rounded inputs (`m` their magnitude).
    pub fn tf32_sum_tolerance(dims: &[u32], _: &[HostBuf]) -> Tolerance {
        let k = dims[2] as u64;
        Tolerance::of_magnitude(k as f64 * FLUSHED, gamma(k + 2, 2.0 * U) * (1.0 + TF32_PRODUCT_ERROR))
    }

    /// The stages that sum each output by one `fma` per term in order: the
    /// same bits, all of them.
    pub static FMA_STAGES: [&Stage; 6] =
        [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_006::STAGE, &mage_007::STAGE, &mage_012::STAGE];

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 11] = [
        &mage_001::STAGE,
        &mage_002::STAGE,
        &mage_003::STAGE,
        &mage_006::STAGE,
        &mage_007::STAGE,
        &mage_008::STAGE,
        &mage_009::STAGE,
        &mage_010::STAGE,
        &mage_011::STAGE,
        &mage_012::STAGE,
        &mage_014::STAGE,
    ];

    /// The sweep of matmul, `matmul_nt` and `matmul_tn`.
    pub static SWEEP: [Workload; 6] = [
        Workload::new(&[256, 256, 256]),
        Workload::new(&[512, 512, 512]),
        Workload::new(&[1024, 1024, 1024]),
        Workload::new(&[2048, 2048, 2048]),
        Workload::new(&[4096, 4096, 4096]),
        Workload::new(&[1000, 1037, 999]),
    ];

    /// The generators of matmul, `matmul_nt` and `matmul_tn`.
    pub static GENERATORS: [Generator; 2] = [
        Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate },
        Generator {
            name: "integers",
            summary: "every input a uniform integer in -8..=8 (exact sums up to k = 2^18)",
            generate: generate_integers,
        },
    ];

    /// Fewest bytes (A and B read, C written once) and flops of a product
    /// of dims `[m, n, k]`, whatever the operands' layout.
    pub fn cost(d: &[u32]) -> (u64, u64) {
        let (m, n, k) = (d[0] as u64, d[1] as u64, d[2] as u64);
        (4 * (m * k + k * n + m * n), 2 * m * n * k)
    }

    /// The op.
    pub static OP: Op = Op {
        name: "matmul",
        package: "mage-matmul",
        dim_names: &["m", "n", "k"],
        min_dims: &[1, 1, 1],
        default_dims: &[1024, 1024, 1024],
        sweep: &SWEEP,
        inputs: &[
            Input { file: "a", role: "a", elem: Elem::F32, shape: &[Dim(0), Dim(2)] },
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
        outside_contract: &[OutsideContract { stage: "mage-008", why: "TF32 products (one per term)", tolerance: tf32_tolerance }],
        current: current::DISPATCHER,
    };
}
