//! The matmul parameter space: one tiled kernel over six knobs, for a
//! search to move through (`cargo xtask evolve matmul`).
//!
//! | knob | values | what it trades |
//! |---|---|---|
//! | tile | 64x64 / 4x4, 128x64 / 8x4, 64x128 / 4x8, 128x128 / 8x8 (block tile / thread tile) | reuse per copied value and per shared load against blocks in the grid and registers |
//! | k step | 8, 16, 32, 64 | barriers and waits per multiply-add against shared memory per buffer |
//! | a layout | `at`: A stored transposed, `As[kk][r]` (row stride `bm + 4`); `ar`: row-major, `As[r][kk]` (row stride `bk + 4`) | 128-bit shared reads of A (4-byte copies) against 16-byte copies of A (scalar shared reads) |
//! | staging | `sync`: one buffer filled through registers; `cp2`: two buffers, the next tile copied by `cp.async` during this one's multiply-adds (two barriers a step); `cp3`: three buffers, copies two tiles ahead, one barrier a step | latency hidden against shared memory |
//! | split-k | 1, 2, 4 | blocks in the grid against a second launch that sums the partial products |
//!
//! Block and thread tile move together: every tile keeps 256 threads, the
//! number the copy layouts are written for. Split-K is a launch parameter
//! (the grid's y); the other knobs are const generics, one kernel entry per
//! combination that fits 48 KiB of shared memory (the most a block gets
//! without opting in, and what every stage stays under): 58 entries of the
//! 96 combinations, 174 configurations with split-K. [`buildable`] says
//! which and why not; [`fits`] which shapes a configuration computes.
//!
//! Every configuration sums each output's products in order of `k` with
//! `fma`, like every stage; with split-K each split sums its range of `k`
//! that way and [`matmul_space_splitk_sum`] adds the partial sums in split
//! order, so split-K changes the rounding but stays within the op's
//! tolerance (its bound covers any order of the `k` terms). Configurations
//! need rows of a multiple of 4 floats (`n % 4 == 0`, `k % 4 == 0`): A and B
//! are copied in quads. Tails in `m`, `n` and `k` are zero-filled.
//!
//! The thread tile is laid out in quads: thread `(tx, ty)` holds the row
//! quads `4 ty + i · 4 (bm / tm)` and the column quads `4 tx + j · 4 (bn /
//! tn)`, so within 8 lanes the B quads are 8 consecutive quads and the A
//! quads one broadcast address. The transposed A tile is copied by element
//! (consecutive threads take consecutive `k` of one row), the row-major A
//! tile and B's by 16-byte quads (consecutive threads along a row).
//!
//! Points of the space that are stages: `bm64-bn64-tm4-tn4-bk32-at-cp2-sk1`
//! is mage-006 (its tiles, copies, shared layout, pipeline and fma order:
//! the same bits), `bm64-bn64-tm4-tn4-bk64-at-sync-sk1` is mage-003 (the
//! same bits). mage-002 is `bm64-bn64-tm4-tn4-bk32-ar-sync-sk1` in
//! geometry and bits, with A's shared rows padded to 36 floats where
//! mage-002 leaves them at 32. mage-007's warp-tiled 8x8 threads, its one
//! barrier per double-buffered step and its hand-unrolled K step are not in
//! the space; `bm128-bn128-tm8-tn8-bk16-at-cp2-sk1` is its nearest point.

use mage_common::device::*;

/// Threads per block, for every tile.
pub const THREADS: u32 = 256;
/// The shared memory a block may use: 48 KiB, the most without the opt-in.
pub const SHARED_BUDGET: u32 = 48 * 1024;
/// Registers a thread may hold.
pub const REGISTER_LIMIT: u32 = 255;
/// Quads of each tile a thread may hold in registers while staging through them.
pub const STAGED_QUADS: u32 = 4;

/// Floats of the A tile of one buffer: transposed `As[kk][r]` (row stride
/// `bm + 4`) or row-major `As[r][kk]` (row stride `bk + 4`). Strides are
/// multiples of 4 (rows start 16-byte aligned) and 4 more than the row, so
/// successive rows start 4 banks apart.
pub const fn a_floats(bm: u32, bk: u32, transposed: bool) -> u32 {
    if transposed { bk * (bm + 4) } else { bm * (bk + 4) }
}

