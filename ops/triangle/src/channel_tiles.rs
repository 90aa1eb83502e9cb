//! The channel tiles: the kernel body of mage-004 and mage-005 (a GEMM per
//! channel through shared memory) and of triangle_backward mage-002 (the
//! two gradients, each such a GEMM), its tile shapes and its kernel
//! entries.
//!
//! [`ChannelTiles`] is the shape of a block (outputs, register tile, `k`
//! chunk, ring depth, warp channels, split of `k`); [`contract`] is the
//! kernel body, generic over that shape, of `O[i, j, ch] = Σ_k P[i, k,
//! ch]·Q[j, k, ch]` for two [`Operand`]s, each read with its row as its
//! first index (the forward's A and B) or as its second (the gradients'
//! B, A and, for dB, dO); [`channel_tiles`] is the forward's contraction
//! `A·Bᵀ` and [`gradient_tiles`] the gradients' `dO·B` and `dOᵀ·A` in one
//! grid. [`TILES_32X16`], [`TILES_64X32`] and [`TILES_32X16_SPLIT`] are
//! the shapes the stages launch, each one `kernel!` entry of the forward
//! (`triangle_tiles_32x16`, `triangle_tiles_64x32`,
//! `triangle_tiles_32x16_split`) and, the first two, one of the gradients
//! (`triangle_backward_tiles_32x16`, `triangle_backward_tiles_64x32`);
//! [`channel_tiles_launch`] and [`gradient_tiles_launch`] are their
//! launches over `[n, c]`. Frozen history: the entries' ptxas resources
//! are pinned by `tests/resources.rs` and their bits by `tests/stages.rs`
//! and `tests/backward.rs` (every entry against the op's mage-001), and the
//! forward's entries compile to the PTX they had before the body took two
//! operand forms; a new stage that changes the body takes a module of its
//! own.

use mage_common::device::*;

/// Channels one block of the channel-tiled stages owns. Eight floats are
/// one 32-byte sector of a `(row, k)` run of A or B (for `c % 8 == 0`), so
/// every sector a block reads from L2 is used whole; lane `l` of a warp
/// takes channel `l % 8`.
pub const GROUP: u32 = 8;

/// The shape of a channel-tiled kernel: a block owns `ti × tj` outputs
/// `(i, j)` for `GROUP` channels, each thread `ri × rj` of them for one
/// channel; A and B go through shared memory in chunks of `tk` values of
/// `k`, `depth` chunks in flight. `warp_channel`: a warp owns one channel
/// (its 32 threads the channel's `ti × tj` tile) instead of lane `l`
/// owning channel `l % 8`. `split`: the block's threads form `split`
/// groups, each summing its own share of every chunk's `k` (see
/// [`channel_tiles`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelTiles {
    pub ti: u32,
    pub tj: u32,
    pub ri: u32,
    pub rj: u32,
    pub tk: u32,
    pub depth: u32,
    pub warp_channel: bool,
    pub split: u32,
}

