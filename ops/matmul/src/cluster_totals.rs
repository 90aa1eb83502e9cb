//! Split-K in one launch: the blocks of one output tile's K slices form a
//! thread-block cluster, and add their partials in each other's shared
//! memory, in slice order, straight into C (matmul mage-014, matmul_nt
//! mage-004 over matmul_nt mage-003's product, and matmul_tn mage-006 over
//! matmul_tn mage-004's). What it does and why, and its prediction, are in
//! [`crate::mage_014`]'s module doc (and [`crate::nt::mage_004`]'s and
//! [`crate::tn::mage_006`]'s).
//!
//! Here: the device side, a block's product over its slice of K
//! ([`crate::tf32x3`]'s body with the [`KSliceInShared`] layout:
//! [`crate::tf32x3::KSliceByN`]'s copies and multiplies, the accumulators
//! stored into the block's own shared memory as a row-major tile; or
//! matmul_nt's with [`NSliceInShared`], B `[n, k]`; or matmul_tn's with
//! [`AKByMInShared`], A `[k, m]`, 64 rows), and the
//! cluster's totals of those tiles ([`add_cluster_partials`]: each block
//! its share of the tile's quads over every rank's shared memory, in rank
//! order, which is slice order); on the host, the rule (k_slices' cost
//! model with at most [`MAX_CLUSTER_SLICES`] slices; at 64 rows only for
//! matmul_tn, [`tn_slice_k`]) and the plan ([`plan_with`]), given the
//! stage's entries.

use crate::tf32x3::{AKByM, BN, Block, KSliceByN, Layout, NSliceByK, Rows64, THREADS, Tile, body, body_with_a_rows};
use mage_common::device::cluster::*;
use mage_common::device::*;

/// Floats from one row of the shared partial tile to the next: 4 more than
/// its 128 columns, so that the 64-bit stores of a half-warp (4 rows 2
/// apart, 8 column pairs) fall on 32 distinct banks.
pub const PARTIAL_ROW_FLOATS: u32 = BN + 4;

/// Bytes of a block's shared partial tile of `bm` rows, from byte 0 of its
/// dynamic shared memory (the pipeline's stages, done with by then).
pub const fn partial_bytes(bm: u32) -> u32 {
    bm * PARTIAL_ROW_FLOATS * 4
}

const _: () = assert!(partial_bytes(128) <= crate::tf32x3::shared_bytes(128) && partial_bytes(64) <= crate::tf32x3::shared_bytes(64));

/// Byte of element `(row, col)` of the shared partial tile.
#[inline(always)]
const fn partial_at(row: u32, col: u32) -> u32 {
    (row * PARTIAL_ROW_FLOATS + col) * 4
}

/// [`KSliceByN`] (matmul's layout over a slice of K) with the accumulators
/// stored into the block's shared memory instead of C: the partial tile
/// (`Cᵀ` as [`crate::tf32x3::KByN`]'s store maps it, rows and columns
/// of the tile) at [`partial_at`], every element, zeros past the matrix's
/// edges. Copies, split and multiplies are [`KSliceByN`]'s, so a block's
/// partial is mage-011's to the bit.
pub struct KSliceInShared;

impl Layout for KSliceInShared {
    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        unsafe { KSliceByN::issue_a::<VEC, T>(blk, tile, stage) }
    }

    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        unsafe { KSliceByN::issue_b::<VEC>(blk, k0, at) }
    }

    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        KSliceByN::fragment(at, s)
    }

    /// Registers 4 q and 4 q + 2 are the tile's row `8 q + 2 (l % 4)`,
    /// columns `col` and `col + 1`; 4 q + 1 and 4 q + 3 the next row: one
    /// 64-bit store per row.
    #[inline(always)]
    unsafe fn store<T: Tile>(_blk: &Block, _c: *mut f32, acc: &T::Acc) {
        // Every thread has waited for its multiplies; the barrier orders
        // every warpgroup's reads of the stages before these stores.
        sync_threads();
        let t = thread_idx_x();
        let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
        let col = 64 * warpgroup + 16 * warp + 2 * (lane / 4);
        let store = |q: u32, v: [f32; 4]| {
            let row = 8 * q + 2 * (lane % 4);
            smem_st2(partial_at(row, col), [v[0], v[2]]);
            smem_st2(partial_at(row + 1, col), [v[1], v[3]]);
        };
        T::each_quad(acc, store);
    }
}

