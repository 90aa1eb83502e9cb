//! layernorm_backward mage-005: mage-003's one pass with the rows streamed
//! through a three-row `cp.async` ring in shared memory, one reduction and
//! one barrier a row.
//!
//! Kernel body: this module ([`ring_gradient`]), over
//! [`quads`](super::quads) (gamma's quad loads, the masks), with
//! mage-003's second kernel ([`totals`](super::totals):
//! `layernorm_backward_totals`).
//!
//! What changed against mage-003, whose rows of 4096 take ~3.4 µs a row an
//! SM where the bytes need ~1.6 (`results/backward-3`): there one
//! 512-thread block an SM holds a row and a register prefetch of the next,
//! 32 KB of x and dy in flight, and each row waits on three block-wide
//! reductions (the shifted mean, then `Σ d` and `Σ d²`, then `Σ g` and
//! `Σ g·x̂`) and on gamma, loaded again each row from L1 or L2 between the
//! second and the third. Here:
//!
//! * **Rows in flight.** A block walks its chunk of rows one row at a
//!   time, all its threads on that row, through a ring of [`RING`] rows of
//!   x and dy in shared memory: while it reduces row `j`, row `j + 1` is
//!   being copied, and row `j + 2` is requested behind row `j`'s barrier
//!   (`cp.async.ca`, 16 bytes a copy where the width is a multiple of 4, 4
//!   bytes where not). Every entry holds 16 warps and 192 KB of ring an SM:
//!   at width 4096 two 256-thread blocks of 96 KB, so two to four rows of
//!   x and dy (64 to 128 KB) in flight an SM, against the ~50 KB that
//!   32 GB/s an SM (its share of ~4.2 TB/s) at ~1.5 µs of loaded DRAM
//!   latency needs. Registers no longer hold the rows: x and dy are read
//!   from the ring in each of the row's three passes.
//! * **No barrier for the ring.** Thread `t` copies the quads `t + T·i` of
//!   x and dy that it alone reads, so its own `cp.async.wait_group` makes
//!   them visible to it; the slot it refills (row `j − 1`'s) it last read
//!   before row `j`'s barrier, behind which the refill is issued. What is
//!   never copied (quads past the width, and in the column-by-column
//!   kernels the columns of the row's last quad past it) is zeroed once
//!   and stays zero.
//! * **One reduction a row.** Each warp takes its lane 0's first element
//!   as its shift `s_w` and reduces, with one butterfly, `Σ (x − s_w)` for
//!   its mean `m_w`, then with a second its centred moment
//!   `M2_w = Σ (x − s_w − m_w)²`, `G_w = Σ g` and the co-moment
//!   `C_w = Σ g·(x − s_w − m_w)` (`g = dy·gamma`). Lane 0 publishes them
//!   behind the row's one barrier, and lane `l` of every warp takes warp
//!   `l mod W`'s part and adds the `W` parts with a `log2 W`-step
//!   butterfly, no division: with `c_v = (s_v − s_0) + m_v` the warp's
//!   centre about warp 0's shift, `mean = Σ n_v c_v / n`,
//!   `M2 = Σ M2_v + n_v (c_v − mean)²`, `Σ g`, and
//!   `Σ g·(x − s_0 − mean) = Σ C_v + (c_v − mean)·G_v`, which is `Σ g·x̂`
//!   over `rstd`. The statistics and both means dx needs come from that one
//!   merge, every term centred (no `Σ x²` cancellation; rows of mean 1e4
//!   and spread 1 hold as they do in mage-003, `tests/backward.rs`), and
//!   every lane of the block gets the same bits.
//! * **Nothing global in the row's chain.** gamma is loaded once into
//!   registers (the column-by-column kernels read it again each row, an L1
//!   hit: its registers would pass their budget); dx is stored from
//!   registers; dgamma's and dbeta's partial sums stay in registers over
//!   the chunk and are written once a block to the scratch
//!   `[chunks, 2, ⌈width/4⌉·4]` that mage-003's totals kernel adds in chunk
//!   order: dgamma and dbeta are the same bits on every run, no
//!   floating-point atomics.
//!
//! Barriers: each iteration of the row loop has exactly one `bar.sync`,
//! and the loop's trip count is the chunk's row count, `min(rows, start +
//! chunk_rows) − start`, from the block index alone: every thread of the
//! block runs the same iterations and reaches every barrier; no barrier
//! is anywhere else. The copies are guarded per thread (quads past the
//! row not copied), and every thread commits one copy group a row, empty
//! or not, so the `cp.async.wait_group` count means the same row in every
//! thread. The warps' parts alternate between two slot sets, so a row's
//! writes cannot meet the previous row's reads.
//!
//! The entries ([`ENTRIES`], narrowest first; four quads a thread; each a
//! kernel for widths a multiple of 4 and one copying column by column;
//! shared bytes from [`shared_bytes`]; registers from `tests/resources.rs`,
//! ptxas 13.0.88, no spills, no local memory, one barrier): 64 threads up
//! to width 1024 (24,704 B, 8 blocks an SM), 128 up to 2048 (49,408 B, 4),
//! 256 up to 4096 (98,816 B, 2) and 512 up to 8192 (197,632 B, 1); 116
//! registers in the 16-byte kernels and 124 in the others, against the
//! budget of 128 that 16 warps an SM need. Rows per chunk
//! ([`chunk_rows`]): one wave of the blocks the SMs hold, and at least
//! four, so that the partials stay a fraction of the bytes.
//!
//! Prediction (H200, ~4.2 TB/s HBM, 50 MB L2, hot). The forward's
//! try-ln-pipe, a ring like this one, ran 10% behind mage-010 at
//! 16384x4096, ~1.13x its 537 MB at the 4.19 TB/s of the backward's copy
//! floor (`docs/attempts.md`), its loss in each row's wait on its
//! reduction; here a thread issues ~510 instructions a row (three passes
//! over its 16 columns, 33 shuffles at 256 threads, the merge), so a row
//! of 4096 costs an SM ~1,000 issue cycles against the ~2,800 its 48 KB
//! take at its share of HBM, and two blocks an SM overlap each other's
//! barrier. So about the same 1.13x:
//!
//! * 16384x4096 (805 MB; 261 chunks of 63 rows, 8.6 MB of partials):
//!   ~217 µs plus ~3 of totals: ~220 µs (1.15x the floor's 191.91)
//!   against mage-003's 428.20 and torch.compile's 222.27.
//! * 4096x4096 (201 MB; 256 chunks of 16 rows, 8.4 MB of partials):
//!   ~57 µs plus ~2.5 of totals: ~60 µs against torch.compile's 103.87
//!   and mage-003's 114.89.
//! * 1024x2048 (25 MB, hot in L2; 256 chunks of 4 rows, two blocks of four
//!   warps an SM, two of a chunk's rows requested before its first is
//!   reduced and the third behind its barrier): ~4.5 µs, the rows' chains
//!   more than the bytes, plus ~2 of totals: ~7 µs against eager's 11.26
//!   and mage-003's 14.16.
//! * 4096x768 and 8192x768 (1024 chunks of 4 and 8 rows, 6.3 MB of
//!   partials; not what it is for): ~15 and ~29 µs against mage-003's
//!   20.46 and 39.19.
//!
//! Measured (`results/backward-5`, one H200, CUPTI kernel time, hot L2,
//! every stage at the default dims, `current`, mage-003 and this stage at
//! the sweep shapes, one session): about twice mage-003's speed at width
//! 4096 (213.63 µs at 16384x4096, 1.11x the copy floor, within the 1.2x
//! the gradient's target asks, and level with torch.compile's 221.76;
//! 59.16 at 4096x4096 against compile's 104.23), 0.79x mage-003 at
//! 1024x2048 (11.36, level with eager's 11.24), 0.84x at 8192x768, and
//! level with it at 4096x768 (19.44 against 18.89), so `current` takes it
//! for rows wider than 768 or more than 4096 of them. The prediction held
//! at width 4096 (220 and 60 predicted) and missed at the narrower shapes
//! (7 predicted at 1024x2048, 15 at 4096x768): there the totals kernel and
//! the chunks' fill, not the ring, set the time.
//!
//! <!-- mage:table compare results/backward-5/comparison.json ops=layernorm_backward stages=mage-003,mage-005 -->
//! | op | workload | Mage current | rust mage-003 | rust mage-005 | torch | torch_compile | floor | Mage / floor |
//! |---|---|---|---|---|---|---|---|---|
//! | layernorm_backward | 4096x768 | 19.73 (2) mage-003 | **18.89** (2) | 19.44 (2) | 24.29 (2) | 23.20 (4) | 13.29 | 1.48 |
//! | layernorm_backward | 8192x768 | 39.73 (2) mage-003 | 39.62 (2) | **33.26** (2) | 62.32 (2) | 45.37 (3) | 23.09 | 1.72 |
//! | layernorm_backward | 1024x2048 | 14.10 (2) mage-003 | 13.99 (2) | 11.36 (2) | **11.24** (2) | 15.91 (4) | 8.35 | 1.69 |
//! | layernorm_backward | 4096x4096 | 116.13 (2) mage-003 | 115.96 (2) | **59.16** (2) | 116.50 (2) | 104.23 (4) | 50.38 | 2.30 |
//! | layernorm_backward | 16384x4096 | 433.34 (2) mage-003 | 433.73 (2) | **213.63** (2) | 434.02 (2) | 221.76 (3) | 192.73 | 2.25 |
//! <!-- /mage:table -->
//!
//! <!-- mage:table verdicts results/backward-5/comparison.json ops=layernorm_backward a=mage-005 -->
//! | op | workload | L2 | instrument | A | B | A/B median [spread] | verdict |
//! |---|---|---|---|---|---|---|---|
//! | layernorm_backward | 4096x768 | hot | kernel time | rust mage-005 | rust mage-003 | 1.019 [1.018, 1.022] | SAME |
//! | layernorm_backward | 8192x768 | hot | kernel time | rust mage-005 | rust mage-003 | 0.838 [0.837, 0.839] | FASTER |
//! | layernorm_backward | 1024x2048 | hot | kernel time | rust mage-005 | rust mage-003 | 0.792 [0.790, 0.794] | FASTER |
//! | layernorm_backward | 4096x4096 | hot | kernel time | rust mage-005 | rust mage-003 | 0.509 [0.507, 0.510] | FASTER |
//! | layernorm_backward | 16384x4096 | hot | kernel time | rust mage-005 | rust mage-003 | 0.495 [0.493, 0.495] | FASTER |
//! <!-- /mage:table -->

