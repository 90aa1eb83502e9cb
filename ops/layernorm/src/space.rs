//! The LayerNorm parameter space: one kernel over four knobs, for a search
//! to move through (`cargo xtask evolve layernorm`).
//!
//! | knob | values | what it trades |
//! |---|---|---|
//! | rows | `lanes16`: two rows per warp; `warp`: a warp per row; `warps2`: two warps per row; `block`: the block per row | lanes per row against rows per block; above a warp the reductions meet in shared memory behind a barrier |
//! | threads | 128, 256, 512 per block | rows per block (or lanes per row, for `block`) |
//! | held | `stream`: the row is read three times (mean, centred sums, output); `hold1` to `hold8`: each lane holds up to that many quads of its row in registers from the one read to the store | bytes read against registers and the widest row |
//! | in flight | 1, 2, 4 quads loaded per lane before any is used (streamed rows) | latency hidden against registers |
//!
//! 4 · 3 · 5 · 3 = 180 combinations; a held row issues all its loads at
//! once, so `in flight` above 1 applies to streamed rows only, which
//! leaves 84 configurations, one kernel entry each ([`buildable`]). Every
//! configuration needs a width that is a multiple of 4 (rows are read in
//! 128-bit quads), and a held row must fit what its lanes hold ([`fits`]).
//!
//! Every configuration computes mage-002's statistics: values shifted by
//! the row's first element, the mean of the shifted values, then centred
//! sums `sd` and `sd2` giving `mean = mean0 + sd / n` and
//! `var = (sd2 - sd² / n) / n`, and `1 / sqrt(var + eps)` (correctly
//! rounded, no `rsqrt.approx`). A lane adds its quads in order; a group of
//! lanes meets by butterflies within a warp and, past a warp, through
//! shared memory in warp order. So every configuration with the same rows
//! knob (and, for `block`, the same threads) gives the same bits whatever
//! it holds or has in flight.
//!
//! Points of the space that are stages: `warp-t256-stream-f1` is mage-002
//! (the same bits). `block-t128-hold2-f1` has mage-006's geometry (a
//! 128-thread block per row, two quads per thread) and `block-t256-hold2-f1`
//! and `block-t512-hold2-f1` mage-008's, but with mage-002's statistics
//! where those stages merge per-warp centred moments and use
//! `rsqrt.approx`; `warp-t256-hold8-f1` is nearest to mage-007 (which holds
//! 2 to 8 quads by width, with `rsqrt.approx`).

use mage_common::device::*;

/// Sum over a row's group of `G` lanes (a power of two; the whole block
/// when `G == T`), returned to every lane of the group. Within a warp by
/// butterflies; past a warp each warp's sum goes to shared memory at byte
/// `slot` (one float per warp) and, behind a barrier, every lane adds its
/// group's warps in order.
#[inline(always)]
fn group_sum<const G: u32, const T: u32>(v: f32, slot: u32) -> f32 {
    let mut v = v;
    let mut mask = G.min(32) / 2;
    while mask > 0 {
        v += shuffle_xor(v, mask);
        mask >>= 1;
    }
    if G <= 32 {
        return v;
    }
    let w = warp_id();
    if lane_id() == 0 {
        smem_st(slot + 4 * w, v);
    }
    sync_threads();
    let first = w / (G / 32) * (G / 32);
    let mut sum = 0.0;
    for i in 0..G / 32 {
        sum += smem_ld(slot + 4 * (first + i));
    }
    sum
}

/// Shared bytes: three sums (`s`, `sd`, `sd2`) of one float per warp, each
/// in its own slots so no barrier guards their reuse; none within a warp.
pub const fn shared_bytes(lanes_per_row: u32, threads: u32) -> u32 {
    if lanes_per_row > 32 { 3 * 4 * (threads / 32) } else { 0 }
}

