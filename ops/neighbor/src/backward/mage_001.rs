//! neighbor_backward mage-001: the transpose built on the GPU with integer
//! work only, then a thread per element of dX walking its node's
//! out-edges (those with `indices[e] = s`) in increasing edge order, and a
//! thread per edge for dw.
//!
//! Kernel bodies: this module (`neighbor_backward_clear`,
//! `neighbor_backward_count`, `neighbor_backward_scan`,
//! `neighbor_backward_fill`, `neighbor_backward_order`,
//! `neighbor_backward_dx`, `neighbor_backward_dw`).
//!
//! The plain form of the gradient, written to be obviously right. It
//! builds the transpose itself on every call and ignores the one the op's
//! inputs now carry (`t_rowptr`, `t_rows`, `t_edges`, added with
//! mage-002): it stays as it was measured, as history. Seven
//! launches, in order, over six scratch buffers of u32 words (held as the
//! bits of f32 elements):
//!
//! 1. `clear`, a thread per node: `count[s] = 0`.
//! 2. `count`, a thread per edge: `row[e]`, the row holding edge `e`, by a
//!    binary search of rowptr, and `slot[e] = atomicAdd(count[indices[e]],
//!    1)`. The counts are the same on every run; the slots are a
//!    permutation of `0..count[s]` within each node, in whatever order the
//!    adds landed.
//! 3. `scan`, one block: `colptr`, the exclusive prefix sum of the counts
//!    (each thread sums a contiguous chunk, the block's partial sums meet
//!    in shared memory, then each thread writes its chunk's prefixes).
//! 4. `fill`, a thread per edge: `bucket[colptr[s] + slot[e]] = e`, each
//!    node's out-edges in arrival order.
//! 5. `order`, a thread per edge: its rank in its bucket, the number of
//!    the bucket's edges below `e`, and `order[colptr[s] + rank] = e`: each
//!    node's out-edges in increasing order, whatever order the slots
//!    were handed out in. From here on nothing depends on the order of
//!    the atomics.
//! 6. `dx`, a thread per element `(s, c)`: `Σ_k w[e]·dY[row[e], c]` over
//!    `e = order[k]`, `k ∈ colptr[s]..colptr[s + 1]`, as one `fma` chain.
//! 7. `dw`, a thread per edge: `Σ_c dY[row[e], c]·x[indices[e], c]`,
//!    columns in order, as one `fma` chain.
//!
//! So both outputs are the same bits on every run: no floating-point
//! atomics, and every sum has one fixed order. The work is `O(edges·log n)`
//! for the rows, `O(n + edges)` for the counts, scan and fill, and
//! `Σ_s out_degree(s)²` loads for the ranks, spread over one thread per
//! edge: about 18 million at 65,536 nodes and 2^20 uniform sources (both
//! generators draw sources uniformly), but quadratic in a node that is the
//! source of very many edges.
//!
//! Not measured yet: it is the reference point later stages are judged
//! against.

use mage_common::device::atomic::atom_add_u32;
use mage_common::device::*;

/// Threads per block of every launch but the scan.
pub const THREADS: u32 = 256;
/// Threads of the scan's one block.
pub const SCAN_THREADS: u32 = 256;

/// Stores the u32 `v` as the bits of `p[i]`.
///
/// # Safety
/// As [`st`].
#[inline(always)]
unsafe fn st_u32(p: *mut u32, i: u32, v: u32) {
    unsafe { st(p.cast(), i, f32::from_bits(v)) }
}

mage_common::kernel! {
    /// Thread `s < n` zeroes `count[s]`.
    pub unsafe fn neighbor_backward_clear(count: *mut u32, n: u32) {
        let s = block_idx_x() * THREADS + thread_idx_x();
        if s < n {
            unsafe { st_u32(count, s, 0) };
        }
    }
}

