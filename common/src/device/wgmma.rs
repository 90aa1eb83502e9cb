//! Hopper's warpgroup matrix multiply (`wgmma`, sm_90a only) on TF32
//! operands in shared memory, and what it needs around it.
//!
//! A warpgroup (four consecutive warps, the first a multiple of four) issues
//! one `wgmma.mma_async.m64nNk8.f32.tf32.tf32` together: D (64 x N, FP32,
//! spread over the 128 threads' registers) += A (64 x 8) · B (8 x N). B is
//! read from shared memory through a 64-bit matrix descriptor
//! ([`MatrixDescriptor`]); A either the same way (`wgmma_m64nNk8_f32_tf32`)
//! or from four registers of each thread (`..._rs`, see
//! [`a_fragment_position`]). Shared operands are K-major: TF32 has no
//! transposed form, so A is stored by rows of K and B by columns of K.
//!
//! The order a kernel follows (PTX ISA 9.7.15): shared stores of the
//! operands, [`fence_proxy_async_shared`] in every storing thread, a
//! barrier; [`wgmma_fence`]; the multiplies; [`wgmma_commit_group`];
//! [`wgmma_wait_group`] before the accumulators are read
//! ([`fence_accumulators`] keeps the compiler from moving those reads
//! above the wait) or the operands overwritten (after a barrier too: the
//! wait completes the multiply for the waiting warp only).
//!
//! On the host each instruction is an emulator call. The multiply is a
//! warpgroup collective: the emulator decodes the descriptors against the
//! block's shared memory by the ISA's layout rules (or gathers A from the
//! 128 threads' fragments), uses only the TF32 bits of each element (the
//! hardware ignores the low 13), and hands each thread its fragment of D
//! (see [`accumulator_position`]). The emulated shared window starts at
//! byte [`EMULATED_WINDOW_BASE`], which is not a multiple of 128: a kernel
//! whose swizzled operands need their atoms aligned must align them from
//! the window address ([`smem_window_address`]), as on the GPU, where the
//! dynamic shared memory is promised 16-byte alignment only; the emulator
//! rejects a swizzled descriptor whose atoms are not aligned.
//!
//! Numerics on the host: each product of two TF32 values is exact, the
//! eight products of one instruction and the accumulator are summed in f64
//! and rounded once to f32, toward zero ([`round_toward_zero`]). The ISA
//! leaves the tensor core's order and rounding unspecified; truncation is
//! what the H200 was measured to do: mage-008's outputs on the GPU against
//! this model rounding to nearest (results/candidates-1) differ as a
//! truncation per instruction predicts (a host model of exact sums
//! truncated, against the same sums rounded to nearest, on normal inputs of
//! the same shapes: 104 of 323 outputs bit-identical at k = 23, 232 of
//! 9100 at k = 200, 1267 of 65536 at k = 256, the largest differences
//! 1.2e-7, 2.6e-6 and 3.8e-6; the GPU: 107 of 323, 299 of 9100, 1689 of
//! 65536, and 1.8e-7, 2.6e-6, 4.8e-6). The GPU may still differ in the
//! last bit where it aligns the products before summing them; with
//! integer inputs whose sums stay below 2^24 both are exact and must agree
//! bit for bit.

