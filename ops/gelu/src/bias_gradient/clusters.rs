//! The kernel body of each GELU gradient op's mage-005: [`chunks_in_cluster`],
//! one launch in all. The [`CLUSTER`] chunks of rows of one column tile are
//! the blocks of one thread-block cluster: each writes its chunk's dx and
//! keeps its partial dbias row in its own shared memory, and after the
//! cluster barrier each block adds its share of the tile's columns over
//! every block's partial, in rank order, straight into dbias. No scratch,
//! no second kernel, no atomics; the stages' entries call it with their
//! op's [`ElementGradient`] (see [`bias_gradient`](super)).
//!
//! Lane `l` takes columns `tile·TILE + l` and `tile·TILE + 32 + l`: a warp's
//! loads are 128 contiguous bytes at any width, aligned or not. Warp `w`
//! of the block takes rows `chunk_start + w + WARPS·i`, [`BATCH`] rows at a
//! time with all their loads of x and dy issued before any is used; its
//! sums run in row order, the warps' in warp order through shared memory,
//! the blocks' in rank order (chunk order) through the cluster's shared
//! window. Every addition's order follows from the shape alone, so dbias
//! is the same bits on every run. dx is the element's gradient of `x +
//! bias`, as every stage rounds it.

use super::ElementGradient;
use mage_common::device::cluster::*;
use mage_common::device::*;

/// Columns of a tile: two a lane, 32 apart.
pub const TILE: u32 = 64;
/// Columns a lane owns.
const LANE_COLUMNS: u32 = TILE / 32;
/// Threads per block.
pub const THREADS: u32 = 512;
/// Warps per block: each a row of the tile at a time.
pub const WARPS: u32 = THREADS / 32;
/// Blocks of a cluster: a tile's chunks of rows (the portable cluster size).
pub const CLUSTER: u32 = 8;
/// Rows a warp loads (x and dy, both columns) before it computes any.
pub const BATCH: u32 = 4;
/// Shared bytes at which the block's partial dbias row starts: before it,
/// each warp's sums of the tile's columns.
const PARTIAL_AT: u32 = WARPS * TILE * 4;
/// Shared bytes: the warps' sums, then the block's partial row.
pub const SHARED_BYTES: u32 = PARTIAL_AT + TILE * 4;
/// Columns of the tile each block of the cluster adds over the blocks.
const COLUMNS_PER_RANK: u32 = TILE / CLUSTER;

/// Rows per chunk at `rows`: the rows split over the [`CLUSTER`] blocks, a
/// multiple of [`WARPS`] (every warp the same count of rows).
pub fn chunk_rows(rows: u32) -> u32 {
    rows.div_ceil(CLUSTER).div_ceil(WARPS).max(1) * WARPS
}