/// [`NSliceByK`] (matmul_nt's layout over a slice of K) with the
/// accumulators stored into the block's shared memory as
/// [`KSliceInShared`]'s are, in [`crate::tf32x3::NByK`]'s map of them:
/// copies, split and multiplies are [`NSliceByK`]'s, so a block's partial
/// is matmul_nt mage-003's to the bit.
pub struct NSliceInShared;

impl Layout for NSliceInShared {
    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        unsafe { NSliceByK::issue_a::<VEC, T>(blk, tile, stage) }
    }

    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        unsafe { NSliceByK::issue_b::<VEC>(blk, k0, at) }
    }

    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        NSliceByK::fragment(at, s)
    }

    /// Registers 4 q and 4 q + 2 are the tile's row `8 q + 2 (l % 4)`,
    /// columns `col` and `col + 8`; 4 q + 1 and 4 q + 3 the next row: four
    /// 32-bit stores, a warp's on 32 distinct banks (rows 2 apart are 8
    /// banks apart at [`PARTIAL_ROW_FLOATS`]).
    #[inline(always)]
    unsafe fn store<T: Tile>(_blk: &Block, _c: *mut f32, acc: &T::Acc) {
        // As in [`KSliceInShared`]'s: the stages' reads done before these stores.
        sync_threads();
        let t = thread_idx_x();
        let (warpgroup, warp, lane) = (t / 128, t / 32 % 4, t % 32);
        let col = 64 * warpgroup + 16 * warp + lane / 4;
        let store = |q: u32, v: [f32; 4]| {
            let row = 8 * q + 2 * (lane % 4);
            smem_st(partial_at(row, col), v[0]);
            smem_st(partial_at(row, col + 8), v[2]);
            smem_st(partial_at(row + 1, col), v[1]);
            smem_st(partial_at(row + 1, col + 8), v[3]);
        };
        T::each_quad(acc, store);
    }
}

/// [`AKByM`] (matmul_tn's layout, A `[k, m]` copied raw and split into
/// the K-major planes, 64 rows) with the accumulators stored into the
/// block's shared memory as [`KSliceInShared`]'s are ([`AKByM`] stores
/// them as [`crate::tf32x3::KByN`] does, the map [`KSliceInShared`]'s
/// store follows): its raw tile, copies, split and multiplies are
/// [`AKByM`]'s, so a block's partial is matmul_tn mage-004's to the bit.
pub struct AKByMInShared;

impl Layout for AKByMInShared {
    const RAW_A_BYTES: u32 = AKByM::RAW_A_BYTES;

    #[inline(always)]
    unsafe fn issue_a<const VEC: bool, T: Tile>(blk: &Block, tile: u32, stage: u32) {
        unsafe { AKByM::issue_a::<VEC, T>(blk, tile, stage) }
    }

    #[inline(always)]
    fn split_a<T: Tile>(stage: u32) {
        AKByM::split_a::<T>(stage)
    }

    #[inline(always)]
    unsafe fn issue_b<const VEC: bool>(blk: &Block, k0: u32, at: u32) {
        unsafe { AKByM::issue_b::<VEC>(blk, k0, at) }
    }

    #[inline(always)]
    fn fragment(at: u32, s: u32) -> [f32; 4] {
        AKByM::fragment(at, s)
    }

    #[inline(always)]
    unsafe fn store<T: Tile>(blk: &Block, c: *mut f32, acc: &T::Acc) {
        unsafe { KSliceInShared::store::<T>(blk, c, acc) }
    }
}

