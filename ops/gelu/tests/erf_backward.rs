//! `gelu_erf_backward` on the emulator: every stage, and `current`, against
//! the f64 reference of dx and dbias under the op's tolerance, on shapes
//! with tails (one row, one column, widths not a multiple of the blocks)
//! and on data of any scale; an output of zeros, an output left poisoned,
//! a gradient missing a term and the tanh form's gradient fail; dbias is
//! the same bits on every run. The emulator computes `ex2.approx` exactly,
//! so the element's arithmetic is also replayed with it pushed to the
//! edges of its contract, and its error against f64 measured over a dense
//! grid of z against the bound its doc states.

use mage_common::fixtures::Rng;
use mage_common::numeric::{EX2_APPROX_REL, FLUSHED, compare};
use mage_common::op::{HostBuf, OUTPUT_POISON, check_current, check_plan, check_stage, emulate};
use mage_gelu::erf_backward::element_gradient::{ELEMENT_ERROR, gelu_erf_grad_with};
use mage_gelu::erf_backward::{ERF_BACKWARD, STAGES, choose, gelu_erf_grad_f64, mage_001, mage_002, mage_006};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// How x is drawn; bias is normal(0, 0.25) times the same scale.
#[derive(Clone, Copy, Debug)]
enum Dist {
    /// normal(0, s).
    Normal(f32),
    /// Uniform in ±h: both tails of Φ.
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
    prop_oneof![(-6.0f32..3.0).prop_map(|e| Dist::Normal(10f32.powf(e))), (0.5f32..22.0).prop_map(Dist::Uniform)]
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
                check_stage(&ERF_BACKWARD, stage, &[rows, width], &x).map_err(TestCaseError::fail)?;
            }
            check_current(&ERF_BACKWARD, &[rows, width], &x).map_err(TestCaseError::fail)?;
            Ok(())
        })
        .unwrap();
}

