//! matmul mage-014 on the emulator: split-K in one clustered launch gives
//! mage-011's bits (the same partials, added in the same order) at 2 to 8
//! slices with tails in m, n and k, writes every element of C, gives the
//! same bits on a second run, and with one slice mage-009's (mage-010's
//! where rows are padded); and its rule, mage-011's with at most 8 slices,
//! on the host. And matmul_nt mage-004 the same way against matmul_nt
//! mage-003 (mage-002 with one slice), and matmul_tn mage-006 against
//! matmul_tn mage-004 (mage-003 with one slice).

use mage_common::kernel::Dim3;
use mage_common::numeric::bits_differing;
use mage_common::op::{HostBuf, OUTPUT_POISON, Plan, check_plan, emulate_plan};
use mage_matmul::{NT, OP, TN, mage_009, mage_010, mage_011, mage_014, nt, tn};

/// Shapes, tile rows and slice lengths: 2 to 8 slices; 16-byte rows (one
/// launch) and rows padded (`k` or `n` not a multiple of 4: two copies
/// first); tails in m and n at both tile heights, several row and column
/// tiles, a last slice shorter than the others and not a multiple of 32
/// (a padded tile).
const CASES: [([u32; 3], u32, u32); 8] = [
    ([64, 128, 128], 128, 64), // 2 slices, exact tiles; v4 rows
    ([37, 29, 97], 128, 64),   // 2 slices, the last 36 of k4 = 100; padded both
    ([65, 130, 150], 64, 64),  // 3 slices, the last 24 (k4 152); two row and two column tiles; padded both
    ([96, 132, 256], 64, 64),  // 4 slices; two row tiles (the second half full), two column tiles (the second 4 wide)
    ([3, 2, 300], 64, 64),     // 5 slices, the last 44; n = 2: every quad cut
    ([5, 7, 383], 128, 64),    // 6 slices, the last 0 + 64 of k4 = 384; k and n padded
    ([130, 36, 401], 128, 64), // 7 slices, the last 20 (k4 404); k padded, two row tiles of 128
    ([8, 12, 512], 64, 64),    // 8 slices, the cluster's most; v4 rows
];

fn run(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&OP, plan, d, inputs).unwrap_or_else(|e| panic!("{d:?}: {e}"))
}