#[cfg(not(target_arch = "nvptx64"))]
use crate::emu;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `cvt.rna.tf32.f32`: `x` rounded to TF32 (10 explicit mantissa bits,
/// nearest, ties away from zero), returned as an f32 whose low 13 bits are
/// zero. Its relative error is at most 2^-11.
#[inline(always)]
pub fn tf32_rna(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: pure arithmetic.
        unsafe { asm!("cvt.rna.tf32.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
        f32::from_bits(r)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if x.is_nan() {
            return x;
        }
        // Half a TF32 unit added to the magnitude, then truncated: nearest,
        // ties away from zero; the largest values round to infinity.
        f32::from_bits((x.to_bits() + 0x1000) & TF32_MASK)
    }
}

/// The bits of an f32 that a `.tf32` operand keeps.
pub const TF32_MASK: u32 = 0xFFFF_E000;

/// `x` truncated to TF32 (toward zero): what a multiply reads from an f32
/// whose low 13 bits are not zero. Its relative error is below 2^-10.
#[inline(always)]
pub fn tf32_trunc(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & TF32_MASK)
}

/// `x` rounded to f32 toward zero: how the emulator's tensor core rounds
/// each instruction's sum (see the module doc).
#[cfg(not(target_arch = "nvptx64"))]
pub fn round_toward_zero(x: f64) -> f32 {
    let r = x as f32;
    if r.is_finite() && (r as f64).abs() > x.abs() { f32::from_bits(r.to_bits() - 1) } else { r }
}

/// `fence.proxy.async.shared::cta`: this thread's shared-memory stores so
/// far become visible to the async proxy, which wgmma reads through. Every
/// thread that stored operands calls it before the barrier that precedes
/// the multiply.
#[inline(always)]
pub fn fence_proxy_async_shared() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a memory fence; no operands.
    unsafe {
        asm!("fence.proxy.async.shared::cta;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::fence_proxy_async_shared()
}

/// `wgmma.fence.sync.aligned`: orders this thread's earlier register
/// accesses before the `wgmma.mma_async` that follow. The ISA needs it
/// before the first multiply and wherever other instructions touched the
/// accumulators since; the emulator asks for it after every
/// [`wgmma_wait_group`] as well, which covers both.
#[inline(always)]
pub fn wgmma_fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("wgmma.fence.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::wgmma_fence()
}

/// `wgmma.commit_group.sync.aligned`: the multiplies issued since the last
/// commit form one group.
#[inline(always)]
pub fn wgmma_commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("wgmma.commit_group.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::wgmma_commit_group()
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` of this
/// thread's committed groups are in flight.
#[inline(always)]
pub fn wgmma_wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no register operands.
    unsafe {
        asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::wgmma_wait_group(N)
}

/// Where the block's dynamic shared memory byte `offset` lies in the
/// shared window, the address a descriptor holds. On the GPU the
/// allocation is promised 16-byte alignment only; the emulator's starts at
/// [`EMULATED_WINDOW_BASE`].
#[inline(always)]
pub fn smem_window_address(offset: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        super::smem_addr(offset)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        EMULATED_WINDOW_BASE + offset
    }
}

/// The shared-window address of byte 0 of a block's dynamic shared memory
/// on the emulator: a multiple of 16 and of nothing larger than 16, so
/// that a kernel that needs 128- or 1024-byte aligned swizzle atoms must
/// align them itself (see [`align_up_in_window`]).
pub const EMULATED_WINDOW_BASE: u32 = 0x0190;

/// The smallest byte offset `o >= offset` of the block's dynamic shared
/// memory whose window address is a multiple of `align` (a power of two):
/// where a swizzled operand of `align`-byte atoms may start. Allocate
/// `align - 16` bytes more than the operands need.
#[inline(always)]
pub fn align_up_in_window(offset: u32, align: u32) -> u32 {
    offset + (smem_window_address(offset).wrapping_neg() & (align - 1))
}

/// How a shared-memory operand is swizzled (descriptor bits 62-63).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// Core matrices of 8 rows x 16 bytes, each contiguous (the ISA's
    /// "interleave" mode): element (row, k) of a K-major operand lies at
    /// `(row % 8) * 16 + (row / 8) * SBO + (k_bytes / 16) * LBO + k_bytes % 16`.
    None = 0,
    /// Rows of 128 bytes in 1024-byte atoms; the 16-byte chunk index
    /// (address bits 4-6) is XORed with address bits 7-9.
    Bytes128 = 1,
    /// Rows of 64 bytes; address bits 4-5 XORed with bits 7-8.
    Bytes64 = 2,
    /// Rows of 32 bytes; address bit 4 XORed with bit 7.
    Bytes32 = 3,
}

impl Swizzle {
    /// The bytes of one row of a swizzle atom (16 without swizzle: one core-matrix row).
    pub const fn row_bytes(self) -> u32 {
        match self {
            Swizzle::None => 16,
            Swizzle::Bytes128 => 128,
            Swizzle::Bytes64 => 64,
            Swizzle::Bytes32 => 32,
        }
    }

    /// The bytes after which the XOR pattern repeats: 8 rows of an atom
    /// (1024 for 128-byte swizzle). A descriptor with base offset 0 must
    /// start at a window address whose bits 7 and up, below this, are zero
    /// (CUTLASS asserts the same); bits 4-6, a start further along K within
    /// the row, are free.
    pub const fn pattern_bytes(self) -> u32 {
        8 * self.row_bytes()
    }
}

/// A wgmma shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2), the
/// fields as bytes.
///
/// | bits | field |
/// |---|---|
/// | 0-13 | start address >> 4 |
/// | 16-29 | leading dimension byte offset >> 4 |
/// | 32-45 | stride dimension byte offset >> 4 |
/// | 49-51 | base offset (swizzled modes whose atoms do not start aligned) |
/// | 62-63 | swizzle |
///
/// For a K-major operand (PTX ISA 9.7.15.5.1.2, and CUTLASS's canonical
/// GMMA layouts): the stride byte offset (SBO) is the distance between
/// groups of 8 rows (M for A, N for B), the leading byte offset (LBO) the
/// distance between the two 16-byte halves of the instruction's 32 bytes
/// of K; swizzled modes keep those halves together in a row and ignore LBO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixDescriptor {
    /// Shared-window byte address of element (0, 0), a multiple of 16.
    pub address: u32,
    pub leading_byte_offset: u32,
    pub stride_byte_offset: u32,
    pub base_offset: u32,
    pub swizzle: Swizzle,
}

/// `(x & 0x3FFFF) >> 4`, the ISA's `matrix-descriptor-encode`.
const fn encode_field(x: u32) -> u64 {
    ((x & 0x3FFFF) >> 4) as u64
}

impl MatrixDescriptor {
    /// The descriptor of a K-major operand whose element (0, 0) is at byte
    /// `offset` of the block's dynamic shared memory, with base offset 0.
    #[inline(always)]
    pub fn k_major(offset: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> u64 {
        MatrixDescriptor { address: smem_window_address(offset), leading_byte_offset, stride_byte_offset, base_offset: 0, swizzle }.encode()
    }

    /// The 64-bit register value.
    #[inline(always)]
    pub const fn encode(self) -> u64 {
        encode_field(self.address)
            | encode_field(self.leading_byte_offset) << 16
            | encode_field(self.stride_byte_offset) << 32
            | ((self.base_offset & 7) as u64) << 49
            | (self.swizzle as u64) << 62
    }

    /// The fields of a descriptor; reserved bits must be zero.
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn decode(d: u64) -> Result<MatrixDescriptor, String> {
        let reserved = d & !(0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 7 << 49 | 3 << 62);
        if reserved != 0 {
            return Err(format!("matrix descriptor {d:#018x} sets reserved bits {reserved:#018x}"));
        }
        let field = |shift: u32| ((d >> shift) & 0x3FFF) as u32 * 16;
        let swizzle = [Swizzle::None, Swizzle::Bytes128, Swizzle::Bytes64, Swizzle::Bytes32][(d >> 62) as usize];
        Ok(MatrixDescriptor {
            address: field(0),
            leading_byte_offset: field(16),
            stride_byte_offset: field(32),
            base_offset: ((d >> 49) & 7) as u32,
            swizzle,
        })
    }
}

/// Where register `register` of thread `thread` (0..128 in its warpgroup)
/// lies in the 64 x N accumulator of `wgmma.mma_async.m64nNk8.f32` (PTX ISA
/// figure "WGMMA .m64nNk8 register fragment layout for accumulator matrix
/// D"): warp `w` holds rows `16 w..16 w + 16`; in it, lane `l` holds rows
/// `l / 4` and `l / 4 + 8`, and in each group of 8 columns the two columns
/// `2 (l % 4)` and `2 (l % 4) + 1`. Registers `4 j..4 j + 4` are column
/// group `j`: (row, c), (row, c + 1), (row + 8, c), (row + 8, c + 1).
/// Returns (row, column).
#[inline(always)]
pub const fn accumulator_position(thread: u32, register: u32) -> (u32, u32) {
    let (warp, lane) = (thread / 32, thread % 32);
    let row = 16 * warp + lane / 4 + 8 * (register / 2 % 2);
    let col = 8 * (register / 4) + 2 * (lane % 4) + register % 2;
    (row, col)
}

/// Where register `register` (0..4) of thread `thread` (0..128 in its
/// warpgroup) lies in the 64 x 8 A operand of `wgmma.mma_async.m64nNk8`
/// with A from registers (PTX ISA figure "WGMMA .m64nNk8 register fragment
/// layout for matrix A"; CUTLASS's `ALayout_64x8`): warp `w` holds rows
/// `16 w..16 w + 16`; lane `l` holds rows `l / 4` and `l / 4 + 8` and K
/// columns `l % 4` and `l % 4 + 4`. Registers: (row, k), (row + 8, k),
/// (row, k + 4), (row + 8, k + 4). Returns (row, k).
#[inline(always)]
pub const fn a_fragment_position(thread: u32, register: u32) -> (u32, u32) {
    let (warp, lane) = (thread / 32, thread % 32);
    (16 * warp + lane / 4 + 8 * (register % 2), lane % 4 + 4 * (register / 2))
}

/// Accumulator fragments of the shapes below: one f32 register per element
/// a thread holds (`N / 2` for `m64nNk8`).
pub trait Accumulators {
    /// An empty instruction that reads and writes every register of the
    /// fragment, so the compiler cannot move an access of them across it.
    fn fence(&mut self);
}

/// [`Accumulators::fence`]: after [`wgmma_wait_group`], before the
/// accumulators are read (CUTLASS's `warpgroup_fence_operand`).
#[inline(always)]
pub fn fence_accumulators(d: &mut impl Accumulators) {
    d.fence()
}

macro_rules! mma_tf32_shapes {
    ($($(#[$doc:meta])* $name:ident, $rs:ident, $n:literal => [$first:literal $(, $rest:literal)*];)*) => {$(
        $(#[$doc])*
        ///
        /// `a` and `b` are K-major matrix descriptors ([`MatrixDescriptor`]),
        /// the same in all 128 threads of the warpgroup; `d` is this
        /// thread's fragment ([`accumulator_position`]). With `accumulate`
        /// false, `d`'s values are ignored (D = A·B). Every thread of the
        /// warpgroup calls it together, with [`wgmma_fence`] before.
        #[inline(always)]
        pub fn $name(d: &mut [f32; $n / 2], a: u64, b: u64, accumulate: bool) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: the registers are this thread's; the descriptors name
            // shared memory of the block (the emulator checks the same
            // layout and bounds); the caller fences and waits.
            unsafe {
                asm!(
                    concat!(
                        "{{\n.reg .pred p;\nsetp.ne.b32 p, {scale}, 0;\nwgmma.mma_async.sync.aligned.m64n", $n,
                        "k8.f32.tf32.tf32 {{{", $first, "}" $(, ", {", $rest, "}")*, "}}, {a}, {b}, p, 1, 1;\n}}"
                    ),
                    inout(reg32) d[$first], $(inout(reg32) d[$rest],)*
                    a = in(reg64) a, b = in(reg64) b, scale = in(reg32) accumulate as u32,
                    options(nostack),
                )
            };
            #[cfg(not(target_arch = "nvptx64"))]
            host::mma(d, None, a, b, accumulate, concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32"));
        }

        /// The same multiply with A from registers: `a` is this thread's
        /// four values of the 64 x 8 A ([`a_fragment_position`]), read as
        /// TF32 (their low 13 bits ignored); `b` a K-major descriptor.
        /// The ISA forbids writing `a`'s registers before the
        /// [`wgmma_wait_group`] that completes the multiply; in Rust they
        /// are values, and the compiler keeps them (ptxas tracks the
        /// asynchronous read).
        #[inline(always)]
        pub fn $rs(d: &mut [f32; $n / 2], a: [f32; 4], b: u64, accumulate: bool) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: as for the shared-memory form.
            unsafe {
                asm!(
                    concat!(
                        "{{\n.reg .pred p;\nsetp.ne.b32 p, {scale}, 0;\nwgmma.mma_async.sync.aligned.m64n", $n,
                        "k8.f32.tf32.tf32 {{{", $first, "}" $(, ", {", $rest, "}")*, "}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, p, 1, 1;\n}}"
                    ),
                    inout(reg32) d[$first], $(inout(reg32) d[$rest],)*
                    a0 = in(reg32) a[0].to_bits(), a1 = in(reg32) a[1].to_bits(), a2 = in(reg32) a[2].to_bits(), a3 = in(reg32) a[3].to_bits(),
                    b = in(reg64) b, scale = in(reg32) accumulate as u32,
                    options(nostack),
                )
            };
            #[cfg(not(target_arch = "nvptx64"))]
            host::mma(d, Some(a), 0, b, accumulate, concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 (A from registers)"));
        }

        impl Accumulators for [f32; $n / 2] {
            #[inline(always)]
            fn fence(&mut self) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: an empty template: nothing runs.
                unsafe {
                    asm!(concat!("// accumulators {", $first, "}" $(, " {", $rest, "}")*), inout(reg32) self[$first], $(inout(reg32) self[$rest],)* options(nostack, nomem, preserves_flags))
                };
            }
        }
    )*};
}

mma_tf32_shapes! {
    /// `wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32`: D (64 x 8) += A (64 x 8) · B (8 x 8).
    wgmma_m64n8k8_f32_tf32, wgmma_m64n8k8_f32_tf32_rs, 8 => [0, 1, 2, 3];
    /// `wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32`: D (64 x 64) += A (64 x 8) · B (8 x 64).
    wgmma_m64n64k8_f32_tf32, wgmma_m64n64k8_f32_tf32_rs, 64 => [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
    ];
    /// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`: D (64 x 128) += A (64 x 8) · B (8 x 128).
    wgmma_m64n128k8_f32_tf32, wgmma_m64n128k8_f32_tf32_rs, 128 => [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
        32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63
    ];
    /// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`: D (64 x 256) += A (64 x 8) · B (8 x 256).
    wgmma_m64n256k8_f32_tf32, wgmma_m64n256k8_f32_tf32_rs, 256 => [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
        32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
        64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
        96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127
    ];
}

/// The emulator's model of the multiply.
#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;

    /// K of one instruction.
    const K: u32 = 8;

    /// One thread's part of a multiply: `a` is its A fragment where A
    /// comes from registers (then `a_desc` is unused).
    pub(super) fn mma<const R: usize>(
        d: &mut [f32; R],
        a: Option<[f32; 4]>,
        a_desc: u64,
        b: u64,
        accumulate: bool,
        instruction: &'static str,
    ) {
        let lane = emu::WarpgroupLane {
            instruction,
            uniform: vec![a_desc, b, accumulate as u64],
            registers: d.to_vec(),
            fragment: a.map_or(vec![], |a| a.to_vec()),
        };
        d.copy_from_slice(&emu::warpgroup_async_op(lane, mma_tf32));
    }

    /// The shared-window address of element (row, k) of a K-major 4-byte
    /// operand: rows in groups of 8 at `stride_byte_offset`; within a
    /// group, row `r` at `r * row_bytes`; K in 16-byte chunks, the second
    /// chunk at `leading_byte_offset` without swizzle and right after the
    /// first with it; then the swizzle's XOR on the address bits.
    pub(super) fn k_major_address(desc: &MatrixDescriptor, row: u32, k: u32) -> u32 {
        let (chunk, within) = (k * 4 / 16, k * 4 % 16);
        let chunk_at = if desc.swizzle == Swizzle::None { chunk * desc.leading_byte_offset } else { chunk * 16 };
        let linear = desc.address + (row / 8) * desc.stride_byte_offset + (row % 8) * desc.swizzle.row_bytes() + chunk_at + within;
        let bits = desc.swizzle.row_bytes() / 16 - 1;
        linear ^ (((linear >> 7) & bits) << 4)
    }

    /// `rows` x 8 TF32 values of a K-major operand, each with its low 13
    /// bits dropped. A swizzled operand must start where its pattern
    /// starts (window address bits 7 and up, below the pattern's size,
    /// zero), the case the model and the GPU agree on.
    fn operand(name: &str, d: u64, rows: u32, instruction: &str) -> Vec<[f64; K as usize]> {
        let desc = MatrixDescriptor::decode(d).unwrap_or_else(|e| panic!("`{instruction}`, operand {name}: {e}"));
        if desc.base_offset != 0 {
            panic!(
                "`{instruction}`, operand {name}: the emulator models base offset 0 only (atoms aligned to their pattern), not {}",
                desc.base_offset
            );
        }
        let pattern = desc.swizzle.pattern_bytes();
        if desc.swizzle != Swizzle::None && desc.address % pattern >= 128 {
            panic!(
                "`{instruction}`, operand {name}: {:?} swizzle from shared-window address {:#x}, {} bytes into a {pattern}-byte pattern; \
                 with base offset 0 the operand must start on a multiple of {pattern} (plus at most 112 bytes along K): align it by its \
                 window address (align_up_in_window), not by its offset in the block's shared memory",
                desc.swizzle,
                desc.address,
                desc.address % pattern
            );
        }
        let offset = |address: u32| {
            address.checked_sub(EMULATED_WINDOW_BASE).unwrap_or_else(|| {
                panic!("`{instruction}`, operand {name}: shared-window address {address:#x} lies before the block's shared memory")
            })
        };
        (0..rows)
            .map(|row| {
                let mut values = [0.0; K as usize];
                for (k, v) in values.iter_mut().enumerate() {
                    let bits = emu::async_shared_load(offset(k_major_address(&desc, row, k as u32)));
                    *v = f32::from_bits(bits & TF32_MASK) as f64;
                }
                values
            })
            .collect()
    }

    /// A (64 x 8) from the 128 threads' fragments ([`a_fragment_position`]),
    /// each value with its low 13 bits dropped.
    fn register_operand(lanes: &[emu::WarpgroupLane]) -> Vec<[f64; K as usize]> {
        let mut a = vec![[0.0; K as usize]; 64];
        for (thread, lane) in lanes.iter().enumerate() {
            for (register, v) in lane.fragment.iter().enumerate() {
                let (row, k) = a_fragment_position(thread as u32, register as u32);
                a[row as usize][k as usize] = f32::from_bits(v.to_bits() & TF32_MASK) as f64;
            }
        }
        a
    }

    /// D (64 x N) = A · B (+ D): each thread's registers at
    /// [`accumulator_position`]; the exact products and the accumulator
    /// summed in f64 (the accumulator first, then K in order), rounded once
    /// toward zero.
    fn mma_tf32(lanes: &mut [emu::WarpgroupLane]) {
        let (instruction, uniform) = (lanes[0].instruction, lanes[0].uniform.clone());
        let n = lanes[0].registers.len() as u32 * 2;
        let a = if lanes[0].fragment.is_empty() { operand("A", uniform[0], 64, instruction) } else { register_operand(lanes) };
        let b = operand("B", uniform[1], n, instruction);
        let accumulate = uniform[2] != 0;
        for (thread, lane) in lanes.iter_mut().enumerate() {
            for (register, d) in lane.registers.iter_mut().enumerate() {
                let (row, col) = accumulator_position(thread as u32, register as u32);
                let mut sum = if accumulate { *d as f64 } else { 0.0 };
                for k in 0..K as usize {
                    sum += a[row as usize][k] * b[col as usize][k];
                }
                *d = round_toward_zero(sum);
            }
        }
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn tf32_rounds_to_nearest_with_ties_away_from_zero() {
        let ulp = f32::from_bits(0x3F80_2000) - 1.0; // 2^-10 at 1.0
        assert_eq!(tf32_rna(1.0), 1.0);
        assert_eq!(tf32_rna(1.0 + 0.49 * ulp), 1.0);
        assert_eq!(tf32_rna(1.0 + 0.5 * ulp), 1.0 + ulp, "a tie goes away from zero");
        assert_eq!(tf32_rna(-1.0 - 0.5 * ulp), -1.0 - ulp);
        assert_eq!(tf32_rna(1.0 + 1.5 * ulp), 1.0 + 2.0 * ulp);
        assert_eq!(tf32_rna(f32::MAX), f32::INFINITY);
        assert_eq!(tf32_rna(f32::INFINITY), f32::INFINITY);
        assert!(tf32_rna(f32::NAN).is_nan());
        let tiny = f32::from_bits(0x0000_1800); // subnormal, 1.5 TF32 units
        assert_eq!(tf32_rna(tiny).to_bits(), 0x0000_2000);
        for x in [0.1f32, -3.7, 1e-30, 6.02e23] {
            let r = tf32_rna(x);
            assert_eq!(r.to_bits() & !TF32_MASK, 0);
            assert!(((r - x) / x).abs() <= 2f32.powi(-11), "{x}: {r}");
        }
    }

    #[test]
    fn descriptors_pack_the_isa_fields() {
        let d = MatrixDescriptor {
            address: 0x1230,
            leading_byte_offset: 1024,
            stride_byte_offset: 128,
            base_offset: 0,
            swizzle: Swizzle::None,
        };
        // 0x1230 >> 4 = 0x123; 1024 >> 4 = 0x40 at bit 16; 128 >> 4 = 0x8 at bit 32.
        assert_eq!(d.encode(), 0x0000_0008_0040_0123);
        assert_eq!(MatrixDescriptor::decode(d.encode()).unwrap(), d);
        let s = MatrixDescriptor {
            address: 0x400,
            leading_byte_offset: 16,
            stride_byte_offset: 1024,
            base_offset: 3,
            swizzle: Swizzle::Bytes128,
        };
        assert_eq!(s.encode(), 1 << 62 | 3 << 49 | 0x40 << 32 | 1 << 16 | 0x40);
        assert_eq!(MatrixDescriptor::decode(s.encode()).unwrap(), s);
        assert!(MatrixDescriptor::decode(d.encode() | 1 << 14).unwrap_err().contains("reserved bits"));
    }

    /// The fragment layout against CUTLASS's `CLayout_64xN` (a second
    /// derivation of the ISA figure): thread `t`, value `v` at linear
    /// position `128 (t % 4) + (t / 4) % 8 + 16 (t / 32) + 64 (v % 2) +
    /// 8 (v / 2 % 2) + 512 (v / 4)` of the column-major 64 x N tile.
    #[test]
    fn the_accumulator_fragment_is_cutlass_clayout_64xn() {
        let n = 256u32;
        let mut seen = vec![false; 64 * n as usize];
        for t in 0..128 {
            for v in 0..n / 2 {
                let linear = 128 * (t % 4) + (t / 4) % 8 + 16 * (t / 32) + 64 * (v % 2) + 8 * (v / 2 % 2) + 512 * (v / 4);
                assert_eq!(accumulator_position(t, v), (linear % 64, linear / 64), "thread {t} register {v}");
                let (r, c) = accumulator_position(t, v);
                assert!(!std::mem::replace(&mut seen[(r * n + c) as usize], true));
            }
        }
    }

    /// The A fragment layout against CUTLASS's `ALayout_64x8` (register
    /// source, 32-bit types): thread `t`, value `v` at linear position
    /// `64 (t % 4) + (t / 4) % 8 + 16 (t / 32) + 8 (v % 2) + 256 (v / 2)`
    /// of the column-major 64 x 8 tile.
    #[test]
    fn the_a_fragment_is_cutlass_alayout_64x8() {
        let mut seen = [false; 64 * 8];
        for t in 0..128 {
            for v in 0..4 {
                let linear = 64 * (t % 4) + (t / 4) % 8 + 16 * (t / 32) + 8 * (v % 2) + 256 * (v / 2);
                assert_eq!(a_fragment_position(t, v), (linear % 64, linear / 64), "thread {t} register {v}");
                assert!(!std::mem::replace(&mut seen[linear as usize], true));
            }
        }
    }

    #[test]
    fn sums_round_toward_zero() {
        let one_and_half_ulp = 1.0 + 1.5 * f32::EPSILON as f64;
        assert_eq!(round_toward_zero(one_and_half_ulp), 1.0 + f32::EPSILON);
        assert_eq!(round_toward_zero(-one_and_half_ulp), -1.0 - f32::EPSILON);
        assert_eq!(round_toward_zero(1.0 + 0.9 * f32::EPSILON as f64), 1.0);
        assert_eq!(round_toward_zero(0.1), f32::from_bits(0.1f32.to_bits() - 1), "0.1 as f32 rounds up; truncated it is one below");
        assert_eq!(round_toward_zero(3.0), 3.0);
        assert_eq!(round_toward_zero(0.0).to_bits(), 0);
    }

    #[test]
    fn truncation_keeps_the_tf32_bits() {
        assert_eq!(tf32_trunc(1.0 + 2f32.powi(-10) * 0.99), 1.0);
        assert_eq!(tf32_trunc(-1.999), -f32::from_bits(1.999f32.to_bits() & TF32_MASK));
        for x in [0.1f32, -3.7, 1e-30, 6.02e23] {
            let (hi, lo) = (tf32_trunc(x), x - tf32_trunc(x));
            assert_eq!(hi + lo, x, "the split of {x} is exact");
            assert!(lo.abs() < hi.abs() * 2f32.powi(-10) && lo * x >= 0.0, "{x}");
        }
    }

    #[test]
    fn aligning_in_the_window_rounds_the_address_up() {
        assert_eq!(EMULATED_WINDOW_BASE % 16, 0);
        assert_ne!(EMULATED_WINDOW_BASE % 32, 0);
        for offset in [0, 16, 624, 625 * 16, 5000 * 16] {
            let at = align_up_in_window(offset, 1024);
            assert_eq!(smem_window_address(at) % 1024, 0);
            assert!(at >= offset && at - offset < 1024);
        }
    }

    #[test]
    fn k_major_addresses_follow_core_matrices_and_swizzles() {
        let plain =
            MatrixDescriptor { address: 2048, leading_byte_offset: 1024, stride_byte_offset: 128, base_offset: 0, swizzle: Swizzle::None };
        assert_eq!(host::k_major_address(&plain, 0, 0), 2048);
        assert_eq!(host::k_major_address(&plain, 1, 0), 2048 + 16);
        assert_eq!(host::k_major_address(&plain, 0, 3), 2048 + 12);
        assert_eq!(host::k_major_address(&plain, 0, 4), 2048 + 1024);
        assert_eq!(host::k_major_address(&plain, 9, 5), 2048 + 128 + 16 + 1024 + 4);
        // 128-byte swizzle, atoms of 8 rows x 128 bytes: chunk c of row r lands in chunk c ^ (r % 8).
        let sw = MatrixDescriptor {
            address: 4096,
            leading_byte_offset: 16,
            stride_byte_offset: 1024,
            base_offset: 0,
            swizzle: Swizzle::Bytes128,
        };
        assert_eq!(host::k_major_address(&sw, 0, 5), 4096 + 16 + 4);
        assert_eq!(host::k_major_address(&sw, 3, 0), 4096 + 3 * 128 + 3 * 16);
        assert_eq!(host::k_major_address(&sw, 3, 6), 4096 + 3 * 128 + (1 ^ 3) * 16 + 8);
        assert_eq!(host::k_major_address(&sw, 10, 1), 4096 + 1024 + 2 * 128 + 2 * 16 + 4);
        // An instruction further along K starts 32 bytes on (chunk 2): the
        // XOR acts on the address, so row 3 finds it in chunk 2 ^ 3 = 1.
        let next = MatrixDescriptor { address: 4096 + 32, ..sw };
        assert_eq!(host::k_major_address(&next, 3, 0), 4096 + 3 * 128 + 16);
        let sw32 = MatrixDescriptor { swizzle: Swizzle::Bytes32, stride_byte_offset: 256, ..sw };
        assert_eq!(host::k_major_address(&sw32, 4, 0), 4096 + 4 * 32 + 16);
        assert_eq!(host::k_major_address(&sw32, 5, 4), 4096 + 5 * 32);
        let sw64 = MatrixDescriptor { swizzle: Swizzle::Bytes64, stride_byte_offset: 512, ..sw };
        assert_eq!(host::k_major_address(&sw64, 6, 4), 4096 + 6 * 64 + (1 ^ 3) * 16);
    }
}
