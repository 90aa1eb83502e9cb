//! The held rows: the kernel body of mage-009 and mage-010. A block
//! normalises `R` rows at once, `T` threads a row, each thread holding `Q`
//! quads of its row from the load to the store ([`held_rows`]); each warp
//! reduces its part ([`warp_part`]), publishes it ([`publish`]) and the
//! parts are merged without a division ([`merge_parts`]). `row_entries!`
//! declares a stage's kernel entries over it and their [`Entry`] table;
//! [`held_plan`] is their launch. Frozen history: mage-009's and
//! mage-010's ptxas resources are pinned by `tests/resources.rs` (each
//! entry held to its register budget) and their outputs by
//! `tests/stages.rs`, so a new stage that changes the body takes a module
//! of its own.

use mage_common::device::*;

/// Declares a stage's kernel entries, `name => (threads, quads, rows,
/// registers)` each running `body::<threads, quads, rows, rest...>`, and on
/// the host its [`Entry`] table (narrowest rows first) and its kernel list.
macro_rules! row_entries {
    ($body:ident::<_, _, _, $($rest:tt),*>; $($name:ident => ($t:literal, $q:literal, $r:literal, $regs:literal)),* $(,)?) => {
        #[inline(always)]
        unsafe fn body<const T: u32, const Q: usize, const R: u32>(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
            unsafe { crate::held_rows::$body::<T, Q, R, $($rest),*>(x, gamma, beta, y, rows, width, eps) }
        }

        $(mage_common::kernel! {
            #[doc = concat!("Groups of ", stringify!($t), " threads holding ", stringify!($q), " quads each, ", stringify!($r), " group(s) per block.")]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
                unsafe { body::<$t, $q, $r>(x, gamma, beta, y, rows, width, eps) }
            }
        })*

        /// The entries, narrowest rows first.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[crate::held_rows::Entry] = &[$(crate::held_rows::Entry { threads: $t, quads: $q, rows: $r, registers: $regs, kernel: &$name::KERNEL }),*];

        /// Every kernel entry of the stage.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static KERNELS: &[&mage_common::Kernel] = &[$(&$name::KERNEL),*];
    };
}

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

/// The row's mean and `1/sqrt(var + eps)` from the parts of `warps` warps
/// published at `offset` (read after a barrier): `mean = Σ sum_v / width`,
/// `M2 = Σ m2_v + n_v (mean_v - mean)²`. Each warp divided once for its own
/// mean, so merging costs no division (mage-006 and mage-008 divide once
/// per warp in every thread here).
#[inline(always)]
pub fn merge_parts(offset: u32, warps: u32, inv_width: f32, eps: f32) -> (f32, f32) {
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
    (mean, rsqrt_approx(m2 * inv_width + eps))
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
    eps: f32,
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
    let stats = merge_parts(slots, warps, 1.0 / width as f32, eps);
    if active {
        unsafe { write_row::<T, Q, GATHER, A>(gamma, beta, y, base, t, &held, &valid, stats) };
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use crate::args;
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Launch, Plan};

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

    /// A launch of [`held_rows`](super::held_rows): a block per `rows` rows.
    pub fn held_plan(entries: &[Entry], d: &[u32]) -> Plan {
        let e = entry_for(entries, d[1]);
        Launch {
            kernel: e.kernel,
            grid: Dim3::x(d[0].div_ceil(e.rows)),
            block: Dim3::x(e.block()),
            shared_bytes: e.rows * e.threads / 32 * 16,
            cluster: Dim3::ONE,
            args: args(d[0], d[1]),
        }
        .into()
    }
}