/// The most slices a cluster holds: the portable cluster size.
pub const MAX_CLUSTER_SLICES: u32 = 8;

/// `C`'s tile `block_idx_x()` (`T::BM` x 128 of `m` x `n4`, C `[m, n]`)
/// as the sum of the partial tiles in the shared memory of the cluster's
/// `cluster_nctarank()` blocks, rank 0 first (rank `r` holds slice `r`):
/// block `r` takes quads `r·per..(r + 1)·per` of the tile's (`per =
/// ⌈quads / ranks⌉`, row-major, 32 to a row), thread `t` those at `t +
/// 256 i`; each quad's partials loaded from every rank (16-byte loads) before
/// they are added, the first partial the sum itself (not `0 + x`), then
/// one 16-byte store where `n` is a multiple of 4, else by the element.
/// Quads past `m` or `n` are neither read nor stored. The same additions
/// in the same order as [`crate::split_k`]'s totals of up to 8 slices (one
/// segment). Ends at a cluster barrier: no block exits while a peer reads
/// its shared memory.
///
/// # Safety
/// `c` holds the `m·n` output; every block of the cluster has stored its
/// partial tile and met the cluster at a barrier since.
#[inline(always)]
unsafe fn add_cluster_partials<T: Tile>(c: *mut f32, m: u32, n: u32) {
    let n4 = n.next_multiple_of(4);
    let tiles_n = n4.div_ceil(BN);
    let (row0, col0) = (block_idx_x() / tiles_n * T::BM, block_idx_x() % tiles_n * BN);
    let (rank, ranks) = (cluster_ctarank(), cluster_nctarank());
    let quads = T::BM * BN / 4;
    // At least 1, said so that the division needs no zero check.
    let per = quads.div_ceil(ranks.max(1));
    let end = ((rank + 1) * per).min(quads);
    // The same trips in every thread: the warps arrive at the cluster
    // barrier below converged, as its `.aligned` form needs.
    for trip in 0..per.div_ceil(THREADS) {
        let q = rank * per + trip * THREADS + thread_idx_x();
        let (r, col) = (q / (BN / 4), 4 * (q % (BN / 4)));
        if q < end && row0 + r < m && col0 + col < n {
            let at = partial_at(r, col);
            let load = |j: u32| if j < ranks { ld_peer_shared4(map_peer_shared(at, j)) } else { F32x4::ZERO };
            // Spelled out, as the accumulators are: a loop over an array
            // here is left rolled, the array in local memory.
            const _: () = assert!(MAX_CLUSTER_SLICES == 8);
            let v = [load(0), load(1), load(2), load(3), load(4), load(5), load(6), load(7)];
            let add = |total: F32x4, j: u32| if j < ranks { total.zip(v[j as usize], |x, y| x + y) } else { total };
            let total = add(add(add(add(add(add(add(v[0], 1), 2), 3), 4), 5), 6), 7);
            if n == n4 {
                unsafe { crate::store_quad::<true>(c, row0 + r, m, col0 + col, n, total) }
            } else {
                unsafe { crate::store_quad::<false>(c, row0 + r, m, col0 + col, n, total) }
            }
        }
    }
    cluster_arrive();
    cluster_wait();
}

/// Block `(t, s)` of a cluster of the slices of tile `t`: the product over
/// slice `s = block_idx_y()` of K (`slice_k` long, the last one what is
/// left of `k`) in layout `L` on `cols` columns, A moved to the slice's
/// first column (its rows stay `k` apart) and B by `k0·b_per_k` floats,
/// into the block's shared partial tile; the cluster barrier, then the
/// cluster's totals into C ([`add_cluster_partials`]). The cluster spans
/// the grid's y, so a block's rank is its slice.
///
/// # Safety
/// As [`slice_in_cluster`] or [`slice_nt_in_cluster`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn slice_in_cluster_with<T: Tile, L: Layout>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
    slice_k: u32,
    cols: u32,
    b_per_k: u32,
) {
    let k0 = block_idx_y() * slice_k;
    let len = slice_k.min(k - k0);
    let a = a.wrapping_add(k0 as usize);
    let b = b.wrapping_add(k0 as usize * b_per_k as usize);
    unsafe { body_with_a_rows::<true, T, L>(a, b, c, m, cols, len, k) };
    // Every block's partial tile stored (released) before any is read.
    cluster_arrive();
    cluster_wait();
    unsafe { add_cluster_partials::<T>(c, m, n) }
}

