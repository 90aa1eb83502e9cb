//! Every neighbour-sum stage, and `current`, on the emulator against the f64
//! reference, on graphs built to break them: empty rows, one heavy row,
//! repeated indices, no edges at all; mage-002 and mage-003 also with tiny
//! shares so that rows split across many warps, and try-split with tiny
//! chunks and low thresholds so that heavy rows cross chunks and blocks. And the CSR checks, each malformed
//! graph rejected with its message before any launch.

use mage_common::fixtures::Rng;
use mage_common::op::{HostBuf, Op, check_current, check_plan, check_stage, emulate};
use mage_neighbor::mage_005 as heavy_rows;
use mage_neighbor::{OP, POWER_LAW_SKEW, STAGES, current, degrees, mage_002, mage_003, reference, rowptr_of};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

/// How the edges' destinations are spread over the rows.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Uniform,
    /// The generator's power law with this skew.
    PowerLaw(u32),
    /// One row (number `seed % n`) takes this share (per mille) of the edges.
    Heavy(u32),
    /// Only every k-th row has edges.
    Sparse(u32),
}

/// A graph and values for `[n, width, edges]`; sources drawn from `sources`
/// distinct rows (1 makes every edge repeat the same index).
fn graph(n: u32, width: u32, edges: u32, shape: Shape, sources: u32, seed: u64) -> (Vec<u32>, Vec<HostBuf>) {
    let mut r = Rng::new(seed);
    let mut deg = vec![0u32; n as usize];
    match shape {
        Shape::Uniform => deg = degrees(n, edges, 0, seed),
        Shape::PowerLaw(s) => deg = degrees(n, edges, s, seed),
        Shape::Heavy(share) => {
            let heavy = (seed % n as u64) as usize;
            let k = (edges as u64 * share as u64 / 1000) as u32;
            deg[heavy] = k;
            for _ in 0..edges - k {
                deg[r.below(n as u64) as usize] += 1;
            }
        }
        Shape::Sparse(k) => {
            let rows: Vec<usize> = (0..n as usize).step_by(k as usize).collect();
            for _ in 0..edges {
                deg[rows[r.below(rows.len() as u64) as usize]] += 1;
            }
        }
    }
    let sources = sources.min(n);
    let indices: Vec<u32> = (0..edges).map(|_| r.below(sources as u64) as u32).collect();
    let inputs = vec![
        HostBuf::F32(r.normal_vec((n * width) as usize, 0.0, 0.25)),
        HostBuf::F32(r.normal_vec(edges as usize, 0.0, 0.25)),
        HostBuf::U32(rowptr_of(&deg)),
        HostBuf::U32(indices),
    ];
    (vec![n, width, edges], inputs)
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Uniform),
        (500u32..=2000).prop_map(Shape::PowerLaw),
        (300u32..=1000).prop_map(Shape::Heavy),
        (2u32..=9).prop_map(Shape::Sparse),
    ]
}

/// Every stage on these inputs, and the merge-path stages with small shares.
fn check_all(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
    for stage in STAGES {
        if (stage.supports)(dims) {
            check_stage(&OP, stage, dims, inputs)?;
        }
    }
    check_current(&OP, dims, inputs)?;
    for items in [1, 2, 3, 7, 32] {
        check_plan(&OP, &mage_002::plan_with(dims, items), dims, inputs)
            .map_err(|e| format!("mage-002 with {items} items per warp at {}: {e}", Op::dims_label(dims)))?;
        if mage_003::supports(dims) {
            check_plan(&OP, &mage_003::plan_with(dims, items), dims, inputs)
                .map_err(|e| format!("mage-003 with {items} items per warp at {}: {e}", Op::dims_label(dims)))?;
        }
    }
    if heavy_rows::supports(dims) {
        // One block of light-row warps makes each walk several rows.
        for (warps, chunk, heavy) in [(1, 1, 0), (64, 2, 1), (9, 3, 4), (64, 7, 0), (1, 7, 6), (64, 32, 2), (1, 32, u32::MAX)] {
            check_plan(&OP, &heavy_rows::plan_with(dims, warps, chunk, heavy), dims, inputs).map_err(|e| {
                format!(
                    "try-split with {warps} light-row warps, chunks of {chunk} edges and rows of more than {heavy} heavy at {}: {e}",
                    Op::dims_label(dims)
                )
            })?;
        }
    }
    Ok(())
}

/// A width mage-003 supports near `width` (the next multiple of 4).
fn quad_width(width: u32) -> u32 {
    width.div_ceil(4) * 4
}