use super::quads::{each, load_quad, masked};
use mage_common::device::*;

/// Rows of x and dy a block's ring holds: the one being reduced, the next
/// (in flight), and the one after it, requested behind the row's barrier.
pub const RING: u32 = 3;
/// Quads of its row each thread holds.
pub const QUADS: usize = 4;
/// Bytes of one warp's part of a row's reduction: `(s_w, m_w, n_w, G_w)`
/// and `(M2_w, C_w, 0, 0)`.
const PART_BYTES: u32 = 32;

/// Shared bytes of a block of `threads` threads: two slot sets of the
/// warps' parts, then the ring (`RING` rows of x and dy, `16·QUADS` bytes
/// a thread each).
pub const fn shared_bytes(threads: u32) -> u32 {
    2 * (threads / 32) * PART_BYTES + RING * 2 * 16 * threads * QUADS as u32
}

/// Declares the kernel entries, `name, scalar name => (threads, registers,
/// blocks an SM)` each running [`ring_gradient`] with `threads` threads
/// (16-byte copies, and column by column), and on the host their
/// [`Entry`] table and the stage's kernels.
macro_rules! ring_entries {
    ($($name:ident, $scalar:ident => ($t:literal, $regs:literal, $b:literal)),* $(,)?) => {
        $(mage_common::kernel! {
            #[doc = concat!("Blocks of ", stringify!($t), " threads walking a chunk of rows through a three-row ring; rows a multiple of 4 wide.")]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(x: *const f32, gamma: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32, eps: f32) {
                unsafe { ring_gradient::<$t, QUADS, true>(x, gamma, dy, dx, partials, rows, width, chunk_rows, eps) }
            }
        }
        mage_common::kernel! {
            #[doc = concat!("As [`", stringify!($name), "`], rows of any width, copied column by column.")]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $scalar(x: *const f32, gamma: *const f32, dy: *const f32, dx: *mut f32, partials: *mut f32, rows: u32, width: u32, chunk_rows: u32, eps: f32) {
                unsafe { ring_gradient::<$t, QUADS, false>(x, gamma, dy, dx, partials, rows, width, chunk_rows, eps) }
            }
        })*

        /// The entries, narrowest rows first.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[Entry] = &[$(Entry {
            threads: $t,
            registers: $regs,
            blocks_per_sm: $b,
            kernel: &$name::KERNEL,
            scalar: &$scalar::KERNEL,
        }),*];

        /// Every kernel entry of the stage, the totals last.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static KERNELS: &[&mage_common::Kernel] =
            &[$(&$name::KERNEL, &$scalar::KERNEL,)* &super::totals::layernorm_backward_totals::KERNEL];
    };
}

