//! K in slices over the 3xTF32 product on 16-byte rows: matmul mage-011's
//! split, shared with matmul_tn mage-005 (which runs it on A transposed
//! into scratch) and matmul_nt mage-003 (which runs it with B `[n, k]`).
//! What it does and why, its cost model and its error analysis are in
//! [`crate::mage_011`]'s module doc; the stages own their kernel entries
//! (each calls `slice`, `slice_nt`, `add_padded_slices` or
//! [`crate::split_k`]'s `add_flat_slices`).
//!
//! Here: the device side, a block's product over its slice of K
//! ([`crate::tf32x3`]'s body with the [`crate::tf32x3::KSliceByN`]
//! layout: A `[m, k]` read in a window of its rows; or with
//! [`crate::tf32x3::NSliceByK`], B `[n, k]` read in a window of its rows
//! too) and the totals of partials `m` x `n4` into C's `n` columns
//! ([`crate::split_k`]'s in-order sum); on the host, the dims the product
//! runs on ([`padded`], [`BLayout::columns`]), the cost model
//! ([`estimate_ns`]), the rule it gives ([`split`]) and the plan of the
//! padding, product and totals launches ([`plan_with`]), given the
//! stage's entries, the layout of B they read and where A comes from
//! ([`AFrom`]); and that model's rule at one tile height
//! ([`slice_k_at_rows`], matmul_tn mage-006's through
//! [`crate::cluster_totals`]).

use crate::split_k::{add_slices, store_flat};
use crate::tf32x3::{KSliceByN, Layout, NSliceByK, Tile, body_with_a_rows};

/// The product over slice `block_idx_y()` of K (`slice_k` long, the last
/// one what is left of `k`) in layout `L`: A moved to the slice's first
/// column (its rows stay `k` apart), B by `k0·b_per_k` floats (`k0` the
/// slice's first term), the output to partial `block_idx_y()`, then
/// mage-009's body over the slice.
///
/// # Safety
/// As [`slice`] or [`slice_nt`], B as `L` lays it out.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn slice_in<T: Tile, L: Layout>(
    a: *const f32,
    b: *const f32,
    partials: *mut f32,
    m: u32,
    n: u32,
    k: u32,
    slice_k: u32,
    b_per_k: u32,
) {
    let s = mage_common::device::block_idx_y();
    let k0 = s * slice_k;
    let len = slice_k.min(k - k0);
    let a = a.wrapping_add(k0 as usize);
    let b = b.wrapping_add(k0 as usize * b_per_k as usize);
    let c = partials.wrapping_add(s as usize * m as usize * n as usize);
    unsafe { body_with_a_rows::<true, T, L>(a, b, c, m, n, len, k) }
}

/// The product over slice `block_idx_y()` of K (`slice_k` long, the last
/// one what is left of `k`): A moved to the slice's first column (its rows
/// stay `k` apart), B to its first row, the output to partial
/// `block_idx_y()`, then mage-009's body over the slice.
///
/// # Safety
/// `a`, `b` hold A `[m, k]` and B `[k, n]`, `n` and `k` multiples of 4;
/// `partials` holds `⌈k / slice_k⌉·m·n` floats; `slice_k` a multiple of 4;
/// `block_idx_y() < ⌈k / slice_k⌉`.
#[inline(always)]
pub(crate) unsafe fn slice<T: Tile>(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
    unsafe { slice_in::<T, KSliceByN>(a, b, partials, m, n, k, slice_k, n) }
}

/// [`slice`] with B `[n, k]` ([`crate::tf32x3::NSliceByK`]): B moved to
/// the slice's first column (`k0` floats, its rows stay `k` apart, as
/// A's), then matmul_nt mage-002's body over the slice, its partial stored
/// by the element on C's own `n` columns.
///
/// # Safety
/// `a`, `b` hold A `[m, k]` and B `[n, k]`, `k` a multiple of 4;
/// `partials` holds `⌈k / slice_k⌉·m·n` floats; `slice_k` a multiple of 4;
/// `block_idx_y() < ⌈k / slice_k⌉`.
#[inline(always)]
pub(crate) unsafe fn slice_nt<T: Tile>(a: *const f32, b: *const f32, partials: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
    unsafe { slice_in::<T, NSliceByK>(a, b, partials, m, n, k, slice_k, 1) }
}

