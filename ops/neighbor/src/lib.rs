//! Weighted neighbour sum over a graph in CSR form (by destination), FP32,
//! with every stage of its history.
//!
//! `out[i, :] = Σ_{e ∈ rowptr[i]..rowptr[i+1]} w[e]·x[indices[e], :]`.
//! Inputs: `a` = x `[n, width]`, `b` = w `[edges]`, `rowptr` `[n + 1]`
//! (u32), `indices` `[edges]` (u32). Rows with no edges give zeros;
//! repeated edges are summed. [`check_csr`] rejects a malformed graph
//! before any launch.
//!
//! | stage | what changed |
//! |---|---|
//! | [`mage_001`] | one thread per output element, walking its row's edges: a heavy row is one long serial chain |
//! | [`mage_002`] | merge-path partition of rows + edges into equal shares, one warp per share, carries of split rows summed by a second kernel |
//! | [`mage_003`] | mage-002's shares, with edges loaded 32 at a time and shuffled out, and 128-bit gathers split over lane groups (`width % 4 == 0`) |
//! | [`mage_004`] | one warp per row, edge batches shuffled to lane groups, 128-bit gathers with 8 in flight per lane, one kernel (`width % 4 == 0`) |
//! | [`mage_005`] | light rows one warp each (several per warp on large graphs, the next row's loads issued early), heavy rows in equal chunks of edges, summed per block and added with `red.global.add.f32` (`width % 4 == 0`) |
//! | [`current`] | the dispatcher: reads the graph's largest row; mage-004 on small graphs without heavy rows, mage-003 (or mage-002) on larger ones, mage-002 where a row is heavy |
//!
//! # Generators
//!
//! Deterministic from the seed: x and w are normal(0, 0.25); each edge's
//! destination is drawn from the generator's degree distribution, rowptr is
//! the prefix sum of the degrees, and each edge's source is uniform in
//! `0..n`, repeats allowed. `uniform` draws destinations uniformly over the
//! rows; `power-law` gives the row of rank `r` (ranks assigned by a seeded
//! shuffle) probability `∝ r^-1.2`: at `n = 4096` and 65,536 edges its
//! heaviest row holds about 14,000 edges. The distribution belongs to the
//! generator, not to the op: the dims are `n, width, edges`, and the
//! dispatcher and the tolerance read the graph itself.
//!
//! # Tolerance
//!
//! `|out − ref| ≤ D·2^-126 + γ_(D+2)·Σ_e |w[e]|·|x[indices[e], c]|`, with
//! `γ_n ≈ n·2^-24`, `D` the largest row's edge count ([`largest_degree`])
//! and the sum of magnitudes computed beside the reference from the inputs
//! themselves ([`mage_common::numeric::sum_of_products`] says why it holds
//! for any data). Every stage sums a row's terms in FP32 in some order: a
//! chain (mage-001, mage-004), shares of a row whose carries are added by
//! a second kernel (mage-002, mage-003), or chunk sums added by
//! `red.global.add.f32` in whatever order the chunks finish (mage-005);
//! any of these is a summation of at most `D` terms, under the same bound.
//! Because it reads the data, it holds for graphs and values no generator
//! drew (all weights positive, a hub of 46,000 edges, inputs of 1e15,
//! rows of x scaled by 10^U(-3,3)), and an output of zeros fails wherever
//! a row has a non-zero term (`tests/scale.rs`).
//!
//! It is a worst case over every rounding: the real error is a random walk
//! far below it. One dropped or misplaced edge of average size moves an
//! output by about `Σ |w x| / D` against the allowance's `D·u·Σ |w x|`, so
//! it fails the check in rows of fewer than about `√(1/u)` = 4096 edges
//! (uniform graphs have about 30). In the heaviest power-law row (14,000
//! edges) the allowance is `8.3e-4·Σ |w x|`, larger than one edge's
//! share: there a single dropped edge of average size would pass.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod mage_001;
pub mod mage_002;
pub mod mage_003;
pub mod mage_004;
pub mod mage_005;

use mage_common::device::{
    F32x4, block_idx_x, fma, lane_id, ld, ld_nc, ld_nc_u32, ld_nc4, shuffle_idx, shuffle_xor, st, thread_idx_x, warp_id, warp_sum,
};

