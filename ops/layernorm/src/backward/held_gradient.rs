//! The held-row gradient: the kernel body of layernorm_backward mage-003
//! (statistics recomputed); its `SAVED` path (statistics read from a saved
//! `[rows, 3]`) was a stage that hung on the H200 and was removed
//! (`docs/attempts.md`), kept here until the hang is understood. A block walks a chunk of rows, `R` rows at once, `T`
//! threads a row, thread `t` holding quads `t + T·i` (`i < Q`) of x and dy
//! of its row and of gamma for the whole chunk; per row, the statistics
//! (recomputed: two group reductions, saved: three loads), one paired
//! reduction of `Σ g` and `Σ g·x̂`, dx stored from the registers, and the
//! thread's columns' `Σ dy·x̂` and `Σ dy` kept in registers over the chunk.
//! At the end the `R` groups' column sums are added in group order
//! (`mage_common::device::column_sums::{publish_quads, group_total}`) and the block
//! writes one partial row of dgamma and one of dbeta to the scratch
//! `[chunks, 2, ⌈width/4⌉·4]`; `layernorm_backward_totals`
//! ([`totals`](super::totals)) adds the chunks. The quad loads, stores and
//! masks are [`quads`](super::quads)'. `gradient_entries!` declares a
//! stage's kernel entries over it and their [`Entry`] table.

use super::quads::{each, load_quad, masked, store_quad};
use mage_common::device::column_sums::{group_total, publish_quads};
use mage_common::device::*;

/// The most threads of an entry's block (`R·T`).
pub const MAX_THREADS: u32 = 512;
/// Bytes of one reduction slot region: a word pair for each warp of the
/// largest block.
const SLOT_BYTES: u32 = MAX_THREADS / 32 * 8;

/// Shared bytes of an entry of `threads`-thread blocks: two slot regions
/// for the row reductions, and where `rows > 1` the `2·quads` quads of each
/// of the block's threads.
pub const fn shared_bytes(quads: u32, rows: u32, threads: u32) -> u32 {
    2 * SLOT_BYTES + if rows > 1 { 2 * quads * threads * 16 } else { 0 }
}

/// Declares a stage's kernel entries, `name => (threads, quads, rows,
/// registers, blocks an SM)` each running [`held_gradient`] with `SAVED`,
/// and on the host its [`Entry`] table (narrowest rows first) and kernels.
/// `recompute` entries take no statistics; `saved` entries read them.
macro_rules! gradient_entries {
    (recompute; $($name:ident => ($t:literal, $q:literal, $r:literal, $regs:literal, $b:literal)),* $(,)?) => {
        $(mage_common::kernel! {
            #[doc = concat!("Groups of ", stringify!($t), " threads holding ", stringify!($q), " quads each, ", stringify!($r), " group(s) per block; statistics recomputed.")]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32, eps: f32) {
                unsafe { crate::backward::held_gradient::held_gradient::<$t, $q, $r, false>(x, gamma, dy, core::ptr::null(), dx, partials, rows, width, chunk_rows, eps) }
            }
        })*
        gradient_entries!(@table $($name => ($t, $q, $r, $regs, $b)),*);
    };
    (saved; $($name:ident => ($t:literal, $q:literal, $r:literal, $regs:literal, $b:literal)),* $(,)?) => {
        $(mage_common::kernel! {
            #[doc = concat!("Groups of ", stringify!($t), " threads holding ", stringify!($q), " quads each, ", stringify!($r), " group(s) per block; statistics read from `stats`.")]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, dy: *const f32, stats: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32, eps: f32) {
                unsafe { crate::backward::held_gradient::held_gradient::<$t, $q, $r, true>(x, gamma, dy, stats, dx, partials, rows, width, chunk_rows, eps) }
            }
        })*
        gradient_entries!(@table $($name => ($t, $q, $r, $regs, $b)),*);
    };
    (@table $($name:ident => ($t:literal, $q:literal, $r:literal, $regs:literal, $b:literal)),*) => {
        /// The entries, narrowest rows first.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[crate::backward::held_gradient::Entry] =
            &[$(crate::backward::held_gradient::Entry { threads: $t, quads: $q, rows: $r, registers: $regs, blocks_per_sm: $b, kernel: &$name::KERNEL }),*];
    };
}
pub(crate) use gradient_entries;

/// The sum over the `T` threads of a row group of each of `v`, in every
/// thread: a butterfly in each warp, then (for `T > 32`) the group's warps'
/// sums through the slot region at byte `slot`, added in warp order behind
/// one barrier. Every thread of the block calls it.
#[inline(always)]
fn group_sums<const T: u32, const N: usize>(v: [f32; N], slot: u32) -> [f32; N] {
    let mut s = v.map(warp_sum);
    if T > 32 {
        let w = thread_idx_x() / 32;
        let first = thread_idx_x() / T * (T / 32);
        if lane_id() == 0 {
            for (j, s) in s.iter().enumerate() {
                smem_st(slot + 4 * (2 * w + j as u32), *s);
            }
        }
        sync_threads();
        for (j, s) in s.iter_mut().enumerate() {
            let mut total = 0.0;
            for v in 0..T / 32 {
                total += smem_ld(slot + 4 * (2 * (first + v) + j as u32));
            }
            *s = total;
        }
    }
    s
}