/// Bytes of one buffer: the A tile, then the B tile `Bs[kk][c]` (row stride `bn`).
pub const fn buffer_bytes(bm: u32, bn: u32, bk: u32, transposed: bool) -> u32 {
    (a_floats(bm, bk, transposed) + bk * bn) * 4
}

/// What one block of a configuration reads and where.
#[derive(Clone, Copy)]
struct Block {
    a: *const f32,
    b: *const f32,
    m: u32,
    n: u32,
    /// A's row stride.
    k: u32,
    /// The end of the `k` range this block sums (its split's).
    k_end: u32,
    row0: u32,
    col0: u32,
}

/// Calls `f(i, q)` for the quads `q = t + THREADS i` below `total` that
/// thread `t` copies (no test where `total` is a multiple of the threads).
#[inline(always)]
fn each_quad(total: u32, mut f: impl FnMut(u32, u32)) {
    let t = thread_idx_x();
    for i in 0..total.div_ceil(THREADS) {
        let q = t + THREADS * i;
        if total.is_multiple_of(THREADS) || q < total {
            f(i, q);
        }
    }
}

/// The quad `p[row * stride + col ..][..4]`, or zeros where `row` or `col`
/// is past its bound (`col` and `cols` multiples of 4).
///
/// # Safety
/// `p` must hold the matrix.
#[inline(always)]
unsafe fn quad_or_zero(p: *const f32, row: u32, rows: u32, col: u32, cols: u32, stride: u32) -> F32x4 {
    if row < rows && col < cols { unsafe { ld_nc4(p, row * stride + col) } } else { F32x4::ZERO }
}

/// Issues the `cp.async` copies of the K tile at `k0` into the buffer at
/// byte `buf`, zero-filling what lies outside A, B or the block's `k` range.
#[inline(always)]
unsafe fn issue_tile<const BM: u32, const BN: u32, const BK: u32, const AT: bool>(o: &Block, k0: u32, buf: u32) {
    let t = thread_idx_x();
    if AT {
        // A element (r, kk) to As[kk][r]: kk = t % BK, r = t / BK + (THREADS / BK) i.
        let kk = t % BK;
        let ka = k0 + kk;
        for i in 0..BM * BK / THREADS {
            let r = t / BK + (THREADS / BK) * i;
            let row = o.row0 + r;
            let ok = row < o.m && ka < o.k_end;
            let src = if ok { row * o.k + ka } else { 0 };
            unsafe { cp_async_ca_4_zfill(buf + (kk * (BM + 4) + r) * 4, o.a, src, if ok { 4 } else { 0 }) };
        }
    } else {
        // A quad q: row q / (BK / 4), columns 4 (q % (BK / 4)).., to As[r][c].
        each_quad(BM * BK / 4, |_, q| {
            let (r, c) = (q / (BK / 4), 4 * (q % (BK / 4)));
            let (row, col) = (o.row0 + r, k0 + c);
            let ok = row < o.m && col < o.k_end;
            let src = if ok { row * o.k + col } else { 0 };
            unsafe { cp_async_ca_16_zfill(buf + (r * (BK + 4) + c) * 4, o.a, src, if ok { 16 } else { 0 }) };
        });
    }
    // B quad q: row q / (BN / 4), columns 4 (q % (BN / 4)).., to Bs[r][c].
    each_quad(BK * BN / 4, |_, q| {
        let (r, c) = (q / (BN / 4), 4 * (q % (BN / 4)));
        let (row, col) = (k0 + r, o.col0 + c);
        let ok = row < o.k_end && col < o.n;
        let src = if ok { row * o.n + col } else { 0 };
        unsafe { cp_async_ca_16_zfill(buf + (a_floats(BM, BK, AT) + r * BN + c) * 4, o.b, src, if ok { 16 } else { 0 }) };
    });
}

