//! Atomic operations on global memory: an f32 add that returns nothing
//! (`red.global.add.f32`) and a u32 add that returns the old word
//! (`atom.global.add.u32`).

#[cfg(not(target_arch = "nvptx64"))]
use crate::emu;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `red.global.add.f32`: adds `v` to `p[i]` atomically (relaxed, GPU scope)
/// and returns nothing. As PTX defines it on global memory, it rounds to
/// nearest even and flushes subnormal inputs and results to sign-preserving
/// zero; the emulator does the same. The order in which the adds of
/// different threads land is not defined, so a sum built from several
/// `red_add`s may differ in its last bits from run to run.
///
/// # Safety
/// `p[i]` must lie in a writable buffer of the launch that threads touch
/// only through `red_add` during it.
#[inline(always)]
pub unsafe fn red_add(p: *mut f32, i: u32, v: f32) {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("red.global.add.f32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let ftz = |x: f32| if x.is_subnormal() { f32::from_bits(x.to_bits() & 0x8000_0000) } else { x };
        // SAFETY: the emulator checks the address as it would a store.
        unsafe { emu::global_atomic_update(a as *mut u32, |old| ftz(ftz(f32::from_bits(old)) + ftz(v)).to_bits()) };
    }
}

/// `atom.global.add.u32`: adds `v` to `p[i]` atomically (relaxed, GPU
/// scope, wrapping) and returns the word it replaced. Integer adds commute
/// exactly, so the final word is the same whatever order the adds of
/// different threads land in; which thread sees which old word is not
/// defined.
///
/// # Safety
/// `p[i]` must lie in a writable buffer of the launch that threads touch
/// only through atomics during it.
#[inline(always)]
pub unsafe fn atom_add_u32(p: *mut u32, i: u32, v: u32) -> u32 {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        unsafe { asm!("atom.global.add.u32 {r}, [{a}], {v};", r = out(reg32) r, a = in(reg64) a, v = in(reg32) v, options(nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the emulator checks the address as it would a store.
        unsafe { emu::global_atomic_update(a, |old| old.wrapping_add(v)) }
    }
}
