//! The device vocabulary kernels are written in.
//!
//! Each function here is a thin wrapper: on `nvptx64` it is inline PTX, on
//! the host it calls into the SIMT emulator ([`crate::emu`]). Kernel bodies
//! stay plain Rust over these names, so moving them to another Rust GPU
//! compiler is a matter of replacing this module.
//!
//! Global memory is addressed by a raw pointer plus an element index
//! (`ld_nc(x, i)` is CUDA's `__ldg(&x[i])`); the emulator checks every such
//! access against the buffers of the launch. Shared memory is one dynamic
//! region per block, addressed by byte offset; the emulator checks bounds,
//! alignment and races on it.

#[cfg(not(target_arch = "nvptx64"))]
use crate::emu;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

pub mod wgmma;

/// Four consecutive f32 values, the unit of a 128-bit access.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(16))]
pub struct F32x4 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub w: f32,
}

impl F32x4 {
    pub const ZERO: F32x4 = F32x4::splat(0.0);
    #[inline(always)]
    pub const fn splat(v: f32) -> Self {
        F32x4 { x: v, y: v, z: v, w: v }
    }
    #[inline(always)]
    pub const fn new(x: f32, y: f32, z: f32, w: f32) -> Self {
        F32x4 { x, y, z, w }
    }
    #[inline(always)]
    pub fn sum(self) -> f32 {
        (self.x + self.y) + (self.z + self.w)
    }
    #[inline(always)]
    pub fn map(self, f: impl Fn(f32) -> f32) -> Self {
        F32x4 { x: f(self.x), y: f(self.y), z: f(self.z), w: f(self.w) }
    }
    #[inline(always)]
    pub fn zip(self, o: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        F32x4 { x: f(self.x, o.x), y: f(self.y, o.y), z: f(self.z, o.z), w: f(self.w, o.w) }
    }
    #[inline(always)]
    pub fn zip3(self, b: Self, c: Self, f: impl Fn(f32, f32, f32) -> f32) -> Self {
        F32x4 { x: f(self.x, b.x, c.x), y: f(self.y, b.y, c.y), z: f(self.z, b.z, c.z), w: f(self.w, b.w, c.w) }
    }
    #[inline(always)]
    pub fn to_array(self) -> [f32; 4] {
        [self.x, self.y, self.z, self.w]
    }
}

// ---------------------------------------------------------------- indices

macro_rules! special_register {
    ($($(#[$m:meta])* $name:ident => $reg:literal, $emu:ident.$field:ident;)*) => {$(
        $(#[$m])*
        #[inline(always)]
        pub fn $name() -> u32 {
            #[cfg(target_arch = "nvptx64")]
            {
                let r: u32;
                // SAFETY: reading a special register has no side effects.
                unsafe { asm!(concat!("mov.u32 {r}, ", $reg, ";"), r = out(reg32) r, options(pure, nomem, nostack)) };
                r
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                emu::$emu().$field
            }
        }
    )*};
}

special_register! {
    /// `threadIdx.x`
    thread_idx_x => "%tid.x", thread_idx.x;
    /// `threadIdx.y`
    thread_idx_y => "%tid.y", thread_idx.y;
    /// `threadIdx.z`
    thread_idx_z => "%tid.z", thread_idx.z;
    /// `blockIdx.x`
    block_idx_x => "%ctaid.x", block_idx.x;
    /// `blockIdx.y`
    block_idx_y => "%ctaid.y", block_idx.y;
    /// `blockIdx.z`
    block_idx_z => "%ctaid.z", block_idx.z;
    /// `blockDim.x`
    block_dim_x => "%ntid.x", block_dim.x;
    /// `blockDim.y`
    block_dim_y => "%ntid.y", block_dim.y;
    /// `blockDim.z`
    block_dim_z => "%ntid.z", block_dim.z;
    /// `gridDim.x`
    grid_dim_x => "%nctaid.x", grid_dim.x;
    /// `gridDim.y`
    grid_dim_y => "%nctaid.y", grid_dim.y;
    /// `gridDim.z`
    grid_dim_z => "%nctaid.z", grid_dim.z;
}

/// The lane of this thread in its warp (for one-dimensional blocks).
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_idx_x() % 32
}

/// The warp of this thread in its block (for one-dimensional blocks).
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx_x() / 32
}

// -------------------------------------------------------- synchronisation

