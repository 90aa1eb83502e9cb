//! Triangle multiplication (the "outgoing edges" contraction of
//! AlphaFold-style models), channels last, FP32, with every stage of its
//! history.
//!
//! `O[i, j, c] = Σ_k A[i, k, c]·B[j, k, c]`: for every channel `c` an
//! `n × n` matrix product `A_c·B_cᵀ`, with the channel the innermost
//! (contiguous) index of all three tensors. Inputs: `a` = A `[n, n, c]`,
//! `b` = B `[n, n, c]`; output `[n, n, c]`.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one output per thread, two loads per FMA straight from global memory |
//! | [`mage_002`] | a 4×4 register tile of (i, j) per thread for one channel: 8 loads per 16 FMAs |
//! | [`mage_003`] | a 4×4 (i, j) tile of channel quads per thread: 128-bit loads, 8 per 64 FMAs (`c % 4 == 0`) |
//! | [`mage_004`] | a GEMM per channel through shared memory (8-channel block tiles, a `cp.async` ring transposing to rows), the block tile by shape: 64x32 where it fills the SMs, else 32x16 |
//! | [`current`] | the dispatcher: mage-001 on the smallest shapes, mage-004 elsewhere |
//!
//! Every stage accumulates each output in the same order (k = 0, 1, ...,
//! one `fma.rn.f32` per term), so the GPU and the emulator agree bit for
//! bit and every stage agrees with every other.
//!
//! # Tolerance
//!
//! Recursive summation with one rounding per term satisfies
//! `|out − ref| ≤ γ_n·Σ_k |A||B|` with `γ_n ≈ n·2^-24`. For the generator's
//! inputs (normal(0, 0.25), σ² = 1/16) `Σ_k |A||B|` is about
//! `(2/π)·σ²·n`; allowing four times `n·σ²` for the spread of that sum
//! gives `abs = 2^-24·n·4nσ² = 2^-24·n²/4` (9.8e-4 at n = 256, 7.3e-7 at
//! n = 7), plus `rel = 2·2^-24·n` for outputs whose terms all share a sign.
//! That is a worst-case bound; the real error is a random walk far below
//! it. It stays small against what an indexing bug does: one wrong or
//! missing term moves an output by about `(2/π)σ² ≈ 0.04` (the allowance
//! at n = 256 is 1/40 of that), a wrong channel or row by the output's own
//! size, about `σ²·√n`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
#[cfg(not(target_arch = "nvptx64"))]
pub mod mage_004;

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

use mage_common::device::*;

/// Channels one block of the channel-tiled stages owns. Eight floats are
/// one 32-byte sector of a `(row, k)` run of A or B (for `c % 8 == 0`), so
/// every sector a block reads from L2 is used whole; lane `l` of a warp
/// takes channel `l % 8`.
pub const GROUP: u32 = 8;

/// The shape of a channel-tiled kernel: a block owns `ti × tj` outputs
/// `(i, j)` for `GROUP` channels, each thread `ri × rj` of them for one
/// channel; A and B go through shared memory in chunks of `tk` values of
/// `k`, `depth` chunks in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelTiles {
    pub ti: u32,
    pub tj: u32,
    pub ri: u32,
    pub rj: u32,
    pub tk: u32,
    pub depth: u32,
}