/// Block (tile, chunk) of [`THREADS`] threads in a cluster of the tile's
/// [`CLUSTER`] chunks (its rank the chunk): dx of columns `tile·TILE ..`
/// of rows `chunk·chunk_rows ..`, its partial dbias row into its shared
/// memory, the cluster barrier, then columns `rank·8 .. rank·8 + 8` of the
/// tile's dbias as the sum of the cluster's partial rows, rank 0 first.
/// Ends at a cluster barrier: no block exits while a peer reads its shared
/// memory. Needs [`SHARED_BYTES`] of shared memory.
///
/// # Safety
/// As the kernel: x, dy and dx hold `rows·width` floats, bias and dbias
/// `width`; the grid `(⌈width/TILE⌉, CLUSTER)` in clusters `(1, CLUSTER)`;
/// `chunk_rows` a multiple of [`WARPS`] with `CLUSTER·chunk_rows ≥ rows`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn chunks_in_cluster<G: ElementGradient>(
    x: *const f32,
    bias: *const f32,
    dy: *const f32,
    dx: *mut f32,
    dbias: *mut f32,
    rows: u32,
    width: u32,
    chunk_rows: u32,
) {
    let t = thread_idx_x();
    let (lane, warp) = (t % 32, t / 32);
    let c0 = block_idx_x() * TILE + lane;
    let start = block_idx_y() * chunk_rows;
    let end = rows.min(start + chunk_rows);
    let mut acc = [0.0f32; LANE_COLUMNS as usize];
    let mut b = [0.0f32; LANE_COLUMNS as usize];
    for j in 0..LANE_COLUMNS {
        let c = c0 + 32 * j;
        if c < width {
            b[j as usize] = unsafe { ld_nc(bias, c) };
        }
    }
    let mut r = start + warp;
    while r < end {
        // Both columns of BATCH rows: 4·BATCH loads issued before any is
        // used. Flat, row-major over (row, column): a nested array, or a
        // batch of 8 rows (16 gradients of the exact form to unroll), is
        // left in local memory.
        let mut xv = [0.0f32; (BATCH * LANE_COLUMNS) as usize];
        let mut dv = [0.0f32; (BATCH * LANE_COLUMNS) as usize];
        for i in 0..BATCH {
            let ri = r + i * WARPS;
            for j in 0..LANE_COLUMNS {
                let c = c0 + 32 * j;
                if ri < end && c < width {
                    unsafe {
                        xv[(i * LANE_COLUMNS + j) as usize] = ld_nc(x, ri * width + c);
                        dv[(i * LANE_COLUMNS + j) as usize] = ld_nc(dy, ri * width + c);
                    }
                }
            }
        }
        for i in 0..BATCH {
            let ri = r + i * WARPS;
            for j in 0..LANE_COLUMNS {
                let c = c0 + 32 * j;
                if ri < end && c < width {
                    let at = (i * LANE_COLUMNS + j) as usize;
                    let g = G::grad(xv[at] + b[j as usize], dv[at]);
                    unsafe { st(dx, ri * width + c, g) };
                    acc[j as usize] += g;
                }
            }
        }
        r += BATCH * WARPS;
    }
    for j in 0..LANE_COLUMNS {
        smem_st(4 * (warp * TILE + lane + 32 * j), acc[j as usize]);
    }
    sync_threads();
    if t < TILE {
        let mut partial = smem_ld(4 * t);
        for w in 1..WARPS {
            partial += smem_ld(4 * (w * TILE + t));
        }
        smem_st(PARTIAL_AT + 4 * t, partial);
    }
    // Every block's partial row stored (released) before any is read.
    cluster_arrive();
    cluster_wait();
    let rank = cluster_ctarank();
    let col = rank * COLUMNS_PER_RANK + t;
    let c = block_idx_x() * TILE + col;
    if t < COLUMNS_PER_RANK && c < width {
        let at = PARTIAL_AT + 4 * col;
        let mut total = ld_peer_shared(map_peer_shared(at, 0));
        for peer in 1..CLUSTER {
            total += ld_peer_shared(map_peer_shared(at, peer));
        }
        unsafe { st(dbias, c, total) };
    }
    cluster_arrive();
    cluster_wait();
}

/// The plan of a stage over [`chunks_in_cluster`] (its entry `kernel`): one
/// launch, a cluster of [`CLUSTER`] blocks per column tile.
#[cfg(not(target_arch = "nvptx64"))]
pub fn plan(d: &[u32], kernel: &'static mage_common::kernel::Kernel) -> mage_common::op::Plan {
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    let (rows, width) = (d[0], d[1]);
    Plan {
        launches: vec![Launch {
            kernel,
            grid: Dim3 { x: width.div_ceil(TILE), y: CLUSTER, z: 1 },
            block: Dim3::x(THREADS),
            shared_bytes: SHARED_BYTES,
            cluster: Dim3 { x: 1, y: CLUSTER, z: 1 },
            args: vec![
                Arg::Input(0),
                Arg::Input(1),
                Arg::Input(2),
                Arg::Output(0),
                Arg::Output(1),
                Arg::U32(rows),
                Arg::U32(width),
                Arg::U32(chunk_rows(rows)),
            ],
        }],
        scratch: vec![],
    }
}