/// Calls `f(q, quad)` on the quads `q = lane, lane + G, ...` of the row at
/// `base`, loading `U` of them before using any.
///
/// # Safety
/// `x` must hold the row.
#[inline(always)]
unsafe fn each_batch<const G: u32, const U: usize>(x: *const f32, base: u32, lane: u32, quads: u32, mut f: impl FnMut(u32, F32x4)) {
    let mut q = lane;
    while q < quads {
        let mut batch = [F32x4::ZERO; U];
        for (u, v) in batch.iter_mut().enumerate() {
            let qu = q + G * u as u32;
            if qu < quads {
                *v = unsafe { ld_nc4(x, base + 4 * qu) };
            }
        }
        for (u, v) in batch.iter().enumerate() {
            let qu = q + G * u as u32;
            if qu < quads {
                f(qu, *v);
            }
        }
        q += G * U as u32;
    }
}

/// The kernel body: rows of `G` lanes, `T` threads per block, `HELD` quads
/// held per lane (0: streamed), `U` loads in flight per streamed lane.
#[inline(always)]
unsafe fn body<const G: u32, const T: u32, const HELD: usize, const U: usize>(
    x: *const f32,
    gamma: *const f32,
    beta: *const f32,
    y: *mut f32,
    rows: u32,
    width: u32,
    eps: f32,
) {
    let t = thread_idx_x();
    let row = block_idx_x() * (T / G) + t / G;
    // A warp that owns a row leaves together; narrower and wider groups
    // stay for the shuffles and barriers their partners reach.
    if G == 32 && row >= rows {
        return;
    }
    let active = row < rows;
    let (lane, quads, n) = (t % G, if active { width / 4 } else { 0 }, width as f32);
    let base = if active { row * width } else { 0 };
    let shift = if active { unsafe { ld_nc(x, base) } } else { 0.0 };
    let slots = 4 * (T / 32);
    let mut held = [F32x4::ZERO; HELD];
    for (i, h) in held.iter_mut().enumerate() {
        let q = lane + G * i as u32;
        if q < quads {
            *h = unsafe { ld_nc4(x, base + 4 * q) }.map(|v| v - shift);
        }
    }
    let holds = |i: usize| (lane + G * i as u32) < quads;

    let mut s = 0.0;
    if HELD > 0 {
        for (i, h) in held.iter().enumerate() {
            if holds(i) {
                s += h.sum();
            }
        }
    } else {
        unsafe { each_batch::<G, U>(x, base, lane, quads, |_, v| s += v.map(|v| v - shift).sum()) };
    }
    let mean0 = group_sum::<G, T>(s, 0) / n;

    let (mut sd, mut sd2) = (0.0, 0.0);
    let mut centred = |d: F32x4| {
        sd += d.sum();
        sd2 += d.zip(d, |a, b| a * b).sum();
    };
    if HELD > 0 {
        for (i, h) in held.iter().enumerate() {
            if holds(i) {
                centred(h.map(|v| v - mean0));
            }
        }
    } else {
        unsafe { each_batch::<G, U>(x, base, lane, quads, |_, v| centred(v.map(|v| v - shift - mean0))) };
    }
    let (sd, sd2) = (group_sum::<G, T>(sd, slots), group_sum::<G, T>(sd2, 2 * slots));
    let mean = mean0 + sd / n;
    let rstd = 1.0 / sqrt(((sd2 - sd * sd / n) / n).max(0.0) + eps);

    let write = |q: u32, d: F32x4| unsafe {
        let out = d.zip3(ld_nc4(gamma, 4 * q), ld_nc4(beta, 4 * q), |d, g, b| fma(d * rstd, g, b));
        st4(y, base + 4 * q, out);
    };
    if HELD > 0 {
        for (i, h) in held.iter().enumerate() {
            if holds(i) {
                write(lane + G * i as u32, h.map(|v| v - mean));
            }
        }
    } else {
        unsafe { each_batch::<G, U>(x, base, lane, quads, |q, v| write(q, v.map(|v| v - shift - mean))) };
    }
}

macro_rules! entries {
    ($($name:ident: $g:literal $t:literal $held:literal $u:literal;)*) => {
        $(mage_common::kernel! {
            pub unsafe fn $name(x: *const f32, gamma: *const f32, beta: *const f32, y: *mut f32, rows: u32, width: u32, eps: f32) {
                unsafe { body::<$g, $t, $held, $u>(x, gamma, beta, y, rows, width, eps) }
            }
        })*

        /// Every built (lanes per row, threads, held, in flight) and its kernel entry.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static ENTRIES: &[(Shape, &mage_common::Kernel)] = &[$((
            Shape { lanes: $g, threads: $t, held: $held, in_flight: $u },
            &$name::KERNEL,
        )),*];

        #[cfg(not(target_arch = "nvptx64"))]
        static KERNELS: &[&mage_common::Kernel] = &[$(&$name::KERNEL),*];
    };
}