mage_common::kernel! {
    /// Thread `e < edges`: `row[e]`, the `r` with `rowptr[r] <= e <
    /// rowptr[r + 1]`, and `slot[e]`, the count of `indices[e]` before its
    /// own atomic add.
    pub unsafe fn neighbor_backward_count(rowptr: *const u32, indices: *const u32, count: *mut u32, row: *mut u32, slot: *mut u32, n: u32, edges: u32) {
        let e = block_idx_x() * THREADS + thread_idx_x();
        if e < edges {
            unsafe {
                // rowptr[lo] <= e < rowptr[hi] throughout: rowptr[0] = 0 and
                // rowptr[n] = edges.
                let (mut lo, mut hi) = (0, n);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if ld_nc_u32(rowptr, mid) <= e {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                st_u32(row, e, lo);
                st_u32(slot, e, atom_add_u32(count, ld_nc_u32(indices, e), 1));
            }
        }
    }
}

mage_common::kernel! {
    /// One block of [`SCAN_THREADS`]: `colptr[s] = Σ_{s' < s} count[s']`
    /// for `s <= n`. Thread `t` owns the nodes `t·per..(t + 1)·per`. Needs
    /// `SCAN_THREADS * 4` bytes of shared memory.
    pub unsafe fn neighbor_backward_scan(count: *const u32, colptr: *mut u32, n: u32) {
        let t = thread_idx_x();
        let per = n.div_ceil(SCAN_THREADS);
        let (start, end) = ((t * per).min(n), ((t + 1) * per).min(n));
        unsafe {
            let mut sum = 0u32;
            let mut s = start;
            while s < end {
                sum += ld_nc_u32(count, s);
                s += 1;
            }
            smem_st(4 * t, f32::from_bits(sum));
            sync_threads();
            let mut running = 0u32;
            let mut k = 0;
            while k < t {
                running += smem_ld(4 * k).to_bits();
                k += 1;
            }
            s = start;
            while s < end {
                st_u32(colptr, s, running);
                running += ld_nc_u32(count, s);
                s += 1;
            }
            if t == SCAN_THREADS - 1 {
                // Every chunk before this one and this one's own: all the counts.
                st_u32(colptr, n, running);
            }
        }
    }
}

mage_common::kernel! {
    /// Thread `e < edges`: `bucket[colptr[indices[e]] + slot[e]] = e`.
    pub unsafe fn neighbor_backward_fill(indices: *const u32, colptr: *const u32, slot: *const u32, bucket: *mut u32, edges: u32) {
        let e = block_idx_x() * THREADS + thread_idx_x();
        if e < edges {
            unsafe { st_u32(bucket, ld_nc_u32(colptr, ld_nc_u32(indices, e)) + ld_nc_u32(slot, e), e) };
        }
    }
}

mage_common::kernel! {
    /// Thread `e < edges`: `order[colptr[s] + rank] = e`, `s = indices[e]`
    /// and `rank` the number of edges below `e` in `s`'s bucket.
    pub unsafe fn neighbor_backward_order(indices: *const u32, colptr: *const u32, bucket: *const u32, order: *mut u32, edges: u32) {
        let e = block_idx_x() * THREADS + thread_idx_x();
        if e < edges {
            unsafe {
                let s = ld_nc_u32(indices, e);
                let (start, end) = (ld_nc_u32(colptr, s), ld_nc_u32(colptr, s + 1));
                let mut rank = 0;
                let mut k = start;
                while k < end {
                    rank += (ld_nc_u32(bucket, k) < e) as u32;
                    k += 1;
                }
                st_u32(order, start + rank, e);
            }
        }
    }
}

mage_common::kernel! {
    /// Thread `t < n·width` writes `dx[t]`, `(s, c) = (t / width, t %
    /// width)`: `Σ w[e]·dy[row[e], c]` over node `s`'s out-edges in
    /// increasing order.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_backward_dx(w: *const f32, dy: *const f32, colptr: *const u32, order: *const u32, row: *const u32, dx: *mut f32, n: u32, width: u32) {
        let t = block_idx_x() * THREADS + thread_idx_x();
        if t < n * width {
            unsafe {
                // SAFETY: t < n·width, so width > 0 (drops the division-by-zero checks).
                core::hint::assert_unchecked(width > 0);
                let (s, c) = (t / width, t % width);
                let (mut k, end) = (ld_nc_u32(colptr, s), ld_nc_u32(colptr, s + 1));
                let mut acc = 0.0;
                while k < end {
                    let e = ld_nc_u32(order, k);
                    acc = fma(ld_nc(w, e), ld_nc(dy, ld_nc_u32(row, e) * width + c), acc);
                    k += 1;
                }
                st(dx, t, acc);
            }
        }
    }
}