/// The rows consumed at diagonals `d0` and `d1` of the merge path of
/// `rowptr[1..=n]` with `0..edges`: for each, the number of rows `i` with
/// `rowptr[i + 1] + i + 1 <= d` (a condition true for a prefix of rows,
/// the tie going to the row end). Lanes 0–15 probe 16 pivots of the first
/// search and lanes 16–31 of the second; one warp sum counts both (the
/// second weighted by 32), so every lane holds both ranges and the loop is
/// warp-uniform.
///
/// # Safety
/// `rowptr` must hold `n + 1` entries; every lane of the warp must call this.
#[inline(always)]
pub unsafe fn merge_path(rowptr: *const u32, d0: u32, d1: u32, n: u32, edges: u32) -> (u32, u32) {
    let lane = lane_id();
    let (mut lo0, mut hi0) = (d0.saturating_sub(edges), d0.min(n));
    let (mut lo1, mut hi1) = (d1.saturating_sub(edges), d1.min(n));
    // Each answer lies in [lo, hi]: rows below lo are consumed; row hi is
    // not, or hi is the end of the range.
    while lo0 < hi0 || lo1 < hi1 {
        let (s0, s1) = ((hi0 - lo0).div_ceil(16), (hi1 - lo1).div_ceil(16));
        let (lo, hi, s, d, weight) = if lane < 16 { (lo0, hi0, s0, d0, 1.0) } else { (lo1, hi1, s1, d1, 32.0) };
        // Lane l of a half probes the last row of the l-th of 16 slices of `s` rows.
        let probe = lo + (lane % 16 + 1) * s;
        let below = s > 0 && probe <= hi && unsafe { ld_nc_u32(rowptr, probe) } + probe <= d;
        let sum = warp_sum(if below { weight } else { 0.0 }) as u32;
        let (c0, c1) = (sum % 32, sum / 32);
        if s0 > 0 {
            hi0 = hi0.min(lo0 + (c0 + 1) * s0 - 1);
            lo0 += c0 * s0;
        }
        if s1 > 0 {
            hi1 = hi1.min(lo1 + (c1 + 1) * s1 - 1);
            lo1 += c1 * s1;
        }
    }
    (lo0, lo1)
}

/// Warps per block of the stages that give each warp its own piece of work.
pub const WARPS_PER_BLOCK: u32 = 8;
/// The number of warps the stages' work splits aim at: 32 per SM of the H200.
pub const TARGET_WARPS: u32 = 132 * 32;
/// Threads per block of the merge-path stages' fix-up kernel.
pub const FIX_THREADS: u32 = 256;

/// This warp's number in the grid, for blocks of [`WARPS_PER_BLOCK`] warps.
#[inline(always)]
pub fn warp_in_grid() -> u32 {
    block_idx_x() * WARPS_PER_BLOCK + warp_id()
}

/// How a warp covers a row of `width / 4` 16-byte quads: groups of `size`
/// lanes (the quads rounded up to a power of two, at most 32), lane `slot`
/// of a group on quad `slot` of a chunk of `size` quads, and the
/// `groups = 32 / size` groups taking turns over the edges.
#[derive(Clone, Copy)]
pub struct QuadGroups {
    pub size: u32,
    pub groups: u32,
    pub group: u32,
    pub slot: u32,
    quads: u32,
}

impl QuadGroups {
    /// For rows of `width` floats (a positive multiple of 4).
    #[inline(always)]
    pub fn new(width: u32) -> QuadGroups {
        let quads = width / 4;
        let size = quads.min(32).next_power_of_two();
        let lane = lane_id();
        QuadGroups { size, groups: 32 / size, group: lane / size, slot: lane % size, quads }
    }

    /// Runs `f(q, at_x)` for each chunk of `size` quads of the row: `q` is
    /// this lane's quad, `at_x` the first float it gathers. Lanes past the
    /// last quad gather the last one (valid) and must not store.
    #[inline(always)]
    pub fn for_each_chunk(self, mut f: impl FnMut(u32, u32)) {
        let mut q0 = 0;
        while q0 < self.quads {
            let q = q0 + self.slot;
            f(q, 4 * q.min(self.quads - 1));
            q0 += self.size;
        }
    }

    /// Whether this lane stores quad `q` of a combined sum: the first group's
    /// lanes, within the row.
    #[inline(always)]
    pub fn stores(self, q: u32) -> bool {
        self.group == 0 && q < self.quads
    }

