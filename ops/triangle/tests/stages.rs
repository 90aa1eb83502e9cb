//! Every triangle stage, and `current`, on the emulator against the f64
//! reference, under the tolerance that scales with the contraction length
//! (see the crate doc), plus an integer-valued case where every stage must
//! be exact, which no indexing bug survives.

use mage_common::fixtures::Rng;
use mage_common::op::{HostBuf, Stage, check_current, check_plan, check_stage, emulate, emulate_plan, fit_last_dim};
use mage_triangle::{OP, OTHER_ORDER, STAGES, current, reference};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

#[derive(Clone, Copy, Debug)]
enum Dist {
    Normal(f32),
    /// Uniform in ±h (h ≤ 0.5: variance at most 1/12, within the tolerance's assumption).
    Uniform(f32),
}

fn inputs(n: u32, c: u32, dist: Dist, seed: u64) -> Vec<HostBuf> {
    let len = (n * n * c) as usize;
    let mut r = Rng::new(seed);
    let mut draw = || -> Vec<f32> {
        match dist {
            Dist::Normal(s) => r.normal_vec(len, 0.0, s),
            Dist::Uniform(h) => (0..len).map(|_| ((r.uniform() * 2.0 - 1.0) * h as f64) as f32).collect(),
        }
    };
    let a = draw();
    vec![HostBuf::F32(a), HostBuf::F32(draw())]
}

fn dist() -> impl Strategy<Value = Dist> {
    prop_oneof![(0.01f32..0.25).prop_map(Dist::Normal), (0.01f32..0.5).prop_map(Dist::Uniform)]
}

/// The nearest dims to `[n, c]` that `stage` supports, changing only `c`
/// (up to 64). Every stage supports some such `c` (mage-003 every multiple
/// of 4), so finding none is a failure: no case passes unchecked.
fn fit(stage: &Stage, n: u32, c: u32) -> Result<Vec<u32>, String> {
    fit_last_dim(stage, &[n, c], 64).ok_or_else(|| format!("{} supports no c up to 64 at n = {n}", stage.name))
}

/// Checks `stage` at the nearest channel count it supports.
fn check(stage: &Stage, n: u32, c: u32, dist: Dist, seed: u64) -> Result<(), String> {
    let dims = fit(stage, n, c)?;
    check_stage(&OP, stage, &dims, &inputs(dims[0], dims[1], dist, seed)).map(|_| ())
}