/// The body of every entry: block `k` (`block_idx_x()`) walks rows
/// `k·chunk_rows ..` (`chunk_rows` a multiple of `R`), `R` at a time, the
/// same number of steps in every group (a row past the chunk or the matrix
/// is inactive: no loads, no stores, zeros in every sum), then writes its
/// partial rows.
///
/// With `SAVED`, `stats[3r..3r + 3]` is row r's `(shift, centre, rstd)`,
/// the mean being `shift + centre` (as `block_tree::row_statistics` writes
/// them); without, they are recomputed from the held row in the same
/// corrected two-pass form: `shift` the row's first element, `mean0` the
/// shifted row's mean, then `Σ d` and `Σ d²` of `d = x − shift − mean0`,
/// `centre = mean0 + Σ d / n`, `var = (Σ d² − (Σ d)²/n)/n`.
///
/// # Safety
/// `x`, `dy` and `dx` hold `rows × width` floats, `gamma` `width`, `stats`
/// (with `SAVED`) `3·rows`, `partials` `2·chunks·⌈width/4⌉·4`, all 16-byte
/// aligned; `width <= 4·T·Q`; the block has `R·T <= MAX_THREADS` threads
/// and [`shared_bytes`]`(Q, R, R·T)` bytes of shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn held_gradient<const T: u32, const Q: usize, const R: u32, const SAVED: bool>(
    x: *const f32,
    gamma: *const f32,
    dy: *const f32,
    stats: *const f32,
    dx: *mut f32,
    partials: *mut f32,
    rows: u32,
    width: u32,
    chunk_rows: u32,
    eps: f32,
) {
    let tid = thread_idx_x();
    let (group, t) = (tid / T, tid % T);
    let k = block_idx_x();
    let quads = width.div_ceil(4);
    let stride = 4 * quads;
    let aligned = width.is_multiple_of(4);
    let (n, inv_n) = (width as f32, 1.0 / width as f32);
    let start = k * chunk_rows;
    let end = rows.min(start + chunk_rows);
    let col = |i: usize| 4 * (t + T * i as u32);
    // Every quad is loaded, those past the row from its last quad and
    // then dropped, so that the loads issue together without branches.
    let at = |i: usize| col(i).min(stride - 4);
    let keep = |v: F32x4, i: usize, ok: bool| if ok && col(i) < width { v } else { F32x4::ZERO };
    // gamma is read again for each row (an L1 hit after the first): held,
    // its 4Q registers would cost the SM a block.
    let gam = |i: usize| keep(unsafe { load_quad(gamma, at(i), at(i), width, aligned) }, i, true);
    let (mut pg, mut pb) = ([F32x4::ZERO; Q], [F32x4::ZERO; Q]);
    let mut slot = 0;
    let mut next_slot = || {
        slot ^= SLOT_BYTES;
        slot
    };
    // Row `r`'s quads of x and dy and its saved statistics (or its first
    // element, the shift). A row past the chunk (or the matrix) loads the
    // chunk's last row and is dropped: no stores, zeros in the column sums.
    let load = |r: u32| {
        let base = r.min(end - 1) * width;
        let (mut xs, mut ds) = ([F32x4::ZERO; Q], [F32x4::ZERO; Q]);
        each::<Q>(|i| unsafe {
            xs[i] = load_quad(x, base + at(i), at(i), width, aligned);
            ds[i] = keep(load_quad(dy, base + at(i), at(i), width, aligned), i, r < end);
        });
        let saved = if SAVED {
            let r = r.min(end - 1);
            unsafe { (ld_nc(stats, 3 * r), ld_nc(stats, 3 * r + 1), ld_nc(stats, 3 * r + 2)) }
        } else {
            (unsafe { ld_nc(x, base) }, 0.0, 0.0)
        };
        (xs, ds, saved)
    };
    let mut r = start + group;
    // Where a block holds one row (`R = 1`, the widest rows) the next
    // row's loads are issued before this row's reductions, so that their
    // latency overlaps this row's barriers and arithmetic: the SM holds one
    // or two such blocks, and the registers allow it (`tests/resources.rs`).
    // The narrower entries hold more rows a block and more blocks an SM,
    // which the prefetch's 16 or more registers would cost them.
    let prefetch = R == 1;
    let mut held = if prefetch { load(r) } else { ([F32x4::ZERO; Q], [F32x4::ZERO; Q], (0.0, 0.0, 0.0)) };
    while r < start + chunk_rows {
        let (xs, ds, saved) = if prefetch {
            let this = held;
            held = load(r + R);
            this
        } else {
            load(r)
        };
        let active = r < end;
        let base = r.min(end - 1) * width;
        // x − shift − centre, masked, and rstd.
        let (shift, centre, rstd) = if SAVED {
            saved
        } else {
            let shift = saved.0;
            let mut s = 0.0;
            each::<Q>(|i| s += masked(xs[i], col(i), width, |a| a - shift).sum());
            let mean0 = group_sums::<T, 1>([s], next_slot())[0] * inv_n;
            let (mut sd, mut sd2) = (0.0, 0.0);
            each::<Q>(|i| {
                let d = masked(xs[i], col(i), width, |a| a - shift - mean0);
                sd += d.sum();
                sd2 += d.zip(d, |a, b| a * b).sum();
            });
            let [sd, sd2] = group_sums::<T, 2>([sd, sd2], next_slot());
            let centre = mean0 + sd / n;
            let var = ((sd2 - sd * sd / n) / n).max(0.0);
            (shift, centre, 1.0 / sqrt(var + eps))
        };
        // x̂ is formed where it is used (twice), not held.
        let xhat = |i: usize| masked(xs[i], col(i), width, |a| (a - shift - centre) * rstd);
        let (mut sg, mut sgx) = (0.0, 0.0);
        each::<Q>(|i| {
            let g = ds[i].zip(gam(i), |d, w| d * w);
            sg += g.sum();
            sgx += g.zip(xhat(i), |g, h| g * h).sum();
        });
        let [sg, sgx] = group_sums::<T, 2>([sg, sgx], next_slot());
        let (mean_g, mean_gx) = (sg * inv_n, sgx * inv_n);
        each::<Q>(|i| {
            let h = xhat(i);
            if active && col(i) < width {
                let g = ds[i].zip(gam(i), |d, w| d * w);
                let out = g.zip(h, |g, h| rstd * (g - mean_g - h * mean_gx));
                unsafe { store_quad(dx, base + col(i), col(i), width, aligned, out) };
            }
            pg[i] = pg[i].zip(ds[i].zip(h, |d, h| d * h), |a, b| a + b);
            pb[i] = pb[i].zip(ds[i], |a, b| a + b);
        });
        r += R;
    }
    // The groups' sums added in group order, spread over the block: sum
    // `o = j·T + t'` (`j < 2Q`) is quad `j mod Q` of thread `t'`,
    // dgamma's (`j < Q`) or dbeta's.
    let region = 2 * SLOT_BYTES;
    let half = Q as u32 * R * T * 16;
    if R > 1 {
        publish_quads(region, &pg, group, t, T, R);
        publish_quads(region + half, &pb, group, t, T, R);
        sync_threads();
        let mut o = tid;
        while o < 2 * Q as u32 * T {
            let (kind, q) = (o / (Q as u32 * T), o % (Q as u32 * T));
            let c = 4 * (q % T + T * (q / T));
            if c < stride {
                unsafe { st4(partials, (2 * k + kind) * stride + c, group_total(region + kind * half, q, T, R)) };
            }
            o += R * T;
        }
    } else {
        each::<Q>(|i| {
            if col(i) < stride {
                unsafe {
                    st4(partials, 2 * k * stride + col(i), pg[i]);
                    st4(partials, (2 * k + 1) * stride + col(i), pb[i]);
                }
            }
        });
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use mage_common::Kernel;

    /// One kernel entry of a stage: blocks of `rows` groups of `threads`
    /// threads, each thread holding `quads` quads of its group's row.
    #[derive(Clone, Copy, Debug)]
    pub struct Entry {
        pub threads: u32,
        pub quads: u32,
        pub rows: u32,
        /// The most registers a thread may take: what `blocks_per_sm`
        /// counts on; `tests/resources.rs` holds ptxas to it.
        pub registers: u32,
        /// Blocks an SM holds at `registers` (65536 an SM).
        pub blocks_per_sm: u32,
        pub kernel: &'static Kernel,
    }

    impl Entry {
        /// The widest row it covers.
        pub fn max_width(&self) -> u32 {
            self.threads * self.quads * 4
        }
        /// Threads of its block.
        pub fn block(&self) -> u32 {
            self.threads * self.rows
        }
    }

    /// SMs of the H200 the chunk rule fills.
    pub const SMS: u32 = 132;

    /// Whether some entry covers the dims' width.
    pub fn entries_support(entries: &[Entry], d: &[u32]) -> bool {
        entries.iter().any(|e| e.max_width() >= d[1])
    }

    /// The narrowest entry covering `width`.
    pub fn entry_for(entries: &[Entry], width: u32) -> &Entry {
        entries.iter().find(|e| e.max_width() >= width).expect("supports() bounds the width")
    }

    /// Rows per chunk: a multiple of the entry's `rows`, so that the chunks
    /// (a block each) are about one wave of the blocks the SMs hold.
    pub fn chunk_rows(e: &Entry, rows: u32) -> u32 {
        let per = rows.div_ceil(SMS * e.blocks_per_sm);
        per.div_ceil(e.rows).max(1) * e.rows
    }
}