/// Copies the K tile at `k0` into the one buffer through registers: every
/// load first, then every shared store.
#[inline(always)]
unsafe fn stage_through_registers<const BM: u32, const BN: u32, const BK: u32, const AT: bool>(o: &Block, k0: u32) {
    let mut va = [F32x4::ZERO; STAGED_QUADS as usize];
    let mut vb = [F32x4::ZERO; STAGED_QUADS as usize];
    let a_quad = |q: u32| (q / (BK / 4), 4 * (q % (BK / 4)));
    let b_quad = |q: u32| (q / (BN / 4), 4 * (q % (BN / 4)));
    each_quad(BM * BK / 4, |i, q| {
        let (r, c) = a_quad(q);
        va[i as usize] = unsafe { quad_or_zero(o.a, o.row0 + r, o.m, k0 + c, o.k_end, o.k) };
    });
    each_quad(BK * BN / 4, |i, q| {
        let (r, c) = b_quad(q);
        vb[i as usize] = unsafe { quad_or_zero(o.b, k0 + r, o.k_end, o.col0 + c, o.n, o.n) };
    });
    each_quad(BM * BK / 4, |i, q| {
        let (r, c) = a_quad(q);
        if AT {
            let v = va[i as usize].to_array();
            for e in 0..4 {
                smem_st(((c + e) * (BM + 4) + r) * 4, v[e as usize]);
            }
        } else {
            smem_st4((r * (BK + 4) + c) * 4, va[i as usize]);
        }
    });
    each_quad(BK * BN / 4, |i, q| {
        let (r, c) = b_quad(q);
        smem_st4((a_floats(BM, BK, AT) + r * BN + c) * 4, vb[i as usize]);
    });
}

/// The multiply-adds of one K tile from the buffer at byte `buf`.
#[inline(always)]
fn multiply_tile<const BM: u32, const BN: u32, const BK: u32, const TM: usize, const TN: usize, const AT: bool>(
    acc: &mut [[f32; TN]; TM],
    buf: u32,
    tx: u32,
    ty: u32,
) {
    let b_at = buf + a_floats(BM, BK, AT) * 4;
    for kk in 0..BK {
        let mut av = [0.0f32; TM];
        for ib in 0..TM / 4 {
            let r = 4 * ty + ib as u32 * 4 * (BM / TM as u32);
            if AT {
                let q = smem_ld4(buf + (kk * (BM + 4) + r) * 4).to_array();
                for e in 0..4 {
                    av[4 * ib + e] = q[e];
                }
            } else {
                for e in 0..4 {
                    av[4 * ib + e] = smem_ld(buf + ((r + e as u32) * (BK + 4) + kk) * 4);
                }
            }
        }
        let mut bv = [0.0f32; TN];
        for jb in 0..TN / 4 {
            let c = 4 * tx + jb as u32 * 4 * (BN / TN as u32);
            let q = smem_ld4(b_at + (kk * BN + c) * 4).to_array();
            for e in 0..4 {
                bv[4 * jb + e] = q[e];
            }
        }
        for i in 0..TM {
            for j in 0..TN {
                acc[i][j] = fma(av[i], bv[j], acc[i][j]);
            }
        }
    }
}

