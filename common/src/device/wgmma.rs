//! Hopper's warpgroup matrix multiply (`wgmma`, sm_90a only) on TF32
//! operands in shared memory, and what it needs around it.
//!
//! A warpgroup (four consecutive warps, the first a multiple of four) issues
//! one `wgmma.mma_async.m64nNk8.f32.tf32.tf32` together: D (64 x N, FP32,
//! spread over the 128 threads' registers) += A (64 x 8) · B (8 x N). A and
//! B are read from shared memory through 64-bit matrix descriptors
//! ([`MatrixDescriptor`]), both K-major: TF32 has no transposed form, so
//! A is stored by rows of K and B by columns of K.
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
//! warpgroup collective: the emulator decodes both descriptors against the
//! block's shared memory by the ISA's layout rules, uses only the TF32 bits
//! of each element (the hardware ignores the low 13), and hands each thread
//! its fragment of D (see [`accumulator_position`]).
//!
//! Numerics on the host: each product of two TF32 values is exact, the
//! eight products of one instruction and the accumulator are summed in f64
//! and rounded once to f32. The ISA leaves the tensor core's order and
//! rounding unspecified, so the GPU may differ in the last bits of each
//! instruction's sum; with integer inputs whose sums stay below 2^24 both
//! are exact and must agree bit for bit.

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
/// shared window, the address a descriptor holds. The emulator's window
/// starts at 0.
#[inline(always)]
pub fn smem_window_address(offset: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        super::smem_addr(offset)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        offset
    }
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
    ($($(#[$doc:meta])* $name:ident, $n:literal => [$first:literal $(, $rest:literal)*];)*) => {$(
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
            host::mma(d, a, b, accumulate, concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32"));
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
    wgmma_m64n8k8_f32_tf32, 8 => [0, 1, 2, 3];
    /// `wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32`: D (64 x 64) += A (64 x 8) · B (8 x 64).
    wgmma_m64n64k8_f32_tf32, 64 => [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
    ];
    /// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`: D (64 x 128) += A (64 x 8) · B (8 x 128).
    wgmma_m64n128k8_f32_tf32, 128 => [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
        32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63
    ];
    /// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`: D (64 x 256) += A (64 x 8) · B (8 x 256).
    wgmma_m64n256k8_f32_tf32, 256 => [
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

    pub(super) fn mma<const R: usize>(d: &mut [f32; R], a: u64, b: u64, accumulate: bool, instruction: &'static str) {
        let lane = emu::WarpgroupLane { instruction, uniform: vec![a, b, accumulate as u64], registers: d.to_vec() };
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

    /// `rows` x 8 TF32 values of a K-major operand, each with its low 13 bits dropped.
    fn operand(name: &str, d: u64, rows: u32, instruction: &str) -> Vec<[f64; K as usize]> {
        let desc = MatrixDescriptor::decode(d).unwrap_or_else(|e| panic!("`{instruction}`, operand {name}: {e}"));
        if desc.base_offset != 0 {
            panic!(
                "`{instruction}`, operand {name}: the emulator models base offset 0 only (atoms aligned to their pattern), not {}",
                desc.base_offset
            );
        }
        (0..rows)
            .map(|row| {
                let mut values = [0.0; K as usize];
                for (k, v) in values.iter_mut().enumerate() {
                    let bits = emu::async_shared_load(k_major_address(&desc, row, k as u32));
                    *v = f32::from_bits(bits & TF32_MASK) as f64;
                }
                values
            })
            .collect()
    }

    /// D (64 x N) = A · B (+ D): each thread's registers at
    /// [`accumulator_position`]; the exact products and the accumulator
    /// summed in f64, rounded once.
    fn mma_tf32(lanes: &mut [emu::WarpgroupLane]) {
        let (instruction, uniform) = (lanes[0].instruction, lanes[0].uniform.clone());
        let n = lanes[0].registers.len() as u32 * 2;
        let a = operand("A", uniform[0], 64, instruction);
        let b = operand("B", uniform[1], n, instruction);
        let accumulate = uniform[2] != 0;
        for (thread, lane) in lanes.iter_mut().enumerate() {
            for (register, d) in lane.registers.iter_mut().enumerate() {
                let (row, col) = accumulator_position(thread as u32, register as u32);
                let mut sum = if accumulate { *d as f64 } else { 0.0 };
                for k in 0..K as usize {
                    sum += a[row as usize][k] * b[col as usize][k];
                }
                *d = sum as f32;
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
