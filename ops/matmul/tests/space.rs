//! The matmul parameter space (`mage_matmul::space`): the built entries are
//! exactly what its rules accept, its stage points compute what those
//! stages compute, and every configuration matches the f64 reference on the
//! emulator at every audit shape it takes (the CI half of
//! `cargo xtask evolve --audit matmul`).

use mage_common::numeric::bits_differing;
use mage_common::op::{HostBuf, Stage, emulate, emulate_plan};
use mage_common::space::Config;
use mage_matmul::space::{ENTRIES, SPACE, Tiling, check_tiling, decode, entry_name};
use mage_matmul::{OP, mage_002, mage_003, mage_006};

fn inputs(d: &[u32], seed: u64) -> Vec<HostBuf> {
    OP.generate(d, seed)
}

fn config(id: &str) -> Config {
    SPACE.parse(id).unwrap()
}

#[test]
fn the_built_entries_are_exactly_what_the_rules_accept() {
    let product = SPACE.product();
    assert_eq!(product.len(), 4 * 4 * 2 * 3 * 3);
    let configs = SPACE.configs();
    assert_eq!(configs.len(), 174, "the space's size is in its doc");
    assert_eq!(ENTRIES.len(), 58);
    for c in &product {
        let tiling = decode(c).tiling;
        let built = ENTRIES.iter().find(|(t, _)| *t == tiling);
        match check_tiling(&tiling) {
            Ok(()) => {
                let (_, kernel) = built.unwrap_or_else(|| panic!("{} is accepted but has no entry", SPACE.id(c)));
                assert_eq!(kernel.name, entry_name(&SPACE, c));
            }
            Err(why) => assert!(built.is_none(), "{} has an entry though the rules refuse it: {why}", SPACE.id(c)),
        }
    }
    for (tiling, _) in ENTRIES {
        check_tiling(tiling).unwrap();
    }
    let why = (SPACE.buildable)(&config("bm64-bn64-tm4-tn4-bk64-at-cp2-sk1")).unwrap_err();
    assert_eq!(why, "2 buffers of 33792 B: 67584 B of shared memory, over the 49152 B a block gets without opting in");
}

/// Rules no tile of the space trips, on tilings built for the purpose.
#[test]
fn the_rules_refuse_bad_geometry_and_say_why() {
    let t = |bm, bn, tm, tn, bk, stages| Tiling { bm, bn, tm, tn, bk, a_transposed: true, stages };
    assert!(check_tiling(&t(128, 128, 4, 4, 16, 2)).unwrap_err().contains("make 1024 threads; the copies are laid out for 256"));
    assert!(check_tiling(&t(64, 64, 4, 4, 512, 1)).unwrap_err().contains("K step 512 to divide 256 threads"));
    assert!(check_tiling(&t(256, 32, 8, 4, 32, 1)).unwrap_err().contains("holds 8 quads of A and 1 of B per thread"));
    assert_eq!(check_tiling(&t(256, 256, 16, 16, 8, 1)).unwrap_err(), "about 328 registers per thread, over 255");
}

#[test]
fn fits_says_which_shapes_and_why() {
    let c = config("bm64-bn64-tm4-tn4-bk64-at-sync-sk2");
    assert!(SPACE.valid(&c, &[64, 64, 128]).is_ok());
    assert!(SPACE.valid(&c, &[64, 63, 128]).unwrap_err().contains("n = 63 and k = 128 must be multiples of 4"));
    assert_eq!(SPACE.valid(&c, &[64, 64, 64]).unwrap_err(), "split-K 2 over 1 K tile of 64 leaves a split without one");
    // 5 tiles in splits of 2 leave the fourth split empty.
    let c = config("bm64-bn64-tm4-tn4-bk16-at-cp3-sk4");
    assert!(SPACE.valid(&c, &[64, 64, 80]).unwrap_err().contains("over 5 K tiles of 16"));
    assert!(SPACE.valid(&c, &[64, 64, 112]).is_ok());
}