impl ChannelTiles {
    pub const fn threads(&self) -> u32 {
        GROUP * (self.ti / self.ri) * (self.tj / self.rj)
    }
    /// Row stride, in floats, of the shared A chunk `As[kk][ch][i]`: a
    /// multiple of 4 (rows start 16-byte aligned) and 4 times an odd number,
    /// so the eight channel rows of one `kk` start on eight different bank
    /// quads (see [`channel_tiles`]).
    pub const fn stride_a(&self) -> u32 {
        self.ti + 4
    }
    /// Row stride of the shared B chunk `Bs[kk][ch][j]`, as [`Self::stride_a`].
    pub const fn stride_b(&self) -> u32 {
        self.tj + 4
    }
    /// Bytes of the A part of one chunk buffer; the B part follows.
    pub const fn a_bytes(&self) -> u32 {
        self.tk * GROUP * self.stride_a() * 4
    }
    pub const fn buffer_bytes(&self) -> u32 {
        self.a_bytes() + self.tk * GROUP * self.stride_b() * 4
    }
    /// Dynamic shared memory of a block: `depth` chunk buffers.
    pub const fn shared_bytes(&self) -> u32 {
        self.depth * self.buffer_bytes()
    }
    /// Blocks for `[n, c]`: (i tiles) × (j tiles) × (channel groups).
    pub const fn blocks(&self, n: u32, c: u32) -> u32 {
        n.div_ceil(self.ti) * n.div_ceil(self.tj) * c.div_ceil(GROUP)
    }
    /// Whether the shape is one [`channel_tiles`] is written for.
    pub const fn is_valid(&self) -> bool {
        self.ri.is_multiple_of(4)
            && self.rj.is_multiple_of(4)
            && self.ti.is_multiple_of(self.ri)
            && self.tj.is_multiple_of(self.rj)
            && (self.stride_a() / 4) % 2 == 1
            && (self.stride_b() / 4) % 2 == 1
            && (self.threads() / GROUP).is_multiple_of(4)
            && (self.ti * self.tk).is_multiple_of(self.threads() / GROUP)
            && (self.tj * self.tk).is_multiple_of(self.threads() / GROUP)
            && (self.tk == 8 || self.tk == 16)
            && self.depth >= 2
            && self.depth <= 4
            && self.threads() <= 1024
    }
}

/// Calls `f(x)` for `x` in `0..N` (4, 8 or 16), spelled out. LLVM leaves
/// loops over bodies of this size rolled (a `k` step of 64 multiply-adds,
/// a row of 8 guarded stores), and then the register tile is indexed by a
/// variable and goes to local memory; unrolled, it stays in registers, the
/// shared addresses are constant offsets from one register, and ptxas can
/// issue the loads of step `x + 1` among the multiply-adds of step `x`.
#[inline(always)]
fn unrolled<const N: usize>(mut f: impl FnMut(u32)) {
    const { assert!(N == 4 || N == 8 || N == 16) };
    f(0);
    f(1);
    f(2);
    f(3);
    if N >= 8 {
        f(4);
        f(5);
        f(6);
        f(7);
    }
    if N == 16 {
        f(8);
        f(9);
        f(10);
        f(11);
        f(12);
        f(13);
        f(14);
        f(15);
    }
}

/// `N` floats (a multiple of 4) from shared byte `at` (16-byte aligned), by 128-bit loads.
#[inline(always)]
fn smem_floats<const N: usize>(at: u32) -> [f32; N] {
    let mut v = [0f32; N];
    for q in 0..N / 4 {
        v[4 * q..4 * q + 4].copy_from_slice(&smem_ld4(at + 16 * q as u32).to_array());
    }
    v
}

/// One slab of a chunk: `ROWS` rows of A (or B) from `row0`, `TK` values of
/// `k` from `k0`, channels `ch0..ch0 + GROUP`, to the shared layout
/// `[kk][ch][row]` (row stride `stride` floats) at byte `dst`. `passes`:
/// the block's threads over `GROUP`, the (row, kk) pairs one pass of the
/// block copies. (Constants after inlining.)
struct Slab {
    x: *const f32,
    dst: u32,
    stride: u32,
    row0: u32,
    rows: u32,
    passes: u32,
}