/// The generator's own inputs at the tails of the tiles: one row, one
/// column, odd widths, a last chunk shorter than the others.
#[test]
fn every_stage_on_generated_inputs_with_tails() {
    for dims in [[1u32, 1u32], [1, 7], [5, 1], [3, 257], [17, 131], [64, 768], [300, 5]] {
        let x = ERF_BACKWARD.generate(&dims, 20261203 + dims[1] as u64);
        for stage in STAGES {
            check_stage(&ERF_BACKWARD, stage, &dims, &x).unwrap_or_else(|e| panic!("{e}"));
        }
        check_current(&ERF_BACKWARD, &dims, &x).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn every_stage_holds_at_any_scale() {
    let dists = [Dist::Normal(1e-6), Dist::Normal(1e-3), Dist::Normal(1.0), Dist::Normal(1e3), Dist::Uniform(22.0)];
    for dist in dists {
        for dy_scale in [1e-6f32, 1.0, 1e6] {
            let x = inputs(7, 300, dist, dy_scale, 11);
            for stage in STAGES {
                let cmp = check_stage(&ERF_BACKWARD, stage, &[7, 300], &x).unwrap_or_else(|e| panic!("{dist:?} dy {dy_scale}: {e}"));
                assert!(cmp.worst_ratio < 0.5, "{} at {dist:?} dy {dy_scale}: {}", stage.name, cmp.worst_ratio);
            }
        }
    }
}

/// z swept densely over [-20, 20] (bias zero) and a few extremes, dy 1,
/// 2^60 and 2^120 (which keeps dx normal deep into the left tail): within
/// a fifth of the allowance, finite everywhere, and `dx = dy` exactly far
/// right.
#[test]
fn a_dense_sweep_of_z_on_every_stage() {
    let mut x: Vec<f32> = (0..8000).map(|i| -20.0 + 40.0 * i as f32 / 8000.0).collect();
    x.extend([0.0, -0.0, 1e-30, -1e-30, -0.7517915, 1e4, -1e4, 7e12, -7e12, 1e30, -1e30]);
    let width = x.len() as u32;
    for dy in [1.0f32, 2f32.powi(60), 2f32.powi(120)] {
        let inputs = vec![HostBuf::F32(x.clone()), HostBuf::F32(vec![0.0; width as usize]), HostBuf::F32(vec![dy; width as usize])];
        for stage in STAGES {
            let cmp = check_stage(&ERF_BACKWARD, stage, &[1, width], &inputs).unwrap_or_else(|e| panic!("dy {dy}: {e}"));
            // Below z ≈ −18.7 `h` flushes, and at dy 2^120 the exact dx there
            // is a subnormal, up to a ninth of the 2^-126 allowed.
            assert!(cmp.worst_ratio < 0.2, "{} at dy {dy}: {} at {:?}", stage.name, cmp.worst_ratio, cmp.worst);
            let out = emulate(&ERF_BACKWARD, stage, &[1, width], &inputs).unwrap();
            for (z, d) in x.iter().zip(&out) {
                assert!(d.is_finite(), "{}: dx at z = {z} is {d}", stage.name);
                if *z >= 7.0 {
                    assert_eq!(*d, dy, "{}: dx at z = {z}", stage.name);
                }
            }
        }
    }
}

/// mage-006 where the width is not a multiple of 4 or there are more than
/// 32 chunks, mage-002 elsewhere: the sweep's shapes and the edges.
#[test]
fn current_dispatches_by_shape() {
    let cases = [
        ([4096u32, 768u32], "mage-006"),
        ([1000, 1001], "mage-006"),
        ([16384, 4096], "mage-006"),
        ([512, 3072], "mage-002"),
        ([1, 1], "mage-006"),
        ([1, 4], "mage-002"),
        ([3, 257], "mage-006"),
        ([256, 128], "mage-002"),
        ([264, 128], "mage-006"),
    ];
    for (d, stage) in cases {
        assert_eq!(choose(&d).name, stage, "{d:?}");
        assert_eq!(ERF_BACKWARD.dispatch(&d, &[]).name, stage, "{d:?}");
        assert_eq!(mage_gelu::backward::BACKWARD.dispatch(&d, &[]).name, stage, "{d:?}");
    }
}

/// The sizes the magnitudes are made of, against known values (CPython's
/// `math.erfc`), and gelu's minimum, where the gradient is zero.
#[test]
fn the_reference_at_known_points() {
    let (g, phi, zd, cond) = gelu_erf_grad_f64(0.0);
    assert_eq!((g, phi, zd, cond), (0.5, 0.5, 0.0, 0.0));
    let (g, ..) = gelu_erf_grad_f64(1.0);
    assert!((g - (0.8413447460685429 + 0.24197072451914337)).abs() < 1e-15);
    let (g, phi, zd, _) = gelu_erf_grad_f64(-3.0);
    assert!((phi - 0.0013498980316300957).abs() < 1e-17);
    assert!((g - (0.0013498980316300957 - 3.0 * 0.0044318484119380075)).abs() < 1e-17 && zd > 0.0);
    assert!(gelu_erf_grad_f64(-0.7517915246935645).0.abs() < 1e-15);
}

#[test]
fn zeros_poison_a_missing_term_and_the_tanh_form_fail() {
    let dims = [9u32, 130];
    let x = inputs(dims[0], dims[1], Dist::Normal(2.0), 1.0, 5);
    let reference = (ERF_BACKWARD.reference)(&dims, &x);
    let tol = (ERF_BACKWARD.tolerance)(&dims, &x);
    let n = ERF_BACKWARD.output_len(&dims);
    let normal = reference.values.iter().filter(|v| v.abs() >= FLUSHED).count();
    let zeros = compare(&vec![0f32; n], &reference, tol);
    assert!(zeros.failures as f64 >= 0.99 * normal as f64, "zeros fail on only {} of {normal}", zeros.failures);
    let poison = compare(&vec![f32::from_bits(OUTPUT_POISON); n], &reference, tol);
    assert_eq!(poison.failures, n, "a poisoned output passes somewhere");
    // dx without its z·φ term (dy·Φ), and dbias summed from it.
    let good = emulate(&ERF_BACKWARD, STAGES[0], &dims, &x).unwrap();
    let (rows, width) = (dims[0] as usize, dims[1] as usize);
    let (xs, bias, dy) = (x[0].as_f32(), x[1].as_f32(), x[2].as_f32());
    let mut no_density = vec![0f32; rows * width + width];
    let mut tanh = vec![0f32; rows * width + width];
    for r in 0..rows {
        for c in 0..width {
            let (i, z) = (r * width + c, xs[r * width + c] as f64 + bias[c] as f64);
            let (_, phi, ..) = gelu_erf_grad_f64(z);
            for (out, g) in [(&mut no_density, phi), (&mut tanh, mage_gelu::backward::gelu_grad_f64(z).0)] {
                let v = (dy[i] as f64 * g) as f32;
                out[i] = v;
                out[rows * width + c] += v;
            }
        }
    }
    let cmp = compare(&no_density, &reference, tol);
    assert!(cmp.failures > (rows * width + width) * 9 / 10, "a dx missing its z·φ term fails on only {} elements", cmp.failures);
    let cmp = compare(&tanh, &reference, tol);
    assert!(cmp.failures > (rows * width + width) / 2, "the tanh form's gradient fails on only {} elements", cmp.failures);
    assert!(compare(&good, &reference, tol).passed());
}

/// A plan that never writes dbias (mage-001 without its column kernel,
/// mage-002 without its totals, mage-004's one launch with dbias sent to
/// scratch) leaves it poisoned, and the check names it.
#[test]
fn a_stage_that_leaves_dbias_unwritten_fails() {
    let dims = [12u32, 70];
    let x = ERF_BACKWARD.generate(&dims, 3);
    for stage in STAGES {
        let mut plan = (stage.plan)(&dims);
        if plan.launches.len() > 1 {
            plan.launches.truncate(1);
        } else {
            let scratch = plan.scratch.len();
            plan.scratch.push(dims[1] as usize);
            for arg in &mut plan.launches[0].args {
                if matches!(arg, mage_common::op::Arg::Output(1)) {
                    *arg = mage_common::op::Arg::Scratch(scratch);
                }
            }
        }
        let err = check_plan(&ERF_BACKWARD, &plan, &dims, &x).unwrap_err();
        assert!(err.contains("dbias"), "{}: {err}", stage.name);
    }
}

#[test]
fn dbias_is_the_same_bits_on_every_run_and_each_output_is_located() {
    let dims = [33u32, 70];
    let x = inputs(dims[0], dims[1], Dist::Normal(1.0), 1.0, 9);
    for stage in STAGES {
        let a = emulate(&ERF_BACKWARD, stage, &dims, &x).unwrap();
        let b = emulate(&ERF_BACKWARD, stage, &dims, &x).unwrap();
        assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{}", stage.name);
    }
    assert_eq!(ERF_BACKWARD.output_offsets(&dims), [0, 33 * 70, 33 * 70 + 70]);
    assert_eq!(ERF_BACKWARD.locate_output(&dims, 33 * 70 + 5), "dbias [5]");
    assert_eq!(ERF_BACKWARD.locate_output(&dims, 71), "dx [1, 1]");
    assert_eq!(ERF_BACKWARD.locate_output(&dims, 33 * 70 + 69), "dbias [69]");
}

/// `ex2.approx` off by `f` (relative), rounded to f32 and flushed like the instruction.
fn ex2_off(f: f64) -> impl Fn(f32) -> f32 {
    move |s| {
        let r = ((s as f64).exp2() * (1.0 + f)) as f32;
        if r.is_subnormal() { 0.0 } else { r }
    }
}

/// The element's arithmetic against f64 on every z in [-20, 20] by steps of
/// 1/2048 and the extremes, `ex2` exact and at either edge of its
/// contract, dy of 1 and 2^100: within [`ELEMENT_ERROR`] of `|dy|·(Φ +
/// |z|φ)` wherever that is a normal FP32 number far from underflow, and
/// within that plus 2^-126 everywhere. Prints the worst ratio, the number
/// the doc states.
#[test]
fn the_element_error_is_within_its_stated_bound() {
    let mut zs: Vec<f32> = (-20 * 2048..=20 * 2048).map(|i| i as f32 / 2048.0).collect();
    zs.extend([-0.7517915, 1e-30, -1e-30, 25.0, -25.0, 1e4, -1e4, 1e30, -1e30]);
    for f in [0.0, EX2_APPROX_REL, -EX2_APPROX_REL] {
        let ex2 = ex2_off(f);
        let (mut worst, mut at) = (0f64, 0f32);
        for dy in [1f32, 2f32.powi(100)] {
            for &z in &zs {
                let (g, phi, zd, _) = gelu_erf_grad_f64(z as f64);
                let (want, size) = (dy as f64 * g, dy as f64 * (phi + zd));
                let got = gelu_erf_grad_with(z, dy, &ex2) as f64;
                let err = (got - want).abs();
                assert!(err <= ELEMENT_ERROR * size + FLUSHED, "ex2 off by {f:e}, dy {dy}: z = {z}: {got} vs {want}");
                if size >= 2f64.powi(-100) && err / size > worst {
                    (worst, at) = (err / size, z);
                }
            }
        }
        println!("ex2 off by {f:e}: worst {worst:.3e} of |dy|·(Φ + |z|φ) at z = {at}");
        assert!(worst <= ELEMENT_ERROR, "ex2 off by {f:e}: {worst:.3e} at z = {at}");
    }
}

/// mage-002's chunks: many chunks of one row a warp (1600x5), a last chunk
/// shorter than the others (1700x132, two tiles, the second of one quad),
/// widths not a multiple of 4 past one tile (9x1029, 23x515), each stage
/// against the reference and twice the same bits; dx is mage-001's bits.
#[test]
fn chunked_shapes_on_every_stage_twice_the_same_bits() {
    for (rows, width) in [(1600u32, 5u32), (1700, 132), (9, 1029), (23, 515), (1, 4)] {
        let dims = [rows, width];
        let per = mage_002::chunk_rows(rows, width);
        assert_eq!(per % mage_002::GROUPS, 0);
        let x = inputs(rows, width, Dist::Normal(1.0), 1.0, rows as u64 * 7 + width as u64);
        let mut outs = Vec::new();
        for stage in STAGES {
            check_stage(&ERF_BACKWARD, stage, &dims, &x).unwrap_or_else(|e| panic!("{} at {rows}x{width}: {e}", stage.name));
            let a = emulate(&ERF_BACKWARD, stage, &dims, &x).unwrap();
            let b = emulate(&ERF_BACKWARD, stage, &dims, &x).unwrap();
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
    assert_eq!(mage_001::THREADS, 256);
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

/// mage-006 is mage-002 to the bit, dx and dbias, at every width: widths
/// that are a multiple of 4 (the 16-byte path) and not (a lane's columns
/// 32 apart), one tile and several, the last tile short; and at shapes of
/// more than 256 chunks, where a totals segment holds more than one batch
/// of loads and a short last one (2500x3: 313 chunks, 10 a segment).
#[test]
fn mage_006_is_mage_002_to_the_bit() {
    for (rows, width) in [(2500u32, 3u32), (2100, 130)] {
        let x = inputs(rows, width, Dist::Normal(1.0), 1.0, 5);
        let a = emulate(&ERF_BACKWARD, &mage_002::STAGE, &[rows, width], &x).unwrap();
        let b = emulate(&ERF_BACKWARD, &mage_006::STAGE, &[rows, width], &x).unwrap();
        assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{rows}x{width}: mage-006 differs from mage-002");
        assert!(rows.div_ceil(mage_002::chunk_rows(rows, width)) > 256, "{rows}x{width}");
    }
    let mut runner = TestRunner::new(Config { cases: 24, ..Config::default() });
    let width = prop_oneof![prop::sample::select(vec![1u32, 3, 4, 31, 33, 127, 128, 129, 255, 257, 1001]), 1u32..=700];
    runner
        .run(&(1u32..=80, width, any::<u64>()), |(rows, width, seed)| {
            let x = inputs(rows, width, Dist::Normal(1.0), 1.0, seed);
            let a = emulate(&ERF_BACKWARD, &mage_002::STAGE, &[rows, width], &x).map_err(TestCaseError::fail)?;
            let b = emulate(&ERF_BACKWARD, &mage_006::STAGE, &[rows, width], &x).map_err(TestCaseError::fail)?;
            prop_assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{}x{}: mage-006 differs from mage-002", rows, width);
            Ok(())
        })
        .unwrap();
}
