//! `triangle_backward` on the emulator: every stage, and `current`, against
//! the f64 reference of dA and dB under the op's tolerance, on random
//! shapes with tails (one row, channel counts not a multiple of 4 or of
//! the channel tiles' group of 8, `n` not a multiple of their block tiles)
//! and on data of any scale; an output of zeros, a gradient over the wrong
//! axis, a gradient missing a term and mage-002's launch with its operands
//! or outputs swapped fail; small integers come out exact; the same bits on
//! every run, and those of forward mage-001 on transposed inputs; both of
//! mage-002's tile entries give mage-001's bits; the reference is the
//! forward's gradient.

use mage_common::fixtures::Rng;
use mage_common::numeric::compare;
use mage_common::op::{HostBuf, check_current, check_plan, check_stage, emulate, emulate_plan};
use mage_common::scale::{SCALES, check_on, rows_scaled, scaled};
use mage_triangle::backward::{BACKWARD, STAGES, mage_001, mage_002, reference};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// A, B and dO `[n, n, c]`, each normal(0, `std`), from `seed`.
fn inputs(n: u32, c: u32, std: f32, seed: u64) -> Vec<HostBuf> {
    let len = (n * n * c) as usize;
    let mut r = Rng::new(seed);
    (0..3).map(|_| HostBuf::F32(r.normal_vec(len, 0.0, std))).collect()
}

/// `x` `[n, n, c]` with its first two axes swapped: `x[k, i, ch]` at `[i, k, ch]`.
fn transpose(x: &[f32], n: usize, c: usize) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for i in 0..n {
        for k in 0..n {
            out[(i * n + k) * c..][..c].copy_from_slice(&x[(k * n + i) * c..][..c]);
        }
    }
    out
}

/// The gradients over the wrong axis of A and B: `dA = Σ_j dO[i, j]·B[k,
/// j]` (dO·Bᵀ where dO·B is meant) and `dB = Σ_i dO[i, j]·A[k, i]`, rounded to f32.
fn wrong_axis(dims: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    let (n, c) = (dims[0] as usize, dims[1] as usize);
    let swapped =
        vec![HostBuf::F32(transpose(inputs[0].as_f32(), n, c)), HostBuf::F32(transpose(inputs[1].as_f32(), n, c)), inputs[2].clone()];
    reference(dims, &swapped).values.iter().map(|v| *v as f32).collect()
}

