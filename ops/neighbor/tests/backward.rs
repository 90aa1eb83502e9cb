//! `neighbor_backward` on the emulator: every stage, and `current`, against
//! the f64 reference of dX and dw under the op's tolerance, on random
//! graphs with tails (empty rows, a heavy row, nodes that are no edge's
//! source, one node the source of most edges, no edges at all, widths
//! 1..70, out-edge lists on and past mage-003's rounds) and on data of
//! any scale; an output of zeros and a planted wrong gradient fail; the
//! outputs are the FP32 chains in the documented order, the same bits on
//! every run; a malformed graph is refused with the
//! forward's message, and a transpose that is not the graph's with one
//! line naming what is wrong; each output is located by name.

use mage_common::fixtures::Rng;
use mage_common::numeric::compare;
use mage_common::op::{HostBuf, Op, check_current, check_stage, emulate};
use mage_neighbor::backward::{BACKWARD, STAGES, largest_out_degree, largest_sum, mage_002, mage_003, with_transpose};
use mage_neighbor::{OP, rowptr_of};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// A graph for `[n, width, edges]`: only every `row_step`-th row has edges
/// (the others are empty), one row (`seed % n`) takes `heavy_row` per mille
/// of them; node `seed % n` is the source of `hub` per mille of the edges,
/// the others' sources uniform over the first `sources` nodes (so the rest
/// are no edge's source). x, w and dY normal(0, 1) times `scale`.
#[allow(clippy::too_many_arguments)]
fn graph(n: u32, width: u32, edges: u32, row_step: u32, heavy_row: u32, hub: u32, sources: u32, scale: f32, seed: u64) -> Vec<HostBuf> {
    let mut r = Rng::new(seed);
    let rows: Vec<usize> = (0..n as usize).step_by(row_step as usize).collect();
    let mut deg = vec![0u32; n as usize];
    let heavy = (edges as u64 * heavy_row as u64 / 1000) as u32;
    deg[rows[(seed % rows.len() as u64) as usize]] += heavy;
    for _ in heavy..edges {
        deg[rows[r.below(rows.len() as u64) as usize]] += 1;
    }
    let (hub_node, sources) = ((seed % n as u64) as u32, sources.clamp(1, n));
    let indices: Vec<u32> =
        (0..edges).map(|_| if r.below(1000) < hub as u64 { hub_node } else { r.below(sources as u64) as u32 }).collect();
    let mut normal = |len: u32| HostBuf::F32(r.normal_vec(len as usize, 0.0, 1.0).iter().map(|v| v * scale).collect());
    let (x, w, dy) = (normal(n * width), normal(edges), normal(n * width));
    with_transpose(&[n, width, edges], vec![x, w, HostBuf::U32(rowptr_of(&deg)), HostBuf::U32(indices), dy])
}

/// Every stage and `current` on these inputs.
fn check_all(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
    for stage in STAGES {
        check_stage(&BACKWARD, stage, dims, inputs)?;
    }
    check_current(&BACKWARD, dims, inputs)?;
    Ok(())
}

#[test]
fn every_stage_and_current_match_the_reference_on_random_graphs() {
    let mut runner = TestRunner::new(Config { cases: 48, ..Config::default() });
    let shape = (
        prop_oneof![Just(1u32), 1u32..=40],
        prop_oneof![Just(1u32), Just(4), Just(64), 1u32..=70],
        prop_oneof![Just(0u32), 0u32..=300],
        prop_oneof![Just(1u32), 1u32..=5],
        prop_oneof![Just(0u32), 0u32..=1000],
        prop_oneof![Just(0u32), 0u32..=1000],
        1u32..=40,
        any::<u64>(),
    );
    runner
        .run(&shape, |(n, width, edges, row_step, heavy_row, hub, sources, seed)| {
            let inputs = graph(n, width, edges, row_step, heavy_row, hub, sources, 1.0, seed);
            check_all(&[n, width, edges], &inputs).map_err(TestCaseError::fail)
        })
        .unwrap();
}

#[test]
fn a_node_the_source_of_very_many_edges_and_rows_with_none() {
    // Node 3 the source of about 95% of 3000 edges, every other row empty,
    // one row holding half the edges; a width not a multiple of 4.
    let dims = [50u32, 7, 3000];
    let inputs = graph(dims[0], dims[1], dims[2], 2, 500, 950, 20, 1.0, 3);
    assert!(largest_out_degree(&dims, &inputs) > 2800);
    check_all(&dims, &inputs).unwrap();
}

