//! The second pass of a split-K product, shared by matmul_tn mage-004 and
//! mage-005, matmul mage-011 and matmul_nt mage-003: each element of C the
//! sum of its partials over the K slices (scratch `[slices, len]`), added
//! in slice order, the same bits every run, no atomics. The stages own
//! their kernel entries (each names where the totals go) and their slice
//! rules; the error analysis of the split sum is in
//! [`crate::tn::mage_004`]'s module doc.
//!
//! A block has [`TOTALS_THREADS`] threads, each 4 consecutive elements of
//! the partials (16-byte loads where `len` is a multiple of 4). The slices
//! are cut into [`total_groups`] contiguous segments (a power of two, so
//! that up to 256 slices a thread's segment is at most [`SEGMENT`]
//! partials, all loaded before they are added: one round trip to L2, not a
//! chain); each group of threads adds its segment in slice order, and the
//! group-0 thread adds the segments' sums in segment order (one barrier,
//! through shared memory) and hands the total to the entry's store. Every
//! grouping follows from the shape.

use mage_common::device::*;

/// Threads per block of the totals kernels.
pub const TOTALS_THREADS: u32 = 256;
/// Partials a thread of the totals kernels loads before it adds them, and
/// the segment length [`total_groups`] aims for.
pub const SEGMENT: u32 = 8;
/// Most segments the slices are cut into.
pub const MAX_GROUPS: u32 = 32;
/// Shared bytes of the totals kernels: one quad per thread.
pub const TOTALS_SHARED_BYTES: u32 = TOTALS_THREADS * 16;

/// The segments `slices` slices are cut into by the totals kernels: the
/// power of two at or above `⌈slices / SEGMENT⌉`, at most [`MAX_GROUPS`].
pub const fn total_groups(slices: u32) -> u32 {
    let g = slices.div_ceil(SEGMENT).next_power_of_two();
    if g > MAX_GROUPS { MAX_GROUPS } else { g }
}

/// Quad `i / 4` of partial `s` (`len` floats each): one 16-byte load
/// where `VEC` (`len` a multiple of 4), else four guarded scalar ones.
///
/// # Safety
/// `partials` holds `(s + 1)·len` floats; `i < len`, a multiple of 4.
#[inline(always)]
unsafe fn partial_quad<const VEC: bool>(partials: *const f32, s: u32, len: u32, i: u32) -> F32x4 {
    let p = partials.wrapping_add(s as usize * len as usize);
    if VEC {
        unsafe { ld_nc4(p, i) }
    } else {
        let e = |j: u32| if i + j < len { unsafe { ld_nc(p, i + j) } } else { 0.0 };
        F32x4::new(e(0), e(1), e(2), e(3))
    }
}

/// The sum of partials `start..end` (`start < end`) of quad `i`, in slice
/// order: [`SEGMENT`] at a time, their loads (predicated, none waiting on
/// another) issued before the additions.
///
/// # Safety
/// As [`partial_quad`], for every slice below `end`.
#[inline(always)]
unsafe fn segment_sum<const VEC: bool>(partials: *const f32, start: u32, end: u32, len: u32, i: u32) -> F32x4 {
    let mut sum = F32x4::ZERO;
    let mut s = start;
    while s < end {
        let mut v = [F32x4::ZERO; SEGMENT as usize];
        for (j, v) in v.iter_mut().enumerate() {
            if s + (j as u32) < end {
                *v = unsafe { partial_quad::<VEC>(partials, s + j as u32, len, i) };
            }
        }
        // The first partial is the sum itself (not `0 + x`, which would turn a -0 into +0).
        for (j, v) in v.into_iter().enumerate() {
            let at = s + j as u32;
            if at < end {
                sum = if at == start { v } else { sum.zip(v, |x, y| x + y) };
            }
        }
        s += SEGMENT;
    }
    sum
}