    /// The sum of every group's `acc`, on every lane: a butterfly across
    /// groups in a fixed order (the same bits on every lane and every run).
    #[inline(always)]
    pub fn combine(self, mut acc: F32x4) -> F32x4 {
        let mut m = self.size;
        while m < 32 {
            acc = acc.zip(acc.map(|v| shuffle_xor(v, m)), |a, b| a + b);
            m *= 2;
        }
        acc
    }
}

/// 32 consecutive edges from `base`: lane `l` holds the source row and the
/// weight of edge `base + l` (zeros from `limit` on). Loaded with two
/// coalesced loads and handed out by shuffles.
#[derive(Clone, Copy)]
pub struct EdgeBatch {
    pub base: u32,
    source: u32,
    weight: f32,
}

impl EdgeBatch {
    /// # Safety
    /// `w` and `indices` must hold at least `limit` entries.
    #[inline(always)]
    pub unsafe fn load(w: *const f32, indices: *const u32, base: u32, limit: u32) -> EdgeBatch {
        let e = base + lane_id();
        if e < limit {
            unsafe { EdgeBatch { base, source: ld_nc_u32(indices, e), weight: ld_nc(w, e) } }
        } else {
            EdgeBatch { base, source: 0, weight: 0.0 }
        }
    }
}

/// Gathers issued per lane before the first of them is waited on. Between
/// issue and use only the gathered quads stay live (each weight is
/// shuffled out of the batch again at its multiply-add), so with eight
/// mage-004 needs 56 registers and 32 warps fit an SM (with the weights
/// held, eight needed 78 registers and 24 warps).
pub const GATHERS_IN_FLIGHT: u32 = 8;

/// `acc` plus this lane's part of `Σ w[e]·x[indices[e], at_x..at_x + 4]`
/// over the edges `e..end` (warp-uniform, `batch.base <= e`): group `g`
/// takes edges `e + g`, `e + g + groups`, ... in order, so each lane's sum
/// has a fixed order. `batch` is reloaded (up to `limit`) as the edges
/// pass its end. [`GATHERS_IN_FLIGHT`] 128-bit gathers are issued before
/// the first multiply-add waits on one; the steps are written out because
/// LLVM does not unroll a loop holding shuffles.
///
/// # Safety
/// Every lane of the warp must call this with the same `e`, `end`, `limit`
/// and batch; the edges below `limit` must index rows of `x` (`width`
/// floats each, `at_x + 4 <= width`, 16-byte aligned).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn accumulate(
    x: *const f32,
    w: *const f32,
    indices: *const u32,
    width: u32,
    at_x: u32,
    lanes: QuadGroups,
    batch: &mut EdgeBatch,
    limit: u32,
    mut e: u32,
    end: u32,
    mut acc: F32x4,
) -> F32x4 {
    while e < end {
        if e >= batch.base + 32 {
            *batch = unsafe { EdgeBatch::load(w, indices, e, limit) };
        }
        let stop = end.min(batch.base + 32) - batch.base;
        let mut k = e - batch.base;
        while k < stop {
            // Step u: this group's edge at lane k + u·groups + group of the
            // batch. Its weight is shuffled out again when the gather is
            // used, so that only the gathered quads stay live meanwhile.
            let at = |u: u32| k + u * lanes.groups + lanes.group;
            let fetch = |u: u32| {
                let source = shuffle_idx(f32::from_bits(batch.source), at(u)).to_bits();
                if at(u) < stop { unsafe { ld_nc4(x, source * width + at_x) } } else { F32x4::ZERO }
            };
            let (s0, s1, s2, s3) = (fetch(0), fetch(1), fetch(2), fetch(3));
            let (s4, s5, s6, s7) = (fetch(4), fetch(5), fetch(6), fetch(7));
            let add = |acc: F32x4, u: u32, v: F32x4| {
                let weight = shuffle_idx(batch.weight, at(u));
                if at(u) < stop { v.zip(acc, |v, a| fma(weight, v, a)) } else { acc }
            };
            acc = add(add(add(add(acc, 0, s0), 1, s1), 2, s2), 3, s3);
            acc = add(add(add(add(acc, 4, s4), 5, s5), 6, s6), 7, s7);
            k += GATHERS_IN_FLIGHT * lanes.groups;
        }
        e = batch.base + stop;
    }
    acc
}

