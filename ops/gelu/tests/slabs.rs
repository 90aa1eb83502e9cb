//! gelu_backward's and gelu_erf_backward's mage-003 (`bias_gradient::slabs`)
//! on the emulator, beyond the registry-wide tests in `backward.rs` and
//! `erf_backward.rs`: last slabs of one to three rows, widths below a quad
//! and odd ones, chunks of many slabs, dx the same bits as mage-001's,
//! dbias the bits of its documented order (rows in order within a chunk,
//! chunks in order within a segment, segments in order), the scalar path
//! where the tensors are not 16-byte aligned, and the chunk rule at the
//! sweep shapes.

use mage_common::emu::{Region, launch_kernel};
use mage_common::fixtures::Rng;
use mage_common::kernel::ArgValue;
use mage_common::op::{Arg, HostBuf, Op, Plan, Stage, check_plan, check_stage, emulate, emulate_plan};
use mage_gelu::backward::{self, BACKWARD};
use mage_gelu::bias_gradient::slabs::{MAX_WIDTH, SEGMENTS, SLAB_ROWS, TARGET_BLOCKS, shared_bytes, slabs_per_chunk, supports};
use mage_gelu::erf_backward::{self, ERF_BACKWARD};

fn inputs(rows: u32, width: u32, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    vec![
        HostBuf::F32(r.normal_vec(n, 0.0, 1.5)),
        HostBuf::F32(r.normal_vec(width as usize, 0.0, 0.25)),
        HostBuf::F32(r.normal_vec(n, 0.0, 1.0)),
    ]
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

/// Both ops with their mage-001 and mage-003.
fn ops() -> [(&'static Op, &'static Stage, &'static Stage); 2] {
    [
        (&BACKWARD, &backward::mage_001::STAGE, &backward::mage_003::STAGE),
        (&ERF_BACKWARD, &erf_backward::mage_001::STAGE, &erf_backward::mage_003::STAGE),
    ]
}

/// mage-003's plan at `dims` with `per` slabs a chunk instead of the rule's.
fn plan_with(op: &Op, stage: &Stage, dims: &[u32], per: u32) -> Plan {
    let mut plan = op.plan_for(stage, dims).unwrap();
    let chunks = dims[0].div_ceil(SLAB_ROWS).div_ceil(per);
    plan.launches[0].grid.x = chunks;
    plan.launches[0].args[7] = Arg::U32(per);
    plan.launches[1].args[2] = Arg::U32(chunks);
    plan.scratch = vec![(chunks * dims[1]) as usize];
    plan
}

/// dbias from dx in mage-003's documented order, in f32.
fn dbias_in_order(dx: &[f32], rows: u32, width: u32, per: u32) -> Vec<f32> {
    let (rows, width, per) = (rows as usize, width as usize, per as usize);
    let chunk_rows = per * SLAB_ROWS as usize;
    let chunks = rows.div_ceil(chunk_rows);
    let partial = |k: usize, c: usize| {
        let mut s = 0f32;
        for r in k * chunk_rows..rows.min((k + 1) * chunk_rows) {
            s += dx[r * width + c];
        }
        s
    };
    let each = chunks.div_ceil(SEGMENTS as usize);
    (0..width)
        .map(|c| {
            let segment = |w: usize| {
                let mut s = 0f32;
                for k in (w * each).min(chunks)..((w + 1) * each).min(chunks) {
                    s += partial(k, c);
                }
                s
            };
            let mut total = segment(0);
            for w in 1..SEGMENTS as usize {
                total += segment(w);
            }
            total
        })
        .collect()
}

/// Against the reference, dx mage-001's bits, dbias the documented order's
/// bits, twice the same bits: last slabs of 1 to 3 rows, widths of 1 to 3
/// and odd ones, several slabs a chunk.
#[test]
fn every_tail_and_chunking_is_mage_001s_dx_and_the_documented_dbias() {
    let cases = [
        (1u32, 1u32, 1u32),
        (2, 3, 1),
        (3, 2, 1),
        (5, 1, 1),
        (7, 5, 1),
        (6, 1001, 1),
        (9, 257, 2),
        (37, 1001, 4),
        (41, 33, 3),
        (64, 7, 5),
        (13, 1024, 1),
        (2, 2049, 1),
        (150, 3, 37),
    ];
    for (op, old, new) in ops() {
        for (rows, width, per) in cases {
            let dims = [rows, width];
            let x = inputs(rows, width, rows as u64 * 131 + width as u64 + per as u64);
            let plan = plan_with(op, new, &dims, per);
            check_plan(op, &plan, &dims, &x).unwrap_or_else(|e| panic!("{} at {rows}x{width}, {per} a chunk: {e}", op.name));
            let a = emulate_plan(op, &plan, &dims, &x).unwrap();
            let b = emulate_plan(op, &plan, &dims, &x).unwrap();
            assert_eq!(bits(&a), bits(&b), "{} at {rows}x{width}: two runs differ", op.name);
            let n = (rows * width) as usize;
            let reference = emulate(op, old, &dims, &x).unwrap();
            assert_eq!(bits(&a[..n]), bits(&reference[..n]), "{} at {rows}x{width}: dx differs from mage-001's", op.name);
            assert_eq!(
                bits(&a[n..]),
                bits(&dbias_in_order(&a[..n], rows, width, per)),
                "{} at {rows}x{width}, {per} a chunk: dbias",
                op.name
            );
        }
    }
}

/// The rule's own chunking where it gives more than one slab a chunk
/// (2200 rows: 550 slabs, 2 a chunk, 275 chunks: nine partials a segment,
/// a batch of eight and one more).
#[test]
fn the_rules_chunks_past_one_wave() {
    let dims = [2200u32, 3u32];
    assert_eq!(slabs_per_chunk(2200, 3), 2);
    let x = inputs(dims[0], dims[1], 77);
    for (op, _, new) in ops() {
        check_stage(op, new, &dims, &x).unwrap_or_else(|e| panic!("{e}"));
        let a = emulate(op, new, &dims, &x).unwrap();
        let n = (dims[0] * dims[1]) as usize;
        assert_eq!(bits(&a[n..]), bits(&dbias_in_order(&a[..n], dims[0], dims[1], 2)), "{}", op.name);
    }
}

/// x, dy and dx one float past a 16-byte boundary: every quad scalar, the
/// same bits as the aligned run.
#[test]
fn misaligned_tensors_take_the_scalar_path() {
    for (rows, width) in [(6u32, 1001u32), (5, 8), (3, 3)] {
        let n = (rows * width) as usize;
        let dims = [rows, width];
        let x = inputs(rows, width, 3 + width as u64);
        for (op, _, new) in ops() {
            let aligned = emulate(op, new, &dims, &x).unwrap();
            let plan = op.plan_for(new, &dims).unwrap();
            let skip = |p: *const f32| (4 - (p as usize / 4) % 4) % 4 + 1;
            let (mut xs, mut dys, mut dxs) = (vec![0f32; n + 8], vec![0f32; n + 8], vec![f32::NAN; n + 8]);
            let (sx, sd, so) = (skip(xs.as_ptr()), skip(dys.as_ptr()), skip(dxs.as_ptr()));
            xs[sx..sx + n].copy_from_slice(x[0].as_f32());
            dys[sd..sd + n].copy_from_slice(x[2].as_f32());
            let bias = x[1].as_f32();
            let mut dbias = vec![f32::NAN; width as usize];
            let mut scratch = vec![f32::NAN; plan.scratch[0]];
            let (xp, dyp, dxp) = (xs[sx..].as_ptr(), dys[sd..].as_ptr(), dxs[so..].as_mut_ptr());
            assert!([xp as usize, dyp as usize, dxp as usize].iter().all(|p| p % 16 == 4));
            let region =
                |name: &str, p: usize, floats: usize, writable: bool| Region { name: name.into(), start: p, bytes: floats * 4, writable };
            let regions = vec![
                region("x", xp as usize, n, false),
                region("bias", bias.as_ptr() as usize, width as usize, false),
                region("dy", dyp as usize, n, false),
                region("dx", dxp as usize, n, true),
                region("dbias", dbias.as_mut_ptr() as usize, width as usize, true),
                region("scratch", scratch.as_mut_ptr() as usize, scratch.len(), true),
            ];
            for launch in &plan.launches {
                let args: Vec<ArgValue> = launch
                    .args
                    .iter()
                    .map(|a| match *a {
                        Arg::Input(0) => ArgValue::Ptr(xp as u64),
                        Arg::Input(1) => ArgValue::Ptr(bias.as_ptr() as u64),
                        Arg::Input(2) => ArgValue::Ptr(dyp as u64),
                        Arg::Output(0) => ArgValue::Ptr(dxp as u64),
                        Arg::Output(1) => ArgValue::Ptr(dbias.as_mut_ptr() as u64),
                        Arg::Scratch(0) => ArgValue::Ptr(scratch.as_mut_ptr() as u64),
                        Arg::U32(v) => ArgValue::U32(v),
                        ref other => panic!("unexpected argument {other:?}"),
                    })
                    .collect();
                launch_kernel(launch.kernel, &launch.config(), &args, &regions).unwrap_or_else(|e| panic!("{}: {e}", op.name));
            }
            assert_eq!(bits(&dxs[so..so + n]), bits(&aligned[..n]), "{} dx at {rows}x{width}", op.name);
            assert_eq!(bits(&dbias), bits(&aligned[n..]), "{} dbias at {rows}x{width}", op.name);
        }
    }
}

/// The chunk rule at the sweep shapes (the stage docs' numbers), their
/// shared memory, and the widths the stage takes.
#[test]
fn the_chunk_rule_at_the_sweep_shapes() {
    for (rows, width, per, chunks) in
        [(1000u32, 1001u32, 1u32, 250u32), (4096, 768, 2, 512), (8192, 768, 4, 512), (4096, 3072, 2, 512), (16384, 4096, 8, 512)]
    {
        assert_eq!(slabs_per_chunk(rows, width), per, "{rows}x{width}");
        let got = rows.div_ceil(SLAB_ROWS).div_ceil(per);
        assert_eq!(got, chunks, "{rows}x{width}");
        assert!(got <= TARGET_BLOCKS);
    }
    assert_eq!(shared_bytes(1001), 20_020);
    assert_eq!(shared_bytes(4096), 81_920);
    assert!(shared_bytes(MAX_WIDTH) <= 227 * 1024);
    assert!(supports(&[1, MAX_WIDTH]) && !supports(&[1, MAX_WIDTH + 1]));
}