ring_entries! {
    layernorm_backward_ring_64, layernorm_backward_ring_64_scalar => (64, 128, 8),
    layernorm_backward_ring_128, layernorm_backward_ring_128_scalar => (128, 128, 4),
    layernorm_backward_ring_256, layernorm_backward_ring_256_scalar => (256, 128, 2),
    layernorm_backward_ring_512, layernorm_backward_ring_512_scalar => (512, 128, 1),
}

/// The body of every entry: block `k` (`block_idx_x()`) walks rows
/// `k·chunk_rows ..` (at most `chunk_rows`, fewer in the last chunk), one
/// at a time with all `T` threads, thread `t` holding quads `t + T·i`
/// (`i < Q`) of gamma, and of x and dy in the ring; then writes its
/// partial rows of dgamma and dbeta. `V`: the width is a multiple of 4,
/// every copy 16 bytes; else each column is copied alone (the columns of
/// the row's last quad past the width zero, never copied) and gamma read
/// again each row.
///
/// # Safety
/// `x`, `dy` and `dx` hold `rows × width` floats, `gamma` `width`,
/// `partials` `2·chunks·⌈width/4⌉·4` (`chunks = ⌈rows/chunk_rows⌉` blocks
/// in the grid), all 16-byte aligned; `1 <= width <= 4·T·Q`, a multiple
/// of 4 with `V`; the block has `T` threads and [`shared_bytes`]`(T)`
/// bytes of shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn ring_gradient<const T: u32, const Q: usize, const V: bool>(
    x: *const f32,
    gamma: *const f32,
    dy: *const f32,
    dx: *mut f32,
    partials: *mut f32,
    rows: u32,
    width: u32,
    chunk_rows: u32,
    eps: f32,
) {
    const { assert!(T.is_multiple_of(32) && T <= 1024 && Q == QUADS) };
    let t = thread_idx_x();
    let (w, warps) = (t / 32, T / 32);
    let k = block_idx_x();
    let stride = 4 * width.div_ceil(4);
    let inv_n = 1.0 / width as f32;
    let start = k * chunk_rows;
    // The same in every thread of the block: the row loop's trip count.
    let count = rows.min(start + chunk_rows) - start;
    let col = |i: usize| 4 * (t + T * i as u32);
    let held = |i: usize| col(i) < width;
    // `v` with the columns past the width zeroed: whole quads where the
    // width is a multiple of 4, else column by column.
    let keep = |v: F32x4, i: usize| {
        if V { if held(i) { v } else { F32x4::ZERO } } else { masked(v, col(i), width, |a| a) }
    };
    // The warp's elements of a row: quads `32w + T·i ..` (32 a step) for
    // each `i`, those below the width.
    let mut n_w = 0;
    for i in 0..Q as u32 {
        n_w += width.saturating_sub(4 * (32 * w + T * i)).min(128);
    }
    let inv_nw = if n_w > 0 { 1.0 / n_w as f32 } else { 0.0 };
    // gamma's quads: held in registers with `V`; without, read again each
    // row (an L1 hit), as the column-by-column copies and stores take the
    // registers.
    let load_gamma = |i: usize| if held(i) { unsafe { load_quad(gamma, col(i), col(i), width, V) } } else { F32x4::ZERO };
    let mut held_gamma = [F32x4::ZERO; Q];
    if V {
        each::<Q>(|i| held_gamma[i] = load_gamma(i));
    }
    let gam = |i: usize| if V { held_gamma[i] } else { load_gamma(i) };
    // Quad `i` of array `a` (x 0, dy 1) in ring slot `s`: this thread's.
    let ring = 2 * warps * PART_BYTES;
    let at = |s: u32, a: u32, i: usize| ring + 16 * (((s * 2 + a) * Q as u32 + i as u32) * T + t);
    // What is never copied (the quads past the width, and with `V` false
    // the columns of the row's last quad past it) is zeroed once, in every
    // slot, and stays zero.
    for s in 0..RING {
        each::<Q>(|i| {
            for a in 0..2 {
                if !held(i) {
                    smem_st4(at(s, a, i), F32x4::ZERO);
                } else if !V {
                    for e in 0..4 {
                        if col(i) + e >= width {
                            smem_st(at(s, a, i) + 4 * e, 0.0);
                        }
                    }
                }
            }
        });
    }
    // Row `j` of the chunk into ring slot `j mod RING`: this thread's
    // quads only, so that no other thread reads what it copies.
    let issue = |j: u32| {
        let (s, base) = (j % RING, (start + j) * width);
        each::<Q>(|i| {
            if held(i) {
                let at0 = base + col(i);
                unsafe {
                    if V {
                        cp_async_ca_16(at(s, 0, i), x, at0);
                        cp_async_ca_16(at(s, 1, i), dy, at0);
                    } else {
                        for e in 0..4 {
                            if col(i) + e < width {
                                cp_async_ca_4(at(s, 0, i) + 4 * e, x, at0 + e);
                                cp_async_ca_4(at(s, 1, i) + 4 * e, dy, at0 + e);
                            }
                        }
                    }
                }
            }
        });
    };
    // One copy group a row, committed in row order, empty past the chunk.
    for j in 0..RING - 1 {
        if j < count {
            issue(j);
        }
        cp_async_commit();
    }
    // Lane `l` holds warp `l mod W`'s part; each group of W lanes adds
    // them with a butterfly, so every lane of every warp has the same bits.
    let group_sum = |mut v: f32| {
        let mut m = warps / 2;
        while m > 0 {
            v += shuffle_xor(v, m);
            m /= 2;
        }
        v
    };
    let (mut pg, mut pb) = ([F32x4::ZERO; Q], [F32x4::ZERO; Q]);
    let mut j = 0;
    while j < count {
        // Row j's group is complete once at most the RING − 2 committed
        // after it are pending.
        cp_async_wait_group::<{ RING - 2 }>();
        let s = j % RING;
        let quad = |a: u32, i: usize| smem_ld4(at(s, a, i));
        // The warp's part: its shift (lane 0's first element), mean,
        // centred moment, Σ g and co-moment. Past the width x and dy are
        // zero, so g is, and `keep` drops x's terms.
        let s_w = shuffle_idx(quad(0, 0).x, 0);
        let mut sd = 0.0;
        each::<Q>(|i| sd += keep(quad(0, i).map(|a| a - s_w), i).sum());
        let m_w = warp_sum(sd) * inv_nw;
        // Centred on the warp's own mean, as the forward's warp parts
        // (`held_rows::warp_part`): an error in m_w moves C_v and the
        // merge's centre c_v alike, and M2 only by its square.
        let (mut m2, mut sg, mut cg) = (0.0, 0.0, 0.0);
        each::<Q>(|i| {
            let e = quad(0, i).map(|a| a - s_w - m_w);
            let g = quad(1, i).zip(gam(i), |d, w| d * w);
            for (e, (g, ek)) in e.to_array().into_iter().zip(g.to_array().into_iter().zip(keep(e, i).to_array())) {
                m2 = fma(ek, ek, m2);
                sg += g;
                cg = fma(g, e, cg);
            }
        });
        let (m2, sg, cg) = (warp_sum(m2), warp_sum(sg), warp_sum(cg));
        let slot = (j % 2) * warps * PART_BYTES;
        if lane_id() == 0 {
            smem_st4(slot + w * PART_BYTES, F32x4::new(s_w, m_w, n_w as f32, sg));
            smem_st4(slot + w * PART_BYTES + 16, F32x4::new(m2, cg, 0.0, 0.0));
        }
        sync_threads();
        // Slot `(j + RING − 1) mod RING` held row `j − 1`, whose every
        // read by this thread came before the barrier above.
        if j + RING - 1 < count {
            issue(j + RING - 1);
        }
        cp_async_commit();
        // The warps merged about warp 0's shift.
        let s0 = smem_ld(slot);
        let part = slot + (lane_id() % warps) * PART_BYTES;
        let (p, q) = (smem_ld4(part), smem_ld4(part + 16));
        let c = (p.x - s0) + p.y;
        let mean = group_sum(p.z * c) * inv_n;
        let delta = c - mean;
        // n_v·δ·δ, left to right: zero for a warp with no elements.
        let m2 = group_sum(q.x + p.z * delta * delta);
        let sg = group_sum(p.w);
        let cg = group_sum(fma(delta, p.w, q.y));
        let rstd = 1.0 / sqrt(m2 * inv_n + eps);
        let (mean_g, mean_gx) = (sg * inv_n, cg * rstd * inv_n);
        let base = (start + j) * width;
        each::<Q>(|i| {
            let (xq, dq) = (quad(0, i), quad(1, i));
            let h = keep(xq.map(|a| (a - s0 - mean) * rstd), i);
            let g = dq.zip(gam(i), |d, w| d * w);
            let out = g.zip(h, |g, h| rstd * fma(-h, mean_gx, g - mean_g));
            if held(i) {
                unsafe {
                    if V {
                        st4(dx, base + col(i), out);
                    } else {
                        for (e, v) in out.to_array().into_iter().enumerate() {
                            if col(i) + (e as u32) < width {
                                st(dx, base + col(i) + e as u32, v);
                            }
                        }
                    }
                }
            }
            pg[i] = dq.zip3(h, pg[i], fma);
            pb[i] = pb[i].zip(dq, |a, b| a + b);
        });
        j += 1;
    }
    each::<Q>(|i| {
        if col(i) < stride {
            unsafe {
                st4(partials, 2 * k * stride + col(i), pg[i]);
                st4(partials, (2 * k + 1) * stride + col(i), pb[i]);
            }
        }
    });
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::backward::held_gradient::SMS;
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan, Stage};

    /// One kernel entry: blocks of `threads` threads, [`QUADS`] quads a
    /// thread; `kernel` for widths a multiple of 4, `scalar` for the others.
    #[derive(Clone, Copy, Debug)]
    pub struct Entry {
        pub threads: u32,
        /// The most registers a thread of either kernel may take: what
        /// `blocks_per_sm` counts on; `tests/resources.rs` holds ptxas to it.
        pub registers: u32,
        /// Blocks an SM holds, by registers and by shared memory
        /// ([`shared_bytes`] each).
        pub blocks_per_sm: u32,
        pub kernel: &'static Kernel,
        pub scalar: &'static Kernel,
    }

    impl Entry {
        /// The widest row it covers.
        pub fn max_width(&self) -> u32 {
            4 * self.threads * QUADS as u32
        }
        /// The kernel for rows of `width`.
        pub fn kernel_for(&self, width: u32) -> &'static Kernel {
            if width.is_multiple_of(4) { self.kernel } else { self.scalar }
        }
    }

    /// The fewest rows a chunk takes (where one wave would give fewer):
    /// at 1024x2048 one wave of 528 blocks would write 8.4 MB of partials
    /// for 25 MB of rows; four rows a chunk halve that.
    pub const MIN_CHUNK_ROWS: u32 = 4;

    /// The widest row of the widest entry.
    pub fn max_width() -> u32 {
        ENTRIES.last().expect("entries").max_width()
    }

    /// The narrowest entry covering `width`.
    pub fn entry_for(width: u32) -> &'static Entry {
        ENTRIES.iter().find(|e| e.max_width() >= width).expect("supports() bounds the width")
    }

    /// Rows per chunk: the chunks (a block each) about one wave of the
    /// blocks the SMs hold, and at least [`MIN_CHUNK_ROWS`].
    pub fn chunk_rows(e: &Entry, rows: u32) -> u32 {
        rows.div_ceil(SMS * e.blocks_per_sm).max(MIN_CHUNK_ROWS)
    }

    /// The two launches: the ring kernel over `⌈rows/chunk⌉` blocks, then
    /// the totals over their partial rows.
    pub fn plan(d: &[u32]) -> Plan {
        plan_with_chunks(d, chunk_rows(entry_for(d[1]), d[0]))
    }

    /// [`plan`] with `per` rows a chunk (tests walk the ring through many
    /// rows on few blocks).
    pub fn plan_with_chunks(d: &[u32], per: u32) -> Plan {
        let (rows, width) = (d[0], d[1]);
        let e = entry_for(width);
        let chunks = rows.div_ceil(per);
        let stride = width.div_ceil(4) * 4;
        Plan {
            launches: vec![
                Launch {
                    kernel: e.kernel_for(width),
                    grid: Dim3::x(chunks),
                    block: Dim3::x(e.threads),
                    shared_bytes: shared_bytes(e.threads),
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
                        Arg::F32(crate::EPS),
                    ],
                },
                crate::backward::totals::totals_launch(chunks, width),
            ],
            scratch: vec![(2 * chunks * stride) as usize],
        }
    }

    pub static STAGE: Stage = Stage {
        name: "mage-005",
        summary: "mage-003's one pass with rows streamed through a three-row cp.async ring in shared memory, one fused reduction and one barrier a row",
        kernels: KERNELS,
        supports: |d| d[1] <= max_width(),
        plan,
    };
}
