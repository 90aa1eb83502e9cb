//! LayerNorm over the rows of an FP32 matrix, with every stage of its history.
//!
//! `y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + 1e-5) * gamma[c] + beta[c]`,
//! biased variance. Inputs: `a` = x `[rows, width]`, `b` = gamma `[width]`,
//! `c` = beta `[width]`.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | a 256-thread block per row, partial sums through shared memory and a tree of barriers, three passes |
//! | [`mage_002`] | one warp per row, 128-bit quads, shuffle reductions |
//! | [`mage_003`] | two warps per row meeting once in shared memory behind one barrier |
//! | [`mage_006`] | one 128-thread block per row, the row held in registers, one read, one barrier, `rsqrt.approx` |
//! | [`mage_007`] | one warp per row, the row held in registers: one read, no shared memory, no barrier |
//! | [`mage_008`] | mage-006's held row in 256- or 512-thread blocks, rows up to 4096 |
//! | [`mage_009`] | two warps per row, four rows per block, two to four held quads per lane, merged without a division |
//! | [`mage_010`] | a block per row (128 to 512 threads), four quads per thread loaded before any is used, merged without a division |
//! | [`current`] | the dispatcher: the stage measured fastest for the shape |
//!
//! Every stage computes the variance soundly: values are shifted by the
//! row's first element (exact where the row's values are close together)
//! and either reduced in two passes or merged as [`Moments`](mage_common::stats::Moments),
//! so a row with mean 1e3 and spread 1e-2 normalises correctly.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

/// Declares a stage's kernel entries, `name => (threads, quads, rows,
/// registers)` each running `body::<threads, quads, rows, rest...>`, and on
/// the host its [`Entry`] table (narrowest rows first) and its kernel list.
macro_rules! row_entries {
    ($body:ident::<_, _, _, $($rest:tt),*>; $($name:ident => ($t:literal, $q:literal, $r:literal, $regs:literal)),* $(,)?) => {
        #[inline(always)]
        unsafe fn body<const T: u32, const Q: usize, const R: u32>(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32) {
            unsafe { crate::$body::<T, Q, R, $($rest),*>(x, gamma, beta, y, rows, width) }
        }

        $(mage_common::kernel! {
            #[doc = concat!("Groups of ", stringify!($t), " threads holding ", stringify!($q), " quads each, ", stringify!($r), " group(s) per block.")]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32) {
                unsafe { body::<$t, $q, $r>(x, gamma, beta, y, rows, width) }
            }
        })*

        /// The entries, narrowest rows first.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[crate::Entry] = &[$(crate::Entry { threads: $t, quads: $q, rows: $r, registers: $regs, kernel: &$name::KERNEL }),*];

        /// Every kernel entry of the stage.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static KERNELS: &[&mage_common::Kernel] = &[$(&$name::KERNEL),*];
    };
}

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_006;
pub mod mage_007;
pub mod mage_008;
pub mod mage_009;
pub mod mage_010;
pub mod space;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

/// Added to the variance before the square root.
pub const EPS: f32 = 1e-5;

use mage_common::device::*;

/// One warp's share of a row: the sum of its (shifted) values, their mean,
/// their second moment about that mean, and how many there are.
#[derive(Clone, Copy, Debug)]
pub struct WarpPart {
    pub sum: f32,
    pub mean: f32,
    pub m2: f32,
    pub n: f32,
}

/// How many elements of a row of `quads` quads warp `w` of a `T`-thread
/// row group holds, when thread `t` holds quads `t`, `t + T`, ...,
/// `t + (Q - 1) T`. The same on every lane.
#[inline(always)]
pub fn warp_count<const T: u32, const Q: usize>(w: u32, quads: u32) -> f32 {
    let mut n = 0;
    for i in 0..Q as u32 {
        n += quads.saturating_sub(w * 32 + T * i).min(32);
    }
    (4 * n) as f32
}

