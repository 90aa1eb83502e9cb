//! `gelu_backward` on the emulator: every stage, and `current`, against the
//! f64 reference of dx and dbias under the op's tolerance, on shapes with
//! tails (one row, one column, widths not a multiple of the blocks) and on
//! data of any scale; an output of zeros and a gradient missing a term
//! fail; dbias is the same bits on every run. The emulator computes
//! `ex2.approx` exactly, so the last test replays the element's arithmetic
//! with it pushed to the edges of its contract.

use mage_common::fixtures::Rng;
use mage_common::numeric::{EX2_APPROX_REL, compare};
use mage_common::op::{HostBuf, check_current, check_stage, emulate};
use mage_gelu::backward::{BACKWARD, STAGES, gelu_grad_f64, mage_001, mage_002, mage_005, mage_006};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// How x is drawn; bias is normal(0, 0.25) times the same scale.
#[derive(Clone, Copy, Debug)]
enum Dist {
    /// normal(0, s).
    Normal(f32),
    /// Uniform in ±h: the saturated tails of tanh on both sides.
    Uniform(f32),
}

/// x and bias from `dist`, dy normal(0, 1)·`dy_scale`.
fn inputs(rows: u32, width: u32, dist: Dist, dy_scale: f32, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    let (x, scale): (Vec<f32>, f32) = match dist {
        Dist::Normal(s) => (r.normal_vec(n, 0.0, s), s),
        Dist::Uniform(h) => ((0..n).map(|_| ((r.uniform() * 2.0 - 1.0) * h as f64) as f32).collect(), 1.0),
    };
    let bias: Vec<f32> = r.normal_vec(width as usize, 0.0, 0.25).iter().map(|b| b * scale).collect();
    let dy: Vec<f32> = r.normal_vec(n, 0.0, 1.0).iter().map(|d| d * dy_scale).collect();
    vec![HostBuf::F32(x), HostBuf::F32(bias), HostBuf::F32(dy)]
}

fn dist() -> impl Strategy<Value = Dist> {
    prop_oneof![(-6.0f32..3.0).prop_map(|e| Dist::Normal(10f32.powf(e))), (0.5f32..20.0).prop_map(Dist::Uniform)]
}