/// [`slice_in_cluster_with`] over matmul's product ([`KSliceInShared`]):
/// as mage-011's slice ([`crate::k_slices`]), B moved to the slice's
/// first row, the product on `n4` columns.
///
/// # Safety
/// `a`, `b` hold A `[m, k]` and B `[k, n4]` (`n4 = ⌈n/4⌉·4`), `k` a
/// multiple of 4; `c` holds C `[m, n]`; `slice_k` a multiple of 4; the
/// launch's grid `(tiles, ⌈k / slice_k⌉)` with clusters `(1, ⌈k /
/// slice_k⌉)`, at most [`MAX_CLUSTER_SLICES`];
/// [`crate::tf32x3::shared_bytes`] of shared memory.
#[inline(always)]
pub(crate) unsafe fn slice_in_cluster<T: Tile>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
    let n4 = n.next_multiple_of(4);
    unsafe { slice_in_cluster_with::<T, KSliceInShared>(a, b, c, m, n, k, slice_k, n4, n4) }
}

/// [`slice_in_cluster_with`] over matmul_nt's product ([`NSliceInShared`]):
/// as matmul_nt mage-003's slice ([`crate::k_slices`]), B `[n, k]` moved
/// to the slice's first column as A is, the product on C's own `n`
/// columns.
///
/// # Safety
/// `a`, `b` hold A `[m, k]` and B `[n, k]`, `k` a multiple of 4; `c`
/// holds C `[m, n]`; the rest as [`slice_in_cluster`].
#[inline(always)]
pub(crate) unsafe fn slice_nt_in_cluster<T: Tile>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
    unsafe { slice_in_cluster_with::<T, NSliceInShared>(a, b, c, m, n, k, slice_k, n, 1) }
}