/// Out-edge lists that end just before, on and just past the 16-edge
/// rounds of mage-003, two nodes of one warp with different round counts,
/// an odd node count (a warp's second group past the last node), and
/// widths of one quad, of one chunk, of two and three chunks of 16 lanes
/// and of single floats.
#[test]
fn out_edge_lists_on_and_past_a_round_boundary() {
    let lengths = [15u32, 16, 17, 0, 31, 32, 33, 1, 48, 49, 5, 64, 3];
    let n = lengths.len() as u32;
    let mut r = Rng::new(29);
    let mut indices: Vec<u32> = lengths.iter().enumerate().flat_map(|(s, &d)| std::iter::repeat_n(s as u32, d as usize)).collect();
    for i in (1..indices.len()).rev() {
        indices.swap(i, r.below(i as u64 + 1) as usize);
    }
    let edges = indices.len() as u32;
    let mut deg = vec![0u32; n as usize];
    for _ in 0..edges {
        deg[r.below(n as u64) as usize] += 1;
    }
    for width in [4u32, 64, 68, 136, 9, 37, 1] {
        let dims = [n, width, edges];
        let mut normal = |len: u32| HostBuf::F32(r.normal_vec(len as usize, 0.0, 1.0));
        let (x, w, dy) = (normal(n * width), normal(edges), normal(n * width));
        let inputs = with_transpose(&dims, vec![x, w, HostBuf::U32(rowptr_of(&deg)), HostBuf::U32(indices.clone()), dy]);
        assert_eq!(largest_out_degree(&dims, &inputs), 64);
        check_all(&dims, &inputs).unwrap_or_else(|e| panic!("width {width}: {e}"));
    }
}

#[test]
fn no_edges_give_zeros_and_an_empty_dw() {
    let dims = [5u32, 3, 0];
    let inputs = graph(dims[0], dims[1], dims[2], 1, 0, 0, 5, 1.0, 1);
    let out = emulate(&BACKWARD, STAGES[0], &dims, &inputs).unwrap();
    assert_eq!(out, vec![0.0; 15]);
    check_all(&dims, &inputs).unwrap();
}

#[test]
fn every_stage_holds_at_any_scale() {
    for (scale, width) in [1e-6f32, 1e6, 1e15].into_iter().flat_map(|s| [(s, 37u32), (s, 64)]) {
        let dims = [30u32, width, 400];
        let inputs = graph(dims[0], dims[1], dims[2], 2, 300, 200, 25, scale, 17);
        for stage in STAGES {
            let cmp = check_stage(&BACKWARD, stage, &dims, &inputs).unwrap_or_else(|e| panic!("scale {scale:e} width {width}: {e}"));
            assert!(cmp.worst_ratio < 0.5, "{} at scale {scale:e} width {width}: {}", stage.name, cmp.worst_ratio);
        }
    }
}

#[test]
fn the_generators_draw_every_input_and_pass() {
    let dims = [64u32, 9, 700];
    for g in BACKWARD.generators {
        let inputs = (g.generate)(&dims, 5);
        let forward = OP.generator(Some(g.name)).unwrap();
        assert_eq!(inputs[..4], (forward.generate)(&dims, 5)[..], "{}: the forward's graph, x and w", g.name);
        let dy = inputs[4].as_f32();
        assert_eq!(dy.len(), 64 * 9);
        assert!(dy.iter().all(|v| *v != 0.0) && dy != inputs[0].as_f32(), "{}: dY drawn on its own, never zeros", g.name);
        check_all(&dims, &inputs).unwrap_or_else(|e| panic!("{}: {e}", g.name));
    }
    for w in BACKWARD.sweep {
        assert!(BACKWARD.generator(Some(w.generator)).is_ok());
    }
}

#[test]
fn the_tolerance_reads_the_longest_sum() {
    let dims = [50u32, 7, 3000];
    let inputs = graph(dims[0], dims[1], dims[2], 1, 0, 950, 50, 1.0, 3);
    let d = largest_out_degree(&dims, &inputs);
    assert_eq!(largest_sum(&dims, &inputs), d);
    assert_eq!((BACKWARD.tolerance)(&dims, &inputs), mage_common::numeric::sum_of_products(d));
    // Wide rows and light nodes: the dot products are the longest sums.
    let dims = [40u32, 70, 20];
    let inputs = graph(dims[0], dims[1], dims[2], 1, 0, 0, 40, 1.0, 3);
    assert_eq!(largest_sum(&dims, &inputs), 70);
}

