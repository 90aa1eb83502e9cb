//! `layernorm_backward` on the emulator: every stage, and `current`, against
//! the f64 reference of the three gradients under the op's tolerance, on
//! shapes with tails (widths not a multiple of the block, one row, one
//! column) and on data of any scale; an output of zeros and a gradient
//! missing a term fail; dgamma and dbeta are the same bits on every run.

use mage_common::fixtures::Rng;
use mage_common::numeric::compare;
use mage_common::op::{HostBuf, Stage, check_current, check_stage, emulate, fit_last_dim};
use mage_layernorm::backward::{BACKWARD, STAGES};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// x drawn normal(mean, spread), gamma normal(1, 0.25)·scale, dy normal(0, 1)·scale.
fn inputs(rows: u32, width: u32, mean: f32, spread: f32, scale: f32, seed: u64) -> Vec<HostBuf> {
    let n = (rows * width) as usize;
    let mut r = Rng::new(seed);
    let x = r.normal_vec(n, mean, spread);
    let gamma: Vec<f32> = r.normal_vec(width as usize, 1.0, 0.25).iter().map(|g| g * scale).collect();
    let dy: Vec<f32> = r.normal_vec(n, 0.0, 1.0).iter().map(|d| d * scale).collect();
    vec![HostBuf::F32(x), HostBuf::F32(gamma), HostBuf::F32(dy)]
}

/// The nearest dims to `[rows, width]` that `stage` supports, changing only
/// the width (up to 1024, which every stage reaches): never none, so no case
/// passes unchecked.
fn fit(stage: &Stage, rows: u32, width: u32) -> Vec<u32> {
    fit_last_dim(stage, &[rows, width], 1024).unwrap_or_else(|| panic!("{} supports no width up to 1024 at {rows} rows", stage.name))
}

/// Checks `stage` at the dims nearest `[rows, width]` it supports, on fresh inputs.
fn check_fitted(stage: &Stage, rows: u32, width: u32, seed: u64) -> Result<(), String> {
    let d = fit(stage, rows, width);
    let x = inputs(d[0], d[1], 0.0, 1.0, 1.0, seed);
    check_stage(&BACKWARD, stage, &d, &x).map(|_| ())
}

#[test]
fn every_stage_and_current_match_the_reference_on_random_shapes() {
    let mut runner = TestRunner::new(Config { cases: 24, ..Config::default() });
    let shape = (1u32..=24, prop_oneof![prop::sample::select(vec![1u32, 3, 4, 255, 256, 257, 768]), 1u32..=600], any::<u64>());
    runner
        .run(&shape, |(rows, width, seed)| {
            for stage in STAGES {
                check_fitted(stage, rows, width, seed).map_err(TestCaseError::fail)?;
            }
            let x = inputs(rows, width, 0.0, 1.0, 1.0, seed);
            check_current(&BACKWARD, &[rows, width], &x).map_err(TestCaseError::fail)?;
            Ok(())
        })
        .unwrap();
}