/// Issues this thread's 4-byte `cp.async` of `slab` for the chunk at `k0`:
/// channel `t % GROUP` of the (row, kk) pairs `q = t / GROUP + passes·m`,
/// `row = q % rows`, `kk = q / rows`. Elements outside the tensor are
/// zero-filled: their source is clamped to a valid element and copies 0
/// bytes. `FULL`: the whole chunk lies below `n` (no `k` check).
///
/// A warp's copies are 8 channels (one 32-byte global sector) of 4
/// consecutive rows; in shared memory words `(kk·8 + ch)·stride + row`,
/// which for a stride of 4 times an odd number fall on 32 banks.
///
/// # Safety
/// `slab.x` must hold an `[n, n, c]` tensor, `n, c ≥ 1`.
#[inline(always)]
unsafe fn issue_slab<const TK: usize, const FULL: bool>(slab: &Slab, k0: u32, ch0: u32, n: u32, c: u32) {
    let (rows, passes) = (slab.rows, slab.passes);
    let t = thread_idx_x();
    let (ch, p) = (t % GROUP, t / GROUP);
    // The rows a thread copies (one, or rows / passes rows `passes` apart),
    // and the kk step between its copies of one row.
    let per_thread_rows = if passes >= rows { 1 } else { rows / passes };
    let kk_step = if passes >= rows { passes / rows } else { 1 };
    let kk_first = p / rows;
    for u in 0..per_thread_rows {
        let r = p % rows + passes * u;
        let (row, chg) = (slab.row0 + r, ch0 + ch);
        let bytes = if row < n && chg < c { 4 } else { 0 };
        // This row's first element of the chunk: copy `v` reads `v·kk_step·c`
        // elements on, an offset from one pointer (one `IMAD.WIDE` a copy).
        let first = slab.x.wrapping_add((row.min(n - 1) * n * c + chg.min(c - 1) + (k0 + kk_first).min(n - 1) * c) as usize);
        for v in 0..TK as u32 / kk_step {
            let kk = kk_first + kk_step * v;
            let dst = slab.dst + ((kk * GROUP + ch) * slab.stride + r) * 4;
            if FULL || k0 + kk < n {
                unsafe { cp_async_ca_4_zfill(dst, first, v * kk_step * c, bytes) };
            } else {
                unsafe { cp_async_ca_4_zfill(dst, first, 0, 0) };
            }
        }
    }
}