/// The kernel body: block `(x, y)` computes output tile `x` over split `y`'s
/// range of `k` (`k_chunk` wide) into `c + y · m · n`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn body<const BM: u32, const BN: u32, const BK: u32, const TM: usize, const TN: usize, const AT: bool, const STAGES: u32>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
    k_chunk: u32,
) {
    let t = thread_idx_x();
    let across = BN / TN as u32;
    let (tx, ty) = (t % across, t / across);
    let tiles_n = n.div_ceil(BN).max(1);
    let (row0, col0) = (block_idx_x() / tiles_n * BM, block_idx_x() % tiles_n * BN);
    let split = block_idx_y();
    let k_begin = split * k_chunk;
    let k_end = k.min(k_begin + k_chunk);
    let tiles = k_end.saturating_sub(k_begin).div_ceil(BK);
    let o = Block { a, b, m, n, k, k_end, row0, col0 };
    let buf = |i: u32| i * buffer_bytes(BM, BN, BK, AT);
    let k0 = |tile: u32| k_begin + tile * BK;
    let mut acc = [[0.0f32; TN]; TM];
    let multiply = |acc: &mut [[f32; TN]; TM], at: u32| multiply_tile::<BM, BN, BK, TM, TN, AT>(acc, at, tx, ty);
    if STAGES == 1 {
        for tile in 0..tiles {
            unsafe { stage_through_registers::<BM, BN, BK, AT>(&o, k0(tile)) };
            sync_threads();
            multiply(&mut acc, 0);
            // Everyone is done with the buffer before it is refilled.
            sync_threads();
        }
    } else if STAGES == 2 {
        // mage-006's pipeline: the copies of tile + 1 are issued before the
        // wait for tile, so the step ends with a barrier before its buffer
        // is refilled.
        if tiles > 0 {
            unsafe { issue_tile::<BM, BN, BK, AT>(&o, k0(0), buf(0)) };
            cp_async_commit();
            for tile in 0..tiles - 1 {
                unsafe { issue_tile::<BM, BN, BK, AT>(&o, k0(tile + 1), buf((tile + 1) % 2)) };
                cp_async_commit();
                // Tile `tile` has landed (only the group just committed may be in flight) ...
                cp_async_wait_group::<1>();
                // ... for every thread's copies.
                sync_threads();
                multiply(&mut acc, buf(tile % 2));
                sync_threads();
            }
            cp_async_wait_group::<0>();
            sync_threads();
            multiply(&mut acc, buf((tiles - 1) % 2));
        }
    } else {
        // Three buffers, tiles issued two ahead. Group g holds tile g (or
        // nothing past the last tile), so before step `tile` groups
        // 0..=tile + 1 are committed and waiting for all but the newest
        // means tile `tile` has landed.
        if tiles > 0 {
            unsafe { issue_tile::<BM, BN, BK, AT>(&o, k0(0), buf(0)) };
        }
        cp_async_commit();
        if tiles > 1 {
            unsafe { issue_tile::<BM, BN, BK, AT>(&o, k0(1), buf(1)) };
        }
        cp_async_commit();
        for tile in 0..tiles {
            cp_async_wait_group::<1>();
            // Every thread's copies of `tile` have landed, and every thread
            // is done with tile - 1, whose buffer tile + 2 takes.
            sync_threads();
            if tile + 2 < tiles {
                unsafe { issue_tile::<BM, BN, BK, AT>(&o, k0(tile + 2), buf((tile + 2) % 3)) };
            }
            cp_async_commit();
            multiply(&mut acc, buf(tile % 3));
        }
    }
    let c = c.wrapping_add(split as usize * (m as usize * n as usize));
    for ib in 0..TM / 4 {
        for e in 0..4 {
            let row = row0 + 4 * ty + ib as u32 * 4 * (BM / TM as u32) + e as u32;
            if row >= m {
                continue;
            }
            let r = &acc[4 * ib + e];
            for jb in 0..TN / 4 {
                let col = col0 + 4 * tx + jb as u32 * 4 * (BN / TN as u32);
                if col < n {
                    unsafe { st4(c, row * n + col, F32x4::new(r[4 * jb], r[4 * jb + 1], r[4 * jb + 2], r[4 * jb + 3])) };
                }
            }
        }
    }
}

mage_common::kernel! {
    /// Split-K's second launch: `c = Σ_s parts[s]`, summed in split order,
    /// one quad per thread; `len` (a multiple of 4) floats per split.
    pub unsafe fn matmul_space_splitk_sum(parts: *const f32, c: *mut f32, len: u32, splits: u32) {
        let q = block_idx_x() * block_dim_x() + thread_idx_x();
        if q < len / 4 {
            let mut sum = unsafe { ld_nc4(parts, 4 * q) };
            for s in 1..splits {
                let part = unsafe { ld_nc4(parts.wrapping_add(s as usize * len as usize), 4 * q) };
                sum = sum.zip(part, |x, y| x + y);
            }
            unsafe { st4(c, 4 * q, sum) }
        }
    }
}

/// The kernel-entry half of a configuration (split-K aside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiling {
    pub bm: u32,
    pub bn: u32,
    pub tm: u32,
    pub tn: u32,
    pub bk: u32,
    pub a_transposed: bool,
    /// Shared buffers: 1 (`sync`), 2 (`cp2`) or 3 (`cp3`).
    pub stages: u32,
}

