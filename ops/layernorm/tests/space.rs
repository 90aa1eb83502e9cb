//! The LayerNorm parameter space (`mage_layernorm::space`): the built
//! entries are exactly what its rules accept, mage-002's point computes what
//! mage-002 computes, and every configuration matches the f64 reference on
//! the emulator at every audit shape it takes (the CI half of
//! `cargo xtask evolve --audit layernorm`).

use mage_common::numeric::bits_differing;
use mage_common::op::{HostBuf, emulate, emulate_plan};
use mage_common::space::Config;
use mage_layernorm::space::{ENTRIES, SPACE, Shape, check_shape, decode, entry_name, shared_bytes};
use mage_layernorm::{OP, mage_002, mage_006, mage_008};

fn inputs(d: &[u32], seed: u64) -> Vec<HostBuf> {
    OP.generate(d, seed)
}

fn config(id: &str) -> Config {
    SPACE.parse(id).unwrap()
}

#[test]
fn the_built_entries_are_exactly_what_the_rules_accept() {
    let product = SPACE.product();
    assert_eq!(product.len(), 4 * 3 * 5 * 3);
    assert_eq!(SPACE.configs().len(), 84, "the space's size is in its doc");
    assert_eq!(ENTRIES.len(), 84);
    for c in &product {
        let shape = decode(c);
        let built = ENTRIES.iter().find(|(s, _)| *s == shape);
        match check_shape(&shape) {
            Ok(()) => assert_eq!(built.unwrap_or_else(|| panic!("{} has no entry", SPACE.id(c))).1.name, entry_name(&SPACE, c)),
            Err(why) => assert!(built.is_none(), "{} has an entry though the rules refuse it: {why}", SPACE.id(c)),
        }
    }
    let why = (SPACE.buildable)(&config("warp-t256-hold2-f4")).unwrap_err();
    assert_eq!(why, "a held row issues all its loads at once; 4 loads in flight apply to streamed rows only");
}

/// Rules no configuration of the space trips, on shapes built for the purpose.
#[test]
fn the_rules_refuse_bad_geometry_and_say_why() {
    let s = |lanes, threads, held| Shape { lanes, threads, held, in_flight: 1 };
    assert!(check_shape(&s(32, 100, 0)).unwrap_err().contains("100 threads are not whole warps"));
    assert!(check_shape(&s(256, 128, 0)).unwrap_err().contains("rows of 256 lanes do not tile a block of 128"));
    assert_eq!(check_shape(&s(32, 256, 64)).unwrap_err(), "about 280 registers per thread, over 255");
}

#[test]
fn fits_says_which_widths_and_why() {
    let c = config("warp-t256-hold4-f1");
    assert!(SPACE.valid(&c, &[8, 512]).is_ok());
    assert_eq!(SPACE.valid(&c, &[8, 514]).unwrap_err(), "width 514 is not a multiple of 4: rows are read in 128-bit quads");
    assert_eq!(SPACE.valid(&c, &[8, 516]).unwrap_err(), "a row of 129 quads needs 5 per lane over 32 lanes; these lanes hold 4");
    assert!(SPACE.valid(&config("warp-t256-stream-f4"), &[8, 40000]).is_ok());
    assert!(SPACE.valid(&config("block-t512-hold2-f1"), &[8, 4096]).is_ok());
}

#[test]
fn plans_put_rows_of_lanes_in_blocks() {
    let plan = |id: &str, d: [u32; 2]| (SPACE.plan)(&config(id), &d).launches.remove(0);
    let l = plan("lanes16-t128-stream-f1", [100, 64]);
    assert_eq!((l.grid.x, l.block.x, l.shared_bytes), (13, 128, 0));
    let l = plan("warps2-t512-hold1-f1", [100, 64]);
    assert_eq!((l.grid.x, l.block.x, l.shared_bytes), (13, 512, 3 * 4 * 16));
    let l = plan("block-t256-hold4-f1", [100, 64]);
    assert_eq!((l.grid.x, l.block.x, l.shared_bytes), (100, 256, shared_bytes(256, 256)));
}

/// mage-002's point gives mage-002's bits; the geometry points launch what
/// mage-006 and mage-008 launch.
#[test]
fn stage_points_compute_what_their_stages_compute() {
    let c = SPACE.stage_point("mage-002").unwrap();
    for d in [[4096, 768], [7, 1000], [33, 4], [9, 4100]] {
        let inputs = inputs(&d, 3);
        let ours = emulate_plan(&OP, &(SPACE.plan)(&c, &d), &d, &inputs).unwrap();
        let theirs = emulate(&OP, &mage_002::STAGE, &d, &inputs).unwrap();
        let differ = bits_differing(&ours, &theirs);
        assert_eq!(differ, 0, "warp-t256-stream-f1 differs from mage-002 in {differ} elements at {d:?}");
        let (ours, theirs) = ((SPACE.plan)(&c, &d), (mage_002::STAGE.plan)(&d));
        assert_eq!((ours.launches[0].grid, ours.launches[0].block), (theirs.launches[0].grid, theirs.launches[0].block));
    }
    for (stage, d) in [(&mage_006::STAGE, [4096, 768]), (&mage_008::STAGE, [1024, 2048])] {
        let (ours, theirs) = ((SPACE.plan)(&SPACE.stage_point(stage.name).unwrap(), &d), (stage.plan)(&d));
        assert_eq!((ours.launches[0].grid, ours.launches[0].block), (theirs.launches[0].grid, theirs.launches[0].block), "{}", stage.name);
    }
}

/// A lane adds its quads in order and a group meets in a fixed order, so
/// configurations with the same lanes per row give the same bits whatever
/// they hold, have in flight, or put in a block: a check with no tolerance.
#[test]
fn configurations_with_the_same_lanes_per_row_give_the_same_bits() {
    let d = [11, 500];
    let inputs = inputs(&d, 4);
    let mut first: Vec<(u32, String, Vec<f32>)> = vec![];
    for c in SPACE.configs().iter().filter(|c| SPACE.valid(c, &d).is_ok()) {
        let out = emulate_plan(&OP, &(SPACE.plan)(c, &d), &d, &inputs).unwrap();
        let lanes = decode(c).lanes;
        match first.iter().find(|(l, ..)| *l == lanes) {
            None => first.push((lanes, SPACE.id(c), out)),
            Some((_, id, bits)) => {
                let differ = bits_differing(&out, bits);
                assert_eq!(differ, 0, "{} differs from {id} in {differ} elements", SPACE.id(c));
            }
        }
    }
    assert_eq!(first.len(), 6, "rows of 16, 32, 64, 128, 256 and 512 lanes");
}

/// The emulator audit: every configuration at every audit shape it takes:
/// rows that leave lanes of a warp or block idle, widths under a quad per
/// lane and over four thousand.
#[test]
fn every_configuration_matches_the_reference_on_the_emulator() {
    let passed = SPACE.check_on_emulator(2026).unwrap_or_else(|e| panic!("{e}"));
    assert!(passed >= SPACE.configs().len());
}

/// ptxas' request for every entry of the space: no stack, no spills.
#[test]
fn space_ptxas_resources() {
    let resources = mage_toolchain::space_resources(&SPACE).unwrap_or_else(|e| panic!("{e}"));
    for r in &resources {
        assert_eq!((r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes), (0, 0, 0), "{}", r.entry);
    }
    insta::assert_yaml_snapshot!(resources);
}