#[test]
fn zeros_and_planted_wrong_gradients_fail() {
    let dims = [40u32, 13, 500];
    let (n, width, edges) = (40usize, 13usize, 500usize);
    let inputs = graph(dims[0], dims[1], dims[2], 1, 0, 100, 40, 1.0, 23);
    let reference = (BACKWARD.reference)(&dims, &inputs);
    let tol = (BACKWARD.tolerance)(&dims, &inputs);
    let zeros = vec![0f32; BACKWARD.output_len(&dims)];
    let cmp = compare(&zeros, &reference, tol);
    let nonzero = reference.values.iter().filter(|v| **v != 0.0).count();
    assert!(nonzero > n * width, "{nonzero}");
    assert!(cmp.failures as f64 >= 0.9 * nonzero as f64, "zeros fail on only {} of {nonzero}", cmp.failures);

    let good = emulate(&BACKWARD, STAGES[0], &dims, &inputs).unwrap();
    assert!(compare(&good, &reference, tol).passed());
    let (x, w, rowptr, indices, dy) = (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_u32(), inputs[3].as_u32(), inputs[4].as_f32());
    // dX summed over the rows instead of the sources: the forward applied to dY.
    let mut wrong = good.clone();
    for r in 0..n {
        for c in 0..width {
            wrong[r * width + c] = (rowptr[r] as usize..rowptr[r + 1] as usize).map(|e| w[e] * dy[indices[e] as usize * width + c]).sum();
        }
    }
    let cmp = compare(&wrong, &reference, tol);
    assert!(cmp.failures > n * width / 2, "dX over the rows fails on only {} elements", cmp.failures);
    // dw with the row's x in place of the source's.
    let mut wrong = good.clone();
    for r in 0..n {
        for e in rowptr[r] as usize..rowptr[r + 1] as usize {
            wrong[n * width + e] = (0..width).map(|c| dy[r * width + c] * x[r * width + c]).sum();
        }
    }
    let cmp = compare(&wrong, &reference, tol);
    assert!(cmp.failures > edges / 2, "dw with the row's x fails on only {} elements", cmp.failures);
    // One edge dropped from one node's sum.
    let e = 7;
    let s = indices[e] as usize;
    let mut wrong = good.clone();
    for c in 0..width {
        wrong[s * width + c] -= w[e] * dy[row_of(rowptr, e) * width + c];
    }
    let cmp = compare(&wrong, &reference, tol);
    assert!(cmp.failures >= width / 2, "a dropped edge fails on only {} elements", cmp.failures);
}

/// The row holding edge `e`.
fn row_of(rowptr: &[u32], e: usize) -> usize {
    rowptr.partition_point(|&p| p as usize <= e) - 1
}

/// The outputs as the stage's doc defines their FP32 sums: each node's
/// out-edges in increasing order as one `fma` chain, each dot product in
/// the stage's order (mage-001: columns in order; mage-002 and mage-003:
/// fixed trees over lanes, chunk by chunk). Bit for bit: nothing depends
/// on the order the integer atomics landed in. Widths of one float per
/// lane (19, 150: five chunks in mage-002, two and ten in mage-003), of
/// quads (64; 136: two chunks in mage-002, three in mage-003) and of one
/// lane per node (1, 4).
#[test]
fn the_outputs_are_the_documented_chains_the_same_bits_on_every_run() {
    for width in [19u32, 64, 136, 150, 1, 4] {
        let dims = [33u32, width, 900];
        let (n, width) = (33usize, width as usize);
        let inputs = graph(dims[0], dims[1], dims[2], 2, 300, 400, 30, 1.0, 41);
        let (x, w, rowptr, indices, dy) =
            (inputs[0].as_f32(), inputs[1].as_f32(), inputs[2].as_u32(), inputs[3].as_u32(), inputs[4].as_f32());
        let mut want = vec![0f32; n * width];
        for (e, &s) in indices.iter().enumerate() {
            let r = row_of(rowptr, e);
            for c in 0..width {
                let acc = &mut want[s as usize * width + c];
                *acc = w[e].mul_add(dy[r * width + c], *acc);
            }
        }
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for stage in STAGES {
            let mut want = want.clone();
            for (e, &s) in indices.iter().enumerate() {
                let (g, src) = (&dy[row_of(rowptr, e) * width..][..width], &x[s as usize * width..][..width]);
                want.push(match stage.name {
                    "mage-001" => column_chain(g, src),
                    "mage-002" => lane_tree(g, src),
                    _ => halving_tree(g, src),
                });
            }
            let a = emulate(&BACKWARD, stage, &dims, &inputs).unwrap();
            let b = emulate(&BACKWARD, stage, &dims, &inputs).unwrap();
            assert_eq!(bits(&a), bits(&b), "{} width {width}: two runs differ", stage.name);
            assert_eq!(bits(&a), bits(&want), "{} width {width}: not the documented chains", stage.name);
        }
    }
}