proptest! {
    #![proptest_config(Config { cases: 40, ..Config::default() })]

    #[test]
    fn every_stage_matches_the_reference(
        n in prop_oneof![Just(1u32), 1u32..=21],
        c in prop_oneof![Just(1u32), 1u32..=21],
        dist in dist(),
        seed in any::<u64>(),
    ) {
        for stage in STAGES {
            check(stage, n, c, dist, seed).map_err(TestCaseError::fail)?;
        }
        check_current(&OP, &[n, c], &inputs(n, c, dist, seed)).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn named_shapes_on_every_stage() {
    for stage in STAGES {
        for (n, c) in [(7, 5), (1, 1), (1, 8), (5, 1), (4, 4), (9, 8), (13, 12), (32, 8), (17, 36)] {
            check(stage, n, c, Dist::Normal(0.25), 20260910 + (n * 100 + c) as u64).unwrap();
        }
    }
}

/// Shapes with several block tiles along `i` and `j` and a partial last
/// one for every tile size (32x16 and 64x32), more `k` chunks than the
/// channel-tiled stages' ring holds (so buffers are refilled), and a
/// partial last channel group.
#[test]
fn shapes_over_several_tiles_on_every_stage() {
    for (n, c) in [(75, 11), (130, 8)] {
        for stage in STAGES {
            check(stage, n, c, Dist::Normal(0.25), 20261201 + (n * 100 + c) as u64).unwrap();
        }
    }
}

/// Small integers: every product and partial sum is exact in f32, so each
/// stage must reproduce the reference bit for bit; a swapped index, a
/// wrong stride or a missing term shows at once.
#[test]
fn integer_inputs_are_exact_on_every_stage() {
    for stage in STAGES {
        for (n, c) in [(7, 5), (6, 8), (9, 4), (11, 12), (5, 3), (67, 9)] {
            let dims = fit(stage, n, c).unwrap();
            let (n, c) = (dims[0], dims[1]);
            let f = |s: u32, m: u32, off: i32| -> Vec<f32> {
                (0..n * n * c).map(|t| (((t / c / n) * s + (t / c % n) * 3 + (t % c) * 5 + 1) % m) as i32 - off).map(|v| v as f32).collect()
            };
            let inputs = vec![HostBuf::F32(f(7, 5, 2)), HostBuf::F32(f(11, 7, 3))];
            let out = emulate(&OP, stage, &dims, &inputs).unwrap();
            let want = reference(&dims, &inputs);
            for (i, (o, w)) in out.iter().zip(&want.values).enumerate() {
                assert_eq!(*o as f64, *w, "{} at {dims:?}, element {i}", stage.name);
            }
        }
    }
}

/// Every stage but those of `OTHER_ORDER` sums each output in the same
/// order (k = 0, 1, ..., one fma per term), so on the same inputs they
/// agree bit for bit; the others do not (else they would not be listed).
#[test]
fn every_stage_gives_the_same_bits() {
    let other_order = |s: &Stage| OTHER_ORDER.iter().any(|o| o.name == s.name);
    for dims in [[9u32, 8u32], [13, 4], [6, 12], [40, 8]] {
        let inputs = OP.generate(&dims, 11);
        let bits = |s: &Stage| -> Vec<u32> { emulate(&OP, s, &dims, &inputs).unwrap().iter().map(|v| v.to_bits()).collect() };
        let outs: Vec<(&str, Vec<u32>)> = STAGES
            .iter()
            .filter(|s| (s.supports)(&dims) && !other_order(s))
            .map(|s| (s.name, emulate(&OP, s, &dims, &inputs).unwrap().iter().map(|v| v.to_bits()).collect()))
            .collect();
        for (name, out) in &outs[1..] {
            assert!(*out == outs[0].1, "{name} differs from {} at {dims:?}", outs[0].0);
        }
        if dims == [40, 8] {
            for s in OTHER_ORDER {
                assert!(bits(s) != outs[0].1, "{} gives the bits of {} at {dims:?}: drop it from OTHER_ORDER", s.name, outs[0].0);
            }
        }
    }
}

/// The tolerance is tight enough to see one term of the sum missing (in
/// all but the few outputs where that term is itself below the allowance).
#[test]
fn the_tolerance_sees_a_missing_term() {
    for (n, c) in [(7u32, 5u32), (64, 8), (256, 4)] {
        let dims = [n, c];
        let inputs = OP.generate(&dims, 3);
        let tol = (OP.tolerance)(&dims, &inputs);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let want = reference(&dims, &inputs);
        // Drop k = n - 1 from every output: how many outputs still pass?
        let mut pass = 0;
        for i in 0..n as usize {
            for j in 0..n as usize {
                for ch in 0..c as usize {
                    let k = n as usize - 1;
                    let t = (i * n as usize + j) * c as usize + ch;
                    let dropped = want.values[t]
                        - a[(i * n as usize + k) * c as usize + ch] as f64 * b[(j * n as usize + k) * c as usize + ch] as f64;
                    pass += tol.allows(dropped as f32, want.values[t], want.magnitude(t)) as usize;
                }
            }
        }
        let total = (n * n * c) as usize;
        assert!(pass * 10 < total, "n = {n}: {pass} of {total} outputs missing a term still pass");
    }
}

#[test]
fn current_dispatches_by_shape() {
    let pick = |d: [u32; 2]| current::choose(&d).name;
    assert_eq!(pick([7, 5]), "mage-001");
    assert_eq!(pick([64, 8]), "mage-001");
    assert_eq!(pick([64, 31]), "mage-001");
    assert_eq!(pick([64, 32]), "mage-005");
    assert_eq!(pick([128, 32]), "mage-005");
    assert_eq!(pick([256, 32]), "mage-004");
    assert_eq!(pick([128, 64]), "mage-005");
    assert_eq!(pick([256, 64]), "mage-004");
    assert_eq!(pick([512, 32]), "mage-004");
    assert_eq!(pick([256, 30]), "mage-005");
    assert_eq!(pick([256, 33]), "mage-004");
}

#[test]
fn mage_004_takes_64x32_where_its_grid_fills_the_sms() {
    use mage_triangle::{TILES_32X16, TILES_64X32, mage_004::tiles};
    let pick = |d: [u32; 2]| tiles(&d).1;
    assert_eq!(pick([7, 5]), TILES_32X16);
    assert_eq!(pick([64, 8]), TILES_32X16);
    assert_eq!(pick([128, 32]), TILES_32X16);
    assert_eq!(pick([128, 64]), TILES_32X16);
    assert_eq!(pick([256, 32]), TILES_64X32);
    assert_eq!(pick([256, 64]), TILES_64X32);
    assert_eq!(pick([512, 32]), TILES_64X32);
    assert_eq!((TILES_32X16.blocks(128, 32), TILES_64X32.blocks(256, 32)), (128, 128));
    for d in [[7u32, 5u32], [128, 32], [256, 32], [256, 64]] {
        let (kernel, shape) = tiles(&d);
        let launch = &(mage_triangle::mage_004::STAGE.plan)(&d).launches[0];
        assert_eq!((launch.kernel.name, launch.block.x, launch.shared_bytes), (kernel.name, shape.threads(), shape.shared_bytes()));
    }
}

/// Every channel-tiled entry on its own, whatever shape its stage would
/// give it (the 64x32 tiles go only to shapes too large for the emulator
/// here): against the reference, and bit for bit against mage-001 where it
/// sums in the same order.
#[test]
fn every_channel_tile_entry_matches_mage_001_bit_for_bit() {
    use mage_triangle::*;
    let entries = [
        (&triangle_tiles_32x16::KERNEL, TILES_32X16),
        (&triangle_tiles_64x32::KERNEL, TILES_64X32),
        (&triangle_tiles_32x16_split::KERNEL, TILES_32X16_SPLIT),
    ];
    for dims in [[1u32, 1u32], [7, 5], [20, 16], [75, 11], [130, 8], [33, 12]] {
        let inputs = OP.generate(&dims, 5);
        let want: Vec<u32> = emulate(&OP, &mage_triangle::mage_001::STAGE, &dims, &inputs).unwrap().iter().map(|v| v.to_bits()).collect();
        for (kernel, shape) in entries {
            let plan = channel_tiles_launch(kernel, shape, &dims);
            check_plan(&OP, &plan, &dims, &inputs).unwrap_or_else(|e| panic!("{} at {dims:?}: {e}", kernel.name));
            let out: Vec<u32> = emulate_plan(&OP, &plan, &dims, &inputs).unwrap().iter().map(|v| v.to_bits()).collect();
            assert!(!same_order(&shape) || out == want, "{} differs from mage-001 at {dims:?}", kernel.name);
        }
    }
}