impl ChannelTiles {
    /// Threads that own one channel's `ti × tj` tile (in one split group).
    pub const fn per_channel(&self) -> u32 {
        (self.ti / self.ri) * (self.tj / self.rj)
    }
    pub const fn threads(&self) -> u32 {
        GROUP * self.per_channel() * self.split
    }
    /// Whether the outputs go through shared memory on their way out: where
    /// a warp holds one channel (so that a quarter warp stores 8 channels
    /// of one output, one 32-byte sector) or split groups add up.
    pub const fn staged_outputs(&self) -> bool {
        self.warp_channel || self.split > 1
    }
    /// Floats between two channels of the output staging `Os[ch][i][j]`
    /// (rows of `tj + 4`): 4 times an odd number (`ti·(tj + 4)` is a
    /// multiple of 8), so the 8 channels that one read of the staging meets
    /// start on 8 different bank quads.
    pub const fn staging_channel_stride(&self) -> u32 {
        self.ti * (self.tj + 4) + 4
    }
    /// Bytes of the output staging: one `[GROUP][ti][tj + 4]` tile per split group.
    pub const fn staging_bytes(&self) -> u32 {
        if self.staged_outputs() { self.split * GROUP * self.staging_channel_stride() * 4 } else { 0 }
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
    /// Dynamic shared memory of a block: `depth` chunk buffers, which the
    /// output staging reuses.
    pub const fn shared_bytes(&self) -> u32 {
        let ring = self.depth * self.buffer_bytes();
        if ring > self.staging_bytes() { ring } else { self.staging_bytes() }
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
            && (self.tk == 4 || self.tk == 8 || self.tk == 16)
            && self.depth >= 2
            && self.depth <= 4
            && self.threads() <= 1024
            && (!self.warp_channel || self.per_channel() == 32)
            && (self.split == 1 || self.split == 2)
            && self.tk.is_multiple_of(self.split)
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

/// `N` floats (a multiple of 4) by 128-bit loads: quad `q` from shared
/// byte `at + step·q` (16-byte aligned).
#[inline(always)]
fn smem_quads<const N: usize>(at: u32, step: u32) -> [f32; N] {
    let mut v = [0f32; N];
    for q in 0..N / 4 {
        v[4 * q..4 * q + 4].copy_from_slice(&smem_ld4(at + step * q as u32).to_array());
    }
    v
}

/// One operand of a channel-tiled contraction `O[row_p, row_q, ch] = Σ_k
/// P[row_p, k, ch]·Q[row_q, k, ch]`: an `[n, n, c]` tensor `x`, its first
/// index the row (`cols` false: the forward's A and B) or the contracted
/// `k` (`cols` true: `dA = Σ_j dO[i, j]·B[j, k]` takes B's `k` for its row
/// and contracts over B's first index `j`).
#[derive(Clone, Copy)]
pub struct Operand {
    pub x: *const f32,
    pub cols: bool,
}

impl Operand {
    /// `X[row, k, ch]`.
    #[inline(always)]
    pub fn rows(x: *const f32) -> Operand {
        Operand { x, cols: false }
    }
    /// `X[k, row, ch]`.
    #[inline(always)]
    pub fn cols(x: *const f32) -> Operand {
        Operand { x, cols: true }
    }
    /// The element of (`row`, `k`, `ch`) (each inside `[n, n, c]`). The
    /// rows form is written as it was before operands had two forms, so
    /// that the forward's entries compile to the PTX they had.
    #[inline(always)]
    fn at(&self, row: u32, k: u32, ch: u32, n: u32, c: u32) -> u32 {
        if self.cols { k * n * c + row * c + ch } else { row * n * c + ch + k * c }
    }
    /// Elements between `k` and `k + 1` of one row.
    #[inline(always)]
    fn k_stride(&self, n: u32, c: u32) -> u32 {
        if self.cols { n * c } else { c }
    }
}

/// One slab of a chunk: `ROWS` rows of an operand from `row0`, `TK` values
/// of `k` from `k0`, channels `ch0..ch0 + GROUP`, to the shared layout
/// `[kk][ch][row]` (row stride `stride` floats) at byte `dst`. `passes`:
/// the block's threads over `GROUP`, the (row, kk) pairs one pass of the
/// block copies. (Constants after inlining.)
struct Slab {
    x: Operand,
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
        // This row's first element of the chunk: copy `v` reads `v·kk_step`
        // times the operand's `k` stride (`c`, or `n·c` by columns) elements
        // on, an offset from one pointer (one `IMAD.WIDE` a copy).
        let x = slab.x;
        let first = x.x.wrapping_add(x.at(row.min(n - 1), (k0 + kk_first).min(n - 1), chg.min(c - 1), n, c) as usize);
        for v in 0..TK as u32 / kk_step {
            let kk = kk_first + kk_step * v;
            let dst = slab.dst + ((kk * GROUP + ch) * slab.stride + r) * 4;
            if FULL || k0 + kk < n {
                unsafe { cp_async_ca_4_zfill(dst, first, v * kk_step * x.k_stride(n, c), bytes) };
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
/// channel-last tensors on the way (see `issue_slab`). Each thread owns
/// one channel and `RI × RJ` outputs of it (see `Place::of`); per `k` it
/// reads `RI/4` quads of A and `RJ/4` of B (128-bit shared loads) and does
/// `RI·RJ` multiply-adds.
///
/// The ring: `DEPTH - 1` chunks are issued before the loop, one commit
/// group each; step `s` waits until at most `DEPTH - 2` groups are in
/// flight (chunk `s` has landed), meets the block at a barrier (every
/// thread's copies of chunk `s` are visible, and every thread is done with
/// chunk `s - 1`), issues chunk `s + DEPTH - 1` into the buffer that held
/// chunk `s - 1`, and multiplies chunk `s`. A group is committed every
/// step, empty past the last chunk, so the count stays right.
///
/// With `SPLIT` = 1 every output is `acc = fma(A[i,k,ch], B[j,k,ch], acc)`
/// for `k = 0, 1, ...` from 0, and the zero-filled `k` past `n` leave it
/// unchanged: the same bits as every other stage. With `SPLIT` = 2 group
/// `s` sums the `k` whose place in their chunk is in its half (`kk` in
/// `s·TK/2..`), in increasing order, and the output is group 0's sum plus
/// group 1's: another order, so other bits (see `OTHER_ORDER`).
///
/// The outputs: with lane `l` owning channel `l % 8`, a quarter warp
/// stores 8 consecutive channels of one output (one 32-byte sector)
/// straight from its registers. Otherwise (`staged_outputs`) they go
/// through shared memory first (see `stage_outputs`).
///
/// # Safety
/// `a`, `b` and `o` must hold `[n, n, c]` tensors with `n, c ≥ 1`; the
/// launch must have `ChannelTiles::threads` threads,
/// `ChannelTiles::shared_bytes` of shared memory and `ChannelTiles::blocks`
/// blocks (a 1-D grid).
#[inline(always)]
pub unsafe fn channel_tiles<
    const TI: u32,
    const TJ: u32,
    const RI: usize,
    const RJ: usize,
    const TK: usize,
    const DEPTH: u32,
    const WARP_CHANNEL: bool,
    const SPLIT: u32,
>(
    a: *const f32,
    b: *const f32,
    o: *mut f32,
    n: u32,
    c: u32,
) {
    unsafe { contract::<TI, TJ, RI, RJ, TK, DEPTH, WARP_CHANNEL, SPLIT>(Operand::rows(a), Operand::rows(b), o, n, c, block_idx_x()) }
}

/// [`channel_tiles`] over any two operands: `O[i, j, ch] = Σ_k P[i, k,
/// ch]·Q[j, k, ch]` (`p` in the place of A, `q` of B, rows and `k` as each
/// [`Operand`] says), for the block tile `block` of the grid that
/// [`channel_tiles`] numbers (`(g · tiles_i + bi) · tiles_j + bj`), which
/// need not be the launch's block index: a launch may hold several
/// contractions, each its own range of blocks.
///
/// # Safety
/// `p.x`, `q.x` and `o` must hold `[n, n, c]` tensors with `n, c ≥ 1`,
/// `p` and `q` either layout of [`Operand`]; `block <
/// ChannelTiles::blocks`; the launch must have `ChannelTiles::threads`
/// threads and `ChannelTiles::shared_bytes` of shared memory (a 1-D grid),
/// and no other block may write this tile of `o`.
#[inline(always)]
pub unsafe fn contract<
    const TI: u32,
    const TJ: u32,
    const RI: usize,
    const RJ: usize,
    const TK: usize,
    const DEPTH: u32,
    const WARP_CHANNEL: bool,
    const SPLIT: u32,
>(
    p: Operand,
    q: Operand,
    o: *mut f32,
    n: u32,
    c: u32,
    block: u32,
) {
    let shape = const {
        let s = ChannelTiles {
            ti: TI,
            tj: TJ,
            ri: RI as u32,
            rj: RJ as u32,
            tk: TK as u32,
            depth: DEPTH,
            warp_channel: WARP_CHANNEL,
            split: SPLIT,
        };
        assert!(s.is_valid());
        s
    };
    let passes = shape.threads() / GROUP;
    let place = unsafe { Place::of(shape, n, c, block) };
    let issue = |chunk: u32| {
        let buf = chunk % DEPTH * shape.buffer_bytes();
        let sa = Slab { x: p, dst: buf, stride: shape.stride_a(), row0: place.i0, rows: TI, passes };
        let sb = Slab { x: q, dst: buf + shape.a_bytes(), stride: shape.stride_b(), row0: place.j0, rows: TJ, passes };
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
    unsafe { if shape.staged_outputs() { stage_outputs(o, &acc, shape, &place, n, c) } else { store_outputs(o, &acc, &place, n, c) } }
}

/// Where a thread's outputs lie: the block's first row `i0`, column `j0`
/// and channel `ch0`; the thread's channel `ch` within the group, its
/// first row `ri0` and column `rj0` within the block tile, the rows
/// `step_i` and columns `step_j` between its quads of rows and of
/// columns, its split group, and the first `kk` of every chunk the group
/// sums.
struct Place {
    i0: u32,
    j0: u32,
    ch0: u32,
    ch: u32,
    ri0: u32,
    rj0: u32,
    step_i: u32,
    step_j: u32,
    kk0: u32,
}

impl Place {
    /// Block `b` = (g · tiles_i + bi) · tiles_j + bj owns `O[ti·bi.., tj·bj..,
    /// 8g..8g + 8]`. Thread `t` is thread `u = t % (threads / split)` of
    /// split group `t / (threads / split)`, and `u` has a channel and a
    /// place `p` in that channel's tile (`ti/ri` rows by `tj/rj` columns of
    /// threads):
    ///
    /// - lane channels (`!warp_channel`): channel `u % 8`, `p = u / 8`, the
    ///   `ri × rj` outputs at rows `ri·(p / (tj/rj))..` and columns
    ///   `rj·(p % (tj/rj))..`, contiguous. A warp's 32 lanes read 8
    ///   channels' rows: per 128-bit load of A 8 quads, of B 32 (five
    ///   shared wavefronts per `k` for the 32x16 tile, ten for 64x32).
    /// - warp channels: channel `u / 32`, `p = u % 32`, rows `4·(p /
    ///   (tj/rj))` plus `x·ti/(ri/4)` for quad `x`, columns likewise: the
    ///   8 row groups of a warp read 32 consecutive floats of one channel
    ///   row per load of A, the 4 column groups 16 of B, one wavefront
    ///   each (two per `k` for 32x16, four for 64x32).
    ///
    /// # Safety
    /// `n, c ≥ 1`.
    #[inline(always)]
    unsafe fn of(shape: ChannelTiles, n: u32, c: u32, block: u32) -> Place {
        let t = thread_idx_x();
        let (group, ch, p) = Self::thread(shape, t);
        let cols = shape.tj / shape.rj;
        let (tiles_i, tiles_j) = (n.div_ceil(shape.ti), n.div_ceil(shape.tj));
        // SAFETY: n, c ≥ 1 (the launch's contract): drops the division-by-zero checks.
        unsafe { core::hint::assert_unchecked(n > 0 && c > 0 && tiles_j > 0 && tiles_i * tiles_j > 0) };
        let (g, ij) = (block / (tiles_i * tiles_j), block % (tiles_i * tiles_j));
        let (ri0, rj0, step_i, step_j) = if shape.warp_channel {
            (4 * (p / cols), 4 * (p % cols), shape.ti / (shape.ri / 4), shape.tj / (shape.rj / 4))
        } else {
            (shape.ri * (p / cols), shape.rj * (p % cols), 4, 4)
        };
        Place {
            i0: shape.ti * (ij / tiles_j),
            j0: shape.tj * (ij % tiles_j),
            ch0: GROUP * g,
            ch,
            ri0,
            rj0,
            step_i,
            step_j,
            kk0: group * (shape.tk / shape.split),
        }
    }

    /// Thread `t`'s split group, channel and place in the channel's tile.
    #[inline(always)]
    fn thread(shape: ChannelTiles, t: u32) -> (u32, u32, u32) {
        // (Written out for one group, so that `kk0` is the constant 0 there.)
        let (group, u) = if shape.split == 1 { (0, t) } else { (t / (shape.threads() / shape.split), t % (shape.threads() / shape.split)) };
        let (ch, p) = if shape.warp_channel { (u / 32, u % 32) } else { (u % GROUP, u / GROUP) };
        (group, ch, p)
    }

    /// The byte of the output staging (see `stage_outputs`) where thread
    /// `t`'s first output goes.
    #[inline(always)]
    fn staged_at(shape: ChannelTiles, t: u32) -> u32 {
        let (group, ch, p) = Self::thread(shape, t);
        let cols = shape.tj / shape.rj;
        ((group * GROUP + ch) * shape.staging_channel_stride() + 4 * (p / cols) * (shape.tj + 4) + 4 * (p % cols)) * 4
    }

    /// The row within the block tile of the thread's `x`-th row.
    #[inline(always)]
    fn row(&self, x: u32) -> u32 {
        self.ri0 + x / 4 * self.step_i + x % 4
    }

    /// The column within the block tile of the thread's `y`-th column.
    #[inline(always)]
    fn col(&self, y: u32) -> u32 {
        self.rj0 + y / 4 * self.step_j + y % 4
    }
}

/// The multiply-adds of one chunk from the buffer at byte `buf`: per `kk`
/// of the thread's split group the thread's `RI` values of A and `RJ` of
/// B (128-bit shared loads), then `acc[x][y] = fma(a[x], b[y], acc[x][y])`.
#[inline(always)]
fn multiply_chunk<const RI: usize, const RJ: usize, const TK: usize>(acc: &mut [[f32; RJ]; RI], shape: ChannelTiles, buf: u32, at: &Place) {
    unrolled::<TK>(|step| {
        if step >= shape.tk / shape.split {
            return;
        }
        let row = (at.kk0 + step) * GROUP + at.ch;
        let av = smem_quads::<RI>(buf + (row * shape.stride_a() + at.ri0) * 4, at.step_i * 4);
        let bv = smem_quads::<RJ>(buf + shape.a_bytes() + (row * shape.stride_b() + at.rj0) * 4, at.step_j * 4);
        for x in 0..RI {
            for y in 0..RJ {
                acc[x][y] = fma(av[x], bv[y], acc[x][y]);
            }
        }
    });
}

/// Stores the thread's register tile, skipping what lies outside `[n, n,
/// c]`. A quarter warp stores 8 consecutive channels of one output: one
/// 32-byte sector (with lane channels).
///
/// # Safety
/// `o` must hold the `[n, n, c]` output; no other thread writes these outputs.
#[inline(always)]
unsafe fn store_outputs<const RI: usize, const RJ: usize>(o: *mut f32, acc: &[[f32; RJ]; RI], at: &Place, n: u32, c: u32) {
    let ch = at.ch0 + at.ch;
    if ch < c {
        unrolled::<RI>(|x| {
            let i = at.i0 + at.row(x);
            if i < n {
                unrolled::<RJ>(|y| {
                    let j = at.j0 + at.col(y);
                    // Indexed only inside the tensor: past it, (i·n + j)·c may pass 2^32.
                    if j < n {
                        unsafe { st(o, (i * n + j) * c + ch, acc[x as usize][y as usize]) };
                    }
                });
            }
        });
    }
}

/// Whether a channel-tiled shape sums every output in the order of every
/// other stage (`k = 0, 1, ...`, one fma each): all but the split ones.
pub const fn same_order(shape: &ChannelTiles) -> bool {
    shape.split == 1
}

/// The outputs through shared memory: after a barrier (every thread is
/// done with the ring) each thread writes its tile to its split group's
/// staging `Os[ch][i][j]` (rows of `tj + 4` floats, channels
/// [`ChannelTiles::staging_channel_stride`] apart) by 128-bit stores along
/// `j`: in a quarter warp 2 row groups × 4 column quads, 16 banks apart,
/// so no conflict. After a second barrier the block reads it back as lane
/// channels: thread `t` takes channel `t % 8` of the outputs `p + (threads
/// / 8)·m`, `p = t / 8`, in row-major order of the tile (a quarter warp's
/// 8 channels of 4 consecutive `j` fall on 32 banks), adds the split
/// groups' sums in group order and stores: a quarter warp writes one
/// 32-byte sector.
///
/// # Safety
/// As [`store_outputs`]; every thread of the block calls it, and the
/// launch has [`ChannelTiles::shared_bytes`] of shared memory.
#[inline(always)]
unsafe fn stage_outputs<const RI: usize, const RJ: usize>(
    o: *mut f32,
    acc: &[[f32; RJ]; RI],
    shape: ChannelTiles,
    at: &Place,
    n: u32,
    c: u32,
) {
    let (row_stride, ch_stride) = (shape.tj + 4, shape.staging_channel_stride());
    let group_bytes = GROUP * ch_stride * 4;
    sync_threads();
    let mine = Place::staged_at(shape, thread_idx_x());
    unrolled::<RI>(|x| {
        for q in 0..RJ as u32 / 4 {
            let v = F32x4::new(
                acc[x as usize][4 * q as usize],
                acc[x as usize][4 * q as usize + 1],
                acc[x as usize][4 * q as usize + 2],
                acc[x as usize][4 * q as usize + 3],
            );
            smem_st4(mine + ((at.row(x) - at.ri0) * row_stride + at.col(4 * q) - at.rj0) * 4, v);
        }
    });
    sync_threads();
    let t = thread_idx_x();
    let (ch, p, passes) = (t % GROUP, t / GROUP, shape.threads() / GROUP);
    let chg = at.ch0 + ch;
    for m in 0..shape.ti * shape.tj / passes {
        let (r, col) = ((p + passes * m) / shape.tj, (p + passes * m) % shape.tj);
        let (i, j) = (at.i0 + r, at.j0 + col);
        let at_word = ch * ch_stride + r * row_stride + col;
        let mut v = smem_ld(at_word * 4);
        for g in 1..shape.split {
            v += smem_ld(g * group_bytes + at_word * 4);
        }
        // Indexed only inside the tensor: past it, (i·n + j)·c may pass 2^32.
        if i < n && j < n && chg < c {
            unsafe { st(o, (i * n + j) * c + chg, v) };
        }
    }
}

/// The block tiles of the channel-tiled stages (see their modules for why these).
pub const TILES_32X16: ChannelTiles = ChannelTiles { ti: 32, tj: 16, ri: 4, rj: 4, tk: 16, depth: 3, warp_channel: false, split: 1 };
pub const TILES_64X32: ChannelTiles = ChannelTiles { ti: 64, tj: 32, ri: 8, rj: 8, tk: 8, depth: 3, warp_channel: false, split: 1 };
/// The 32x16 tile with a warp per channel and `k` split over two groups of 256 threads.
pub const TILES_32X16_SPLIT: ChannelTiles = ChannelTiles { warp_channel: true, depth: 4, split: 2, ..TILES_32X16 };

/// A kernel entry running [`channel_tiles`] with the constant tile shape `$shape`.
macro_rules! channel_tiles_entry {
    ($(#[$attr:meta])* $name:ident, $shape:expr) => {
        mage_common::kernel! {
            $(#[$attr])*
            pub unsafe fn $name(a: *const f32, b: *const f32, o: *mut f32, n: u32, c: u32) {
                const S: ChannelTiles = $shape;
                unsafe {
                    channel_tiles::<{ S.ti }, { S.tj }, { S.ri as usize }, { S.rj as usize }, { S.tk as usize }, { S.depth }, { S.warp_channel }, { S.split }>(
                        a, b, o, n, c,
                    )
                }
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
channel_tiles_entry!(
    /// [`TILES_32X16_SPLIT`]: 512 threads in two `k` groups, a warp per channel, 4x4 outputs each; any `n`, `c`.
    triangle_tiles_32x16_split,
    TILES_32X16_SPLIT
);

/// The two gradients of the triangle multiplication in one grid, each a
/// [`contract`] of the tile `S`:
///
/// * `dA[i, k, ch] = Σ_j dO[i, j, ch]·B[j, k, ch]`: `P = dO` by rows, `Q
///   = B` by columns (row `k`, contracted `j`);
/// * `dB[j, k, ch] = Σ_i dO[i, j, ch]·A[i, k, ch]`: `P = dO` by columns
///   (row `j`, contracted `i`), `Q = A` by columns (row `k`).
///
/// Block `b` of the `2·S.blocks(n, c)` is tile `ij` of channel group `g`
/// of dA (`w` = 0) or dB (`w` = 1), `b = (2g + w)·tiles + ij`: both
/// gradients of one channel group run side by side, reading one group of
/// dO. Each element sums its `n` terms in order (`j` or `i` = 0, 1, ...,
/// one `fma` each), as triangle_backward mage-001 does.
///
/// # Safety
/// `a`, `b`, `d`, `da` and `db` must hold `[n, n, c]` tensors, `n, c ≥
/// 1`, `da` and `db` apart; the launch as [`gradient_tiles_launch`] makes it.
#[inline(always)]
pub unsafe fn gradient_tiles<const TI: u32, const TJ: u32, const RI: usize, const RJ: usize, const TK: usize, const DEPTH: u32>(
    a: *const f32,
    b: *const f32,
    d: *const f32,
    da: *mut f32,
    db: *mut f32,
    n: u32,
    c: u32,
) {
    let tiles = n.div_ceil(TI) * n.div_ceil(TJ);
    // SAFETY: n ≥ 1 (the launch's contract): drops the division-by-zero checks.
    unsafe { core::hint::assert_unchecked(tiles > 0) };
    let block = block_idx_x();
    let (g, r) = (block / (2 * tiles), block % (2 * tiles));
    let second = r >= tiles;
    let ij = if second { r - tiles } else { r };
    let (p, q, o) = if second { (Operand::cols(d), Operand::cols(a), db) } else { (Operand::rows(d), Operand::cols(b), da) };
    unsafe { contract::<TI, TJ, RI, RJ, TK, DEPTH, false, 1>(p, q, o, n, c, g * tiles + ij) }
}

/// A kernel entry running [`gradient_tiles`] with the constant tile shape `$shape`.
macro_rules! gradient_tiles_entry {
    ($(#[$attr:meta])* $name:ident, $shape:expr) => {
        mage_common::kernel! {
            $(#[$attr])*
            pub unsafe fn $name(a: *const f32, b: *const f32, d: *const f32, da: *mut f32, db: *mut f32, n: u32, c: u32) {
                const S: ChannelTiles = $shape;
                const { assert!(!S.warp_channel && S.split == 1) };
                unsafe { gradient_tiles::<{ S.ti }, { S.tj }, { S.ri as usize }, { S.rj as usize }, { S.tk as usize }, { S.depth }>(a, b, d, da, db, n, c) }
            }
        }
    };
}

gradient_tiles_entry!(
    /// The gradients dA and dB in [`TILES_32X16`]: 256 threads, 4x4 outputs each; any `n`, `c`.
    triangle_backward_tiles_32x16,
    TILES_32X16
);
gradient_tiles_entry!(
    /// The gradients dA and dB in [`TILES_64X32`]: 256 threads, 8x8 outputs each; any `n`, `c`.
    triangle_backward_tiles_64x32,
    TILES_64X32
);

/// The launch of a [`gradient_tiles`] `kernel` of tile `shape` over `[n,
/// c]`: `2·shape.blocks(n, c)` blocks, inputs A, B, dO, outputs dA, dB.
#[cfg(not(target_arch = "nvptx64"))]
pub fn gradient_tiles_launch(kernel: &'static mage_common::Kernel, shape: ChannelTiles, d: &[u32]) -> mage_common::op::Plan {
    use mage_common::op::Arg;
    mage_common::op::Launch {
        kernel,
        grid: mage_common::kernel::Dim3::x(2 * shape.blocks(d[0], d[1])),
        block: mage_common::kernel::Dim3::x(shape.threads()),
        shared_bytes: shape.shared_bytes(),
        cluster: mage_common::kernel::Dim3::ONE,
        args: vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Output(0), Arg::Output(1), Arg::U32(d[0]), Arg::U32(d[1])],
    }
    .into()
}

/// The launch of a channel-tiled `kernel` of tile `shape` over `[n, c]`.
#[cfg(not(target_arch = "nvptx64"))]
pub fn channel_tiles_launch(kernel: &'static mage_common::Kernel, shape: ChannelTiles, d: &[u32]) -> mage_common::op::Plan {
    mage_common::op::Launch {
        kernel,
        grid: mage_common::kernel::Dim3::x(shape.blocks(d[0], d[1])),
        block: mage_common::kernel::Dim3::x(shape.threads()),
        shared_bytes: shape.shared_bytes(),
        cluster: mage_common::kernel::Dim3::ONE,
        args: crate::args(d[0], d[1]),
    }
    .into()
}