/// mage-001's dot product: one `fma` chain over the columns in order.
fn column_chain(g: &[f32], x: &[f32]) -> f32 {
    g.iter().zip(x).fold(0f32, |acc, (g, x)| g.mul_add(*x, acc))
}

/// mage-002's dot product: lanes of vectors of 4 floats (`width % 4 ==
/// 0`) or 1, a group of `size` lanes per chunk of the row; each lane's
/// vector an `fma` chain in column order (zero past the row), the lanes
/// summed by a butterfly over xor 1, 2, ..., `size / 2` (lane 0's value
/// kept), the chunks added in order.
fn lane_tree(g: &[f32], x: &[f32]) -> f32 {
    let width = g.len() as u32;
    let v = if width.is_multiple_of(4) { 4 } else { 1 };
    let size = mage_002::group_size(width, v) as usize;
    let v = v as usize;
    let mut total = 0f32;
    for (chunk, c0) in (0..g.len()).step_by(size * v).enumerate() {
        let mut p: Vec<f32> = (0..size)
            .map(|slot| (c0 + slot * v..c0 + slot * v + v).filter(|&c| c < g.len()).fold(0f32, |acc, c| g[c].mul_add(x[c], acc)))
            .collect();
        let mut m = 1;
        while m < size {
            p = (0..size).map(|l| p[l] + p[l ^ m]).collect();
            m *= 2;
        }
        total = if chunk == 0 { p[0] } else { total + p[0] };
    }
    total
}

/// mage-003's dot product: 16 lanes of vectors of 4 floats (`width % 4 ==
/// 0`) or 1 per chunk of the row, each lane's vector an `fma` chain in
/// column order from zero (zero past the row), the lanes summed by a
/// butterfly over xor 8, 4, 2, 1 in that order, the chunks added in order.
fn halving_tree(g: &[f32], x: &[f32]) -> f32 {
    let v = mage_003::floats_per_lane(g.len() as u32) as usize;
    let lanes = mage_003::LANES as usize;
    let mut total = 0f32;
    for (chunk, c0) in (0..g.len()).step_by(lanes * v).enumerate() {
        let mut p: Vec<f32> = (0..lanes)
            .map(|slot| (c0 + slot * v..c0 + slot * v + v).filter(|&c| c < g.len()).fold(0f32, |acc, c| g[c].mul_add(x[c], acc)))
            .collect();
        let mut m = lanes / 2;
        while m > 0 {
            p = (0..lanes).map(|l| p[l] + p[l ^ m]).collect();
            m /= 2;
        }
        total = if chunk == 0 { p[0] } else { total + p[0] };
    }
    total
}