#[test]
fn every_stage_and_current_match_the_reference_on_random_shapes() {
    let mut runner = TestRunner::new(Config { cases: 32, ..Config::default() });
    let shape = (
        prop_oneof![Just(1u32), 1u32..=40],
        prop_oneof![prop::sample::select(vec![1u32, 3, 5, 7, 11]), 1u32..=12],
        prop::sample::select(vec![0.25f32, 1.0, 1e-3, 1e3]),
        any::<u64>(),
    );
    runner
        .run(&shape, |(n, c, std, seed)| {
            let x = inputs(n, c, std, seed);
            for stage in STAGES {
                check_stage(&BACKWARD, stage, &[n, c], &x).map_err(TestCaseError::fail)?;
            }
            check_current(&BACKWARD, &[n, c], &x).map_err(TestCaseError::fail)?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn named_shapes_on_every_stage() {
    for (n, c) in [(1, 1), (1, 7), (2, 1), (7, 5), (9, 8), (13, 12), (40, 3), (33, 1)] {
        let x = BACKWARD.generate(&[n, c], 20261202 + (n * 100 + c) as u64);
        for stage in STAGES {
            check_stage(&BACKWARD, stage, &[n, c], &x).unwrap_or_else(|e| panic!("{e}"));
        }
        check_current(&BACKWARD, &[n, c], &x).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// On each data set, every stage passes, zeros fail on at least 90% of the
/// non-zero elements, and the gradients over the wrong axis on 90% of all.
fn check_scales(dims: &[u32]) {
    let c = dims[1] as usize;
    let base = BACKWARD.generate(dims, 43);
    let mut data: Vec<(String, Vec<HostBuf>)> =
        SCALES.iter().map(|&s| (format!("A, B and dO scaled by {s:e}"), scaled(&base, &[0, 1, 2], s))).collect();
    data.push(("rows of dO scaled by 10^U(-3,3)".into(), rows_scaled(&base, 2, c, 5)));
    data.push(("rows of A and of B scaled by 10^U(-3,3)".into(), rows_scaled(&rows_scaled(&base, 0, c, 6), 1, c, 7)));
    for (what, x) in &data {
        let wrong = wrong_axis(dims, x);
        for stage in STAGES {
            check_on(&BACKWARD, stage, dims, x, &wrong, 0.9).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}

#[test]
fn every_stage_holds_its_tolerance_at_every_scale() {
    check_scales(&[16, 8]);
    check_scales(&[13, 5]);
}

/// Zeros fail; a dB with the indices of A swapped fails in dB (at least
/// 90% of it) and only there; a dA missing its last term fails on at
/// least 90% of dA; the correct output passes.
#[test]
fn zeros_a_wrong_gradient_and_a_missing_term_fail() {
    let dims = [24u32, 7];
    let (n, c) = (dims[0] as usize, dims[1] as usize);
    let len = n * n * c;
    let x = BACKWARD.generate(&dims, 5);
    let want = reference(&dims, &x);
    let tol = (BACKWARD.tolerance)(&dims, &x);
    let zeros = compare(&vec![0f32; BACKWARD.output_len(&dims)], &want, tol);
    let nonzero = want.values.iter().filter(|v| **v != 0.0).count();
    assert!(zeros.failures as f64 >= 0.9 * nonzero as f64, "zeros fail on only {} of {nonzero}", zeros.failures);

    let good = emulate(&BACKWARD, STAGES[0], &dims, &x).unwrap();
    assert!(compare(&good, &want, tol).passed());

    // dB[j, k] = Σ_i dO[i, j]·A[k, i]: A's indices swapped.
    let mut wrong = good.clone();
    let swapped = vec![HostBuf::F32(transpose(x[0].as_f32(), n, c)), x[1].clone(), x[2].clone()];
    let wrong_db = reference(&dims, &swapped);
    for (w, v) in wrong[len..].iter_mut().zip(&wrong_db.values[len..]) {
        *w = *v as f32;
    }
    let cmp = compare(&wrong, &want, tol);
    assert!(cmp.failures as f64 >= 0.9 * len as f64, "a dB over A's swapped indices fails on only {} of {len}", cmp.failures);
    assert!(cmp.first_failures.iter().all(|f| f.0 >= len), "a wrong dB fails in dA: {:?}", cmp.first_failures);
    let worst = BACKWARD.locate_output(&dims, cmp.worst.unwrap().0);
    assert!(worst.starts_with("dB ["), "the worst element of a wrong dB is {worst}");

    // dA without its last term j = n - 1.
    let (b, d) = (x[1].as_f32(), x[2].as_f32());
    let mut missing = good.clone();
    for i in 0..n {
        for k in 0..n {
            for ch in 0..c {
                let j = n - 1;
                let t = (i * n + k) * c + ch;
                missing[t] = (want.values[t] - d[(i * n + j) * c + ch] as f64 * b[(j * n + k) * c + ch] as f64) as f32;
            }
        }
    }
    let cmp = compare(&missing, &want, tol);
    assert!(cmp.failures as f64 >= 0.9 * len as f64, "a dA missing a term fails on only {} of {len}", cmp.failures);
}

/// Small integers: every product and partial sum is exact in f32, so each
/// stage must give the reference bit for bit; a swapped index, a wrong
/// stride or a missing term shows at once.
#[test]
fn integer_inputs_are_exact_on_every_stage() {
    for (n, c) in [(7u32, 5u32), (6, 8), (9, 4), (11, 3), (1, 2), (30, 1)] {
        let dims = [n, c];
        let f = |s: u32, m: u32, off: i32| -> Vec<f32> {
            (0..n * n * c).map(|t| (((t / c / n) * s + (t / c % n) * 3 + (t % c) * 5 + 1) % m) as i32 - off).map(|v| v as f32).collect()
        };
        let x = vec![HostBuf::F32(f(7, 5, 2)), HostBuf::F32(f(11, 7, 3)), HostBuf::F32(f(13, 9, 4))];
        let want = reference(&dims, &x);
        for stage in STAGES {
            let out = emulate(&BACKWARD, stage, &dims, &x).unwrap();
            for (i, (o, w)) in out.iter().zip(&want.values).enumerate() {
                assert_eq!(*o as f64, *w, "{} at {dims:?}, {}", stage.name, BACKWARD.locate_output(&dims, i));
            }
        }
    }
}

#[test]
fn the_same_bits_on_every_run_and_each_output_is_located() {
    let dims = [21u32, 11];
    let x = BACKWARD.generate(&dims, 9);
    for stage in STAGES {
        let bits = || -> Vec<u32> { emulate(&BACKWARD, stage, &dims, &x).unwrap().iter().map(|v| v.to_bits()).collect() };
        assert_eq!(bits(), bits(), "{} gives other bits on a second run", stage.name);
    }
    let len = 21 * 21 * 11;
    assert_eq!(BACKWARD.output_offsets(&dims), [0, len, 2 * len]);
    assert_eq!(BACKWARD.locate_output(&dims, (21 + 2) * 11 + 3), "dA [1, 2, 3]");
    assert_eq!(BACKWARD.locate_output(&dims, len + (4 * 21 + 20) * 11 + 10), "dB [4, 20, 10]");
    assert_eq!(BACKWARD.locate_output(&dims, len), "dB [0, 0, 0]");
}

/// The reference is the forward's gradient: for the forward's `O = f(A,
/// B)`, `⟨dO, O⟩ = ⟨dA, A⟩ = ⟨dB, B⟩` (each is `Σ dO[i, j]·A[i, k]·B[j, k]`
/// over every index), in f64 to far below any FP32 rounding.
#[test]
fn the_reference_is_the_gradient_of_the_forward() {
    for dims in [[1u32, 1u32], [7, 5], [16, 3]] {
        let x = BACKWARD.generate(&dims, 17);
        let len = x[0].len();
        let o = mage_triangle::reference(&dims, &x[..2]);
        let g = reference(&dims, &x);
        let dot = |p: &[f64], q: &[f32]| -> (f64, f64) {
            p.iter().zip(q).fold((0.0, 0.0), |(s, m), (p, q)| (s + p * *q as f64, m + (p * *q as f64).abs()))
        };
        let (through_o, scale) = dot(&o.values, x[2].as_f32());
        let (through_a, _) = dot(&g.values[..len], x[0].as_f32());
        let (through_b, _) = dot(&g.values[len..], x[1].as_f32());
        for (what, v) in [("⟨dA, A⟩", through_a), ("⟨dB, B⟩", through_b)] {
            assert!((v - through_o).abs() <= 1e-12 * scale, "{what} = {v:e}, ⟨dO, O⟩ = {through_o:e} at {dims:?}");
        }
    }
}

/// Each gradient is the forward on transposed inputs, `dA = f(dO, Bᵀ)` and
/// `dB = f(dOᵀ, Aᵀ)` (`Xᵀ[k, i] = X[i, k]`), and mage-001 sums its terms
/// in the order forward mage-001 does, with the same `fma`s: the same bits.
#[test]
fn each_gradient_is_forward_mage_001_on_transposed_inputs_bit_for_bit() {
    for dims in [[1u32, 1u32], [7, 5], [20, 3], [33, 12]] {
        let (n, c) = (dims[0] as usize, dims[1] as usize);
        let x = BACKWARD.generate(&dims, 23);
        let (a, b, d) = (x[0].as_f32(), x[1].as_f32(), x[2].as_f32());
        let forward = |p: Vec<f32>, q: Vec<f32>| -> Vec<u32> {
            let out = emulate(&mage_triangle::OP, &mage_triangle::mage_001::STAGE, &dims, &[HostBuf::F32(p), HostBuf::F32(q)]).unwrap();
            out.iter().map(|v| v.to_bits()).collect()
        };
        let mut want = forward(d.to_vec(), transpose(b, n, c));
        want.extend(forward(transpose(d, n, c), transpose(a, n, c)));
        let got: Vec<u32> = emulate(&BACKWARD, &mage_001::STAGE, &dims, &x).unwrap().iter().map(|v| v.to_bits()).collect();
        let first = got.iter().zip(&want).position(|(g, w)| g != w);
        assert!(first.is_none(), "mage-001 at {dims:?} differs from the forward at {}", BACKWARD.locate_output(&dims, first.unwrap()));
    }
}

#[test]
fn current_runs_mage_002_at_every_shape() {
    for w in BACKWARD.sweep {
        assert_eq!(BACKWARD.dispatch(w.dims, &[]).name, "mage-002");
    }
    assert_eq!(BACKWARD.dispatch(&[1, 1], &[]).name, "mage-002");
}

/// mage-002 takes the 64x32 tile where the grid of both gradients has 128
/// blocks (about one per SM), else 32x16, and launches what it picked.
#[test]
fn mage_002_takes_64x32_where_both_gradients_fill_the_sms() {
    use mage_triangle::{TILES_32X16, TILES_64X32};
    let pick = |d: [u32; 2]| mage_002::tiles(&d).1;
    assert_eq!(pick([7, 5]), TILES_32X16);
    assert_eq!(pick([64, 8]), TILES_32X16);
    assert_eq!(pick([128, 32]), TILES_32X16);
    assert_eq!(pick([128, 63]), TILES_64X32);
    assert_eq!(pick([128, 64]), TILES_64X32);
    assert_eq!(pick([256, 32]), TILES_64X32);
    assert_eq!(pick([256, 64]), TILES_64X32);
    assert_eq!(pick([512, 32]), TILES_64X32);
    assert_eq!((2 * TILES_64X32.blocks(128, 64), 2 * TILES_64X32.blocks(128, 63)), (128, 128));
    assert_eq!(2 * TILES_64X32.blocks(128, 56), 112);
    assert_eq!(pick([128, 56]), TILES_32X16);
    for d in [[7u32, 5u32], [128, 32], [128, 64], [512, 32]] {
        let (kernel, shape) = mage_002::tiles(&d);
        let plan = (mage_002::STAGE.plan)(&d);
        assert_eq!(plan.launches.len(), 1);
        let launch = &plan.launches[0];
        assert_eq!(
            (launch.kernel.name, launch.grid.x, launch.block.x, launch.shared_bytes),
            (kernel.name, 2 * shape.blocks(d[0], d[1]), shape.threads(), shape.shared_bytes())
        );
    }
}

/// Both gradient entries on their own, whatever tile mage-002 would pick
/// (the 64x32 tile goes only to shapes too large for the emulator here),
/// on shapes with several tiles along both axes and partial last ones
/// (`n` not a multiple of 16, 32 or 64), a partial last channel group (`c`
/// not a multiple of 8), more `k` chunks than the ring holds, and `n` = 1:
/// against the reference (outputs poisoned first), and bit for bit against
/// mage-001, which sums every element in the same order.
#[test]
fn every_gradient_tile_entry_matches_mage_001_bit_for_bit() {
    use mage_triangle::{TILES_32X16, TILES_64X32, gradient_tiles_launch, triangle_backward_tiles_32x16, triangle_backward_tiles_64x32};
    let entries = [(&triangle_backward_tiles_32x16::KERNEL, TILES_32X16), (&triangle_backward_tiles_64x32::KERNEL, TILES_64X32)];
    for dims in [[1u32, 1u32], [1, 9], [7, 5], [20, 16], [33, 12], [75, 11], [66, 3], [97, 8]] {
        let inputs = BACKWARD.generate(&dims, 31);
        let want: Vec<u32> = emulate(&BACKWARD, &mage_001::STAGE, &dims, &inputs).unwrap().iter().map(|v| v.to_bits()).collect();
        for (kernel, shape) in entries {
            let plan = gradient_tiles_launch(kernel, shape, &dims);
            check_plan(&BACKWARD, &plan, &dims, &inputs).unwrap_or_else(|e| panic!("{} at {dims:?}: {e}", kernel.name));
            let out: Vec<u32> = emulate_plan(&BACKWARD, &plan, &dims, &inputs).unwrap().iter().map(|v| v.to_bits()).collect();
            let first = out.iter().zip(&want).position(|(o, w)| o != w);
            assert!(
                first.is_none(),
                "{} differs from mage-001 at {dims:?}, {}",
                kernel.name,
                BACKWARD.locate_output(&dims, first.unwrap())
            );
        }
    }
}

/// Planted wrong results fail: mage-002's launch with dA and dB swapped,
/// with A and B swapped (dA from A, dB from B), and with dO in the place
/// of B; and its correct output with one element moved by the size of one
/// of its terms fails there and only there.
#[test]
fn planted_wrong_results_fail_on_mage_002() {
    use mage_common::op::Arg;
    let dims = [37u32, 10];
    let x = BACKWARD.generate(&dims, 77);
    let plan = (mage_002::STAGE.plan)(&dims);
    check_plan(&BACKWARD, &plan, &dims, &x).unwrap();
    let swap = |p: Arg, q: Arg| {
        let mut wrong = plan.clone();
        for arg in &mut wrong.launches[0].args {
            *arg = if *arg == p {
                q
            } else if *arg == q {
                p
            } else {
                *arg
            };
        }
        wrong
    };
    for (what, wrong) in [
        ("dA and dB swapped", swap(Arg::Output(0), Arg::Output(1))),
        ("A and B swapped", swap(Arg::Input(0), Arg::Input(1))),
        ("dO and B swapped", swap(Arg::Input(1), Arg::Input(2))),
    ] {
        assert!(check_plan(&BACKWARD, &wrong, &dims, &x).is_err(), "mage-002 with {what} passes");
    }

    let good = emulate(&BACKWARD, &mage_002::STAGE, &dims, &x).unwrap();
    let want = reference(&dims, &x);
    let tol = (BACKWARD.tolerance)(&dims, &x);
    let (n, c) = (dims[0] as usize, dims[1] as usize);
    let len = n * n * c;
    // dB[5, 30, 7] without its term i = 0, dO[0, 5, 7]·A[0, 30, 7].
    let at = len + (5 * n + 30) * c + 7;
    let term = x[2].as_f32()[5 * c + 7] as f64 * x[0].as_f32()[30 * c + 7] as f64;
    let mut planted = good.clone();
    planted[at] = (want.values[at] - term) as f32;
    let cmp = compare(&planted, &want, tol);
    assert_eq!(cmp.failures, 1, "one planted element: {:?}", cmp.first_failures);
    assert_eq!(BACKWARD.locate_output(&dims, cmp.worst.unwrap().0), "dB [5, 30, 7]");
}