/// `__syncthreads()`: every thread of the block waits here; shared-memory
/// accesses before it are visible to every thread after it.
#[inline(always)]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a block-wide barrier; memory effects are what we want.
    unsafe {
        asm!("bar.sync 0;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::barrier();
}

/// `__shfl_down_sync(0xffffffff, v, delta)`: the value of lane `lane + delta`,
/// or this lane's own value where that lane is past 31.
#[inline(always)]
pub fn shuffle_down(v: f32, delta: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a full-warp shuffle; every lane of the warp takes part.
        unsafe {
            asm!("shfl.sync.down.b32 {r}, {v}, {d}, 31, -1;", r = out(reg32) r, v = in(reg32) v, d = in(reg32) delta, options(nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shuffle(v, emu::Shuffle::Down(delta))
}

/// `__shfl_xor_sync(0xffffffff, v, mask)`: the value of lane `lane ^ mask`.
#[inline(always)]
pub fn shuffle_xor(v: f32, mask: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a full-warp shuffle; every lane of the warp takes part.
        unsafe {
            asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 31, -1;", r = out(reg32) r, v = in(reg32) v, m = in(reg32) mask, options(nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shuffle(v, emu::Shuffle::Xor(mask))
}

/// `__shfl_sync(0xffffffff, v, lane)`: the value of lane `src`.
#[inline(always)]
pub fn shuffle_idx(v: f32, src: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a full-warp shuffle; every lane of the warp takes part.
        unsafe {
            asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 31, -1;", r = out(reg32) r, v = in(reg32) v, s = in(reg32) src, options(nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shuffle(v, emu::Shuffle::Idx(src))
}

/// Sum over the 32 lanes of a warp, returned to every lane (butterfly).
#[inline(always)]
pub fn warp_sum(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v += shuffle_xor(v, m);
        m >>= 1;
    }
    v
}

// ---------------------------------------------------------- global memory

/// Read-only (non-coherent cache) load of `p[i]`.
///
/// # Safety
/// `p[i]` must lie in a buffer of the launch that no thread writes during it.
#[inline(always)]
pub unsafe fn ld_nc(p: *const f32, i: u32) -> f32 {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        unsafe { asm!("ld.global.nc.f32 {r}, [{a}];", r = out(reg32) r, a = in(reg64) a, options(readonly, nostack, pure)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_load(a)
    }
}

/// Read-only load of the u32 `p[i]`.
///
/// # Safety
/// As [`ld_nc`].
#[inline(always)]
pub unsafe fn ld_nc_u32(p: *const u32, i: u32) -> u32 {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        unsafe { asm!("ld.global.nc.u32 {r}, [{a}];", r = out(reg32) r, a = in(reg64) a, options(readonly, nostack, pure)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_load(a)
    }
}

/// Read-only 128-bit load of `p[i..i + 4]`; `i` must be a multiple of 4 and
/// `p` 16-byte aligned.
///
/// # Safety
/// As [`ld_nc`], for all four elements.
#[inline(always)]
pub unsafe fn ld_nc4(p: *const f32, i: u32) -> F32x4 {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y, z, w): (f32, f32, f32, f32);
        unsafe {
            asm!("ld.global.nc.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
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

/// Coherent load of `p[i]` (for buffers the launch also writes).
///
/// # Safety
/// `p[i]` must lie in a buffer of the launch.
#[inline(always)]
pub unsafe fn ld(p: *const f32, i: u32) -> f32 {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        unsafe { asm!("ld.global.f32 {r}, [{a}];", r = out(reg32) r, a = in(reg64) a, options(readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_load(a)
    }
}

/// Store `v` to `p[i]`.
///
/// # Safety
/// `p[i]` must lie in a buffer of the launch; no other thread may touch it.
#[inline(always)]
pub unsafe fn st(p: *mut f32, i: u32, v: f32) {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("st.global.f32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_store(a, v)
    }
}

/// 128-bit store of `v` to `p[i..i + 4]`; `i` must be a multiple of 4.
///
/// # Safety
/// As [`st`], for all four elements.
#[inline(always)]
pub unsafe fn st4(p: *mut f32, i: u32, v: F32x4) {
    let a = p.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("st.global.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg64) a,
            x = in(reg32) v.x, y = in(reg32) v.y, z = in(reg32) v.z, w = in(reg32) v.w, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    unsafe {
        emu::global_store(a as *mut F32x4, v)
    }
}

mod stream;
pub use stream::*;

// ---------------------------------------------------------- shared memory

#[cfg(target_arch = "nvptx64")]
core::arch::global_asm!(".extern .shared .align 16 .b8 mage_smem[];");

/// The 32-bit shared-window address of byte `offset` of the block's dynamic
/// shared memory.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn smem_addr(offset: u32) -> u32 {
    let base: u32;
    // SAFETY: takes the address of the module's shared declaration.
    unsafe { asm!("mov.u32 {b}, mage_smem;", b = out(reg32) base, options(pure, nomem, nostack)) };
    base + offset
}

/// Load the f32 at byte `offset` of the block's shared memory.
#[inline(always)]
pub fn smem_ld(offset: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: shared memory is sized by the launch; the emulator checks bounds.
        unsafe { asm!("ld.shared.f32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) smem_addr(offset), options(readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_load::<f32>(offset)
}

/// Store `v` at byte `offset` of the block's shared memory.
#[inline(always)]
pub fn smem_st(offset: u32, v: f32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `smem_ld`.
    unsafe {
        asm!("st.shared.f32 [{a}], {v};", a = in(reg32) smem_addr(offset), v = in(reg32) v, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_store::<f32>(offset, v)
}

/// 128-bit load at byte `offset` (a multiple of 16) of shared memory.
#[inline(always)]
pub fn smem_ld4(offset: u32) -> F32x4 {
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y, z, w): (f32, f32, f32, f32);
        // SAFETY: as `smem_ld`.
        unsafe {
            asm!("ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
                x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                a = in(reg32) smem_addr(offset), options(readonly, nostack))
        };
        F32x4 { x, y, z, w }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_load::<F32x4>(offset)
}

/// 128-bit store at byte `offset` (a multiple of 16) of shared memory.
#[inline(always)]
pub fn smem_st4(offset: u32, v: F32x4) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `smem_ld`.
    unsafe {
        asm!("st.shared.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) smem_addr(offset),
            x = in(reg32) v.x, y = in(reg32) v.y, z = in(reg32) v.z, w = in(reg32) v.w, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_store::<F32x4>(offset, v)
}

// ------------------------------------------------------------- cp.async

/// `cp.async.ca.shared.global` of 4 bytes from `src[i]` to shared byte
/// `offset`. The emulator copies at once.
///
/// # Safety
/// `src[i]` must lie in a buffer of the launch.
#[inline(always)]
pub unsafe fn cp_async_ca_4(offset: u32, src: *const f32, i: u32) {
    let a = src.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("cp.async.ca.shared.global [{s}], [{g}], 4;", s = in(reg32) smem_addr(offset), g = in(reg64) a, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_store::<f32>(offset, unsafe { emu::global_load(a) })
}

/// `cp.async.ca.shared.global` of 16 bytes from `src[i..i + 4]` to shared
/// byte `offset` (both 16-byte aligned).
///
/// # Safety
/// `src[i..i + 4]` must lie in a buffer of the launch.
#[inline(always)]
pub unsafe fn cp_async_ca_16(offset: u32, src: *const f32, i: u32) {
    let a = src.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("cp.async.ca.shared.global [{s}], [{g}], 16;", s = in(reg32) smem_addr(offset), g = in(reg64) a, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_store::<F32x4>(offset, unsafe { emu::global_load(a as *const F32x4) })
}

/// `cp.async.commit_group`: closes the group of copies issued so far.
#[inline(always)]
pub fn cp_async_commit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("cp.async.commit_group;", options(nostack))
    };
}

/// `cp.async.wait_group N`: waits until at most `N` groups are in flight.
#[inline(always)]
pub fn cp_async_wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no register operands.
    unsafe {
        asm!("cp.async.wait_group {n};", n = const N, options(nostack))
    };
}

// --------------------------------------------------------------- numerics

/// `fma.rn.f32`: `a * b + c` with one rounding, the same bits on both targets.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::fmaf32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

/// `sqrt.rn.f32`, correctly rounded on both targets.
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::sqrtf32(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.sqrt()
    }
}

/// `rsqrt.approx.f32`. On the host: the correctly rounded `1/sqrt(x)`. The
/// PTX instruction's relative error is at most 2^-22.9 (see
/// [`crate::numeric::contract`]).
#[inline(always)]
pub fn rsqrt_approx(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: pure arithmetic.
        unsafe { asm!("rsqrt.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        (1.0 / (x as f64).sqrt()) as f32
    }
}

/// `tanh.approx.f32`. On the host: `tanh` rounded from f64. The PTX
/// instruction's relative error is at most about 2^-11.
#[inline(always)]
pub fn tanh_approx(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: pure arithmetic.
        unsafe { asm!("tanh.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        (x as f64).tanh() as f32
    }
}

/// `ex2.approx.ftz.f32`: 2^x. On the host: `exp2` rounded from f64 (with
/// subnormal results flushed to zero, as `.ftz` does).
#[inline(always)]
pub fn ex2_approx(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: pure arithmetic.
        unsafe { asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let r = (x as f64).exp2() as f32;
        if r.is_subnormal() { 0.0 } else { r }
    }
}

/// `rcp.rn.f32`-equivalent correctly rounded reciprocal (a plain division).
#[inline(always)]
pub fn recip(x: f32) -> f32 {
    1.0 / x
}

// ------------------------------------------------ added for matmul

/// `cp.async.ca.shared.global` of 4 bytes with zero fill: copies the first
/// `src_bytes` bytes (0 or 4) of `src[i]` to shared byte `offset` and fills
/// the rest of the 4 bytes with zeros (PTX's src-size operand). With
/// `src_bytes == 0` nothing is read; kernels still pass an index inside the
/// buffer (clamped), and the emulator checks that it is one, so whether the
/// hardware would fault on a wild address with src-size 0 never matters.
///
/// # Safety
/// `src[i]` must lie in a buffer of the launch.
#[inline(always)]
pub unsafe fn cp_async_ca_4_zfill(offset: u32, src: *const f32, i: u32, src_bytes: u32) {
    let a = src.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("cp.async.ca.shared.global [{s}], [{g}], 4, {n};", s = in(reg32) smem_addr(offset), g = in(reg64) a, n = in(reg32) src_bytes, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        assert!(src_bytes == 0 || src_bytes == 4, "cp.async of 4 bytes with src-size {src_bytes}: Mage uses 0 or 4");
        // SAFETY: the emulator checks the address against the launch's buffers.
        let v: f32 = unsafe { emu::global_load(a) };
        emu::shared_store::<f32>(offset, if src_bytes == 4 { v } else { 0.0 })
    }
}

/// `cp.async.ca.shared.global` of 16 bytes with zero fill: copies the first
/// `src_bytes` bytes (0, 4, 8, 12 or 16) of `src[i..i + 4]` to shared byte
/// `offset` and zero-fills the rest; both addresses 16-byte aligned. As
/// with [`cp_async_ca_4_zfill`], `src[i]` must be a valid address even when
/// `src_bytes == 0` (the emulator checks it).
///
/// # Safety
/// The first `src_bytes` bytes from `src[i]`, and `src[i]` itself, must lie
/// in a buffer of the launch.
#[inline(always)]
pub unsafe fn cp_async_ca_16_zfill(offset: u32, src: *const f32, i: u32, src_bytes: u32) {
    let a = src.wrapping_add(i as usize);
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        asm!("cp.async.ca.shared.global [{s}], [{g}], 16, {n};", s = in(reg32) smem_addr(offset), g = in(reg64) a, n = in(reg32) src_bytes, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        assert!(src_bytes <= 16 && src_bytes.is_multiple_of(4), "cp.async of 16 bytes with src-size {src_bytes}: Mage uses multiples of 4");
        assert!((a as usize).is_multiple_of(16), "misaligned 16-byte cp.async source address {a:p}");
        let v = if src_bytes == 16 {
            // SAFETY: the emulator checks the address against the launch's buffers.
            unsafe { emu::global_load(a as *const F32x4) }
        } else {
            let mut w = [0.0f32; 4];
            // SAFETY: as above; only the words that are copied are read,
            // and the first word always (to check the address).
            let first: f32 = unsafe { emu::global_load(a) };
            for (j, x) in w.iter_mut().enumerate().take(src_bytes as usize / 4) {
                *x = if j == 0 { first } else { unsafe { emu::global_load(a.wrapping_add(j)) } };
            }
            F32x4::new(w[0], w[1], w[2], w[3])
        };
        emu::shared_store::<F32x4>(offset, v)
    }
}

/// 64-bit load of the two f32 at byte `offset` (a multiple of 8) of shared memory.
#[inline(always)]
pub fn smem_ld2(offset: u32) -> [f32; 2] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y): (f32, f32);
        // SAFETY: as `smem_ld`.
        unsafe {
            asm!("ld.shared.v2.f32 {{{x}, {y}}}, [{a}];", x = out(reg32) x, y = out(reg32) y, a = in(reg32) smem_addr(offset), options(readonly, nostack))
        };
        [x, y]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_load::<[f32; 2]>(offset)
}

/// 64-bit store of `v` at byte `offset` (a multiple of 8) of shared memory.
#[inline(always)]
pub fn smem_st2(offset: u32, v: [f32; 2]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `smem_ld`.
    unsafe {
        asm!("st.shared.v2.f32 [{a}], {{{x}, {y}}};", a = in(reg32) smem_addr(offset), x = in(reg32) v[0], y = in(reg32) v[1], options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::shared_store::<[f32; 2]>(offset, v)
}

pub mod atomic;
pub mod cluster;
pub mod column_sums;