/// One launch (after the padding's copies where rows are padded), its grid
/// `(tiles, slices)` in clusters of `(1, slices)`, straight into C: every
/// element written, within the op's tolerance, and mage-011's bits at the
/// same split, twice.
#[test]
fn mage_014_is_mage_011_to_the_bit() {
    for (i, (d, rows, len)) in CASES.into_iter().enumerate() {
        let plan = mage_014::plan_with(&d, rows, len);
        let aligned = d[1] % 4 == 0 && d[2] % 4 == 0;
        let names: Vec<_> = plan.launches.iter().map(|l| l.kernel.name).collect();
        let product = format!("matmul_3xtf32_cluster_m{rows}");
        let want: Vec<&str> = if aligned { vec![&product] } else { vec!["matmul_resize", "matmul_resize", &product] };
        assert_eq!(names, want, "{d:?}");
        let slices = d[2].next_multiple_of(4).div_ceil(len);
        assert!((2..=mage_014::MAX_CLUSTER_SLICES).contains(&slices), "{d:?}: {slices} slices");
        let launch = plan.launches.last().unwrap();
        assert_eq!((launch.grid.y, launch.cluster), (slices, Dim3::new(1, slices, 1)), "{d:?}");
        assert_eq!(plan.scratch.len(), if aligned { 0 } else { 2 }, "{d:?}: scratch only for the padding");

        let inputs = OP.generate(&d, 1400 + i as u64);
        let out = run(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        let want = run(&mage_011::plan_with(&d, rows, len), &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in {slices} slices of {len}: {differ} of {} elements differ from mage-011's", out.len());
        assert_eq!(bits_differing(&run(&plan, &d, &inputs), &out), 0, "{d:?}: a second run differs");
        check_plan(&OP, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// One slice is a cluster of one: mage-009's product and bits where rows
/// are 16-byte, mage-010's padding and bits where they are not, with C's
/// own columns written in place (no copy back).
#[test]
fn mage_014_with_one_slice_is_mage_009_to_the_bit() {
    for rows in [64, 128] {
        for d in [[17, 20, 100], [130, 260, 200], [65, 66, 255], [1, 1, 1], [129, 68, 7]] {
            let plan = mage_014::plan_with(&d, rows, d[2].next_multiple_of(4));
            let aligned = d[1] % 4 == 0 && d[2] % 4 == 0;
            assert_eq!(plan.launches.len(), if aligned { 1 } else { 3 }, "{d:?}");
            assert_eq!(plan.launches.last().unwrap().cluster, Dim3::ONE, "{d:?}");
            let inputs = OP.generate(&d, 1478);
            let want = run(&mage_009::plan_with_rows(&d, rows), &d, &inputs);
            assert_eq!(bits_differing(&run(&plan, &d, &inputs), &want), 0, "{d:?} at {rows} rows");
        }
    }
    let d = [130, 131, 97];
    let inputs = OP.generate(&d, 1479);
    assert_eq!(mage_014::slices(&d), 1, "{d:?}");
    let (one, ten) = ((mage_014::STAGE.plan)(&d), (mage_010::STAGE.plan)(&d));
    assert_eq!(bits_differing(&run(&one, &d, &inputs), &run(&ten, &d, &inputs)), 0, "{d:?}");
}

/// mage-011's rule with at most 8 slices: its split wherever it takes 8
/// or fewer (256³, 512³, 1000x1037x999, 768³ among them), at most 8
/// elsewhere, and the plan's grid, clusters and shared bytes.
#[test]
fn the_mage_014_slice_rule_from_the_dims() {
    for (d, want_rows, want_slices, want_len) in [
        ([256, 256, 256], 64, 4, 64),
        ([512, 512, 512], 64, 4, 128),
        ([1000, 1037, 999], 128, 3, 384),
        ([768, 768, 768], 128, 3, 256),
        ([1024, 1024, 1024], 64, 1, 1024),
        ([2048, 2048, 2048], 128, 1, 2048),
    ] {
        let (rows, len) = mage_014::split(&d);
        assert_eq!((rows, mage_014::slices(&d), len), (want_rows, want_slices, want_len), "{d:?}");
    }
    let mut capped = 0;
    for m in [1, 32, 64, 100, 128, 256, 768, 1000, 1024, 4096] {
        for k in [1, 63, 64, 65, 127, 128, 255, 256, 999, 1024, 4096, 16384, 1 << 20] {
            let d = [m, m + 3, k];
            let s = mage_014::slices(&d);
            assert!(s <= mage_014::MAX_CLUSTER_SLICES, "{d:?}: {s} slices");
            if mage_011::slices(&d) <= mage_014::MAX_CLUSTER_SLICES {
                assert_eq!(mage_014::split(&d), mage_011::split(&d), "{d:?}");
            } else {
                capped += 1;
            }
            let plan = (mage_014::STAGE.plan)(&d);
            let product = plan.launches.last().unwrap();
            assert_eq!((product.grid.y, product.grid.z, product.cluster), (s, 1, Dim3::new(1, s, 1)), "{d:?}");
            assert!(plan.launches.iter().all(|l| l.shared_bytes <= 227 * 1024));
            let [_, n4, k4] = mage_011::padded(&d).map(|x| x as usize);
            let padding = if d[1] % 4 == 0 && k % 4 == 0 { vec![] } else { vec![m as usize * k4, k4 * n4] };
            assert_eq!(plan.scratch, padding, "{d:?}: scratch only for the padding");
        }
    }
    assert!(capped > 0, "no shape where mage-011 takes more than 8 slices");
}

fn run_nt(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&NT, plan, d, inputs).unwrap_or_else(|e| panic!("matmul_nt at {d:?}: {e}"))
}

/// matmul_nt mage-004 at [`CASES`]' shapes and splits: one launch (after
/// A's and B's padding where `k` is not a multiple of 4; `n` needs none),
/// every element written, mage-003's bits at the same split, twice.
#[test]
fn matmul_nt_mage_004_is_mage_003_to_the_bit() {
    for (i, (d, rows, len)) in CASES.into_iter().enumerate() {
        let plan = nt::mage_004::plan_with(&d, rows, len);
        let aligned = d[2] % 4 == 0;
        let names: Vec<_> = plan.launches.iter().map(|l| l.kernel.name).collect();
        let product = format!("matmul_nt_3xtf32_cluster_m{rows}");
        let want: Vec<&str> = if aligned { vec![&product] } else { vec!["matmul_resize", "matmul_resize", &product] };
        assert_eq!(names, want, "{d:?}");
        let slices = d[2].next_multiple_of(4).div_ceil(len);
        assert!((2..=nt::mage_004::MAX_CLUSTER_SLICES).contains(&slices), "{d:?}: {slices} slices");
        let launch = plan.launches.last().unwrap();
        assert_eq!((launch.grid.y, launch.cluster), (slices, Dim3::new(1, slices, 1)), "{d:?}");

        let inputs = NT.generate(&d, 1500 + i as u64);
        let out = run_nt(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        let want = run_nt(&nt::mage_003::plan_with(&d, rows, len), &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in {slices} slices of {len}: {differ} of {} elements differ from mage-003's", out.len());
        assert_eq!(bits_differing(&run_nt(&plan, &d, &inputs), &out), 0, "{d:?}: a second run differs");
        check_plan(&NT, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// One slice, a cluster of one: mage-002's bits at the same rows.
#[test]
fn matmul_nt_mage_004_with_one_slice_is_mage_002_to_the_bit() {
    for rows in [64, 128] {
        for d in [[17, 21, 100], [130, 260, 200], [65, 66, 255], [1, 1, 1]] {
            let plan = nt::mage_004::plan_with(&d, rows, d[2].next_multiple_of(4));
            assert_eq!(plan.launches.last().unwrap().cluster, Dim3::ONE, "{d:?}");
            let inputs = NT.generate(&d, 1578);
            let want = run_nt(&nt::mage_002::plan_with_rows(&d, rows), &d, &inputs);
            assert_eq!(bits_differing(&run_nt(&plan, &d, &inputs), &want), 0, "{d:?} at {rows} rows");
        }
    }
}

/// Its rule is mage-014's, so mage-003's wherever that takes 8 slices or
/// fewer.
#[test]
fn the_matmul_nt_mage_004_slice_rule_from_the_dims() {
    for d in [[256, 256, 256], [512, 512, 512], [1000, 1037, 999], [1024, 1024, 1024], [64, 67, 4096]] {
        assert_eq!(nt::mage_004::split(&d), mage_014::split(&d), "{d:?}");
        if nt::mage_003::slices(&d) <= 8 {
            assert_eq!(nt::mage_004::split(&d), nt::mage_003::split(&d), "{d:?}");
        }
        assert!(nt::mage_004::slices(&d) <= 8, "{d:?}");
    }
}

fn run_tn(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&TN, plan, d, inputs).unwrap_or_else(|e| panic!("matmul_tn at {d:?}: {e}"))
}

/// matmul_tn mage-006 at [`CASES`]' shapes and slice lengths (its tiles
/// have 64 rows only; `k` is not padded, so `k = 383` is 6 slices, the
/// last 63 long) and at slices of 32 (one K tile, the body's zero tile
/// beside it): one launch, 16-byte copies only where `m` and `n` are
/// multiples of 4, every element written, mage-004's bits at the same
/// split, twice.
#[test]
fn matmul_tn_mage_006_is_mage_004_to_the_bit() {
    let cases = CASES.map(|(d, _, len)| (d, len)).into_iter().chain([([33, 70, 150], 32), ([61, 131, 224], 32), ([4, 8, 100], 96)]);
    for (i, (d, len)) in cases.enumerate() {
        let plan = tn::mage_006::plan_with(&d, len);
        let vector = d[0] % 4 == 0 && d[1] % 4 == 0;
        let names: Vec<_> = plan.launches.iter().map(|l| l.kernel.name).collect();
        let want = if vector { "matmul_tn_3xtf32_cluster_m64_v4" } else { "matmul_tn_3xtf32_cluster_m64_scalar" };
        assert_eq!(names, [want], "{d:?}");
        let slices = d[2].div_ceil(len);
        assert!((2..=tn::mage_006::MAX_CLUSTER_SLICES).contains(&slices), "{d:?}: {slices} slices");
        let launch = &plan.launches[0];
        assert_eq!((launch.grid.y, launch.cluster), (slices, Dim3::new(1, slices, 1)), "{d:?}");
        assert!(plan.scratch.is_empty(), "{d:?}: no scratch");

        let inputs = TN.generate(&d, 1600 + i as u64);
        let out = run_tn(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        let want = run_tn(&tn::mage_004::plan_with_slice_k(&d, len), &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in {slices} slices of {len}: {differ} of {} elements differ from mage-004's", out.len());
        assert_eq!(bits_differing(&run_tn(&plan, &d, &inputs), &out), 0, "{d:?}: a second run differs");
        check_plan(&TN, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// One slice, a cluster of one: mage-003's bits.
#[test]
fn matmul_tn_mage_006_with_one_slice_is_mage_003_to_the_bit() {
    for d in [[17, 21, 100], [130, 260, 200], [65, 66, 255], [1, 1, 1], [64, 128, 64]] {
        let plan = tn::mage_006::plan_with(&d, d[2]);
        assert_eq!(plan.launches[0].cluster, Dim3::ONE, "{d:?}");
        let inputs = TN.generate(&d, 1678);
        let want = run_tn(&(tn::mage_003::STAGE.plan)(&d), &d, &inputs);
        assert_eq!(bits_differing(&run_tn(&plan, &d, &inputs), &want), 0, "{d:?}");
    }
}

/// Its rule: mage-011's cost model at 64 rows with at most 8 slices (4 of
/// 64 at 256³, 4 of 128 at 512³, 4 of 256 at 1000x1037x999), at most 8
/// everywhere, and the plan's grid, clusters and shared bytes (mage-004's).
#[test]
fn the_matmul_tn_mage_006_slice_rule_from_the_dims() {
    for (d, want_slices, want_len) in [
        ([256, 256, 256], 4, 64),
        ([512, 512, 512], 4, 128),
        ([1000, 1037, 999], 4, 256),
        ([1024, 1024, 1024], 1, 1024),
        ([64, 64, 4096], 8, 512),
    ] {
        assert_eq!((tn::mage_006::slices(&d), tn::mage_006::slice_k(&d)), (want_slices, want_len), "{d:?}");
    }
    assert_eq!(tn::mage_006::SHARED_BYTES, 173040);
    for m in [1, 32, 64, 100, 128, 256, 768, 1000, 1024, 4096] {
        for k in [1, 63, 64, 65, 127, 128, 255, 256, 999, 1024, 4096, 16384, 1 << 20] {
            let d = [m, m + 3, k];
            let s = tn::mage_006::slices(&d);
            assert!(s <= tn::mage_006::MAX_CLUSTER_SLICES, "{d:?}: {s} slices");
            let plan = (tn::mage_006::STAGE.plan)(&d);
            assert_eq!(plan.launches.len(), 1, "{d:?}");
            let l = &plan.launches[0];
            assert_eq!((l.grid.x, l.grid.y, l.grid.z, l.cluster), (tn::mage_006::tiles(&d), s, 1, Dim3::new(1, s, 1)), "{d:?}");
            assert_eq!(l.shared_bytes, 173040, "{d:?}");
            assert!(plan.scratch.is_empty(), "{d:?}");
        }
    }
}
