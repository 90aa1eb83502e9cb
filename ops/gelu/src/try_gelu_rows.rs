//! try-gelu-rows (candidate): a two-dimensional grid, each thread one
//! column quad of two rows: one bias load for two quads, no remainder.
//!
//! mage-002 gives each thread one quad of the flattened matrix and finds its
//! bias column as `4q mod width`. There is no integer remainder instruction:
//! ptxas expands `rem.u32` into about twenty (a float reciprocal on the
//! multi-function unit that the GELU's eight `ex2` and `rsqrt` per quad
//! also use, then integer corrections), out of the 86 SASS instructions of
//! a quad (ptxas 13.0.88, disassembled). Neither variant tried so far
//! isolated that cost (`docs/attempts.md`): two quads a thread kept the
//! remainder, and a resident wave striding with one remainder per thread
//! also made each thread's steps run one after another.
//! Here the grid is two-dimensional: lane `l` of warp `w` of block
//! `(bx, by)` takes column quad `32·bx + l` of rows `2·(8·by + w)` and the
//! next, so its column is `4·(32·bx + l)` with no remainder, one bias load
//! serves both quads ([`gelu_column`](crate::gelu_column)), both x loads
//! are issued before any math, and each warp still reads and writes 512
//! contiguous bytes per row. The arithmetic is mage-002's, shared through
//! [`gelu_sigmoid_with`](crate::gelu_sigmoid_with).
//!
//! Prediction (29 registers in the snapshot: eight 256-thread blocks per
//! SM, as mage-002; a thread of two quads runs 134 SASS instructions, 67 a
//! quad against mage-002's 86, and 8 multi-function ops a quad against 9):
//!
//! * 4096x768 (1536 blocks; x and y stay in L2 between calls): from
//!   mage-002's 4.62 to about 4.45 µs, if the issue slots and the
//!   multi-function unit that the remainder takes are on the path once the
//!   data are in L2; unchanged if L2 bandwidth alone sets the time.
//! * 4096x3072 and 16384x4096 (DRAM-bound, mage-002 near the copy's rate):
//!   within a percent of mage-002.
//!
//! Not yet measured on the GPU.

use mage_common::device::*;

/// Warps per block; each takes a run of 32 column quads in rows of its own.
pub const WARPS: u32 = 8;
/// Rows each thread takes at its column quad.
pub const ROWS: u32 = 2;

mage_common::kernel! {
    /// Lane `l` of warp `w` of block `(bx, by)` writes column quad
    /// `32·bx + l` of rows `2·(8·by + w)` and the next; `width` a multiple
    /// of 4.
    pub unsafe fn gelu_rows(x: *const f32, bias: *const f32, y: *mut f32, rows: u32, width: u32) {
        let quads = width / 4;
        let c = block_idx_x() * 32 + lane_id();
        let r = (block_idx_y() * WARPS + warp_id()) * ROWS;
        if c < quads && r < rows {
            let q = r * quads + c;
            unsafe {
                if r + 1 < rows {
                    crate::gelu_column::<2>(x, bias, y, [q, q + quads], 4 * c);
                } else {
                    crate::gelu_column::<1>(x, bias, y, [q], 4 * c);
                }
            }
        }
    }
}

/// Widths that are a multiple of 4, and rows that keep the grid's second
/// dimension within CUDA's 65535.
#[cfg(not(target_arch = "nvptx64"))]
pub fn supports(d: &[u32]) -> bool {
    crate::supports_quads(d) && d[0].div_ceil(WARPS * ROWS) <= 65535
}

#[cfg(not(target_arch = "nvptx64"))]
pub static STAGE: mage_common::op::Stage = mage_common::op::Stage {
    name: "try-gelu-rows",
    summary: "2-D grid: each thread one column quad of two rows, one bias load, no remainder",
    kernels: &[&gelu_rows::KERNEL],
    supports,
    plan: |d| {
        use mage_common::kernel::Dim3;
        mage_common::op::Launch {
            kernel: &gelu_rows::KERNEL,
            grid: Dim3::new((d[1] / 4).div_ceil(32), d[0].div_ceil(WARPS * ROWS), 1),
            block: Dim3::x(WARPS * 32),
            shared_bytes: 0,
            args: crate::args(d[0], d[1]),
        }
        .into()
    },
};
