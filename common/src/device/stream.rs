//! How a kernel body reads the data it touches once and writes its output,
//! as a type parameter ([`Access`]). Only [`Cached`] exists: the streaming
//! variants (`ld.global.nc.L1::no_allocate`, `st.global.cs`,
//! `cp.async.cg`) measured no gain and were removed (`docs/attempts.md`);
//! LayerNorm's held-row body keeps the parameter, so a later variant can
//! try them again without a copy of the body.

use super::F32x4;

/// How a kernel reads the data it touches once and writes its output, as a
/// type parameter of its body. Data read again
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
