//! A thread's quads of a row (four consecutive columns): loaded and stored
//! with one 16-byte access where the width is a multiple of 4, column by
//! column where not; masked to the columns below the width; and the
//! written-out loop over a thread's held quads. Used by mage-003's gradient
//! body ([`held_gradient`](super::held_gradient)) and mage-005's
//! ([`mage_005`](super::mage_005)).

use mage_common::device::*;

/// Loads the quad of `p` at element `i` (columns `c..c + 4` of a row):
/// one 16-byte load where `aligned`, else the columns below `width` one
/// by one, the others zero.
///
/// # Safety
/// `c < width`, the quad's columns below `width` readable at `i..`.
#[inline(always)]
pub unsafe fn load_quad(p: *const f32, i: u32, c: u32, width: u32, aligned: bool) -> F32x4 {
    unsafe {
        if aligned {
            ld_nc4(p, i)
        } else {
            let at = |j: u32| if c + j < width { ld_nc(p, i + j) } else { 0.0 };
            F32x4::new(at(0), at(1), at(2), at(3))
        }
    }
}

/// Stores the quad `v` at element `i` as [`load_quad`] loads it.
///
/// # Safety
/// As [`load_quad`], writable.
#[inline(always)]
pub unsafe fn store_quad(p: *mut f32, i: u32, c: u32, width: u32, aligned: bool, v: F32x4) {
    unsafe {
        if aligned {
            st4(p, i, v);
        } else {
            let put = |j: u32, v: f32| {
                if c + j < width {
                    st(p, i + j, v);
                }
            };
            put(0, v.x);
            put(1, v.y);
            put(2, v.z);
            put(3, v.w);
        }
    }
}

/// `f` on the lanes of a quad whose columns `c..c + 4` lie below `width`,
/// zero on the others.
#[inline(always)]
pub fn masked(v: F32x4, c: u32, width: u32, f: impl Fn(f32) -> f32) -> F32x4 {
    let m = |j: u32, a: f32| if c + j < width { f(a) } else { 0.0 };
    F32x4::new(m(0, v.x), m(1, v.y), m(2, v.z), m(3, v.w))
}

/// Runs `f(0), f(1), ..., f(Q - 1)` written out (Q at most 8), so that
/// every index into a thread's held quads is a constant and they stay in
/// registers (a loop LLVM leaves rolled indexes them in local memory).
#[inline(always)]
pub fn each<const Q: usize>(mut f: impl FnMut(usize)) {
    const { assert!(Q <= 8) };
    macro_rules! at {
        ($($i:literal)*) => {$(if $i < Q { f($i) })*};
    }
    at!(0 1 2 3 4 5 6 7);
}