macro_rules! entries {
    ($($name:ident: $bm:literal $bn:literal $tm:literal $tn:literal $bk:literal $at:literal $st:literal;)*) => {
        $(mage_common::kernel! {
            pub unsafe fn $name(a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32, k: u32, k_chunk: u32) {
                unsafe { body::<$bm, $bn, $bk, $tm, $tn, $at, $st>(a, b, c, m, n, k, k_chunk) }
            }
        })*

        /// Every built tiling and its kernel entry.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[(Tiling, &mage_common::Kernel)] = &[$((
            Tiling { bm: $bm, bn: $bn, tm: $tm, tn: $tn, bk: $bk, a_transposed: $at, stages: $st },
            &$name::KERNEL,
        )),*];

        #[cfg(not(target_arch = "nvptx64"))]
        static KERNELS: &[&mage_common::Kernel] = &[$(&$name::KERNEL,)* &matmul_space_splitk_sum::KERNEL];
    };
}

entries! {
    matmul_space_bm64_bn64_tm4_tn4_bk8_at_sync: 64 64 4 4 8 true 1;
    matmul_space_bm64_bn64_tm4_tn4_bk8_at_cp2: 64 64 4 4 8 true 2;
    matmul_space_bm64_bn64_tm4_tn4_bk8_at_cp3: 64 64 4 4 8 true 3;
    matmul_space_bm64_bn64_tm4_tn4_bk8_ar_sync: 64 64 4 4 8 false 1;
    matmul_space_bm64_bn64_tm4_tn4_bk8_ar_cp2: 64 64 4 4 8 false 2;
    matmul_space_bm64_bn64_tm4_tn4_bk8_ar_cp3: 64 64 4 4 8 false 3;
    matmul_space_bm64_bn64_tm4_tn4_bk16_at_sync: 64 64 4 4 16 true 1;
    matmul_space_bm64_bn64_tm4_tn4_bk16_at_cp2: 64 64 4 4 16 true 2;
    matmul_space_bm64_bn64_tm4_tn4_bk16_at_cp3: 64 64 4 4 16 true 3;
    matmul_space_bm64_bn64_tm4_tn4_bk16_ar_sync: 64 64 4 4 16 false 1;
    matmul_space_bm64_bn64_tm4_tn4_bk16_ar_cp2: 64 64 4 4 16 false 2;
    matmul_space_bm64_bn64_tm4_tn4_bk16_ar_cp3: 64 64 4 4 16 false 3;
    matmul_space_bm64_bn64_tm4_tn4_bk32_at_sync: 64 64 4 4 32 true 1;
    matmul_space_bm64_bn64_tm4_tn4_bk32_at_cp2: 64 64 4 4 32 true 2;
    matmul_space_bm64_bn64_tm4_tn4_bk32_ar_sync: 64 64 4 4 32 false 1;
    matmul_space_bm64_bn64_tm4_tn4_bk32_ar_cp2: 64 64 4 4 32 false 2;
    matmul_space_bm64_bn64_tm4_tn4_bk64_at_sync: 64 64 4 4 64 true 1;
    matmul_space_bm64_bn64_tm4_tn4_bk64_ar_sync: 64 64 4 4 64 false 1;
    matmul_space_bm128_bn64_tm8_tn4_bk8_at_sync: 128 64 8 4 8 true 1;
    matmul_space_bm128_bn64_tm8_tn4_bk8_at_cp2: 128 64 8 4 8 true 2;
    matmul_space_bm128_bn64_tm8_tn4_bk8_at_cp3: 128 64 8 4 8 true 3;
    matmul_space_bm128_bn64_tm8_tn4_bk8_ar_sync: 128 64 8 4 8 false 1;
    matmul_space_bm128_bn64_tm8_tn4_bk8_ar_cp2: 128 64 8 4 8 false 2;
    matmul_space_bm128_bn64_tm8_tn4_bk8_ar_cp3: 128 64 8 4 8 false 3;
    matmul_space_bm128_bn64_tm8_tn4_bk16_at_sync: 128 64 8 4 16 true 1;
    matmul_space_bm128_bn64_tm8_tn4_bk16_at_cp2: 128 64 8 4 16 true 2;
    matmul_space_bm128_bn64_tm8_tn4_bk16_at_cp3: 128 64 8 4 16 true 3;
    matmul_space_bm128_bn64_tm8_tn4_bk16_ar_sync: 128 64 8 4 16 false 1;
    matmul_space_bm128_bn64_tm8_tn4_bk16_ar_cp2: 128 64 8 4 16 false 2;
    matmul_space_bm128_bn64_tm8_tn4_bk16_ar_cp3: 128 64 8 4 16 false 3;
    matmul_space_bm128_bn64_tm8_tn4_bk32_at_sync: 128 64 8 4 32 true 1;
    matmul_space_bm128_bn64_tm8_tn4_bk32_ar_sync: 128 64 8 4 32 false 1;
    matmul_space_bm64_bn128_tm4_tn8_bk8_at_sync: 64 128 4 8 8 true 1;
    matmul_space_bm64_bn128_tm4_tn8_bk8_at_cp2: 64 128 4 8 8 true 2;
    matmul_space_bm64_bn128_tm4_tn8_bk8_at_cp3: 64 128 4 8 8 true 3;
    matmul_space_bm64_bn128_tm4_tn8_bk8_ar_sync: 64 128 4 8 8 false 1;
    matmul_space_bm64_bn128_tm4_tn8_bk8_ar_cp2: 64 128 4 8 8 false 2;
    matmul_space_bm64_bn128_tm4_tn8_bk8_ar_cp3: 64 128 4 8 8 false 3;
    matmul_space_bm64_bn128_tm4_tn8_bk16_at_sync: 64 128 4 8 16 true 1;
    matmul_space_bm64_bn128_tm4_tn8_bk16_at_cp2: 64 128 4 8 16 true 2;
    matmul_space_bm64_bn128_tm4_tn8_bk16_at_cp3: 64 128 4 8 16 true 3;
    matmul_space_bm64_bn128_tm4_tn8_bk16_ar_sync: 64 128 4 8 16 false 1;
    matmul_space_bm64_bn128_tm4_tn8_bk16_ar_cp2: 64 128 4 8 16 false 2;
    matmul_space_bm64_bn128_tm4_tn8_bk16_ar_cp3: 64 128 4 8 16 false 3;
    matmul_space_bm64_bn128_tm4_tn8_bk32_at_sync: 64 128 4 8 32 true 1;
    matmul_space_bm64_bn128_tm4_tn8_bk32_ar_sync: 64 128 4 8 32 false 1;
    matmul_space_bm128_bn128_tm8_tn8_bk8_at_sync: 128 128 8 8 8 true 1;
    matmul_space_bm128_bn128_tm8_tn8_bk8_at_cp2: 128 128 8 8 8 true 2;
    matmul_space_bm128_bn128_tm8_tn8_bk8_at_cp3: 128 128 8 8 8 true 3;
    matmul_space_bm128_bn128_tm8_tn8_bk8_ar_sync: 128 128 8 8 8 false 1;
    matmul_space_bm128_bn128_tm8_tn8_bk8_ar_cp2: 128 128 8 8 8 false 2;
    matmul_space_bm128_bn128_tm8_tn8_bk8_ar_cp3: 128 128 8 8 8 false 3;
    matmul_space_bm128_bn128_tm8_tn8_bk16_at_sync: 128 128 8 8 16 true 1;
    matmul_space_bm128_bn128_tm8_tn8_bk16_at_cp2: 128 128 8 8 16 true 2;
    matmul_space_bm128_bn128_tm8_tn8_bk16_ar_sync: 128 128 8 8 16 false 1;
    matmul_space_bm128_bn128_tm8_tn8_bk16_ar_cp2: 128 128 8 8 16 false 2;
    matmul_space_bm128_bn128_tm8_tn8_bk32_at_sync: 128 128 8 8 32 true 1;
    matmul_space_bm128_bn128_tm8_tn8_bk32_ar_sync: 128 128 8 8 32 false 1;
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Arg, Launch, Plan};
    use mage_common::space::{Config, Knob, Space, StagePoint};

    /// (block m, block n, thread m, thread n) of each `tile` value.
    const TILES: [(u32, u32, u32, u32); 4] = [(64, 64, 4, 4), (128, 64, 8, 4), (64, 128, 4, 8), (128, 128, 8, 8)];
    const K_STEPS: [u32; 4] = [8, 16, 32, 64];
    const SPLITS: [u32; 3] = [1, 2, 4];

    static KNOBS: [Knob; 5] = [
        Knob {
            name: "tile",
            summary: "block tile / thread tile: larger tiles reuse each copied value and shared load more, with fewer blocks and more registers",
            values: &["bm64-bn64-tm4-tn4", "bm128-bn64-tm8-tn4", "bm64-bn128-tm4-tn8", "bm128-bn128-tm8-tn8"],
        },
        Knob {
            name: "k step",
            summary: "a deeper K step pays fewer barriers and waits per multiply-add, with more shared memory per buffer",
            values: &["bk8", "bk16", "bk32", "bk64"],
        },
        Knob {
            name: "a layout",
            summary: "A transposed in shared memory (128-bit reads, 4-byte copies) or row-major (scalar reads, 16-byte copies)",
            values: &["at", "ar"],
        },
        Knob {
            name: "staging",
            summary: "one buffer through registers, or two or three buffers filled by cp.async during the multiply-adds",
            values: &["sync", "cp2", "cp3"],
        },
        Knob {
            name: "split-k",
            summary: "splitting K multiplies the blocks in the grid, at the cost of a second launch summing partial products",
            values: &["sk1", "sk2", "sk4"],
        },
    ];

    /// A configuration in kernel terms.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Matmul {
        pub tiling: Tiling,
        pub split: u32,
    }

    pub fn decode(c: &Config) -> Matmul {
        let (bm, bn, tm, tn) = TILES[c.0[0]];
        let tiling = Tiling { bm, bn, tm, tn, bk: K_STEPS[c.0[1]], a_transposed: c.0[2] == 0, stages: c.0[3] as u32 + 1 };
        Matmul { tiling, split: SPLITS[c.0[4]] }
    }

    /// Shared bytes of a block: one buffer per stage.
    pub fn shared_bytes(t: &Tiling) -> u32 {
        t.stages * buffer_bytes(t.bm, t.bn, t.bk, t.a_transposed)
    }

    /// Quads of the A and B tiles each thread copies per K step.
    pub fn quads_per_thread(t: &Tiling) -> (u32, u32) {
        ((t.bm * t.bk / 4).div_ceil(THREADS), (t.bk * t.bn / 4).div_ceil(THREADS))
    }

    /// A thread's registers, roughly: the accumulators, one K step's A and
    /// B values, the staged quads (through registers only), and 24 for
    /// addresses, indices and loop state.
    pub fn register_estimate(t: &Tiling) -> u32 {
        let (qa, qb) = quads_per_thread(t);
        let staged = if t.stages == 1 { 4 * (qa + qb) } else { 0 };
        t.tm * t.tn + t.tm + t.tn + staged + 24
    }

    /// Whether a tiling is built into the PTX, or why not.
    pub fn check_tiling(t: &Tiling) -> Result<(), String> {
        let threads = (t.bm / t.tm) * (t.bn / t.tn);
        if threads != THREADS {
            return Err(format!(
                "{}x{} tiles of {}x{} per thread make {threads} threads; the copies are laid out for {THREADS}",
                t.bm, t.bn, t.tm, t.tn
            ));
        }
        if t.a_transposed && (!THREADS.is_multiple_of(t.bk) || !(t.bm * t.bk).is_multiple_of(THREADS)) {
            return Err(format!("the transposed copies of A need the K step {} to divide {THREADS} threads", t.bk));
        }
        let shared = shared_bytes(t);
        if shared > SHARED_BUDGET {
            return Err(format!(
                "{} buffer{} of {} B: {shared} B of shared memory, over the {SHARED_BUDGET} B a block gets without opting in",
                t.stages,
                if t.stages > 1 { "s" } else { "" },
                buffer_bytes(t.bm, t.bn, t.bk, t.a_transposed)
            ));
        }
        let (qa, qb) = quads_per_thread(t);
        if t.stages == 1 && qa.max(qb) > STAGED_QUADS {
            return Err(format!("staging through registers holds {qa} quads of A and {qb} of B per thread; at most {STAGED_QUADS} each"));
        }
        let registers = register_estimate(t);
        if registers > REGISTER_LIMIT {
            return Err(format!("about {registers} registers per thread, over {REGISTER_LIMIT}"));
        }
        Ok(())
    }

    fn buildable(c: &Config) -> Result<(), String> {
        check_tiling(&decode(c).tiling)
    }

    /// K tiles of `k`, and how many each split takes.
    fn k_tiles(d: &[u32], m: &Matmul) -> (u32, u32) {
        let tiles = d[2].div_ceil(m.tiling.bk);
        (tiles, tiles.div_ceil(m.split))
    }

    fn fits(c: &Config, d: &[u32]) -> Result<(), String> {
        let mm = decode(c);
        let (m, n, k) = (d[0], d[1], d[2]);
        if !n.is_multiple_of(4) || !k.is_multiple_of(4) {
            return Err(format!("n = {n} and k = {k} must be multiples of 4: A and B are copied in 16-byte quads"));
        }
        let (tiles, per_split) = k_tiles(d, &mm);
        if (mm.split - 1) * per_split >= tiles {
            return Err(format!(
                "split-K {} over {tiles} K tile{} of {} leaves a split without one",
                mm.split,
                if tiles > 1 { "s" } else { "" },
                mm.tiling.bk
            ));
        }
        if mm.split as u64 * m as u64 * n as u64 > 1 << 30 {
            return Err(format!("split-K {} needs {} partial sums, over 2^30", mm.split, mm.split as u64 * m as u64 * n as u64));
        }
        Ok(())
    }

    /// The kernel entry of a tiling (one is built for every tiling [`check_tiling`] accepts).
    pub fn entry(t: &Tiling) -> &'static Kernel {
        ENTRIES.iter().find(|(e, _)| e == t).unwrap_or_else(|| panic!("no kernel entry for {t:?}")).1
    }

    /// The entry's name, from the configuration's id without its split.
    pub fn entry_name(space: &Space, c: &Config) -> String {
        let id = space.id(c);
        let tiling = id.rsplit_once('-').expect("the id ends with its split").0;
        format!("matmul_space_{}", tiling.replace('-', "_"))
    }

    const REDUCE_THREADS: u32 = 256;

    fn plan(c: &Config, d: &[u32]) -> Plan {
        let mm = decode(c);
        let t = &mm.tiling;
        let (m, n, k) = (d[0], d[1], d[2]);
        let (_, per_split) = k_tiles(d, &mm);
        let tiled = |out: Arg| Launch {
            kernel: entry(t),
            grid: Dim3::new(m.div_ceil(t.bm) * n.div_ceil(t.bn), mm.split, 1),
            block: Dim3::x(THREADS),
            shared_bytes: shared_bytes(t),
            cluster: Dim3::ONE,
            args: vec![Arg::Input(0), Arg::Input(1), out, Arg::U32(m), Arg::U32(n), Arg::U32(k), Arg::U32(per_split * t.bk)],
        };
        if mm.split == 1 {
            return tiled(Arg::Output(0)).into();
        }
        let len = m * n;
        let sum = Launch {
            kernel: &matmul_space_splitk_sum::KERNEL,
            grid: Dim3::x((len / 4).div_ceil(REDUCE_THREADS)),
            block: Dim3::x(REDUCE_THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: vec![Arg::Scratch(0), Arg::Output(0), Arg::U32(len), Arg::U32(mm.split)],
        };
        Plan { launches: vec![tiled(Arg::Scratch(0)), sum], scratch: vec![mm.split as usize * len as usize] }
    }

    pub static SPACE: Space = Space {
        op: &crate::OP,
        summary: "one tiled kernel: tile, K step, A's shared layout, staging (registers or cp.async, 1-3 buffers), split-K",
        knobs: &KNOBS,
        buildable,
        fits,
        plan,
        kernels: KERNELS,
        stages: &[
            StagePoint {
                stage: "mage-006",
                config: "bm64-bn64-tm4-tn4-bk32-at-cp2-sk1",
                likeness: "same bits: the same tiles, copies, shared layout, pipeline and fma order",
            },
            StagePoint {
                stage: "mage-003",
                config: "bm64-bn64-tm4-tn4-bk64-at-sync-sk1",
                likeness: "same bits: the same tiles, copies through registers, shared layout and fma order",
            },
            StagePoint {
                stage: "mage-002",
                config: "bm64-bn64-tm4-tn4-bk32-ar-sync-sk1",
                likeness: "same bits and geometry; A's shared rows padded to 36 floats (mage-002: 32)",
            },
        ],
        audit_dims: &[&[64, 64, 64], &[100, 132, 68], &[36, 8, 200]],
    };
}