/// Row counts around the column kernels' chunks of rows (one chunk, a
/// chunk and one row, several with a tail).
#[test]
fn every_stage_matches_the_reference_across_chunks_of_rows() {
    for rows in [63u32, 64, 65, 130, 200] {
        for width in [1u32, 5, 129] {
            for stage in STAGES {
                check_fitted(stage, rows, width, rows as u64 * 1000 + width as u64).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}

#[test]
fn every_stage_holds_at_any_scale_and_far_from_zero() {
    // (mean, spread, scale of gamma and dy)
    for (mean, spread, scale) in [(0.0, 1.0, 1e-6), (0.0, 1.0, 1e6), (1e4, 1.0, 1.0), (0.0, 1e-20, 1.0), (3.0, 1e-3, 1e3)] {
        let x = inputs(7, 300, mean, spread, scale, 11);
        for stage in STAGES {
            let cmp =
                check_stage(&BACKWARD, stage, &[7, 300], &x).unwrap_or_else(|e| panic!("mean {mean} spread {spread} scale {scale}: {e}"));
            assert!(cmp.worst_ratio < 0.5, "{} at mean {mean} spread {spread} scale {scale}: {}", stage.name, cmp.worst_ratio);
        }
    }
}

#[test]
fn zeros_and_a_missing_term_fail() {
    let dims = [9u32, 130];
    let x = inputs(dims[0], dims[1], 0.5, 2.0, 1.0, 5);
    let reference = (BACKWARD.reference)(&dims, &x);
    let tol = (BACKWARD.tolerance)(&dims, &x);
    let zeros = vec![0f32; BACKWARD.output_len(&dims)];
    let cmp = compare(&zeros, &reference, tol);
    let nonzero = reference.values.iter().filter(|v| **v != 0.0).count();
    assert!(cmp.failures as f64 >= 0.9 * nonzero as f64, "zeros fail on only {} of {nonzero}", cmp.failures);
    // dx without its `- x̂·mean(g·x̂)` term, dgamma and dbeta as computed.
    let good = emulate(&BACKWARD, STAGES[0], &dims, &x).unwrap();
    let (rows, width) = (dims[0] as usize, dims[1] as usize);
    let (xs, gam, dy) = (x[0].as_f32(), x[1].as_f32(), x[2].as_f32());
    let mut wrong = good.clone();
    for r in 0..rows {
        let row: Vec<f64> = xs[r * width..(r + 1) * width].iter().map(|v| *v as f64).collect();
        let mean = row.iter().sum::<f64>() / width as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / width as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        let g: Vec<f64> = (0..width).map(|c| dy[r * width + c] as f64 * gam[c] as f64).collect();
        let mean_g = g.iter().sum::<f64>() / width as f64;
        for c in 0..width {
            wrong[r * width + c] = (rstd * (g[c] - mean_g)) as f32;
        }
    }
    let cmp = compare(&wrong, &reference, tol);
    assert!(cmp.failures > rows * width / 2, "a dx missing a term fails on only {} elements", cmp.failures);
    assert!(compare(&good, &reference, tol).passed());
}

#[test]
fn the_column_sums_are_the_same_bits_on_every_run_and_each_output_is_located() {
    let dims = [33u32, 72];
    let x = inputs(dims[0], dims[1], 0.0, 1.0, 1.0, 9);
    for stage in STAGES {
        let a = emulate(&BACKWARD, stage, &dims, &x).unwrap();
        let b = emulate(&BACKWARD, stage, &dims, &x).unwrap();
        assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{}", stage.name);
    }
    assert_eq!(BACKWARD.output_offsets(&dims), [0, 33 * 72, 33 * 72 + 72, 33 * 72 + 144]);
    assert_eq!(BACKWARD.locate_output(&dims, 33 * 72 + 5), "dgamma [5]");
    assert_eq!(BACKWARD.locate_output(&dims, 73), "dx [1, 1]");
    assert_eq!(BACKWARD.locate_output(&dims, 33 * 72 + 143), "dbeta [71]");
}

/// The held-row stage (mage-003) on every entry, on rows that
/// are not a multiple of a chunk, widths not a multiple of 4 (the scalar
/// path) and up to the widest entry (4096), one row and a column of one,
/// and many chunks (2500x3: 313 chunks, the totals' batches of 8 and their
/// remainders): against the reference, twice the same bits.
#[test]
fn the_held_row_stages_across_entries_chunks_and_tails() {
    use mage_layernorm::backward::mage_003;
    let shapes = [(1u32, 1u32), (2500, 3), (130, 768), (9, 765), (37, 769), (3, 2048), (19, 2050), (5, 4096), (2, 4093)];
    for (rows, width) in shapes {
        let dims = [rows, width];
        let x = inputs(rows, width, 0.5, 2.0, 1.0, rows as u64 * 31 + width as u64);
        for stage in [&mage_003::STAGE] {
            assert!((stage.supports)(&dims), "{} refuses {rows}x{width}", stage.name);
            check_stage(&BACKWARD, stage, &dims, &x).unwrap_or_else(|e| panic!("{} at {rows}x{width}: {e}", stage.name));
            let a = emulate(&BACKWARD, stage, &dims, &x).unwrap();
            let b = emulate(&BACKWARD, stage, &dims, &x).unwrap();
            assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{} at {rows}x{width}: two runs differ", stage.name);
        }
    }
}

/// `current`: mage-005 for rows wider than 768 or more than 4096 of them
/// (to its widest, 8192), mage-003 elsewhere, mage-002 past 8192.
#[test]
fn current_takes_mage_005_wide_or_long_mage_003_elsewhere_mage_002_past_8192() {
    use mage_layernorm::backward::{mage_002, mage_003, mage_005};
    let pick = |r: u32, w: u32| BACKWARD.dispatch(&[r, w], &inputs(r, w, 0.0, 1.0, 1.0, 1)).name;
    for (r, w) in [(4, 769), (4, 2048), (4, 4097), (4, 8192), (4097, 768), (8192, 64)] {
        assert_eq!(pick(r, w), mage_005::STAGE.name, "{r}x{w}");
    }
    for (r, w) in [(4, 1), (4, 3), (4, 768), (4096, 768), (4096, 64)] {
        assert_eq!(pick(r, w), mage_003::STAGE.name, "{r}x{w}");
    }
    for w in [8193u32, 10000] {
        assert!(!(mage_003::STAGE.supports)(&[4, w]) && !(mage_005::STAGE.supports)(&[4, w]));
        assert_eq!(pick(4, w), mage_002::STAGE.name, "4x{w}");
    }
    let x = inputs(3, 8200, 0.0, 1.0, 1.0, 3);
    check_current(&BACKWARD, &[3, 8200], &x).unwrap();
}

/// The chunk rule at the sweep shapes: the entry, rows per chunk and chunks.
#[test]
fn the_chunk_rule_at_the_sweep_shapes() {
    use mage_layernorm::backward::held_gradient::{chunk_rows, entry_for};
    use mage_layernorm::backward::mage_003::ENTRIES;
    for (rows, width, threads, per, chunks) in [
        (4096u32, 768u32, 96u32, 12u32, 342u32),
        (8192, 768, 96, 22, 373),
        (1024, 2048, 256, 4, 256),
        (4096, 4096, 512, 32, 128),
        (16384, 4096, 512, 125, 132),
    ] {
        let e = entry_for(ENTRIES, width);
        assert_eq!((e.threads, chunk_rows(e, rows), rows.div_ceil(chunk_rows(e, rows))), (threads, per, chunks), "{rows}x{width}");
    }
}

/// The ring stage (mage-005) on every entry and both of its kernels (16-byte
/// copies, and column by column where the width is not a multiple of 4):
/// one row and a column of one, widths just past each narrower entry, up
/// to the widest (8192), rows not a multiple of a chunk (the last chunk of
/// 1101x1028 one row), chunks of fewer rows than the ring holds, and many
/// chunks (2500x3: 625, the totals' batches of 8 and their remainders):
/// against the reference, twice the same bits.
#[test]
fn the_ring_stage_across_entries_chunks_and_tails() {
    use mage_layernorm::backward::mage_005;
    let shapes = [
        (1u32, 1u32),
        (1, 3),
        (2500, 3),
        (130, 768),
        (9, 765),
        (37, 1025),
        (6, 2048),
        (1101, 1028),
        (19, 2050),
        (5, 4096),
        (2, 4093),
        (3, 4100),
        (3, 8192),
        (2, 8191),
    ];
    for (rows, width) in shapes {
        let dims = [rows, width];
        let x = inputs(rows, width, 0.5, 2.0, 1.0, rows as u64 * 31 + width as u64);
        let stage = &mage_005::STAGE;
        assert!((stage.supports)(&dims), "{} refuses {rows}x{width}", stage.name);
        check_stage(&BACKWARD, stage, &dims, &x).unwrap_or_else(|e| panic!("{} at {rows}x{width}: {e}", stage.name));
        let a = emulate(&BACKWARD, stage, &dims, &x).unwrap();
        let b = emulate(&BACKWARD, stage, &dims, &x).unwrap();
        assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "{} at {rows}x{width}: two runs differ", stage.name);
    }
    assert!(!(mage_005::STAGE.supports)(&[4, 8193]));
}

/// Long walks through the ring: few blocks, each many rows (the ring
/// wrapping a dozen times, the last chunk shorter, and chunks of one and
/// two rows, fewer than the ring holds), on every entry and both kernels,
/// data far from zero.
#[test]
fn the_ring_stage_walks_long_chunks() {
    use mage_common::op::check_plan;
    use mage_layernorm::backward::mage_005::plan_with_chunks;
    for (rows, width, per) in
        [(50u32, 4096u32, 17u32), (41, 4093, 40), (40, 1000, 13), (29, 1001, 7), (7, 2048, 1), (5, 3, 2), (12, 8192, 12)]
    {
        let dims = [rows, width];
        let x = inputs(rows, width, 1e3, 1.0, 1.0, rows as u64 * 7 + width as u64);
        check_plan(&BACKWARD, &plan_with_chunks(&dims, per), &dims, &x)
            .unwrap_or_else(|e| panic!("mage-005 at {rows}x{width}, {per} rows a chunk: {e}"));
    }
}

/// mage-005's chunk rule at the sweep shapes: the entry, rows per chunk and chunks.
#[test]
fn the_ring_chunk_rule_at_the_sweep_shapes() {
    use mage_layernorm::backward::mage_005::{chunk_rows, entry_for};
    for (rows, width, threads, per, chunks) in [
        (4096u32, 768u32, 64u32, 4u32, 1024u32),
        (8192, 768, 64, 8, 1024),
        (1024, 2048, 128, 4, 256),
        (4096, 4096, 256, 16, 256),
        (16384, 4096, 256, 63, 261),
    ] {
        let e = entry_for(width);
        assert_eq!((e.threads, chunk_rows(e, rows), rows.div_ceil(chunk_rows(e, rows))), (threads, per, chunks), "{rows}x{width}");
    }
}