proptest! {
    #![proptest_config(Config { cases: 40, ..Config::default() })]

    #[test]
    fn every_stage_matches_the_reference(
        n in prop_oneof![Just(1u32), 1u32..=40],
        width in prop_oneof![Just(1u32), 1u32..=70],
        edges in prop_oneof![Just(0u32), 0u32..=300],
        shape in shape(),
        sources in prop_oneof![Just(1u32), 1u32..=40],
        seed in any::<u64>(),
    ) {
        let (dims, inputs) = graph(n, width, edges, shape, sources, seed);
        check_all(&dims, &inputs).map_err(TestCaseError::fail)?;
        if width % 4 != 0 {
            let (dims, inputs) = graph(n, quad_width(width), edges, shape, sources, seed);
            check_all(&dims, &inputs).map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn generated_small_cases_on_every_stage() {
    for (dims, generator) in [
        ([7, 9, 23], "uniform"),
        ([7, 9, 0], "uniform"),
        ([1, 5, 9], "uniform"),
        ([1, 1, 0], "uniform"),
        ([7, 12, 23], "uniform"),
        ([7, 4, 0], "uniform"),
        ([1, 4, 9], "uniform"),
        ([33, 64, 500], "power-law"),
        ([40, 65, 700], "uniform"),
        ([5, 129, 40], "power-law"),
        ([5, 132, 40], "power-law"),
        ([9, 260, 100], "power-law"),
        ([11, 20, 90], "uniform"),
    ] {
        let generate = OP.generator(Some(generator)).unwrap().generate;
        check_all(&dims, &generate(&dims, 20260910)).unwrap();
    }
}

#[test]
fn no_edges_give_zeros() {
    for dims in [[7, 9, 0], [7, 8, 0]] {
        let inputs = OP.generate(&dims, 1);
        for stage in STAGES.iter().filter(|s| (s.supports)(&dims)) {
            let out = emulate(&OP, stage, &dims, &inputs).unwrap();
            assert!(out.iter().all(|v| v.to_bits() == 0), "{}: {out:?}", stage.name);
        }
    }
}

/// n = 1, nine edges all from node 0 into row 0: out = (Σ w)·x[0, :]
/// (width 5, and width 8 for mage-003).
#[test]
fn duplicate_edges_are_summed() {
    duplicates(vec![1.0, -2.0, 0.5, 4.0, 0.25]);
    duplicates(vec![1.0, -2.0, 0.5, 4.0, 0.25, 8.0, -0.5, 3.0]);
}

fn duplicates(x: Vec<f32>) {
    let dims = [1, x.len() as u32, 9];
    let w: Vec<f32> = (1..=9).map(|k| k as f32 * 0.125).collect();
    let inputs = vec![HostBuf::F32(x.clone()), HostBuf::F32(w), HostBuf::U32(vec![0, 9]), HostBuf::U32(vec![0; 9])];
    for stage in STAGES.iter().filter(|s| (s.supports)(&dims)) {
        let out = emulate(&OP, stage, &dims, &inputs).unwrap();
        let want: Vec<f32> = x.iter().map(|v| v * 5.625).collect();
        assert_eq!(out, want, "{}", stage.name);
    }
    check_all(&dims, &inputs).unwrap();
}

/// One row with 1,900 of 2,000 edges, the rest spread, many rows empty:
/// mage-002 splits the heavy row over dozens of warps.
#[test]
fn one_heavy_row_with_empty_rows_around_it() {
    for (n, width, seed) in [(16, 33, 5), (16, 36, 5), (64, 64, 9), (300, 8, 2), (20, 136, 3)] {
        let (dims, inputs) = graph(n, width, 2000, Shape::Heavy(950), 7, seed);
        check_all(&dims, &inputs).unwrap();
    }
}

/// The generator's power law at the default size: the heaviest row holds
/// about 14,000 of the 65,536 edges (1/H(4096, 1.2) of them); uniform
/// destinations stay near the mean of 16.
#[test]
fn the_generators_make_the_degree_distributions_they_promise() {
    let heavy = degrees(4096, 65536, POWER_LAW_SKEW, 20260910);
    let max = *heavy.iter().max().unwrap();
    assert!((13_000..=15_300).contains(&max), "heaviest row {max}");
    assert_eq!(heavy.iter().sum::<u32>(), 65536);
    let uniform = degrees(4096, 65536, 0, 20260910);
    let max = *uniform.iter().max().unwrap();
    assert!((20..=45).contains(&max), "uniform heaviest row {max}");
    // Deterministic from the seed, and valid CSR, for both generators.
    let dims = [64, 3, 1000];
    for g in OP.generators {
        let (a, b) = ((g.generate)(&dims, 4), (g.generate)(&dims, 4));
        assert_eq!(a, b);
        OP.check_inputs(&dims, &a).unwrap();
    }
}

/// The default power-law shape, end to end on the emulator, and `current`
/// on it: told nothing about the degrees, it reads rowptr and takes a
/// merge-path stage.
#[test]
fn the_default_power_law_shape_on_every_stage() {
    let dims = [4096, 64, 65536];
    let inputs = OP.generator(Some("power-law")).unwrap().generate;
    let inputs = inputs(&dims, 20260910);
    for stage in STAGES {
        check_stage(&OP, stage, &dims, &inputs).unwrap();
    }
    let picked = OP.pick("current", &dims, &inputs).unwrap();
    assert_eq!(picked.stage.name, "mage-005");
    check_stage(&OP, picked.stage, &dims, &inputs).unwrap();
}

/// A graph no generator here drew: 5,000 nodes, one hub of about 46,000 of
/// its 210,000 edges, every weight positive. mage-001 sums the hub's row in
/// one serial chain; the tolerance, read off the data's magnitudes and the
/// graph's largest row, allows its rounding, and still sees a dropped edge
/// of a light row.
#[test]
fn the_tolerance_follows_the_data_on_a_hub() {
    let (n, width, edges) = (5000u32, 4u32, 210_000u32);
    let deg = degrees(n, edges, POWER_LAW_SKEW, 7);
    let hub = *deg.iter().max().unwrap();
    assert!(hub > 40_000, "hub of {hub} edges");
    let mut r = Rng::new(9);
    let rowptr = rowptr_of(&deg);
    let inputs = vec![
        HostBuf::F32(r.normal_vec((n * width) as usize, 0.5, 0.5)),
        HostBuf::F32((0..edges).map(|_| r.uniform() as f32).collect()),
        HostBuf::U32(rowptr.clone()),
        HostBuf::U32((0..edges).map(|_| r.below(n as u64) as u32).collect()),
    ];
    let dims = [n, width, edges];
    let tol = (OP.tolerance)(&dims, &inputs);
    // mage-001's arithmetic, on the host: one fma per edge, in edge order.
    let (x, w, idx) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[3].as_u32());
    let serial: Vec<f32> = (0..(n * width) as usize)
        .map(|t| {
            let (i, c) = (t / width as usize, t % width as usize);
            (rowptr[i]..rowptr[i + 1]).fold(0f32, |acc, e| w[e as usize].mul_add(x[idx[e as usize] as usize * width as usize + c], acc))
        })
        .collect();
    let want = reference(&dims, &inputs);
    let cmp = mage_common::numeric::compare(&serial, &want, tol);
    assert!(cmp.passed(), "{}", OP.summarize(&cmp, &dims));
    assert!(cmp.max_abs_err > 1e-3, "the hub's rounding ({}) should exceed the plain 1e-4 allowance", cmp.max_abs_err);
    // One dropped edge of a light row is still far outside it.
    let light = (0..n as usize).find(|&i| deg[i] > 0 && deg[i] < 50).unwrap();
    let e = rowptr[light] as usize;
    let t = light * width as usize;
    let dropped = serial[t] - w[e] * x[idx[e] as usize * width as usize];
    assert!(
        !tol.allows(dropped, want.values[t], want.magnitude(t)),
        "a dropped edge ({}) passes an allowance of {}",
        w[e] * x[idx[e] as usize * width as usize],
        tol
    );
}

#[test]
fn malformed_graphs_are_rejected_before_any_launch() {
    let dims = [4, 4, 5];
    let ok = || {
        vec![HostBuf::F32(vec![0.5; 16]), HostBuf::F32(vec![1.0; 5]), HostBuf::U32(vec![0, 2, 2, 4, 5]), HostBuf::U32(vec![0, 3, 1, 1, 2])]
    };
    OP.check_inputs(&dims, &ok()).unwrap();
    let cases: [(usize, Vec<u32>, &str); 5] = [
        (2, vec![1, 2, 2, 4, 5], "rowptr[0] is 1; a CSR row pointer must start at 0"),
        (2, vec![0, 3, 2, 4, 5], "rowptr decreases at row 1: rowptr[1] = 3 > rowptr[2] = 2"),
        (2, vec![0, 2, 2, 4, 4], "rowptr[4] is 4; it must equal the edge count 5"),
        (2, vec![0, 2, 2, 4, 6], "rowptr[4] is 6; it must equal the edge count 5"),
        (3, vec![0, 3, 4, 1, 2], "indices[2] is 4; every index must be below n = 4"),
    ];
    for (which, bad, message) in cases {
        let mut inputs = ok();
        inputs[which] = HostBuf::U32(bad);
        let err = OP.check_inputs(&dims, &inputs).unwrap_err();
        assert!(err.contains(message), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        for stage in STAGES {
            let err = emulate(&OP, stage, &dims, &inputs).unwrap_err();
            assert!(err.contains(message), "{}: {err}", stage.name);
        }
    }
    // A wrong length is caught before the CSR checks.
    let mut inputs = ok();
    inputs[3] = HostBuf::U32(vec![0; 4]);
    let err = OP.check_inputs(&dims, &inputs).unwrap_err();
    assert!(err.contains("indices.bin"), "{err}");
}

/// What a caller with its inputs on a device runs: only rowptr and indices
/// on the host, x and w empty.
#[test]
fn the_csr_check_reads_only_rowptr_and_indices() {
    assert_eq!(OP.content_reads, &[2, 3]);
    let dims = [4, 4, 5];
    let graph =
        |rowptr: Vec<u32>, indices: Vec<u32>| vec![HostBuf::F32(vec![]), HostBuf::F32(vec![]), HostBuf::U32(rowptr), HostBuf::U32(indices)];
    OP.check_contents(&dims, &graph(vec![0, 2, 2, 4, 5], vec![0, 3, 1, 1, 2])).unwrap();
    let cases = [
        (vec![1, 2, 2, 4, 5], vec![0, 3, 1, 1, 2], "rowptr.bin: rowptr[0] is 1; a CSR row pointer must start at 0"),
        (vec![0, 3, 2, 4, 5], vec![0, 3, 1, 1, 2], "rowptr.bin: rowptr decreases at row 1: rowptr[1] = 3 > rowptr[2] = 2"),
        (vec![0, 2, 2, 4, 4], vec![0, 3, 1, 1, 2], "rowptr.bin: rowptr[4] is 4; it must equal the edge count 5"),
        (vec![0, 2, 2, 4, 5], vec![0, 3, 4, 1, 2], "indices.bin: indices[2] is 4; every index must be below n = 4"),
        // Lengths before contents: a short rowptr or indices is never indexed.
        (vec![0, 2, 2, 4], vec![0, 3, 1, 1, 2], "rowptr.bin (rowptr) holds 4 U32 values; dims 4x4x5 need 5"),
        (vec![0, 2, 2, 4, 5], vec![0, 3, 1, 1], "indices.bin (indices) holds 4 U32 values; dims 4x4x5 need 5"),
        (vec![], vec![], "rowptr.bin (rowptr) holds 0 U32 values; dims 4x4x5 need 5"),
    ];
    for (rowptr, indices, message) in cases {
        let inputs = graph(rowptr, indices);
        assert_eq!(OP.check_contents(&dims, &inputs).unwrap_err(), message);
    }
    let mut inputs = graph(vec![0, 2, 2, 4, 5], vec![0, 3, 1, 1, 2]);
    inputs[2] = HostBuf::F32(vec![0.0; 5]);
    assert_eq!(OP.check_contents(&dims, &inputs).unwrap_err(), "rowptr.bin (rowptr) holds 5 F32 values; dims 4x4x5 need 5");
    assert_eq!(OP.check_contents(&dims, &inputs[..3]).unwrap_err(), "neighbor takes 4 inputs, got 3");
    assert_eq!(OP.check_contents(&[4, 4], &inputs).unwrap_err(), "neighbor takes 3 dims (n,width,edges), got 2");
}

#[test]
fn current_reads_the_graph_not_a_hint() {
    let pick = |dims: [u32; 3], generator: &str| {
        let inputs = (OP.generator(Some(generator)).unwrap().generate)(&dims, 20260910);
        OP.pick("current", &dims, &inputs).unwrap().stage.name
    };
    assert_eq!(pick([4096, 64, 65536], "uniform"), "mage-004");
    assert_eq!(pick([4096, 64, 65536], "power-law"), "mage-005");
    assert_eq!(pick([65536, 64, 1048576], "uniform"), "mage-003");
    assert_eq!(pick([65536, 64, 1048576], "power-law"), "mage-005");
    assert_eq!(pick([4096, 63, 65536], "power-law"), "mage-002");
    assert_eq!(pick([65536, 63, 1048576], "uniform"), "mage-002");
    assert_eq!(pick([7, 9, 23], "uniform"), "mage-001");
    assert_eq!(pick([7, 12, 23], "uniform"), "mage-004");
    assert_eq!(pick([4096, 62, 65536], "uniform"), "mage-001");
    // The dispatcher reads rowptr alone: it is handed nothing else.
    assert_eq!(OP.current.reads, &[2]);
    // Heavy rows on a graph too large for mage-002's scratch at width 1024:
    // mage-005 needs none; at a width that is not a multiple of 4 the pick is
    // one of the scalar stages that supports the graph.
    let rowptr: Vec<u32> = (0..=(1u32 << 20)).map(|i| i << 10).collect();
    assert_eq!(current::choose(&[1 << 20, 1 << 10, 1 << 30], &rowptr).name, "mage-005");
    let odd = [1 << 20, 1023, 1 << 30];
    let picked = current::choose(&odd, &rowptr);
    assert!((picked.supports)(&odd) && ["mage-001", "mage-002"].contains(&picked.name), "{}", picked.name);
    assert!(reference(&[1, 1, 0], &OP.generate(&[1, 1, 0], 1)).values == vec![0.0]);
}