/// The kernel body of the channel-tiled stages: block `b` = (g · tiles_i +
/// bi) · tiles_j + bj computes `O[TI·bi.., TJ·bj.., 8g..8g + 8]` as a GEMM
/// per channel.
///
/// Shared memory holds `DEPTH` chunk buffers, each A's `[TK][GROUP][TI]`
/// and B's `[TK][GROUP][TJ]` (k, channel, row: rows contiguous, each row
/// padded by 4 floats), filled by 4-byte `cp.async` that transpose the
/// channel-last tensors on the way (see `issue_slab`). Thread `t` owns
/// channel `t % 8` and the `RI × RJ` outputs at rows `RI·(p / (TJ/RJ))..`
/// and columns `RJ·(p % (TJ/RJ))..`, `p = t / 8`. Per `k` it reads `RI/4`
/// quads of A and `RJ/4` of B (128-bit shared loads) and does `RI·RJ`
/// multiply-adds. The 8 lanes of a quarter warp read the same row quad of
/// 8 channel rows, whose starts are 4 banks apart: 32 words on 32 banks.
///
/// The ring: `DEPTH - 1` chunks are issued before the loop, one commit
/// group each; step `s` waits until at most `DEPTH - 2` groups are in
/// flight (chunk `s` has landed), meets the block at a barrier (every
/// thread's copies of chunk `s` are visible, and every thread is done with
/// chunk `s - 1`), issues chunk `s + DEPTH - 1` into the buffer that held
/// chunk `s - 1`, and multiplies chunk `s`. A group is committed every
/// step, empty past the last chunk, so the count stays right.
///
/// Every output is `acc = fma(A[i,k,ch], B[j,k,ch], acc)` for `k = 0, 1,
/// ...` from 0, and the zero-filled `k` past `n` leave it unchanged: the
/// same bits as every other stage.
///
/// A quarter warp stores 8 consecutive channels of one output: one 32-byte
/// sector.
///
/// # Safety
/// `a`, `b` and `o` must hold `[n, n, c]` tensors with `n, c ≥ 1`; the
/// launch must have `ChannelTiles::threads` threads,
/// `ChannelTiles::shared_bytes` of shared memory and `ChannelTiles::blocks`
/// blocks (a 1-D grid).
#[inline(always)]
pub unsafe fn channel_tiles<const TI: u32, const TJ: u32, const RI: usize, const RJ: usize, const TK: usize, const DEPTH: u32>(
    a: *const f32,
    b: *const f32,
    o: *mut f32,
    n: u32,
    c: u32,
) {
    const { assert!(ChannelTiles { ti: TI, tj: TJ, ri: RI as u32, rj: RJ as u32, tk: TK as u32, depth: DEPTH }.is_valid()) };
    let shape = ChannelTiles { ti: TI, tj: TJ, ri: RI as u32, rj: RJ as u32, tk: TK as u32, depth: DEPTH };
    let passes = shape.threads() / GROUP;
    let place = unsafe { Place::of(shape, n, c) };
    let issue = |chunk: u32| {
        let buf = chunk % DEPTH * shape.buffer_bytes();
        let sa = Slab { x: a, dst: buf, stride: shape.stride_a(), row0: place.i0, rows: TI, passes };
        let sb = Slab { x: b, dst: buf + shape.a_bytes(), stride: shape.stride_b(), row0: place.j0, rows: TJ, passes };
        let k0 = chunk * TK as u32;
        unsafe {
            if k0 + TK as u32 <= n {
                issue_slab::<TK, true>(&sa, k0, place.ch0, n, c);
                issue_slab::<TK, true>(&sb, k0, place.ch0, n, c);
            } else {
                issue_slab::<TK, false>(&sa, k0, place.ch0, n, c);
                issue_slab::<TK, false>(&sb, k0, place.ch0, n, c);
            }
        }
    };
    let chunks = n.div_ceil(TK as u32);
    for chunk in 0..DEPTH - 1 {
        if chunk < chunks {
            issue(chunk);
        }
        cp_async_commit();
    }
    let mut acc = [[0f32; RJ]; RI];
    for chunk in 0..chunks {
        // Chunk `chunk` has landed: only the newer groups may be in flight ...
        match DEPTH {
            2 => cp_async_wait_group::<0>(),
            3 => cp_async_wait_group::<1>(),
            _ => cp_async_wait_group::<2>(),
        }
        // ... for every thread; and everyone is done with chunk `chunk - 1`.
        sync_threads();
        if chunk + DEPTH - 1 < chunks {
            issue(chunk + DEPTH - 1);
        }
        cp_async_commit();
        multiply_chunk::<RI, RJ, TK>(&mut acc, shape, chunk % DEPTH * shape.buffer_bytes(), &place);
    }
    unsafe { store_outputs(o, &acc, &place, n, c) }
}

/// Where a thread's outputs lie: the block's first row `i0`, column `j0`
/// and channel `ch0`; the thread's channel `ch` within the group and its
/// first row `ri0` and column `rj0` within the block tile.
struct Place {
    i0: u32,
    j0: u32,
    ch0: u32,
    ch: u32,
    ri0: u32,
    rj0: u32,
}

