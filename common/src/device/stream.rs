//! Streaming accesses: global loads and stores with cache hints for data
//! touched once, and the L1-bypassing `cp.async`.
//!
//! The hints change where lines are kept, never what a load returns, so on
//! the host each function is its plain counterpart.
//!
//! No stage uses the hints or `cp.async.cg` now: the LayerNorm and GELU
//! variants built on them measured no gain (`docs/attempts.md`). LayerNorm's
//! held-row body still takes its access as an [`Access`] parameter
//! ([`Cached`]), so a later variant can try them again without a copy of it.

use super::F32x4;
#[cfg(not(target_arch = "nvptx64"))]
use crate::emu;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Read-only 128-bit load of `p[i..i + 4]` for data read once:
/// `ld.global.nc.L1::no_allocate.L2::256B` (no L1 line is allocated, and L2
/// fetches the whole 256-byte sector group from DRAM). `i` a multiple of 4,
/// `p` 16-byte aligned.
///
/// # Safety
/// As [`ld_nc4`](super::ld_nc4).
#[inline(always)]
pub unsafe fn ld_nc4_stream(p: *const f32, i: u32) -> F32x4 {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y, z, w): (f32, f32, f32, f32);
        unsafe {
            asm!("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
                x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                a = in(reg64) a, options(readonly, nostack, pure))
        };
        F32x4 { x, y, z, w }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_load(a as *const F32x4)
    }
}

/// 128-bit store of `v` to `p[i..i + 4]` for data not read again by this
/// launch: `st.global.cs` (evict-first in L1 and L2). `i` a multiple of 4.
///
/// # Safety
/// As [`st4`](super::st4).
#[inline(always)]
pub unsafe fn st4_stream(p: *mut f32, i: u32, v: F32x4) {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("st.global.cs.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg64) a,
            x = in(reg32) v.x, y = in(reg32) v.y, z = in(reg32) v.z, w = in(reg32) v.w, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_store(a as *mut F32x4, v)
    }
}

/// `cp.async.cg.shared.global.L2::256B` of 16 bytes from `src[i..i + 4]` to
/// shared byte `offset` (both 16-byte aligned): cached in L2 only, so a
/// stream staged through shared memory does not pass through L1. Complete
/// after [`cp_async_wait_group`](super::cp_async_wait_group), and then
/// visible to the issuing thread only (others need a barrier). The
/// emulator copies at once.
///
/// # Safety
/// `src[i..i + 4]` must lie in a buffer of the launch.
#[inline(always)]
pub unsafe fn cp_async_cg_16(offset: u32, src: *const f32, i: u32) {
    let a = src.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("cp.async.cg.shared.global.L2::256B [{s}], [{g}], 16;", s = in(reg32) super::smem_addr(offset), g = in(reg64) a, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_store::<F32x4>(offset, unsafe { emu::global_load(a as *const F32x4) })
}

/// How a kernel reads the data it touches once and writes its output, as a
/// type parameter of its body: [`Cached`] or [`Streamed`]. Data read again
/// (LayerNorm's gamma, a bias) keeps plain [`ld_nc4`](super::ld_nc4).
pub trait Access {
    /// Loads `p[i..i + 4]`.
    ///
    /// # Safety
    /// As [`ld_nc4`](super::ld_nc4).
    unsafe fn load4(p: *const f32, i: u32) -> F32x4;
    /// Stores `v` to `p[i..i + 4]`.
    ///
    /// # Safety
    /// As [`st4`](super::st4).
    unsafe fn store4(p: *mut f32, i: u32, v: F32x4);
}

/// `ld.global.nc` and `st.global`: lines allocated in L1 and L2 as usual.
pub struct Cached;

impl Access for Cached {
    #[inline(always)]
    unsafe fn load4(p: *const f32, i: u32) -> F32x4 {
        unsafe { super::ld_nc4(p, i) }
    }
    #[inline(always)]
    unsafe fn store4(p: *mut f32, i: u32, v: F32x4) {
        unsafe { super::st4(p, i, v) }
    }
}

/// [`ld_nc4_stream`] and [`st4_stream`].
pub struct Streamed;

impl Access for Streamed {
    #[inline(always)]
    unsafe fn load4(p: *const f32, i: u32) -> F32x4 {
        unsafe { ld_nc4_stream(p, i) }
    }
    #[inline(always)]
    unsafe fn store4(p: *mut f32, i: u32, v: F32x4) {
        unsafe { st4_stream(p, i, v) }
    }
}