/// Block `(t, s)` of a cluster of the slices of tile `t` over matmul_tn's
/// product ([`AKByMInShared`], 64 rows): as matmul_tn mage-004's slice, A
/// `[k, m]` and B `[k, n]` moved to the slice's first K row (`k0·m` and
/// `k0·n` floats; a slice is contiguous rows of both), the body over the
/// slice's `len` terms into the block's shared partial tile, `VEC` its
/// 16-byte copies; the cluster barrier, then the cluster's totals into C
/// ([`add_cluster_partials`]).
///
/// # Safety
/// `a`, `b` hold A `[k, m]` and B `[k, n]` (`m` and `n` multiples of 4
/// where `VEC`); `c` holds C `[m, n]`; `slice_k` a multiple of 32; the
/// launch's grid `(tiles, ⌈k / slice_k⌉)` with clusters `(1, ⌈k /
/// slice_k⌉)`, at most [`MAX_CLUSTER_SLICES`];
/// [`crate::tf32x3::layout_shared_bytes`] of [`AKByM`] at 64 rows of
/// shared memory.
#[inline(always)]
pub(crate) unsafe fn slice_tn_in_cluster<const VEC: bool>(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, slice_k: u32) {
    let k0 = block_idx_y() * slice_k;
    let len = slice_k.min(k - k0);
    let a = a.wrapping_add(k0 as usize * m as usize);
    let b = b.wrapping_add(k0 as usize * n as usize);
    unsafe { body::<VEC, Rows64, AKByMInShared>(a, b, c, m, n, len) };
    // Every block's partial tile stored (released) before any is read.
    cluster_arrive();
    cluster_wait();
    unsafe { add_cluster_partials::<Rows64>(c, m, n) }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::k_slices::{BLayout, SLICE_QUANTUM, padded, slice_k_at_rows, split_at_most, tiles};
    use crate::tf32x3::{resize, shared_bytes};
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};

    /// The tile rows and the K per slice: [`crate::k_slices::split`]'s
    /// rule with at most [`MAX_CLUSTER_SLICES`] slices.
    pub fn split(d: &[u32]) -> (u32, u32) {
        split_at_most(d, MAX_CLUSTER_SLICES)
    }

    /// Slices for these dims.
    pub fn slices(d: &[u32]) -> u32 {
        padded(d)[2].div_ceil(split(d).1)
    }

    /// The K per slice of matmul_tn's clustered product (64-row tiles
    /// only): [`crate::k_slices::slice_k_at_rows`] at 64 rows with at most
    /// [`MAX_CLUSTER_SLICES`] slices.
    pub fn tn_slice_k(d: &[u32]) -> u32 {
        slice_k_at_rows(d, 64, MAX_CLUSTER_SLICES)
    }

    /// A stage's clustered entries at 128 and 64 rows (kernel arguments
    /// `a, b, c, m, n, k4, slice_k`), the layout of B they read, and its
    /// name for messages.
    pub struct ClusterEntries {
        pub stage: &'static str,
        pub m128: &'static Kernel,
        pub m64: &'static Kernel,
        pub b: BLayout,
    }

    /// The launches with tiles of `rows` rows (64 or 128) and slices of
    /// `slice_k` (a multiple of [`SLICE_QUANTUM`] where there are two or
    /// more, at most [`MAX_CLUSTER_SLICES`] of them): where the rows are not
    /// 16-byte ([`BLayout::in_place`]), A and B first padded into scratch
    /// (`[m, k4]`, and [`BLayout::b_shapes`]: `[k4, n4]` as mage-011's or
    /// `[n, k4]` as matmul_nt mage-003's); then one launch, grid `(tiles,
    /// slices)` in clusters of `(1, slices)`, straight into C.
    pub fn plan_with(d: &[u32], rows: u32, slice_k: u32, entries: &ClusterEntries) -> Plan {
        let (m, n, k) = (d[0], d[1], d[2]);
        let k4 = padded(d)[2];
        let slices = k4.div_ceil(slice_k);
        let stage = entries.stage;
        assert!(slices == 1 || slice_k.is_multiple_of(SLICE_QUANTUM), "{stage}: slices of {slice_k} are not a multiple of {SLICE_QUANTUM}");
        assert!(slices <= MAX_CLUSTER_SLICES, "{stage}: {slices} slices; a cluster holds at most {MAX_CLUSTER_SLICES}");
        let kernel = match rows {
            128 => entries.m128,
            64 => entries.m64,
            _ => panic!("{stage} has tiles of 64 or 128 rows, not {rows}"),
        };
        let (mut launches, mut scratch) = (vec![], vec![]);
        let (a, b) = if entries.b.in_place(d) {
            (Arg::Input(0), Arg::Input(1))
        } else {
            let (from, to) = entries.b.b_shapes(d);
            scratch.push(m as usize * k4 as usize);
            scratch.push(to[0] as usize * to[1] as usize);
            launches.push(resize(Arg::Input(0), Arg::Scratch(0), [m, k], [m, k4]));
            launches.push(resize(Arg::Input(1), Arg::Scratch(1), from, to));
            (Arg::Scratch(0), Arg::Scratch(1))
        };
        launches.push(Launch {
            kernel,
            grid: Dim3 { x: tiles(d, rows), y: slices, z: 1 },
            block: Dim3::x(THREADS),
            shared_bytes: shared_bytes(rows),
            cluster: Dim3 { x: 1, y: slices, z: 1 },
            args: vec![a, b, Arg::Output(0), Arg::U32(m), Arg::U32(n), Arg::U32(k4), Arg::U32(slice_k.min(k4))],
        });
        Plan { launches, scratch }
    }
}