/// The [`WarpPart`] of the quads the lanes hold (values already shifted;
/// slots not `valid` hold zeros), given the warp's element count `n`:
/// two butterflies, the second centred on the warp's own mean.
#[inline(always)]
pub fn warp_part<const Q: usize>(held: &[F32x4; Q], valid: &[bool; Q], n: f32) -> WarpPart {
    let mut s = 0.0;
    for v in held {
        s += v.sum();
    }
    let sum = warp_sum(s);
    let mean = if n > 0.0 { sum / n } else { 0.0 };
    let mut m2 = 0.0;
    for (v, ok) in held.iter().zip(valid) {
        if *ok {
            m2 += v.map(|a| (a - mean) * (a - mean)).sum();
        }
    }
    WarpPart { sum, mean, m2: warp_sum(m2), n }
}

/// Lane 0 writes its warp's part to the 16 shared bytes at `offset`.
#[inline(always)]
pub fn publish(offset: u32, p: WarpPart) {
    if lane_id() == 0 {
        smem_st4(offset, F32x4::new(p.sum, p.mean, p.m2, p.n));
    }
}

/// The row's mean and `1/sqrt(var + EPS)` from the parts of `warps` warps
/// published at `offset` (read after a barrier): `mean = Σ sum_v / width`,
/// `M2 = Σ m2_v + n_v (mean_v - mean)²`. Each warp divided once for its own
/// mean, so merging costs no division (mage-006 and mage-008 divide once
/// per warp in every thread here).
#[inline(always)]
pub fn merge_parts(offset: u32, warps: u32, inv_width: f32) -> (f32, f32) {
    let mut sum = 0.0;
    for v in 0..warps {
        sum += smem_ld(offset + 16 * v);
    }
    let mean = sum * inv_width;
    let mut m2 = 0.0;
    for v in 0..warps {
        let p = smem_ld4(offset + 16 * v);
        let d = p.y - mean;
        m2 += p.z + p.w * d * d;
    }
    (mean, rsqrt_approx(m2 * inv_width + EPS))
}

/// Writes `gamma·(v - mean)·rstd + beta` for the valid held quads of a row
/// starting at element `base`, thread `t` of `T`. With `GATHER`, a thread
/// whose slots are all valid (all but the last few of a row) issues every
/// gamma and beta load before its first store: one L1 or L2 round trip
/// instead of one per slot, for up to 8 more registers per slot while they
/// are live.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn write_row<const T: u32, const Q: usize, const GATHER: bool, A: Access>(
    gamma: *const f32,
    beta: *const f32,
    y: *mut f32,
    base: u32,
    t: u32,
    held: &[F32x4; Q],
    valid: &[bool; Q],
    (mean, rstd): (f32, f32),
) {
    let write = |i: usize| {
        let q = t + T * i as u32;
        unsafe {
            let out = held[i].zip3(ld_nc4(gamma, 4 * q), ld_nc4(beta, 4 * q), |v, g, b| fma((v - mean) * rstd, g, b));
            A::store4(y, base + 4 * q, out);
        }
    };
    // Slots are valid from the first up; where all are, one branch-free
    // block lets the loads issue together.
    if GATHER && valid[Q - 1] {
        (0..Q).for_each(write);
    } else {
        (0..Q).filter(|&i| valid[i]).for_each(write);
    }
}