#[test]
fn malformed_graphs_are_refused_with_the_forwards_message() {
    let dims = [4u32, 4, 5];
    let ok = || {
        vec![
            HostBuf::F32(vec![0.5; 16]),
            HostBuf::F32(vec![1.0; 5]),
            HostBuf::U32(vec![0, 2, 2, 4, 5]),
            HostBuf::U32(vec![0, 3, 1, 1, 2]),
            HostBuf::F32(vec![0.25; 16]),
            // The transpose: node 0 the source of edge 0 (row 0), node 1
            // of edges 2 and 3 (row 2), node 2 of edge 4 (row 3), node 3
            // of edge 1 (row 0).
            HostBuf::U32(vec![0, 1, 3, 4, 5]),
            HostBuf::U32(vec![0, 2, 2, 3, 0]),
            HostBuf::U32(vec![0, 2, 3, 4, 1]),
        ]
    };
    BACKWARD.check_inputs(&dims, &ok()).unwrap();
    assert_eq!(with_transpose(&dims, ok()[..5].to_vec()), ok());
    assert_eq!(BACKWARD.content_reads[..2], OP.content_reads[..]);
    assert_eq!(BACKWARD.content_reads[2..], [5, 6, 7]);
    let cases: [(usize, Vec<u32>); 4] =
        [(2, vec![1, 2, 2, 4, 5]), (2, vec![0, 3, 2, 4, 5]), (2, vec![0, 2, 2, 4, 4]), (3, vec![0, 3, 4, 1, 2])];
    for (which, bad) in cases {
        let mut inputs = ok();
        inputs[which] = HostBuf::U32(bad);
        let forward = OP.check_inputs(&dims, &inputs[..4]).unwrap_err();
        assert_eq!(BACKWARD.check_inputs(&dims, &inputs).unwrap_err(), forward);
        for stage in STAGES {
            let err = emulate(&BACKWARD, stage, &dims, &inputs).unwrap_err();
            assert!(err.contains(&forward), "{}: {err}", stage.name);
        }
        // Only the graph and its transpose on the host, as a caller with the rest on a device.
        assert_eq!(BACKWARD.check_contents(&dims, &graph_only(&inputs)).unwrap_err(), forward);
    }
    // A transpose that is not the graph's: each refused in one line naming it.
    let transposes: [(usize, Vec<u32>, &str); 8] = [
        (5, vec![1, 1, 3, 4, 5], "t_rowptr.bin: t_rowptr[0] is 1; a transposed row pointer must start at 0"),
        (5, vec![0, 3, 1, 4, 5], "t_rowptr.bin: t_rowptr decreases at node 1: t_rowptr[1] = 3 > t_rowptr[2] = 1"),
        (5, vec![0, 1, 3, 4, 4], "t_rowptr.bin: t_rowptr[4] is 4; it must equal the edge count 5"),
        (5, vec![0, 2, 3, 4, 5], "t_edges.bin: t_edges[1] is 2; node 0's entries must be edges with indices[e] = 0, and indices[2] is 1"),
        (7, vec![0, 3, 2, 4, 1], "t_edges.bin: t_edges[1] = 3 then t_edges[2] = 2; node 1's edges must be in increasing order"),
        (7, vec![0, 2, 3, 1, 4], "t_edges.bin: t_edges[3] is 1; node 2's entries must be edges with indices[e] = 2, and indices[1] is 3"),
        (7, vec![0, 2, 3, 4, 5], "t_edges.bin: t_edges[4] is 5; node 3's entries must be edges with indices[e] = 3 (there are 5 edges)"),
        (6, vec![0, 2, 2, 3, 1], "t_rows.bin: t_rows[4] is 1; edge 1 is in row 0"),
    ];
    for (which, bad, message) in transposes {
        let mut inputs = ok();
        inputs[which] = HostBuf::U32(bad);
        let err = BACKWARD.check_inputs(&dims, &inputs).unwrap_err();
        assert_eq!(err, message);
        assert!(!err.contains('\n'));
        assert_eq!(BACKWARD.check_contents(&dims, &graph_only(&inputs)).unwrap_err(), message);
        for stage in STAGES {
            let err = emulate(&BACKWARD, stage, &dims, &inputs).unwrap_err();
            assert!(err.contains(message), "{}: {err}", stage.name);
        }
    }
    let mut inputs = ok();
    inputs[4] = HostBuf::F32(vec![0.0; 15]);
    let err = BACKWARD.check_inputs(&dims, &inputs).unwrap_err();
    assert!(err.contains("dy.bin (dY) holds 15"), "{err}");
}

/// Only the inputs the content check reads (the graph and its transpose),
/// the others empty.
fn graph_only(inputs: &[HostBuf]) -> Vec<HostBuf> {
    inputs.iter().enumerate().map(|(i, b)| if BACKWARD.content_reads.contains(&i) { b.clone() } else { HostBuf::empty(b.elem()) }).collect()
}

#[test]
fn each_output_is_located_by_name() {
    let dims = [33u32, 70, 500];
    assert_eq!(BACKWARD.output_offsets(&dims), [0, 33 * 70, 33 * 70 + 500]);
    assert_eq!(BACKWARD.output_len(&dims), 33 * 70 + 500);
    assert_eq!(BACKWARD.locate_output(&dims, 71), "dX [1, 1]");
    assert_eq!(BACKWARD.locate_output(&dims, 33 * 70 + 5), "dw [5]");
    assert_eq!(BACKWARD.locate_output(&dims, 33 * 70 + 499), "dw [499]");
    assert_eq!(Op::dims_label(BACKWARD.default_dims), Op::dims_label(OP.default_dims));
}