#[test]
fn split_k_plans_a_second_launch_over_scratch() {
    let d = [100, 132, 200];
    let plan = (SPACE.plan)(&config("bm128-bn128-tm8-tn8-bk16-at-cp2-sk4"), &d);
    assert_eq!(plan.launches.len(), 2);
    assert_eq!(plan.scratch, vec![4 * 100 * 132]);
    assert_eq!((plan.launches[0].grid.x, plan.launches[0].grid.y), (2, 4));
    // 13 K tiles of 16: 4 per split, so `k_chunk` is 64.
    assert_eq!(plan.launches[0].args[6], mage_common::op::Arg::U32(64));
    // Without the sum the output is never written: the poison shows.
    let one = mage_common::op::Plan { launches: plan.launches[..1].to_vec(), scratch: plan.scratch.clone() };
    let out = emulate_plan(&OP, &one, &d, &inputs(&d, 1)).unwrap();
    assert!(out.iter().all(|v| v.is_nan()));
}

/// The stages that are points of the space: the same launch geometry and
/// the same bits.
#[test]
fn stage_points_compute_what_their_stages_compute() {
    let stages: [&Stage; 3] = [&mage_006::STAGE, &mage_003::STAGE, &mage_002::STAGE];
    for stage in stages {
        let c = SPACE.stage_point(stage.name).unwrap();
        for d in [[1024, 1024, 1024], [96, 132, 36]] {
            let (ours, theirs) = ((SPACE.plan)(&c, &d), (stage.plan)(&d));
            let (a, b) = (&ours.launches[0], &theirs.launches[0]);
            assert_eq!((a.grid, a.block), (b.grid, b.block), "{} at {d:?}", stage.name);
            if stage.name != "mage-002" {
                assert_eq!(a.shared_bytes, b.shared_bytes, "{} at {d:?}", stage.name);
            }
        }
        for d in [[96, 132, 36], [64, 64, 100], [17, 12, 200]] {
            let inputs = inputs(&d, 5);
            let ours = emulate_plan(&OP, &(SPACE.plan)(&c, &d), &d, &inputs).unwrap();
            let theirs = emulate(&OP, stage, &d, &inputs).unwrap();
            let differ = bits_differing(&ours, &theirs);
            assert_eq!(differ, 0, "{} differs from {} in {differ} elements at {d:?}", SPACE.id(&c), stage.name);
        }
    }
}

/// Without split-K every configuration sums each output's products in `k`
/// order with `fma`: all give the same bits, a check with no tolerance.
#[test]
fn every_unsplit_configuration_gives_the_same_bits() {
    let d = [70, 136, 52];
    let inputs = inputs(&d, 9);
    let reference = emulate(&OP, &mage_006::STAGE, &d, &inputs).unwrap();
    for c in SPACE.configs().iter().filter(|c| decode(c).split == 1) {
        let out = emulate_plan(&OP, &(SPACE.plan)(c, &d), &d, &inputs).unwrap();
        let differ = bits_differing(&out, &reference);
        assert_eq!(differ, 0, "{} differs from mage-006 in {differ} elements", SPACE.id(c));
    }
}

/// The emulator audit: every configuration at every audit shape it takes.
/// The shapes have tails in m and n, 1 to 25 K tiles per split (odd and
/// even counts for both pipelines), and K long enough for split-K 4 at
/// every K step.
#[test]
fn every_configuration_matches_the_reference_on_the_emulator() {
    let passed = SPACE.check_on_emulator(2026).unwrap_or_else(|e| panic!("{e}"));
    assert!(passed >= SPACE.configs().len());
}

/// ptxas' request for every entry of the space: no stack, no spills, and
/// registers that let a 256-thread block launch.
#[test]
fn space_ptxas_resources() {
    let resources = mage_toolchain::space_resources(&SPACE).unwrap_or_else(|e| panic!("{e}"));
    for r in &resources {
        assert_eq!((r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes), (0, 0, 0), "{}", r.entry);
        assert!(r.registers * 256 <= 65536, "{}: {} registers", r.entry, r.registers);
    }
    insta::assert_yaml_snapshot!(resources);
}
