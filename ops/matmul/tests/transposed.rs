//! `matmul_nt` (`C = A·Bᵀ`) and `matmul_tn` (`C = Aᵀ·B`) on the emulator:
//! every stage, and `current`, against the f64 reference under matmul's
//! tolerance, on shapes with every kind of tile tail; each stage against
//! matmul's stage of the same arithmetic on the operand transposed back, to
//! the bit; the tolerance at every scale of the data, failing zeros and a
//! misplaced term; and the dispatchers.

use mage_common::numeric::{bits_differing, compare};
use mage_common::op::{HostBuf, Op, Stage, check_current, check_stage, emulate, emulate_plan};
use mage_common::scale::{SCALES, check_on, rows_scaled, scaled};
use mage_matmul::{NT, OP, TN, as_matmul_inputs, mage_001, mage_009, nt, tn};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

/// The two ops.
const OPS: [&Op; 2] = [&NT, &TN];

/// `inputs` of `op` put back to matmul's layout, A `[m, k]` and B `[k, n]`.
fn as_matmul(op: &Op, d: &[u32], inputs: &[HostBuf]) -> Vec<HostBuf> {
    let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
    match op.name {
        "matmul_nt" => as_matmul_inputs(inputs, [m, k], false, [n, k], true),
        "matmul_tn" => as_matmul_inputs(inputs, [k, m], true, [k, n], false),
        other => panic!("not a transposed matmul: {other}"),
    }
}

/// matmul's inputs (A `[m, k]`, B `[k, n]`) put in `op`'s layout.
fn from_matmul(op: &Op, d: &[u32], inputs: &[HostBuf]) -> Vec<HostBuf> {
    let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
    match op.name {
        "matmul_nt" => as_matmul_inputs(inputs, [m, k], false, [k, n], true),
        "matmul_tn" => as_matmul_inputs(inputs, [m, k], true, [k, n], false),
        other => panic!("not a transposed matmul: {other}"),
    }
}

fn check(op: &Op, stage: &Stage, d: [u32; 3], seed: u64) -> Result<(), String> {
    if !(stage.supports)(&d) {
        return Err(format!("{} {} does not support {}", op.name, stage.name, Op::dims_label(&d)));
    }
    check_stage(op, stage, &d, &op.generate(&d, seed)).map(|_| ())
}

/// Sizes with and without tails of every tile (4, 16, 32, 64, 128), and 1.
fn dim() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(vec![1u32, 3, 4, 5, 16, 17, 31, 32, 33, 64, 65, 97, 128, 130]), 1u32..=150]
}