/// The body of kernels whose blocks normalise `R` rows at once, `T` threads
/// a row, thread `t` holding quads `t + T·i` (`i < Q`) of its row from the
/// load to the store. All `Q` loads are issued before any is used (indices
/// past the row are clamped to its last quad and the value dropped, so no
/// branch splits them); each warp reduces its part with two butterflies,
/// the parts meet in `R·T/32·16` bytes of shared memory behind one barrier,
/// and gamma and beta are read at the store (with `GATHER`, a thread whose
/// slots all lie in the row issues those loads together before its first
/// store, for up to 8 more registers a slot while they are live).
///
/// # Safety
/// `x` and `y` hold `rows × width` floats, `gamma` and `beta` `width`, all
/// 16-byte aligned; `width` is a multiple of 4 and at most `4·T·Q`; the
/// block has `R·T` threads and `R·T/32·16` bytes of shared memory.
#[inline(always)]
pub unsafe fn held_rows<const T: u32, const Q: usize, const R: u32, A: Access, const GATHER: bool>(
    x: *const f32,
    gamma: *const f32,
    beta: *const f32,
    y: *mut f32,
    rows: u32,
    width: u32,
) {
    let tid = thread_idx_x();
    let (group, t) = (tid / T, tid % T);
    let row = block_idx_x() * R + group;
    let active = row < rows;
    let (quads, base, warps) = (width / 4, row * width, T / 32);
    let mut held = [F32x4::ZERO; Q];
    let mut valid = [false; Q];
    if active {
        let shift = unsafe { ld_nc(x, base) };
        let mut raw = [F32x4::ZERO; Q];
        for (i, v) in raw.iter_mut().enumerate() {
            *v = unsafe { A::load4(x, base + 4 * (t + T * i as u32).min(quads - 1)) };
        }
        for (i, v) in raw.iter().enumerate() {
            valid[i] = t + T * (i as u32) < quads;
            held[i] = if valid[i] { v.map(|a| a - shift) } else { F32x4::ZERO };
        }
    }
    let w = t / 32;
    let slots = group * warps * 16;
    publish(slots + 16 * w, warp_part(&held, &valid, warp_count::<T, Q>(w, quads)));
    sync_threads();
    let stats = merge_parts(slots, warps, 1.0 / width as f32);
    if active {
        unsafe { write_row::<T, Q, GATHER, A>(gamma, beta, y, base, t, &held, &valid, stats) };
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::fixtures::normal_input;
    use mage_common::kernel::Dim3;
    use mage_common::numeric::{FLUSHED, Reference, Tolerance};
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Launch, Op, Plan, Stage, Workload};

    /// The kernel arguments every LayerNorm kernel takes, in order.
    pub fn args(rows: u32, width: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output, Arg::U32(rows), Arg::U32(width)]
    }

    /// The f64 reference, with each element's magnitude `|gamma[c]|·(1 +
    /// |x̂|) + |beta[c]|` (`x̂` the exact normalised value) in the same pass.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        let (x, gamma, beta) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_f32());
        let mut out = Vec::with_capacity(rows * width);
        let mut mag = Vec::with_capacity(rows * width);
        for row in x.chunks_exact(width).take(rows) {
            let mean = row.iter().map(|v| *v as f64).sum::<f64>() / width as f64;
            let var = row.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / width as f64;
            let rstd = 1.0 / (var + EPS as f64).sqrt();
            for (c, v) in row.iter().enumerate() {
                let (xhat, g, b) = ((*v as f64 - mean) * rstd, gamma[c] as f64, beta[c] as f64);
                out.push(xhat * g + b);
                mag.push(g.abs() * (1.0 + xhat.abs()) + b.abs());
            }
        }
        Reference { values: out, magnitudes: mag }
    }

    /// `|out - ref| <= 2^-126 + 1e-4·(|gamma[c]|·(1 + |x̂|) + |beta[c]|)`.
    ///
    /// Why: every stage computes `x̂·gamma + beta` from a normalised value
    /// whose error is relative to `1 + |x̂|` (the mean's and the variance's
    /// rounding, shifted by the row's first element, and `rsqrt.approx`,
    /// 1.5e-7: about 1e-6 at a width of 4096 even in the worst case met),
    /// then one multiply-add, whose rounding is relative to `|x̂ gamma| +
    /// |beta|`. Scaling the allowance by those magnitudes, not by `|ref|`,
    /// keeps it sound where `x̂ gamma` and `beta` cancel, where gamma and
    /// beta are 1e6 or 1e-6, and where an output of zeros would otherwise
    /// pass: at gamma = beta = 0 the output must be exactly 0, and anywhere
    /// else zeros fail. 1e-4 is a hundred times the largest error measured
    /// (`tests/scale.rs`: rows of mean 1e4 and spread 1, values of 1e-20,
    /// variance below eps, x up to the range [`check_range`] allows).
    pub fn tolerance(_: &[u32], _: &[HostBuf]) -> Tolerance {
        Tolerance::of_magnitude(FLUSHED, 1e-4)
    }

    /// The largest `Σ_c (x[r, c] - x[r, 0])²` a row may have: the kernels
    /// shift each row by its first element and sum squares of the shifted
    /// values in FP32, so past this a partial sum may overflow. A quarter
    /// of FP32's largest value leaves room for the merges of partial
    /// moments.
    pub const LARGEST_SQUARES: f64 = f32::MAX as f64 / 4.0;

    /// Refuses a row whose squared deviations pass FP32's range
    /// ([`LARGEST_SQUARES`]): no FP32 kernel can normalise it, so the input
    /// is out of range, not the stage wrong.
    pub fn check_range(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        let width = dims[1] as usize;
        for (r, row) in inputs[0].as_f32().chunks_exact(width).enumerate() {
            let first = row[0] as f64;
            let squares: f64 = row.iter().map(|v| (*v as f64 - first).powi(2)).sum();
            if squares > LARGEST_SQUARES {
                let largest = row.iter().fold(0f32, |m, v| m.max(v.abs()));
                return Err(format!(
                    "a.bin (x) row {r} spreads too far for FP32: the sum of its squared deviations is {squares:.3e} \
                     (values up to {largest:.3e}), beyond {LARGEST_SQUARES:.3e}; scale the input down"
                ));
            }
        }
        Ok(())
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let (rows, width) = (dims[0] as usize, dims[1] as usize);
        vec![
            HostBuf::F32(normal_input(seed, 0, rows * width)),
            HostBuf::F32(normal_input(seed, 1, width)),
            HostBuf::F32(normal_input(seed, 2, width)),
        ]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 8] = [
        &mage_001::STAGE,
        &mage_002::STAGE,
        &mage_003::STAGE,
        &mage_006::STAGE,
        &mage_007::STAGE,
        &mage_008::STAGE,
        &mage_009::STAGE,
        &mage_010::STAGE,
    ];

    /// One kernel entry of a stage: blocks of `rows` groups of `threads`
    /// threads, each thread holding `quads` quads of its group's row.
    #[derive(Clone, Copy, Debug)]
    pub struct Entry {
        pub threads: u32,
        pub quads: u32,
        pub rows: u32,
        /// The most registers a thread may take: what the stage's occupancy
        /// figures count on; `tests/resources.rs` holds ptxas to it.
        pub registers: u32,
        pub kernel: &'static Kernel,
    }

    impl Entry {
        /// The widest row it covers.
        pub fn max_width(&self) -> u32 {
            self.threads * self.quads * 4
        }
        fn block(&self) -> u32 {
            self.threads * self.rows
        }
    }

    /// Whether some entry covers the dims' width, a multiple of 4.
    pub fn entries_support(entries: &[Entry], d: &[u32]) -> bool {
        d[1].is_multiple_of(4) && entries.iter().any(|e| e.max_width() >= d[1])
    }

    /// The narrowest entry covering `width`.
    pub fn entry_for(entries: &[Entry], width: u32) -> &Entry {
        entries.iter().find(|e| e.max_width() >= width).expect("supports() bounds the width")
    }

    /// A launch of [`held_rows`]: a block per `rows` rows.
    pub fn held_plan(entries: &[Entry], d: &[u32]) -> Plan {
        let e = entry_for(entries, d[1]);
        Launch {
            kernel: e.kernel,
            grid: Dim3::x(d[0].div_ceil(e.rows)),
            block: Dim3::x(e.block()),
            shared_bytes: e.rows * e.threads / 32 * 16,
            args: args(d[0], d[1]),
        }
        .into()
    }

    pub static OP: Op = Op {
        name: "layernorm",
        package: "mage-layernorm",
        dim_names: &["rows", "width"],
        min_dims: &[1, 1],
        default_dims: &[4096, 768],
        sweep: &[
            Workload::new(&[4096, 768]),
            Workload::new(&[8192, 768]),
            Workload::new(&[1024, 2048]),
            Workload::new(&[4096, 4096]),
            Workload::new(&[16384, 4096]),
        ],
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "gamma", elem: Elem::F32, shape: &[Dim(1)] },
            Input { file: "c", role: "beta", elem: Elem::F32, shape: &[Dim(1)] },
        ],
        output: &[Dim(0), Dim(1)],
        constants: &[("eps", EPS as f64)],
        check_inputs: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        tolerance,
        check_range,
        cost: |d| {
            let (r, w) = (d[0] as u64, d[1] as u64);
            (4 * (2 * r * w + 2 * w), 8 * r * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