impl Place {
    /// Block `b` = (g · tiles_i + bi) · tiles_j + bj owns `O[ti·bi.., tj·bj..,
    /// 8g..8g + 8]`; thread `t` channel `t % 8` and the `ri × rj` outputs
    /// at rows `ri·(p / (tj/rj))..`, columns `rj·(p % (tj/rj))..`, `p = t / 8`.
    ///
    /// # Safety
    /// `n, c ≥ 1`.
    #[inline(always)]
    unsafe fn of(shape: ChannelTiles, n: u32, c: u32) -> Place {
        let t = thread_idx_x();
        let (ch, p) = (t % GROUP, t / GROUP);
        let cols = shape.tj / shape.rj;
        let (tiles_i, tiles_j) = (n.div_ceil(shape.ti), n.div_ceil(shape.tj));
        // SAFETY: n, c ≥ 1 (the launch's contract): drops the division-by-zero checks.
        unsafe { core::hint::assert_unchecked(n > 0 && c > 0 && tiles_j > 0 && tiles_i * tiles_j > 0) };
        let block = block_idx_x();
        let (g, ij) = (block / (tiles_i * tiles_j), block % (tiles_i * tiles_j));
        Place {
            i0: shape.ti * (ij / tiles_j),
            j0: shape.tj * (ij % tiles_j),
            ch0: GROUP * g,
            ch,
            ri0: shape.ri * (p / cols),
            rj0: shape.rj * (p % cols),
        }
    }
}

/// The multiply-adds of one chunk from the buffer at byte `buf`: per `kk`
/// the thread's `RI` values of A and `RJ` of B (128-bit shared loads),
/// then `acc[x][y] = fma(a[x], b[y], acc[x][y])`.
#[inline(always)]
fn multiply_chunk<const RI: usize, const RJ: usize, const TK: usize>(acc: &mut [[f32; RJ]; RI], shape: ChannelTiles, buf: u32, at: &Place) {
    unrolled::<TK>(|kk| {
        let row = kk * GROUP + at.ch;
        let av = smem_floats::<RI>(buf + (row * shape.stride_a() + at.ri0) * 4);
        let bv = smem_floats::<RJ>(buf + shape.a_bytes() + (row * shape.stride_b() + at.rj0) * 4);
        for x in 0..RI {
            for y in 0..RJ {
                acc[x][y] = fma(av[x], bv[y], acc[x][y]);
            }
        }
    });
}

/// Stores the thread's register tile, skipping what lies outside `[n, n,
/// c]`. A quarter warp stores 8 consecutive channels of one output: one
/// 32-byte sector.
///
/// # Safety
/// `o` must hold the `[n, n, c]` output; no other thread writes these outputs.
#[inline(always)]
unsafe fn store_outputs<const RI: usize, const RJ: usize>(o: *mut f32, acc: &[[f32; RJ]; RI], at: &Place, n: u32, c: u32) {
    let (ch, i, j) = (at.ch0 + at.ch, at.i0 + at.ri0, at.j0 + at.rj0);
    if ch < c {
        unrolled::<RI>(|x| {
            if i + x < n {
                unrolled::<RJ>(|y| {
                    // Indexed only inside the tensor: past it, (i·n + j)·c may pass 2^32.
                    if j + y < n {
                        unsafe { st(o, ((i + x) * n + j + y) * c + ch, acc[x as usize][y as usize]) };
                    }
                });
            }
        });
    }
}

/// The block tiles of the channel-tiled stages (see their modules for why these).
pub const TILES_32X16: ChannelTiles = ChannelTiles { ti: 32, tj: 16, ri: 4, rj: 4, tk: 16, depth: 3 };
pub const TILES_64X32: ChannelTiles = ChannelTiles { ti: 64, tj: 32, ri: 8, rj: 8, tk: 8, depth: 3 };