/// `c[i, j] = Σ_s partials[s][i, j]` for C `[m, n]`, the partials `m` x
/// `n4` each (`n4 = ⌈n/4⌉·4`): quads of the partials in
/// [`crate::split_k`]'s order (`groups` segments of the `slices`), each
/// total stored in one 16-byte store where `n` is a multiple of 4, else by
/// the element, C's `n` columns of the partials' `n4`.
///
/// # Safety
/// `partials` holds `slices·m·n4` floats, `c` the `m·n` output;
/// [`crate::split_k::TOTALS_SHARED_BYTES`] of shared memory.
#[inline(always)]
pub(crate) unsafe fn add_padded_slices(partials: *const f32, c: *mut f32, m: u32, n: u32, slices: u32, groups: u32) {
    let n4 = n.next_multiple_of(4);
    let len = m * n4;
    if n == n4 {
        unsafe { add_slices::<true>(partials, len, slices, groups, |i, v| store_flat::<true>(c, len, i, v)) }
    } else {
        unsafe { add_slices::<true>(partials, len, slices, groups, |i, v| crate::store_quad::<false>(c, i / n4, m, i % n4, n, v)) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use crate::split_k::{total_groups, totals_launch, totals_ns};
    use crate::tf32x3::{BK, BN, SMS, THREADS, resize, shared_bytes, tile_rows};
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};

    /// Slice lengths of the rule are a multiple of this: two K tiles, one
    /// trip of the body's loop (and the shortest slice the rule takes).
    pub const SLICE_QUANTUM: u32 = 2 * BK;
    /// The most slices the rule takes.
    pub const MAX_SLICES: u32 = 1024;
    /// The cost model's time of one K tile of a 64x128 block (mage-009's at
    /// 64 rows, 1024³: one wave of 32 tiles in 31.09 µs), ...
    pub const TILE_NS_64: u64 = 900;
    /// ... of a 128x128 block (4096x4096x1024: 8 waves of 32 tiles in
    /// 405.72 µs), ...
    pub const TILE_NS_128: u64 = 1600;
    /// ... and of a block's pipeline fill and stores; the totals launch is
    /// [`crate::split_k::totals_ns`].
    pub const BLOCK_NS: u64 = 2000;

    /// The dims the product runs on: `[m, n4, k4]`, `n` and `k` rounded up
    /// to multiples of 4 (the padded rows).
    pub fn padded(d: &[u32]) -> [u32; 3] {
        [d[0], d[1].next_multiple_of(4), d[2].next_multiple_of(4)]
    }

    /// Output tiles of `rows` x 128 (of the padded dims).
    pub fn tiles(d: &[u32], rows: u32) -> u32 {
        let [m, n4, _] = padded(d);
        m.div_ceil(rows) * n4.div_ceil(BN)
    }

    /// The cost model's time in ns of the dims with tiles of `rows` rows
    /// and slices of `slice_k`: waves of one block per SM, each block its
    /// K tiles (rounded up to even, as the body runs them) and its fill,
    /// and the totals launch where there are two slices or more. The
    /// padding's copies, the same for every choice, are left out.
    pub fn estimate_ns(d: &[u32], rows: u32, slice_k: u32) -> u64 {
        let [m, n4, k4] = padded(d);
        let slices = k4.div_ceil(slice_k) as u64;
        let waves = (tiles(d, rows) as u64 * slices).div_ceil(SMS as u64);
        let tile_ns = if rows == 128 { TILE_NS_128 } else { TILE_NS_64 };
        let block = slice_k.min(k4).div_ceil(BK).next_multiple_of(2) as u64 * tile_ns + BLOCK_NS;
        let totals = if slices > 1 { totals_ns(m as u64 * n4 as u64, slices) } else { 0 };
        waves * block + totals
    }

    /// The tile rows and the K per slice for these dims: of one slice
    /// (`k4`, at mage-009's rows, [`tile_rows`]) and, at 64 and at 128 rows
    /// for every count `s` from 2 to `min(⌈k4 / SLICE_QUANTUM⌉,
    /// MAX_SLICES)`, `⌈k4 / s⌉` rounded up to [`SLICE_QUANTUM`], the one
    /// [`estimate_ns`] puts cheapest (one slice, then 64 rows, then the
    /// longer slice on a tie).
    pub fn split(d: &[u32]) -> (u32, u32) {
        split_at_most(d, MAX_SLICES)
    }

    /// [`split`] among the choices of at most `max_slices` slices: where
    /// [`split`]'s choice has that many or fewer, it.
    pub fn split_at_most(d: &[u32], max_slices: u32) -> (u32, u32) {
        let p = padded(d);
        let k4 = p[2];
        let one = tile_rows(&p);
        let mut best = (estimate_ns(d, one, k4), one, k4);
        for rows in [64, 128] {
            for s in 2..=k4.div_ceil(SLICE_QUANTUM).min(MAX_SLICES) {
                let len = k4.div_ceil(s).next_multiple_of(SLICE_QUANTUM);
                // A count's rounding up may give fewer slices than `s`.
                if k4.div_ceil(len) > max_slices {
                    continue;
                }
                let cost = estimate_ns(d, rows, len);
                if cost < best.0 {
                    best = (cost, rows, len);
                }
            }
        }
        (best.1, best.2)
    }

    /// Slices for these dims.
    pub fn slices(d: &[u32]) -> u32 {
        padded(d)[2].div_ceil(split(d).1)
    }

    /// The K per slice at tiles of `rows` rows only, among the choices of
    /// at most `max_slices` slices: of one slice (`k4`) and, for every
    /// count `s` from 2 to `min(⌈k4 / SLICE_QUANTUM⌉, MAX_SLICES)`, `⌈k4 /
    /// s⌉` rounded up to [`SLICE_QUANTUM`], the one [`estimate_ns`] puts
    /// cheapest (one slice, then the longer slice on a tie): [`split`]'s
    /// model for a product that has one tile height (matmul_tn's
    /// [`crate::tf32x3::AKByM`], 64 rows).
    pub fn slice_k_at_rows(d: &[u32], rows: u32, max_slices: u32) -> u32 {
        let k4 = padded(d)[2];
        let mut best = (estimate_ns(d, rows, k4), k4);
        for s in 2..=k4.div_ceil(SLICE_QUANTUM).min(MAX_SLICES) {
            let len = k4.div_ceil(s).next_multiple_of(SLICE_QUANTUM);
            // A count's rounding up may give fewer slices than `s`.
            if k4.div_ceil(len) > max_slices {
                continue;
            }
            let cost = estimate_ns(d, rows, len);
            if cost < best.0 {
                best = (cost, len);
            }
        }
        best.1
    }

    /// A stage's entries: its slice products at 128 and 64 rows (kernel
    /// arguments `a, b, partials, m, columns, k4, slice_k`, `columns` as
    /// [`BLayout::columns`]) and its totals (`partials, c, m, n, slices,
    /// groups`), the layout of B they read, and its name for messages.
    pub struct Entries {
        pub stage: &'static str,
        pub m128: &'static Kernel,
        pub m64: &'static Kernel,
        pub totals: &'static Kernel,
        pub b: BLayout,
    }

    /// Where the product's B lies, and what follows from it: when the
    /// operands are padded, and on how many columns the product runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BLayout {
        /// B `[k, n]` (matmul's, [`crate::tf32x3::KSliceByN`]): padded to
        /// `[k4, n4]` where `k` or `n` is not a multiple of 4; the product
        /// and its partials on `n4` columns, C's `n` cut from them.
        KByN,
        /// B `[n, k]` (matmul_nt's, [`crate::tf32x3::NSliceByK`]): padded
        /// to `[n, k4]` where `k` is not a multiple of 4; the product
        /// stores by the element, so it and its partials run on C's own
        /// `n` columns.
        NByK,
    }

    impl BLayout {
        /// Whether A and B are read in place: their rows 16-byte (`k`, and
        /// for [`BLayout::KByN`] `n`, multiples of 4).
        pub fn in_place(self, d: &[u32]) -> bool {
            match self {
                BLayout::KByN => crate::vector_rows(d),
                BLayout::NByK => d[2].is_multiple_of(4),
            }
        }

        /// B's shape as stored, and padded.
        pub fn b_shapes(self, d: &[u32]) -> ([u32; 2], [u32; 2]) {
            let (n, k) = (d[1], d[2]);
            let [_, n4, k4] = padded(d);
            match self {
                BLayout::KByN => ([k, n], [k4, n4]),
                BLayout::NByK => ([n, k], [n, k4]),
            }
        }

        /// The columns of the product and its partials: `n4` or `n`.
        pub fn columns(self, d: &[u32]) -> u32 {
            match self {
                BLayout::KByN => padded(d)[1],
                BLayout::NByK => d[1],
            }
        }
    }

    /// Where the product's A `[m, k4]` comes from.
    pub enum AFrom {
        /// Input 0, A `[m, k]` (matmul's, matmul_nt's): read in place
        /// where the rows are 16-byte ([`BLayout::in_place`]), else padded
        /// into scratch by `matmul_resize` as B is.
        Input,
        /// Scratch `m·k4` floats, written by the launch this makes of that
        /// scratch argument, the plan's first (matmul_tn's transpose of A
        /// `[k, m]`, zeros in columns `k..k4`).
        Written(Box<dyn FnOnce(Arg) -> Launch>),
    }

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`SLICE_QUANTUM`] where there are two or
    /// more): A as `a` says and, where the rows are not 16-byte
    /// ([`BLayout::in_place`]), B padded into scratch ([`BLayout::b_shapes`]:
    /// `[k4, n4]` or `[n, k4]`); then the product on the entries'
    /// [`BLayout::columns`] (`n4` or `n`), straight into C where one slice
    /// holds all of k and those columns are `n`, into C's padded copy (then
    /// cut back) where they are not, and into the partials (`[slices, m,
    /// columns]`) where there are two slices or more, added into C by the
    /// totals entry.
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32, entries: &Entries, a: AFrom) -> Plan {
        let (m, n, k) = (d[0], d[1], d[2]);
        let k4 = padded(d)[2];
        let cols = entries.b.columns(d);
        let slices = k4.div_ceil(slice_k);
        let stage = entries.stage;
        assert!(slices == 1 || slice_k.is_multiple_of(SLICE_QUANTUM), "{stage}: slices of {slice_k} are not a multiple of {SLICE_QUANTUM}");
        let kernel = match rows {
            128 => entries.m128,
            64 => entries.m64,
            _ => panic!("{stage} has tiles of 64 or 128 rows, not {rows}"),
        };
        let (mut launches, mut scratch) = (vec![], vec![]);
        let mut take = |floats: usize| {
            scratch.push(floats);
            Arg::Scratch(scratch.len() - 1)
        };
        let aligned = entries.b.in_place(d);
        let a = match a {
            AFrom::Input if aligned => Arg::Input(0),
            AFrom::Input => {
                let a4 = take(m as usize * k4 as usize);
                launches.push(resize(Arg::Input(0), a4, [m, k], [m, k4]));
                a4
            }
            AFrom::Written(launch) => {
                let a4 = take(m as usize * k4 as usize);
                launches.push(launch(a4));
                a4
            }
        };
        let b = if aligned {
            Arg::Input(1)
        } else {
            let (from, to) = entries.b.b_shapes(d);
            let b4 = take(to[0] as usize * to[1] as usize);
            launches.push(resize(Arg::Input(1), b4, from, to));
            b4
        };
        let into = if slices > 1 {
            take(slices as usize * m as usize * cols as usize)
        } else if cols != n {
            take(m as usize * cols as usize)
        } else {
            Arg::Output(0)
        };
        launches.push(Launch {
            kernel,
            grid: Dim3 { x: tiles(d, rows), y: slices, z: 1 },
            block: Dim3::x(THREADS),
            shared_bytes: shared_bytes(rows),
            cluster: Dim3::ONE,
            args: vec![a, b, into, Arg::U32(m), Arg::U32(cols), Arg::U32(k4), Arg::U32(slice_k.min(k4))],
        });
        if slices > 1 {
            let args = vec![into, Arg::Output(0), Arg::U32(m), Arg::U32(n), Arg::U32(slices), Arg::U32(total_groups(slices))];
            launches.push(totals_launch(entries.totals, m * cols, slices, args));
        } else if cols != n {
            launches.push(resize(into, Arg::Output(0), [m, cols], [m, n]));
        }
        Plan { launches, scratch }
    }
}