mage_common::kernel! {
    /// Thread `e < edges` writes `dw[e] = Σ_c dy[row[e], c]·x[indices[e], c]`,
    /// columns in order.
    pub unsafe fn neighbor_backward_dw(x: *const f32, indices: *const u32, dy: *const f32, row: *const u32, dw: *mut f32, width: u32, edges: u32) {
        let e = block_idx_x() * THREADS + thread_idx_x();
        if e < edges {
            unsafe {
                let (src, dst) = (ld_nc_u32(indices, e) * width, ld_nc_u32(row, e) * width);
                let mut acc = 0.0;
                let mut c = 0;
                while c < width {
                    acc = fma(ld_nc(dy, dst + c), ld_nc(x, src + c), acc);
                    c += 1;
                }
                st(dw, e, acc);
            }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "mage-001",
    summary: "the transpose built with integer atomics, a scan and ranks by edge number; a thread per dX element over its node's out-edges in order, a thread per edge for dw",
    kernels: &[
        &neighbor_backward_clear::KERNEL,
        &neighbor_backward_count::KERNEL,
        &neighbor_backward_scan::KERNEL,
        &neighbor_backward_fill::KERNEL,
        &neighbor_backward_order::KERNEL,
        &neighbor_backward_dx::KERNEL,
        &neighbor_backward_dw::KERNEL,
    ],
    supports: |_| true,
    plan: |d| {
        use mage_common::kernel::{Dim3, Kernel};
        use mage_common::op::{Arg, Launch, Plan};
        let (n, width, edges) = (d[0], d[1], d[2]);
        // Scratch: 0 count [n], 1 colptr [n + 1], 2 row, 3 slot, 4 bucket, 5 order [edges].
        let (count, colptr, row, slot, bucket, order) =
            (Arg::Scratch(0), Arg::Scratch(1), Arg::Scratch(2), Arg::Scratch(3), Arg::Scratch(4), Arg::Scratch(5));
        let (x, w, rowptr, indices, dy) = (Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Input(4));
        // At least one block: a graph may have no edges.
        let over = |kernel: &'static Kernel, threads: u32, args: Vec<Arg>| Launch {
            kernel,
            grid: Dim3::x(threads.div_ceil(THREADS).max(1)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args,
        };
        Plan {
            launches: vec![
                over(&neighbor_backward_clear::KERNEL, n, vec![count, Arg::U32(n)]),
                over(&neighbor_backward_count::KERNEL, edges, vec![rowptr, indices, count, row, slot, Arg::U32(n), Arg::U32(edges)]),
                Launch {
                    kernel: &neighbor_backward_scan::KERNEL,
                    grid: Dim3::x(1),
                    block: Dim3::x(SCAN_THREADS),
                    shared_bytes: SCAN_THREADS * 4,
                    cluster: Dim3::ONE,
                    args: vec![count, colptr, Arg::U32(n)],
                },
                over(&neighbor_backward_fill::KERNEL, edges, vec![indices, colptr, slot, bucket, Arg::U32(edges)]),
                over(&neighbor_backward_order::KERNEL, edges, vec![indices, colptr, bucket, order, Arg::U32(edges)]),
                over(
                    &neighbor_backward_dx::KERNEL,
                    n * width,
                    vec![w, dy, colptr, order, row, Arg::Output(0), Arg::U32(n), Arg::U32(width)],
                ),
                over(&neighbor_backward_dw::KERNEL, edges, vec![x, indices, dy, row, Arg::Output(1), Arg::U32(width), Arg::U32(edges)]),
            ],
            scratch: vec![n as usize, n as usize + 1, edges as usize, edges as usize, edges as usize, edges as usize],
        }
    },
};