#[test]
fn every_stage_and_current_match_the_reference_on_random_shapes() {
    let mut runner = TestRunner::new(Config { cases: 32, ..Config::default() });
    let width = prop_oneof![prop::sample::select(vec![1u32, 3, 4, 5, 127, 128, 129, 768]), 1u32..=600];
    let dy_scale = prop::sample::select(vec![1e-6f32, 1.0, 1e6]);
    let shape = (1u32..=24, width, dist(), dy_scale, any::<u64>());
    runner
        .run(&shape, |(rows, width, dist, dy_scale, seed)| {
            let x = inputs(rows, width, dist, dy_scale, seed);
            for stage in STAGES {
                check_stage(&BACKWARD, stage, &[rows, width], &x).map_err(TestCaseError::fail)?;
            }
            check_current(&BACKWARD, &[rows, width], &x).map_err(TestCaseError::fail)?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn every_stage_holds_at_any_scale() {
    let dists = [Dist::Normal(1e-6), Dist::Normal(1e-3), Dist::Normal(1.0), Dist::Normal(1e3), Dist::Uniform(20.0)];
    for dist in dists {
        for dy_scale in [1e-6f32, 1.0, 1e6] {
            let x = inputs(7, 300, dist, dy_scale, 11);
            for stage in STAGES {
                let cmp = check_stage(&BACKWARD, stage, &[7, 300], &x).unwrap_or_else(|e| panic!("{dist:?} dy {dy_scale}: {e}"));
                assert!(cmp.worst_ratio < 0.5, "{} at {dist:?} dy {dy_scale}: {}", stage.name, cmp.worst_ratio);
            }
        }
    }
}

/// z swept densely over [-20, 20] (bias zero) and a few extremes, dy 1 and 2^60.
#[test]
fn a_dense_sweep_of_z_on_every_stage() {
    let mut x: Vec<f32> = (0..8000).map(|i| -20.0 + 40.0 * i as f32 / 8000.0).collect();
    x.extend([0.0, -0.0, 1e-30, -1e-30, 1e4, -1e4, 7e12, -7e12, 1e30, -1e30]);
    let width = x.len() as u32;
    for dy in [1.0f32, 2f32.powi(60)] {
        let inputs = vec![HostBuf::F32(x.clone()), HostBuf::F32(vec![0.0; width as usize]), HostBuf::F32(vec![dy; width as usize])];
        for stage in STAGES {
            let cmp = check_stage(&BACKWARD, stage, &[1, width], &inputs).unwrap_or_else(|e| panic!("dy {dy}: {e}"));
            assert!(cmp.worst_ratio < 0.5, "{} at dy {dy}: {}", stage.name, cmp.worst_ratio);
            let out = emulate(&BACKWARD, stage, &[1, width], &inputs).unwrap();
            for (z, d) in x.iter().zip(&out) {
                assert!(d.is_finite(), "{}: dx at z = {z} is {d}", stage.name);
                if *z >= 14.0 {
                    assert_eq!(*d, dy, "{}: dx at z = {z}", stage.name);
                }
            }
        }
    }
}

#[test]
fn zeros_and_a_missing_term_fail() {
    let dims = [9u32, 130];
    let x = inputs(dims[0], dims[1], Dist::Normal(2.0), 1.0, 5);
    let reference = (BACKWARD.reference)(&dims, &x);
    let tol = (BACKWARD.tolerance)(&dims, &x);
    let zeros = vec![0f32; BACKWARD.output_len(&dims)];
    let cmp = compare(&zeros, &reference, tol);
    let nonzero = reference.values.iter().filter(|v| **v != 0.0).count();
    assert!(cmp.failures as f64 >= 0.9 * nonzero as f64, "zeros fail on only {} of {nonzero}", cmp.failures);
    // dx without its `0.5·z·(1 − t²)·…` term, and dbias summed from it.
    let good = emulate(&BACKWARD, STAGES[0], &dims, &x).unwrap();
    let (rows, width) = (dims[0] as usize, dims[1] as usize);
    let (xs, bias, dy) = (x[0].as_f32(), x[1].as_f32(), x[2].as_f32());
    let mut wrong = vec![0f32; rows * width + width];
    for r in 0..rows {
        for c in 0..width {
            let z = xs[r * width + c] as f64 + bias[c] as f64;
            let t = (mage_gelu::SQRT_2_OVER_PI * (z + mage_gelu::CUBIC * z * z * z)).tanh();
            let v = (dy[r * width + c] as f64 * 0.5 * (1.0 + t)) as f32;
            wrong[r * width + c] = v;
            wrong[rows * width + c] += v;
        }
    }
    let cmp = compare(&wrong, &reference, tol);
    assert!(cmp.failures > (rows * width + width) / 2, "a dx missing a term fails on only {} elements", cmp.failures);
    assert!(compare(&good, &reference, tol).passed());
}

#[test]
fn dbias_is_the_same_bits_on_every_run_and_each_output_is_located() {
    let dims = [33u32, 70];
    let x = inputs(dims[0], dims[1], Dist::Normal(1.0), 1.0, 9);
    for stage in STAGES {
        let a = emulate(&BACKWARD, stage, &dims, &x).unwrap();
        let b = emulate(&BACKWARD, stage, &dims, &x).unwrap();
        assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{}", stage.name);
    }
    assert_eq!(BACKWARD.output_offsets(&dims), [0, 33 * 70, 33 * 70 + 70]);
    assert_eq!(BACKWARD.locate_output(&dims, 33 * 70 + 5), "dbias [5]");
    assert_eq!(BACKWARD.locate_output(&dims, 71), "dx [1, 1]");
    assert_eq!(BACKWARD.locate_output(&dims, 33 * 70 + 69), "dbias [69]");
}

/// `ex2.approx` off by `f` (relative), rounded to f32 and flushed like the instruction.
fn ex2_off(f: f64) -> impl Fn(f32) -> f32 {
    move |s| {
        let r = ((s as f64).exp2() * (1.0 + f)) as f32;
        if r.is_subnormal() { 0.0 } else { r }
    }
}

/// mage-001's element arithmetic, with `ex2.approx` at either edge of its
/// bound, on every z in [-30, 30] in steps of 1/512, for dy of 1 and 2^100
/// (which keeps dx normal deep into the left tail): within a tenth of the
/// op's allowance (the analysis says a thirtieth).
#[test]
fn mage_001_holds_with_ex2_at_the_edges_of_its_contract() {
    let tol = (BACKWARD.tolerance)(&[1, 1], &[]);
    let mut worst = (0f64, 0f32);
    for f in [EX2_APPROX_REL, -EX2_APPROX_REL, 0.0] {
        let ex2 = ex2_off(f);
        for dy in [1f32, 2f32.powi(100)] {
            for i in -30 * 512..=30 * 512 {
                let z = i as f32 / 512.0;
                let (g, a, b, s, two_u) = gelu_grad_f64(z as f64);
                let (want, m) = (dy as f64 * g, dy as f64 * (a + (1.0 + two_u) * (s + b)));
                let got = mage_001::gelu_grad_with(z, dy, &ex2) as f64;
                let ratio = (got - want).abs() / tol.allowance(want, m);
                if ratio > worst.0 {
                    worst = (ratio, z);
                }
            }
        }
    }
    assert!(worst.0 < 0.1, "worst at z = {}: {} of the allowance", worst.1, worst.0);
}

/// mage-002's chunks: many chunks of one row a warp (1600x5, 200 chunks:
/// the totals' batches of 8 and their remainders), a last chunk shorter
/// than the others (1700x132, two tiles, the second of one quad), widths
/// not a multiple of 4 past one tile (9x1029, 23x515), each stage against
/// the reference and twice the same bits; every stage's dx is mage-001's bits.
#[test]
fn chunked_shapes_on_every_stage_twice_the_same_bits() {
    for (rows, width) in [(1600u32, 5u32), (1700, 132), (9, 1029), (23, 515), (1, 4)] {
        let dims = [rows, width];
        let per = mage_002::chunk_rows(rows, width);
        assert_eq!(per % mage_002::GROUPS, 0);
        let x = inputs(rows, width, Dist::Normal(1.0), 1.0, rows as u64 * 7 + width as u64);
        let mut outs = Vec::new();
        for stage in STAGES {
            check_stage(&BACKWARD, stage, &dims, &x).unwrap_or_else(|e| panic!("{} at {rows}x{width}: {e}", stage.name));
            let a = emulate(&BACKWARD, stage, &dims, &x).unwrap();
            let b = emulate(&BACKWARD, stage, &dims, &x).unwrap();
            assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{} at {rows}x{width}: two runs differ", stage.name);
            outs.push(a);
        }
        let n = (rows * width) as usize;
        for (stage, out) in STAGES.iter().zip(&outs).skip(1) {
            assert!(
                outs[0][..n].iter().zip(&out[..n]).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{}'s dx differs from mage-001's at {rows}x{width}",
                stage.name
            );
        }
    }
}

/// The chunk rule at the sweep shapes: about 1056 blocks, whole rows a warp.
#[test]
fn the_chunk_rule_fills_the_gpu_at_the_sweep_shapes() {
    for (rows, width, per) in [(4096u32, 768u32, 24u32), (8192, 768, 48), (4096, 3072, 96), (16384, 4096, 504), (1000, 1001, 8)] {
        assert_eq!(mage_002::chunk_rows(rows, width), per, "{rows}x{width}");
        let blocks = width.div_ceil(mage_002::TILE) * rows.div_ceil(per);
        assert!((900..=1100).contains(&blocks), "{rows}x{width}: {blocks} blocks");
    }
}

/// mage-005's chunks: the eight blocks of a tile's cluster cover every row
/// with a whole count of rows a warp and no chunk to spare, and the plan's
/// cluster is the grid's y.
#[test]
fn the_cluster_chunks_cover_every_row_once() {
    use mage_005::{CLUSTER, WARPS, chunk_rows};
    for rows in [1u32, 7, 16, 127, 128, 129, 1000, 1001, 4096, 16384] {
        let per = chunk_rows(rows);
        assert_eq!(per % WARPS, 0, "{rows}");
        assert!(per * CLUSTER >= rows, "{rows}: {per} rows a chunk");
        assert!(per == WARPS || (per - WARPS) * CLUSTER < rows, "{rows}: {per} rows a chunk, more than it needs");
        let plan = (mage_005::STAGE.plan)(&[rows, 1001]);
        let launch = &plan.launches[0];
        assert_eq!((launch.grid.x, launch.grid.y, launch.cluster.y), (16, CLUSTER, CLUSTER));
        assert!(plan.scratch.is_empty());
    }
}

/// mage-006 is mage-002 to the bit, dx and dbias, at every width: widths
/// that are a multiple of 4 (the 16-byte path) and not (a lane's columns
/// 32 apart), one tile and several, the last tile short; and at shapes of
/// more than 256 chunks, where a totals segment holds more than one batch
/// of loads and a short last one (2500x3: 313 chunks, 10 a segment).
#[test]
fn mage_006_is_mage_002_to_the_bit() {
    for (rows, width) in [(2500u32, 3u32), (2100, 130)] {
        let x = inputs(rows, width, Dist::Normal(1.0), 1.0, 5);
        let a = emulate(&BACKWARD, &mage_002::STAGE, &[rows, width], &x).unwrap();
        let b = emulate(&BACKWARD, &mage_006::STAGE, &[rows, width], &x).unwrap();
        assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{rows}x{width}: mage-006 differs from mage-002");
        assert!(rows.div_ceil(mage_002::chunk_rows(rows, width)) > 256, "{rows}x{width}");
    }
    let mut runner = TestRunner::new(Config { cases: 24, ..Config::default() });
    let width = prop_oneof![prop::sample::select(vec![1u32, 3, 4, 31, 33, 127, 128, 129, 255, 257, 1001]), 1u32..=700];
    runner
        .run(&(1u32..=80, width, any::<u64>()), |(rows, width, seed)| {
            let x = inputs(rows, width, Dist::Normal(1.0), 1.0, seed);
            let a = emulate(&BACKWARD, &mage_002::STAGE, &[rows, width], &x).map_err(TestCaseError::fail)?;
            let b = emulate(&BACKWARD, &mage_006::STAGE, &[rows, width], &x).map_err(TestCaseError::fail)?;
            prop_assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{}x{}: mage-006 differs from mage-002", rows, width);
            Ok(())
        })
        .unwrap();
}