// The merge-path stages (mage-002, mage-003) share their fix-up kernel.
mage_common::kernel! {
    /// Thread `t` = `p·width + col`: if worker `p` starts a run of carries
    /// into row `r`, adds the run's carries (in worker order) to `out[r, col]`.
    /// `items` must be positive.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn neighbor_fixup(
        rowptr: *const u32,
        carry: *const f32,
        carry_row: *const u32,
        out: *mut f32,
        n: u32,
        width: u32,
        edges: u32,
        items: u32,
    ) {
        // SAFETY: the plan passes a positive share size.
        unsafe { core::hint::assert_unchecked(items > 0) };
        let workers = (n + edges).div_ceil(items);
        let t = block_idx_x() * FIX_THREADS + thread_idx_x();
        if t >= workers * width {
            return;
        }
        unsafe {
            // SAFETY: t < workers·width, so width > 0.
            core::hint::assert_unchecked(width > 0);
            let (p, col) = (t / width, t % width);
            let r = ld_nc_u32(carry_row, p);
            if r >= n || (p > 0 && ld_nc_u32(carry_row, p - 1) == r) {
                return;
            }
            // Worker q carries into row r while (q + 1)·items <= r + rowptr[r + 1].
            let last = ((r + ld_nc_u32(rowptr, r + 1)) / items).min(workers);
            let mut s = 0.0;
            let mut q = p;
            while q < last {
                s += ld_nc(carry, q * width + col);
                q += 1;
            }
            let i = r * width + col;
            st(out, i, ld(out, i) + s);
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub mod current;

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::fixtures::{Rng, normal_input};
    use mage_common::kernel::Dim3;
    use mage_common::numeric::{Reference, Tolerance, sum_of_products};
    use mage_common::op::Extent::{Dim, DimPlus1};
    use mage_common::op::{Arg, Elem, Generator, HostBuf, Input, Launch, Op, Plan, Stage, Workload};

    /// A launch of `warps` warps in blocks of [`WARPS_PER_BLOCK`], without
    /// shared memory.
    pub fn warp_launch(kernel: &'static Kernel, warps: u32, args: Vec<Arg>) -> Launch {
        warp_launch_shared(kernel, warps, 0, args)
    }

    /// A launch of `warps` warps in blocks of [`WARPS_PER_BLOCK`], with
    /// `shared_bytes` of shared memory per block.
    pub fn warp_launch_shared(kernel: &'static Kernel, warps: u32, shared_bytes: u32, args: Vec<Arg>) -> Launch {
        Launch { kernel, grid: Dim3::x(warps.div_ceil(WARPS_PER_BLOCK)), block: Dim3::x(WARPS_PER_BLOCK * 32), shared_bytes, args }
    }

    /// Items (rows + edges) per warp of the merge-path stages for these
    /// dims.
    pub fn merge_items(d: &[u32]) -> u32 {
        (d[0] + d[2]).div_ceil(TARGET_WARPS).clamp(32, 1024)
    }

    /// Whether the merge-path stages' scratch fits (at most 2^30 floats) and
    /// their item count fits a u32 with room.
    pub fn merge_supports(d: &[u32]) -> bool {
        let (n, width, edges) = (d[0] as u64, d[1] as u64, d[2] as u64);
        let workers = (n + edges).div_ceil(merge_items(d) as u64);
        n + edges < 1 << 31 && workers * width <= 1 << 30
    }

    /// A merge-path stage's two launches with `items` per warp: its `main`
    /// kernel, then the fix-up that adds the carries.
    pub fn merge_plan(d: &[u32], items: u32, main: &'static Kernel) -> Plan {
        let (n, width, edges) = (d[0], d[1], d[2]);
        let workers = (n + edges).div_ceil(items);
        let sizes = vec![Arg::U32(n), Arg::U32(width), Arg::U32(edges), Arg::U32(items)];
        let mut main_args = vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Output, Arg::Scratch(0), Arg::Scratch(1)];
        main_args.extend(&sizes);
        let mut fix = vec![Arg::Input(2), Arg::Scratch(0), Arg::Scratch(1), Arg::Output];
        fix.extend(&sizes);
        Plan {
            launches: vec![
                warp_launch(main, workers, main_args),
                Launch {
                    kernel: &neighbor_fixup::KERNEL,
                    grid: Dim3::x((workers * width).div_ceil(FIX_THREADS)),
                    block: Dim3::x(FIX_THREADS),
                    shared_bytes: 0,
                    args: fix,
                },
            ],
            scratch: vec![workers as usize * width as usize, workers as usize],
        }
    }

    /// The arguments of a kernel that takes the graph and the output, then
    /// `n` and `width`: `x, w, rowptr, indices, out, n, width`.
    pub fn graph_args(d: &[u32]) -> Vec<Arg> {
        vec![Arg::Input(0), Arg::Input(1), Arg::Input(2), Arg::Input(3), Arg::Output, Arg::U32(d[0]), Arg::U32(d[1])]
    }

    /// The in-degree of each row (its edge count), for a degree
    /// distribution of exponent `skew / 1000` (0: uniform).
    pub fn degrees(n: u32, edges: u32, skew: u32, seed: u64) -> Vec<u32> {
        let mut rng = Rng::stream(seed, 2);
        let mut deg = vec![0u32; n as usize];
        if skew == 0 {
            for _ in 0..edges {
                deg[rng.below(n as u64) as usize] += 1;
            }
            return deg;
        }
        let s = skew as f64 / 1000.0;
        let mut total = 0.0;
        let cdf: Vec<f64> = (1..=n)
            .map(|r| {
                total += (r as f64).powf(-s);
                total
            })
            .collect();
        let mut row_of_rank: Vec<u32> = (0..n).collect();
        for i in (1..n as usize).rev() {
            row_of_rank.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for _ in 0..edges {
            let u = rng.uniform() * total;
            let rank = cdf.partition_point(|c| *c <= u).min(n as usize - 1);
            deg[row_of_rank[rank] as usize] += 1;
        }
        deg
    }

    /// The row pointer of a graph with these in-degrees.
    pub fn rowptr_of(degrees: &[u32]) -> Vec<u32> {
        let mut rowptr = Vec::with_capacity(degrees.len() + 1);
        rowptr.push(0);
        let mut acc = 0;
        for d in degrees {
            acc += d;
            rowptr.push(acc);
        }
        rowptr
    }

    /// The largest in-degree (row length) of a CSR row pointer.
    pub fn max_degree(rowptr: &[u32]) -> u32 {
        rowptr.windows(2).map(|p| p[1].saturating_sub(p[0])).max().unwrap_or(0)
    }

    /// The exponent (times 1000) of the `power-law` generator.
    pub const POWER_LAW_SKEW: u32 = 1200;

    /// A graph for `[n, width, edges]` with degrees of exponent `skew / 1000`.
    pub fn generate_with_skew(dims: &[u32], seed: u64, skew: u32) -> Vec<HostBuf> {
        let (n, width, edges) = (dims[0], dims[1], dims[2]);
        let rowptr = rowptr_of(&degrees(n, edges, skew, seed));
        let mut rng = Rng::stream(seed, 3);
        let indices: Vec<u32> = (0..edges).map(|_| rng.below(n as u64) as u32).collect();
        vec![
            HostBuf::F32(normal_input(seed, 0, n as usize * width as usize)),
            HostBuf::F32(normal_input(seed, 1, edges as usize)),
            HostBuf::U32(rowptr),
            HostBuf::U32(indices),
        ]
    }

    pub static GENERATORS: [Generator; 2] = [
        Generator {
            name: "uniform",
            summary: "destinations uniform over the rows, sources uniform, x and w normal(0, 0.25)",
            generate: |d, seed| generate_with_skew(d, seed, 0),
        },
        Generator {
            name: "power-law",
            summary: "destination of rank r with probability ∝ r^-1.2, sources uniform, x and w normal(0, 0.25)",
            generate: |d, seed| generate_with_skew(d, seed, POWER_LAW_SKEW),
        },
    ];

    /// The CSR checks every launch relies on: rowptr starts at 0, never
    /// decreases and ends at `edges`; every index is below `n`. It reads
    /// only rowptr and indices (inputs 2 and 3, the op's `content_reads`):
    /// x and w may be empty, as where the Python module copies only these
    /// two from the device. (Their lengths are checked by
    /// [`Op::check_inputs`] or [`Op::check_contents`] before this runs.)
    pub fn check_csr(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        let (n, edges) = (dims[0], dims[2]);
        let (rowptr, indices) = (inputs[2].as_u32(), inputs[3].as_u32());
        if rowptr[0] != 0 {
            return Err(format!("rowptr.bin: rowptr[0] is {}; a CSR row pointer must start at 0", rowptr[0]));
        }
        if let Some(i) = rowptr.windows(2).position(|p| p[1] < p[0]) {
            return Err(format!(
                "rowptr.bin: rowptr decreases at row {i}: rowptr[{i}] = {} > rowptr[{}] = {}",
                rowptr[i],
                i + 1,
                rowptr[i + 1]
            ));
        }
        if rowptr[n as usize] != edges {
            return Err(format!("rowptr.bin: rowptr[{n}] is {}; it must equal the edge count {edges}", rowptr[n as usize]));
        }
        if let Some(e) = indices.iter().position(|&j| j >= n) {
            return Err(format!("indices.bin: indices[{e}] is {}; every index must be below n = {n}", indices[e]));
        }
        Ok(())
    }

    /// The f64 reference, with each output's magnitude `Σ_e |w[e]|
    /// |x[indices[e], c]|` in the same pass.
    pub fn reference(dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let (n, width) = (dims[0] as usize, dims[1] as usize);
        let (x, w, rowptr, indices) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_u32(), inputs[3].as_u32());
        let (mut out, mut mag) = (vec![0f64; n * width], vec![0f64; n * width]);
        for (i, (row, row_mag)) in out.chunks_exact_mut(width).zip(mag.chunks_exact_mut(width)).enumerate() {
            for e in rowptr[i] as usize..rowptr[i + 1] as usize {
                let (wv, src) = (w[e] as f64, &x[indices[e] as usize * width..][..width]);
                for ((o, g), v) in row.iter_mut().zip(row_mag.iter_mut()).zip(src) {
                    let t = wv * *v as f64;
                    *o += t;
                    *g += t.abs();
                }
            }
        }
        Reference { values: out, magnitudes: mag }
    }

    /// The most edges any row has: the longest sum an output is.
    pub fn largest_degree(dims: &[u32], inputs: &[HostBuf]) -> u64 {
        let rowptr = inputs[2].as_u32();
        (0..dims[0] as usize).map(|i| (rowptr[i + 1] - rowptr[i]) as u64).max().unwrap_or(0)
    }

    /// See the crate doc.
    pub fn tolerance(dims: &[u32], inputs: &[HostBuf]) -> Tolerance {
        sum_of_products(largest_degree(dims, inputs))
    }

    /// The registry: every stage, oldest first.
    pub static STAGES: [&Stage; 5] = [&mage_001::STAGE, &mage_002::STAGE, &mage_003::STAGE, &mage_004::STAGE, &mage_005::STAGE];

    pub static OP: Op = Op {
        name: "neighbor",
        package: "mage-neighbor",
        dim_names: &["n", "width", "edges"],
        min_dims: &[1, 1, 0],
        default_dims: &[4096, 64, 65536],
        sweep: &[
            Workload::with(&[4096, 64, 65536], "uniform"),
            Workload::with(&[4096, 64, 65536], "power-law"),
            Workload::with(&[65536, 64, 1048576], "uniform"),
            Workload::with(&[65536, 64, 1048576], "power-law"),
            Workload::with(&[7, 9, 23], "uniform"),
        ],
        inputs: &[
            Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0), Dim(1)] },
            Input { file: "b", role: "w", elem: Elem::F32, shape: &[Dim(2)] },
            Input { file: "rowptr", role: "rowptr", elem: Elem::U32, shape: &[DimPlus1(0)] },
            Input { file: "indices", role: "indices", elem: Elem::U32, shape: &[Dim(2)] },
        ],
        output: &[Dim(0), Dim(1)],
        constants: &[],
        check_inputs: check_csr,
        check_range: |_, _| Ok(()),
        content_reads: &[2, 3],
        generators: &GENERATORS,
        reference,
        tolerance,
        cost: |d| {
            let (n, w, e) = (d[0] as u64, d[1] as u64, d[2] as u64);
            // x read once, out written once, w and indices, rowptr.
            (4 * (2 * n * w + 2 * e + n + 1), 2 * e * w)
        },
        stages: &STAGES,
        outside_contract: &[],
        current: current::DISPATCHER,
    };
}