/// A configuration in kernel terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Lanes per row: 16, 32, 64, or the whole block.
    pub lanes: u32,
    pub threads: u32,
    /// Quads held per lane; 0 for a streamed row.
    pub held: u32,
    pub in_flight: u32,
}

entries! {
    layernorm_space_lanes16_t128_stream_f1: 16 128 0 1;
    layernorm_space_lanes16_t128_stream_f2: 16 128 0 2;
    layernorm_space_lanes16_t128_stream_f4: 16 128 0 4;
    layernorm_space_lanes16_t128_hold1_f1: 16 128 1 1;
    layernorm_space_lanes16_t128_hold2_f1: 16 128 2 1;
    layernorm_space_lanes16_t128_hold4_f1: 16 128 4 1;
    layernorm_space_lanes16_t128_hold8_f1: 16 128 8 1;
    layernorm_space_lanes16_t256_stream_f1: 16 256 0 1;
    layernorm_space_lanes16_t256_stream_f2: 16 256 0 2;
    layernorm_space_lanes16_t256_stream_f4: 16 256 0 4;
    layernorm_space_lanes16_t256_hold1_f1: 16 256 1 1;
    layernorm_space_lanes16_t256_hold2_f1: 16 256 2 1;
    layernorm_space_lanes16_t256_hold4_f1: 16 256 4 1;
    layernorm_space_lanes16_t256_hold8_f1: 16 256 8 1;
    layernorm_space_lanes16_t512_stream_f1: 16 512 0 1;
    layernorm_space_lanes16_t512_stream_f2: 16 512 0 2;
    layernorm_space_lanes16_t512_stream_f4: 16 512 0 4;
    layernorm_space_lanes16_t512_hold1_f1: 16 512 1 1;
    layernorm_space_lanes16_t512_hold2_f1: 16 512 2 1;
    layernorm_space_lanes16_t512_hold4_f1: 16 512 4 1;
    layernorm_space_lanes16_t512_hold8_f1: 16 512 8 1;
    layernorm_space_warp_t128_stream_f1: 32 128 0 1;
    layernorm_space_warp_t128_stream_f2: 32 128 0 2;
    layernorm_space_warp_t128_stream_f4: 32 128 0 4;
    layernorm_space_warp_t128_hold1_f1: 32 128 1 1;
    layernorm_space_warp_t128_hold2_f1: 32 128 2 1;
    layernorm_space_warp_t128_hold4_f1: 32 128 4 1;
    layernorm_space_warp_t128_hold8_f1: 32 128 8 1;
    layernorm_space_warp_t256_stream_f1: 32 256 0 1;
    layernorm_space_warp_t256_stream_f2: 32 256 0 2;
    layernorm_space_warp_t256_stream_f4: 32 256 0 4;
    layernorm_space_warp_t256_hold1_f1: 32 256 1 1;
    layernorm_space_warp_t256_hold2_f1: 32 256 2 1;
    layernorm_space_warp_t256_hold4_f1: 32 256 4 1;
    layernorm_space_warp_t256_hold8_f1: 32 256 8 1;
    layernorm_space_warp_t512_stream_f1: 32 512 0 1;
    layernorm_space_warp_t512_stream_f2: 32 512 0 2;
    layernorm_space_warp_t512_stream_f4: 32 512 0 4;
    layernorm_space_warp_t512_hold1_f1: 32 512 1 1;
    layernorm_space_warp_t512_hold2_f1: 32 512 2 1;
    layernorm_space_warp_t512_hold4_f1: 32 512 4 1;
    layernorm_space_warp_t512_hold8_f1: 32 512 8 1;
    layernorm_space_warps2_t128_stream_f1: 64 128 0 1;
    layernorm_space_warps2_t128_stream_f2: 64 128 0 2;
    layernorm_space_warps2_t128_stream_f4: 64 128 0 4;
    layernorm_space_warps2_t128_hold1_f1: 64 128 1 1;
    layernorm_space_warps2_t128_hold2_f1: 64 128 2 1;
    layernorm_space_warps2_t128_hold4_f1: 64 128 4 1;
    layernorm_space_warps2_t128_hold8_f1: 64 128 8 1;
    layernorm_space_warps2_t256_stream_f1: 64 256 0 1;
    layernorm_space_warps2_t256_stream_f2: 64 256 0 2;
    layernorm_space_warps2_t256_stream_f4: 64 256 0 4;
    layernorm_space_warps2_t256_hold1_f1: 64 256 1 1;
    layernorm_space_warps2_t256_hold2_f1: 64 256 2 1;
    layernorm_space_warps2_t256_hold4_f1: 64 256 4 1;
    layernorm_space_warps2_t256_hold8_f1: 64 256 8 1;
    layernorm_space_warps2_t512_stream_f1: 64 512 0 1;
    layernorm_space_warps2_t512_stream_f2: 64 512 0 2;
    layernorm_space_warps2_t512_stream_f4: 64 512 0 4;
    layernorm_space_warps2_t512_hold1_f1: 64 512 1 1;
    layernorm_space_warps2_t512_hold2_f1: 64 512 2 1;
    layernorm_space_warps2_t512_hold4_f1: 64 512 4 1;
    layernorm_space_warps2_t512_hold8_f1: 64 512 8 1;
    layernorm_space_block_t128_stream_f1: 128 128 0 1;
    layernorm_space_block_t128_stream_f2: 128 128 0 2;
    layernorm_space_block_t128_stream_f4: 128 128 0 4;
    layernorm_space_block_t128_hold1_f1: 128 128 1 1;
    layernorm_space_block_t128_hold2_f1: 128 128 2 1;
    layernorm_space_block_t128_hold4_f1: 128 128 4 1;
    layernorm_space_block_t128_hold8_f1: 128 128 8 1;
    layernorm_space_block_t256_stream_f1: 256 256 0 1;
    layernorm_space_block_t256_stream_f2: 256 256 0 2;
    layernorm_space_block_t256_stream_f4: 256 256 0 4;
    layernorm_space_block_t256_hold1_f1: 256 256 1 1;
    layernorm_space_block_t256_hold2_f1: 256 256 2 1;
    layernorm_space_block_t256_hold4_f1: 256 256 4 1;
    layernorm_space_block_t256_hold8_f1: 256 256 8 1;
    layernorm_space_block_t512_stream_f1: 512 512 0 1;
    layernorm_space_block_t512_stream_f2: 512 512 0 2;
    layernorm_space_block_t512_stream_f4: 512 512 0 4;
    layernorm_space_block_t512_hold1_f1: 512 512 1 1;
    layernorm_space_block_t512_hold2_f1: 512 512 2 1;
    layernorm_space_block_t512_hold4_f1: 512 512 4 1;
    layernorm_space_block_t512_hold8_f1: 512 512 8 1;
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use mage_common::Kernel;
    use mage_common::kernel::Dim3;
    use mage_common::op::{Launch, Plan};
    use mage_common::space::{Config, Knob, Space, StagePoint};

    /// Lanes per row of each `rows` value; 0 for the whole block.
    const LANES: [u32; 4] = [16, 32, 64, 0];
    const THREADS: [u32; 3] = [128, 256, 512];
    const HELD: [u32; 5] = [0, 1, 2, 4, 8];
    const IN_FLIGHT: [u32; 3] = [1, 2, 4];
    /// Registers a thread may hold.
    pub const REGISTER_LIMIT: u32 = 255;

    static KNOBS: [Knob; 4] = [
        Knob {
            name: "rows",
            summary: "lanes per row: fewer lanes per row put more rows in a block; past a warp the sums meet in shared memory",
            values: &["lanes16", "warp", "warps2", "block"],
        },
        Knob {
            name: "threads",
            summary: "threads per block: rows per block, or lanes per row for a block per row",
            values: &["t128", "t256", "t512"],
        },
        Knob {
            name: "held",
            summary: "holding the row in registers reads it once instead of three times, with more registers per lane",
            values: &["stream", "hold1", "hold2", "hold4", "hold8"],
        },
        Knob {
            name: "in flight",
            summary: "more loads in flight per lane hide more latency of a streamed row",
            values: &["f1", "f2", "f4"],
        },
    ];

    pub fn decode(c: &Config) -> Shape {
        let threads = THREADS[c.0[1]];
        let lanes = if LANES[c.0[0]] == 0 { threads } else { LANES[c.0[0]] };
        Shape { lanes, threads, held: HELD[c.0[2]], in_flight: IN_FLIGHT[c.0[3]] }
    }

    /// A thread's registers, roughly: held or in-flight quads and 24 for
    /// the statistics, addresses and indices.
    pub fn register_estimate(s: &Shape) -> u32 {
        4 * s.held.max(s.in_flight) + 24
    }

    /// Whether a shape is built into the PTX, or why not.
    pub fn check_shape(s: &Shape) -> Result<(), String> {
        if !s.threads.is_multiple_of(32) || s.threads > 1024 {
            return Err(format!("{} threads are not whole warps of a block", s.threads));
        }
        if !s.lanes.is_power_of_two() || s.lanes > s.threads {
            return Err(format!("rows of {} lanes do not tile a block of {}", s.lanes, s.threads));
        }
        if s.held > 0 && s.in_flight > 1 {
            return Err(format!("a held row issues all its loads at once; {} loads in flight apply to streamed rows only", s.in_flight));
        }
        let registers = register_estimate(s);
        if registers > REGISTER_LIMIT {
            return Err(format!("about {registers} registers per thread, over {REGISTER_LIMIT}"));
        }
        Ok(())
    }

    fn buildable(c: &Config) -> Result<(), String> {
        check_shape(&decode(c))
    }

    fn fits(c: &Config, d: &[u32]) -> Result<(), String> {
        let s = decode(c);
        let width = d[1];
        if !width.is_multiple_of(4) {
            return Err(format!("width {width} is not a multiple of 4: rows are read in 128-bit quads"));
        }
        let quads = width / 4;
        if s.held > 0 && quads > s.held * s.lanes {
            return Err(format!(
                "a row of {quads} quads needs {} per lane over {} lanes; these lanes hold {}",
                quads.div_ceil(s.lanes),
                s.lanes,
                s.held
            ));
        }
        Ok(())
    }

    /// The kernel entry of a shape (one is built for every shape [`check_shape`] accepts).
    pub fn entry(s: &Shape) -> &'static Kernel {
        ENTRIES.iter().find(|(e, _)| e == s).unwrap_or_else(|| panic!("no kernel entry for {s:?}")).1
    }

    /// The entry's name, from the configuration's id.
    pub fn entry_name(space: &Space, c: &Config) -> String {
        format!("layernorm_space_{}", space.id(c).replace('-', "_"))
    }

    fn plan(c: &Config, d: &[u32]) -> Plan {
        let s = decode(c);
        Launch {
            kernel: entry(&s),
            grid: Dim3::x(d[0].div_ceil(s.threads / s.lanes)),
            block: Dim3::x(s.threads),
            shared_bytes: shared_bytes(s.lanes, s.threads),
            cluster: Dim3::ONE,
            args: crate::args(d[0], d[1]),
        }
        .into()
    }

    pub static SPACE: Space = Space {
        op: &crate::OP,
        summary: "one kernel: lanes per row, threads per block, quads held per lane, loads in flight",
        knobs: &KNOBS,
        buildable,
        fits,
        plan,
        kernels: KERNELS,
        stages: &[
            StagePoint { stage: "mage-002", config: "warp-t256-stream-f1", likeness: "same bits: the same rows, passes and statistics" },
            StagePoint {
                stage: "mage-006",
                config: "block-t128-hold2-f1",
                likeness: "mage-006's geometry with mage-002's statistics (mage-006 merges per-warp centred moments, rsqrt.approx)",
            },
            StagePoint {
                stage: "mage-008",
                config: "block-t256-hold2-f1",
                likeness: "mage-008's geometry up to 2048 wide (512 threads beyond) with mage-002's statistics",
            },
        ],
        audit_dims: &[&[5, 200], &[3, 1000], &[9, 64], &[2, 4100]],
    };
}