/// A kernel entry running [`channel_tiles`] with the constant tile shape `$shape`.
macro_rules! channel_tiles_entry {
    ($(#[$attr:meta])* $name:ident, $shape:expr) => {
        mage_common::kernel! {
            $(#[$attr])*
            pub unsafe fn $name(a: *const f32, b: *const f32, o: *mut f32, n: u32, c: u32) {
                const S: ChannelTiles = $shape;
                unsafe { channel_tiles::<{ S.ti }, { S.tj }, { S.ri as usize }, { S.rj as usize }, { S.tk as usize }, { S.depth }>(a, b, o, n, c) }
            }
        }
    };
}

channel_tiles_entry!(
    /// [`TILES_32X16`]: 256 threads, 4x4 outputs each; any `n`, `c`.
    triangle_tiles_32x16,
    TILES_32X16
);
channel_tiles_entry!(
    /// [`TILES_64X32`]: 256 threads, 8x8 outputs each; any `n`, `c`.
    triangle_tiles_64x32,
    TILES_64X32
);
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::fixtures::normal_input;
    use mage_common::numeric::Tolerance;
    use mage_common::op::Extent::Dim;
    use mage_common::op::{Arg, DEFAULT_GENERATOR, Elem, Generator, HostBuf, Input, Op, Stage, Workload};

    /// The variance of the generator's inputs, which the tolerance assumes.
    pub const INPUT_VARIANCE: f64 = 0.0625;

    /// The kernel arguments every triangle kernel takes, in order.
    pub fn args(n: u32, c: u32) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Output, Arg::U32(n), Arg::U32(c)]
    }

    /// The launch of a channel-tiled `kernel` of tile `shape` over `[n, c]`.
    pub fn channel_tiles_launch(kernel: &'static mage_common::Kernel, shape: ChannelTiles, d: &[u32]) -> mage_common::op::Plan {
        mage_common::op::Launch {
            kernel,
            grid: mage_common::kernel::Dim3::x(shape.blocks(d[0], d[1])),
            block: mage_common::kernel::Dim3::x(shape.threads()),
            shared_bytes: shape.shared_bytes(),
            args: args(d[0], d[1]),
        }
        .into()
    }

    /// The f64 reference.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Vec<f64> {
        let (n, c) = (dims[0] as usize, dims[1] as usize);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let mut out = vec![0f64; n * n * c];
        for i in 0..n {
            for j in 0..n {
                let o = &mut out[(i * n + j) * c..][..c];
                for k in 0..n {
                    let (ar, br) = (&a[(i * n + k) * c..][..c], &b[(j * n + k) * c..][..c]);
                    for ch in 0..c {
                        o[ch] += ar[ch] as f64 * br[ch] as f64;
                    }
                }
            }
        }
        out
    }

    /// The allowance for contraction length `n` (see the crate doc).
    pub fn tolerance(dims: &[u32], _: &[HostBuf]) -> Tolerance {
        let (n, u) = (dims[0] as f64, f32::EPSILON as f64 / 2.0);
        Tolerance::new(u * n * 4.0 * n * INPUT_VARIANCE, 2.0 * u * n)
    }

    fn generate(dims: &[u32], seed: u64) -> Vec<HostBuf> {
        let len = dims[0] as usize * dims[0] as usize * dims[1] as usize;
        vec![HostBuf::F32(normal_input(seed, 0, len)), HostBuf::F32(normal_input(seed, 1, len))]
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 4] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE];

    pub static OP: Op = Op {
        name: "triangle",
        package: "mage-triangle",
        dim_names: &["n", "c"],
        min_dims: &[1, 1],
        default_dims: &[128, 32],
        sweep: &[
            Workload::new(&[64, 8]),
            Workload::new(&[128, 32]),
            Workload::new(&[256, 32]),
            Workload::new(&[128, 64]),
            Workload::new(&[256, 64]),
            Workload::new(&[512, 32]),
            Workload::new(&[7, 5]),
        ],
        inputs: &[
            Input { file: "a", role: "A", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
            Input { file: "b", role: "B", elem: Elem::F32, shape: &[Dim(0), Dim(0), Dim(1)] },
        ],
        output: &[Dim(0), Dim(0), Dim(1)],
        constants: &[],
        check_inputs: |_, _| Ok(()),
        generators: &[Generator { name: DEFAULT_GENERATOR, summary: "every input normal(0, 0.25)", generate }],
        reference,
        tolerance,
        cost: |d| {
            let (n, c) = (d[0] as u64, d[1] as u64);
            (4 * 3 * n * n * c, 2 * n * n * n * c)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