proptest! {
    #![proptest_config(Config { cases: 12, ..Config::default() })]

    #[test]
    fn every_stage_of_both_ops_matches_the_reference(m in dim(), n in dim(), k in dim(), seed in any::<u64>()) {
        for op in OPS {
            for stage in op.stages {
                check(op, stage, [m, n, k], seed).map_err(TestCaseError::fail)?;
            }
            check_current(op, &[m, n, k], &op.generate(&[m, n, k], seed)).map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn named_shapes_on_every_stage_of_both_ops() {
    let shapes = [
        [17, 19, 23],  // odd everywhere: scalar entries, tails in m, n and k
        [1, 1, 1],     // one element
        [70, 66, 5],   // K shorter than any tile
        [65, 68, 100], // K not a multiple of 16 or 32; m and n tails
        [129, 65, 64], // M and N tails with whole K tiles, n odd
        [64, 128, 64], // exact tiles, v4 entries
        [96, 132, 36], // tails with rows a multiple of 4: v4 entries with partial tiles
        [1, 200, 3],   // a row vector
        [200, 1, 7],   // a column
        [3, 2, 250],   // long K
    ];
    for op in OPS {
        for stage in op.stages {
            for (i, d) in shapes.into_iter().enumerate() {
                check(op, stage, d, 1000 + i as u64).unwrap();
            }
        }
    }
}

/// mage-001 of each op sums every output by one `fma` per term in K order,
/// as matmul's mage-001 does: the same bits on the operand transposed back.
#[test]
fn mage_001_is_matmuls_mage_001_to_the_bit() {
    for d in [[17, 19, 23], [33, 70, 65], [64, 128, 96], [5, 3, 129]] {
        for (op, stage) in [(&NT, &nt::mage_001::STAGE), (&TN, &tn::mage_001::STAGE)] {
            let inputs = op.generate(&d, 7);
            let out = emulate(op, stage, &d, &inputs).unwrap();
            let want = emulate(&OP, &mage_001::STAGE, &d, &as_matmul(op, &d, &inputs)).unwrap();
            let differ = bits_differing(&out, &want);
            assert_eq!(differ, 0, "{} mage-001 differs from matmul's in {differ} elements at {d:?}", op.name);
        }
    }
}

/// mage-002 of each op, and matmul_tn's mage-003 (64 rows), is matmul mage-009's arithmetic (the same split
/// products, in the same order, per K tile of 32), so its output is
/// mage-009's on the operand transposed back, to the bit, on all four
/// entries (64 and 128 rows, 16- and 4-byte copies): K tiles one to seven
/// (the pipeline's four stages and a round past them), one block tile
/// exact or with tails, several whose edges fall inside the warpgroups'
/// column slices and the accumulators' column pairs (NT stores columns
/// `col` and `col + 8`, mage-009 `col` and `col + 1`).
#[test]
fn the_3xtf32_stages_are_matmuls_mage_009_to_the_bit() {
    for rows in [64, 128] {
        for (k, (m, n)) in [(8, (rows, 128)), (32, (37, 29)), (65, (130, 260)), (200, (65, 131)), (96, (rows, 128)), (33, (64, 132))] {
            let d = [m, n, k];
            let want_plan = mage_009::plan_with_rows(&d, rows);
            let mut plans = vec![(&NT, nt::mage_002::plan_with_rows(&d, rows)), (&TN, tn::mage_002::plan_with_rows(&d, rows))];
            if rows == 64 {
                plans.push((&TN, (tn::mage_003::STAGE.plan)(&d)));
            }
            for (op, plan) in plans {
                let product = plan.launches.last().unwrap().kernel.name;
                assert!(product.contains(&format!("_m{rows}_")), "{product} at {d:?}");
                let inputs = op.generate(&d, k as u64 + 300);
                let out = emulate_plan(op, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{product} at {d:?}: {e}"));
                let want = emulate_plan(&OP, &want_plan, &d, &as_matmul(op, &d, &inputs)).unwrap();
                let differ = bits_differing(&out, &want);
                assert_eq!(differ, 0, "{product} at {d:?}: {differ} of {} elements differ from mage-009's", out.len());
            }
        }
    }
}

/// The entries each plan picks: NT's 16-byte copies need only `k` a
/// multiple of 4 (C is stored by the element), TN's product reads the
/// transposed A and B as mage-009 does (`k` and `n`), after the transpose.
#[test]
fn the_plans_pick_their_entries() {
    let nt_entry = |d: [u32; 3]| (nt::mage_002::STAGE.plan)(&d).launches[0].kernel.name;
    assert_eq!(nt_entry([1024, 1024, 1024]), "matmul_nt_3xtf32_m64_v4");
    assert_eq!(nt_entry([4096, 4096, 4096]), "matmul_nt_3xtf32_m128_v4");
    assert_eq!(nt_entry([1000, 1037, 1000]), "matmul_nt_3xtf32_m128_v4");
    assert_eq!(nt_entry([1000, 1036, 999]), "matmul_nt_3xtf32_m128_scalar");
    let tn_plan = |d: [u32; 3]| (tn::mage_002::STAGE.plan)(&d);
    let p = tn_plan([1024, 1024, 1024]);
    assert_eq!(p.launches.iter().map(|l| l.kernel.name).collect::<Vec<_>>(), ["matmul_tn_transpose", "matmul_tn_3xtf32_m64_v4"]);
    assert_eq!(p.scratch, [1024 * 1024]);
    assert_eq!(tn_plan([4096, 4096, 4096]).launches[1].kernel.name, "matmul_tn_3xtf32_m128_v4");
    assert_eq!(tn_plan([1000, 1037, 1000]).launches[1].kernel.name, "matmul_tn_3xtf32_m128_scalar");
    let split = |d: [u32; 3]| (tn::mage_003::STAGE.plan)(&d).launches.iter().map(|l| l.kernel.name).collect::<Vec<_>>();
    assert_eq!(split([1024, 1024, 1024]), ["matmul_tn_3xtf32_split_m64_v4"]);
    assert_eq!(split([1024, 1022, 1024]), ["matmul_tn_3xtf32_split_m64_scalar"]);
    assert_eq!(split([1022, 1024, 1023]), ["matmul_tn_3xtf32_split_m64_scalar"]);
    assert_eq!(split([1024, 1024, 1023]), ["matmul_tn_3xtf32_split_m64_v4"]);
    for op in OPS {
        for stage in op.stages {
            for d in op.sweep.iter().map(|w| w.dims).chain([&[1u32, 1, 1][..], &[17, 19, 23]]) {
                for l in (stage.plan)(d).launches {
                    assert!(l.shared_bytes <= 227 * 1024, "{} {} asks for {} bytes at {d:?}", op.name, stage.name, l.shared_bytes);
                    // 1-D grids, but for the K slices of matmul_tn mage-004's to mage-006's and matmul_nt
                    // mage-003's and mage-004's products (their grids' y).
                    let slices = match (op.name, stage.name) {
                        ("matmul_nt", "mage-003") if l.kernel.name.contains("splitk") => nt::mage_003::slices(d),
                        ("matmul_nt", "mage-004") if l.kernel.name.contains("cluster") => nt::mage_004::slices(d),
                        ("matmul_tn", "mage-004") if l.kernel.name.contains("splitk") => tn::mage_004::slices(d),
                        ("matmul_tn", "mage-005") if l.kernel.name.contains("splitk") => tn::mage_005::slices(d),
                        ("matmul_tn", "mage-006") => tn::mage_006::slices(d),
                        _ => 1,
                    };
                    assert_eq!((l.grid.y, l.grid.z), (slices, 1), "{} {} at {d:?}", op.name, stage.name);
                }
            }
        }
    }
}

/// With integer inputs in -8..=8 every stage gives the reference's value exactly.
#[test]
fn every_stage_of_both_ops_is_exact_on_integers() {
    for op in OPS {
        let integers = op.generator(Some("integers")).unwrap();
        for d in [[64, 64, 8], [70, 66, 300], [17, 19, 23], [130, 129, 97]] {
            let inputs = (integers.generate)(&d, 11);
            let reference = (op.reference)(&d, &inputs);
            for stage in op.stages {
                let out = emulate(op, stage, &d, &inputs).unwrap();
                let cmp = compare(&out, &reference, mage_common::numeric::Tolerance::new(0.0, 0.0));
                assert!(cmp.passed(), "{} {} at {d:?}: {}", op.name, stage.name, op.summarize(&cmp, &d));
            }
        }
    }
}

/// The reference of `op` with terms `p` and `p + 1` of every output
/// swapped between the operands (B's K rows swapped in matmul's layout):
/// every output has two terms misplaced.
fn misplaced(op: &Op, d: &[u32], inputs: &[HostBuf], p: usize) -> Vec<f32> {
    let (n, k) = (d[1] as usize, d[2] as usize);
    let mut nn = as_matmul(op, d, inputs);
    let mut b = nn[1].as_f32().to_vec();
    let q = (p + 1) % k;
    for j in 0..n {
        b.swap(p * n + j, q * n + j);
    }
    nn[1] = HostBuf::F32(b);
    (OP.reference)(d, &nn).values.iter().map(|v| *v as f32).collect()
}

fn check_scales(d: &[u32]) {
    for op in OPS {
        let base = op.generate(d, 41);
        let mut data: Vec<(String, Vec<HostBuf>)> = SCALES.iter().map(|&s| (format!("scale {s:e}"), scaled(&base, &[0, 1], s))).collect();
        // The rows of C's A (`[m, k]` in matmul's layout), each its own scale.
        let rows = from_matmul(op, d, &rows_scaled(&as_matmul(op, d, &base), 0, d[2] as usize, 5));
        data.push(("rows of A scaled by 10^U(-3,3)".into(), rows));
        for (what, inputs) in &data {
            let wrong = misplaced(op, d, inputs, 0);
            for stage in op.stages {
                check_on(op, stage, d, inputs, &wrong, 0.9).unwrap_or_else(|e| panic!("{what}: {e}"));
            }
        }
    }
}

#[test]
fn every_stage_of_both_ops_holds_its_tolerance_at_every_scale() {
    check_scales(&[64, 64, 64]);
}

#[test]
fn every_stage_of_both_ops_holds_its_tolerance_at_every_scale_on_ragged_shapes() {
    check_scales(&[33, 65, 17]);
}

/// A wrong result fails: the untransposed product (matmul on the inputs as
/// stored, at square shapes where it is defined), and a stage's output
/// with one element changed by a term's size.
#[test]
fn a_planted_wrong_result_fails() {
    let d = [48, 48, 48];
    for op in OPS {
        let inputs = op.generate(&d, 13);
        let reference = (op.reference)(&d, &inputs);
        let tol = (op.tolerance)(&d, &inputs);
        let untransposed: Vec<f32> = (OP.reference)(&d, &inputs).values.iter().map(|v| *v as f32).collect();
        let cmp = compare(&untransposed, &reference, tol);
        assert!(
            cmp.failures * 10 > cmp.elements * 9,
            "{}: the untransposed product fails only {} of {}",
            op.name,
            cmp.failures,
            cmp.elements
        );
        for stage in op.stages {
            let mut out = emulate(op, stage, &d, &inputs).unwrap();
            assert!(compare(&out, &reference, tol).passed(), "{} {}", op.name, stage.name);
            out[5 * 48 + 7] += 0.25 * 0.25;
            let cmp = compare(&out, &reference, tol);
            assert_eq!(cmp.failures, 1, "{} {}: a planted error at one element", op.name, stage.name);
        }
    }
}

#[test]
fn current_dispatches_by_shape() {
    for (op, choose) in [(&NT, nt::current::choose as fn(&[u32]) -> &'static Stage), (&TN, tn::current::choose)] {
        for d in [[1024, 1024, 1024], [4096, 4096, 4096], [512, 256, 64], [2048, 2048, 2048]] {
            assert_eq!(choose(&d).name, "mage-002", "{} {d:?}", op.name);
        }
        // Many tiles over a long k: matmul_tn transposes A, then splits k
        // (mage-005); matmul_nt splits k over its product, in one launch of
        // clusters where they fit one wave (mage-004: three slices, and two
        // over many tiles), else with a totals launch (mage-003: eight).
        let (few_slices, many_slices) = if op.name == "matmul_tn" { ("mage-005", "mage-005") } else { ("mage-004", "mage-003") };
        assert_eq!(choose(&[1000, 1037, 999]).name, few_slices, "{}", op.name);
        assert_eq!(choose(&[768, 3072, 4096]).name, many_slices, "{}", op.name);
        if op.name == "matmul_nt" {
            assert_eq!(choose(&[4096, 768, 3072]).name, "mage-004");
            // 32 tiles in clusters of 4: past one wave.
            assert_eq!(choose(&[512, 512, 512]).name, "mage-003");
        }
        for d in [[1024, 1024, 63], [4096, 4096, 1], [1, 1, 1], [17, 19, 23], [256, 256, 64]] {
            assert_eq!(choose(&d).name, "mage-001", "{} {d:?}", op.name);
        }
        // Few tiles: matmul_nt splits k from k = 64 (mage-004 in one launch
        // where its split is mage-003's, mage-003 where that takes more than
        // 8 slices); matmul_tn from k = 512 (mage-004), below it in one
        // launch of clusters (mage-006) where its rule splits.
        let (few, long) = if op.name == "matmul_tn" { ("mage-006", "mage-004") } else { ("mage-004", "mage-003") };
        assert_eq!(choose(&[256, 256, 256]).name, few, "{}", op.name);
        assert_eq!(choose(&[128, 128, 4096]).name, long, "{}", op.name);
        assert!(std::ptr::eq(op.dispatch(&[1024, 1024, 1024], &[]), choose(&[1024, 1024, 1024])));
    }
}
