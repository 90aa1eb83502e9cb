//! The tolerance holds on data of any scale, for every stage: inputs of
//! 1e-6, 1, 1e6 and 1e15, and rows of A scaled by 10^U(-3,3). A correct
//! stage passes; zeros and an output with a misplaced term fail.

use mage_common::op::HostBuf;
use mage_common::scale::{SCALES, check_on, rows_scaled, scaled};
use mage_triangle::{OP, STAGES};

/// The contraction with `k = 0` and `k = 1` of B swapped: every output has
/// two terms misplaced.
fn misplaced(dims: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    let (n, c) = (dims[0] as usize, dims[1] as usize);
    let mut b = inputs[1].as_f32().to_vec();
    for j in 0..n {
        for ch in 0..c {
            b.swap(j * n * c + ch, (j * n + 1) * c + ch);
        }
    }
    let swapped = vec![inputs[0].clone(), HostBuf::F32(b)];
    (OP.reference)(dims, &swapped).values.iter().map(|v| *v as f32).collect()
}

fn check_scales(dims: &[u32]) {
    let base = OP.generate(dims, 43);
    let mut data: Vec<(String, Vec<HostBuf>)> = SCALES.iter().map(|&s| (format!("scale {s:e}"), scaled(&base, &[0, 1], s))).collect();
    data.push(("rows of A scaled by 10^U(-3,3)".into(), rows_scaled(&base, 0, dims[1] as usize, 5)));
    for (what, inputs) in &data {
        let wrong = misplaced(dims, inputs);
        let mut ran = 0;
        for stage in STAGES.iter().filter(|s| (s.supports)(dims)) {
            check_on(&OP, stage, dims, inputs, &wrong, 0.9).unwrap_or_else(|e| panic!("{what}: {e}"));
            ran += 1;
        }
        assert!(ran > 0, "no stage supports {dims:?}");
    }
}

#[test]
fn every_stage_holds_its_tolerance_at_every_scale() {
    // 16x8 runs every stage (mage-003 needs c % 4 == 0, the channel tiles c % 8).
    check_scales(&[16, 8]);
    check_scales(&[13, 5]);
}

#[test]
fn every_stage_runs_in_the_scale_test() {
    for stage in STAGES {
        assert!((stage.supports)(&[16, 8]), "{} does not support 16x8: the scale test would skip it", stage.name);
    }
}