/// The body of a totals kernel: block `b`'s threads `g·lanes + l` (`lanes
/// = 256 / groups`) add quad `q = b·lanes + l` (elements `4 q..4 q + 4` of
/// each partial, `len` floats) over segment `g` of the `slices`
/// (`⌈slices / groups⌉` each) in slice order; the group-0 thread adds the
/// segments in order and calls `store(4 q, total)` (elements past `len`
/// of the last quad are zero there). `VEC`: `len` a multiple of 4.
///
/// # Safety
/// `partials` holds `slices·len` floats; [`TOTALS_SHARED_BYTES`] of
/// shared memory; `store` writes only what no other thread writes.
#[inline(always)]
pub(crate) unsafe fn add_slices<const VEC: bool>(partials: *const f32, len: u32, slices: u32, groups: u32, store: impl FnOnce(u32, F32x4)) {
    // At least 1 (groups <= 256), said so the divisions need no zero check.
    let lanes = (TOTALS_THREADS / groups).max(1);
    let (lane, group) = (thread_idx_x() % lanes, thread_idx_x() / lanes);
    let i = 4 * (block_idx_x() * lanes + lane);
    let per = slices.div_ceil(groups.max(1));
    let (start, end) = ((group * per).min(slices), ((group + 1) * per).min(slices));
    if i < len && start < end {
        smem_st4(16 * thread_idx_x(), unsafe { segment_sum::<VEC>(partials, start, end, len, i) });
    }
    sync_threads();
    if group == 0 && i < len {
        let mut total = smem_ld4(16 * lane);
        let mut g = 1;
        while g < groups && g * per < slices {
            total = total.zip(smem_ld4(16 * (g * lanes + lane)), |x, y| x + y);
            g += 1;
        }
        store(i, total);
    }
}

/// Stores quad `v` at `c[i..i + 4]`, skipping elements at or past `len`:
/// one 16-byte store where `VEC` (`len` a multiple of 4). The store of a
/// totals kernel whose C is the partials' layout.
///
/// # Safety
/// `c` holds `len` floats; `i < len`, a multiple of 4.
#[inline(always)]
pub(crate) unsafe fn store_flat<const VEC: bool>(c: *mut f32, len: u32, i: u32, v: F32x4) {
    if VEC {
        unsafe { st4(c, i, v) };
    } else {
        let v = v.to_array();
        for j in 0..4 {
            if i + j < len {
                unsafe { st(c, i + j, v[j as usize]) };
            }
        }
    }
}

/// `c[i] = Σ_s partials[s·len + i]` for `i < len`: [`add_slices`] with
/// C in the partials' layout ([`store_flat`]); `VEC`: `len` a multiple of
/// 4, 16-byte accesses. The totals of matmul_tn mage-004 and matmul_nt
/// mage-003.
///
/// # Safety
/// `partials` holds `slices·len` floats, `c` `len`;
/// [`TOTALS_SHARED_BYTES`] of shared memory.
#[inline(always)]
pub(crate) unsafe fn add_flat_slices<const VEC: bool>(partials: *const f32, c: *mut f32, len: u32, slices: u32, groups: u32) {
    unsafe { add_slices::<VEC>(partials, len, slices, groups, |i, v| store_flat::<VEC>(c, len, i, v)) }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch};

    /// A cost model's time of a totals launch, beside its bytes at ...
    pub const TOTALS_NS: u64 = 2500;
    /// ... this many a nanosecond (3 TB/s, from L2).
    pub const TOTALS_BYTES_PER_NS: u64 = 3000;

    /// The cost model's ns of a totals launch over `slices` partials of
    /// `len` floats: [`TOTALS_NS`] and `(slices + 1)·len·4` bytes.
    pub fn totals_ns(len: u64, slices: u64) -> u64 {
        TOTALS_NS + (slices + 1) * len * 4 / TOTALS_BYTES_PER_NS
    }

    /// The launch of a totals `kernel` over `slices` partials of `len`
    /// floats: quads of `len` over blocks of [`TOTALS_THREADS`] in
    /// [`total_groups`] groups; `args` are the kernel's, in its order.
    pub fn totals_launch(kernel: &'static Kernel, len: u32, slices: u32, args: Vec<Arg>) -> Launch {
        let groups = total_groups(slices);
        Launch {
            kernel,
            grid: Dim3::x(len.div_ceil(4).div_ceil(TOTALS_THREADS / groups)),
            block: Dim3::x(TOTALS_THREADS),
            shared_bytes: TOTALS_SHARED_BYTES,
            cluster: Dim3::ONE,
            args,
        }
    }
}
