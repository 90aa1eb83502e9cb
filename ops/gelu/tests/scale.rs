//! The tolerance follows the data, for every stage: x and bias of 1e-6, 1
//! and 1e6, |x| up to 30, and rows scaled by 10^U(-3,3). A correct stage
//! passes; zeros and an output whose bias is shifted by a column fail.

use mage_common::op::HostBuf;
use mage_common::op::Op;
use mage_common::scale::{check_on, rows_scaled, scaled};
use mage_gelu::{ERF, OP};

/// The output with the bias read one column off.
fn shifted(op: &Op, dims: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    let mut bias = inputs[1].as_f32().to_vec();
    bias.rotate_left(1);
    let moved = vec![inputs[0].clone(), HostBuf::F32(bias)];
    (op.reference)(dims, &moved).values.iter().map(|v| *v as f32).collect()
}

/// The tanh form's stages and the exact form's.
#[test]
fn every_stage_holds_its_tolerance_at_every_scale() {
    for op in [&OP, &ERF] {
        at_every_scale(op);
    }
}

fn at_every_scale(op: &Op) {
    for dims in [[8u32, 256], [3, 257]] {
        let base = op.generate(&dims, 51);
        let mut data: Vec<(String, Vec<HostBuf>)> =
            [1e-6f32, 1.0, 1e6, 120.0].iter().map(|&s| (format!("scale {s:e}"), scaled(&base, &[0, 1], s))).collect();
        data.push(("rows scaled by 10^U(-3,3)".into(), rows_scaled(&base, 0, dims[1] as usize, 5)));
        for (what, inputs) in &data {
            let wrong = shifted(op, &dims, inputs);
            let mut ran = 0;
            for stage in op.stages.iter().filter(|s| (s.supports)(&dims)) {
                // Where z is far below zero the output is 0 whatever the bias: the share is of the rest.
                check_on(op, stage, &dims, inputs, &wrong, 0.3).unwrap_or_else(|e| panic!("{} {what}: {e}", op.name));
                ran += 1;
            }
            assert!(ran > 0);
        }
    }
}
