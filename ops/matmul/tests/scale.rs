//! The tolerance holds on data of any scale, for every stage: inputs of
//! 1e-6, 1, 1e6 and 1e15, and rows of A scaled by 10^U(-3,3). A correct
//! stage passes; zeros and an output with a misplaced term fail.

use mage_common::op::HostBuf;
use mage_common::scale::{SCALES, check_on, rows_scaled, scaled};
use mage_matmul::{OP, STAGES};

/// The product with rows `p` and `p + 1` of B swapped: every output has
/// two terms misplaced.
fn misplaced(dims: &[u32], inputs: &[HostBuf], p: usize) -> Vec<f32> {
    let (n, k) = (dims[1] as usize, dims[2] as usize);
    let mut b = inputs[1].as_f32().to_vec();
    let q = (p + 1) % k;
    for j in 0..n {
        b.swap(p * n + j, q * n + j);
    }
    let swapped = vec![inputs[0].clone(), HostBuf::F32(b)];
    (OP.reference)(dims, &swapped).values.iter().map(|v| *v as f32).collect()
}

fn check_scales(dims: &[u32]) {
    let base = OP.generate(dims, 41);
    let mut data: Vec<(String, Vec<HostBuf>)> = SCALES.iter().map(|&s| (format!("scale {s:e}"), scaled(&base, &[0, 1], s))).collect();
    data.push(("rows of A scaled by 10^U(-3,3)".into(), rows_scaled(&base, 0, dims[2] as usize, 5)));
    for (what, inputs) in &data {
        let wrong = misplaced(dims, inputs, 0);
        for stage in STAGES.iter().filter(|s| (s.supports)(dims)) {
            check_on(&OP, stage, dims, inputs, &wrong, 0.9).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}

#[test]
fn every_stage_holds_its_tolerance_at_every_scale() {
    check_scales(&[64, 64, 64]);
}

#[test]
fn every_stage_holds_its_tolerance_at_every_scale_on_ragged_shapes() {
    check_scales(&[33, 65, 17]);
}

/// Inputs whose terms pass FP32's range are refused as such, not blamed on a stage.
#[test]
fn inputs_beyond_fp32_are_a_range_error() {
    let dims = [8, 8, 8];
    let inputs = scaled(&OP.generate(&dims, 1), &[0, 1], 1e20);
    let reference = (OP.reference)(&dims, &inputs);
    let e = OP.check_range(&dims, &inputs, &reference).unwrap_err();
    assert!(e.contains("beyond FP32's range"), "{e}");
    let fine = scaled(&OP.generate(&dims, 1), &[0, 1], 1e15);
    OP.check_range(&dims, &fine, &(OP.reference)(&dims, &fine)).unwrap();
}
