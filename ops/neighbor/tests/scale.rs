//! The tolerance holds on data of any scale, for every stage: x and w of
//! 1e-6, 1, 1e6 and 1e15, and rows of x scaled by 10^U(-3,3), on a uniform
//! and a power-law graph. A correct stage passes; zeros and an output with
//! a misplaced term fail.

use mage_common::op::HostBuf;
use mage_common::scale::{SCALES, check_on, rows_scaled, scaled};
use mage_neighbor::{OP, STAGES};

/// The first edge of every row reading the next node's row of x: every
/// row with an edge has one term misplaced.
fn misplaced(dims: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    let n = dims[0];
    let rowptr = inputs[2].as_u32();
    let mut indices = inputs[3].as_u32().to_vec();
    for i in 0..n as usize {
        if rowptr[i] < rowptr[i + 1] {
            let e = rowptr[i] as usize;
            indices[e] = (indices[e] + 1) % n;
        }
    }
    let mut moved = inputs.to_vec();
    moved[3] = HostBuf::U32(indices);
    (OP.reference)(dims, &moved).values.iter().map(|v| *v as f32).collect()
}

fn check_scales(dims: &[u32], generator: &str, share: f64) {
    let base = (OP.generator(Some(generator)).unwrap().generate)(dims, 47);
    let mut data: Vec<(String, Vec<HostBuf>)> = SCALES.iter().map(|&s| (format!("scale {s:e}"), scaled(&base, &[0, 1], s))).collect();
    data.push(("rows of x scaled by 10^U(-3,3)".into(), rows_scaled(&base, 0, dims[1] as usize, 5)));
    for (what, inputs) in &data {
        let wrong = misplaced(dims, inputs);
        for stage in STAGES.iter().filter(|s| (s.supports)(dims)) {
            check_on(&OP, stage, dims, inputs, &wrong, share).unwrap_or_else(|e| panic!("{generator} {what}: {e}"));
        }
    }
}

#[test]
fn every_stage_holds_its_tolerance_at_every_scale() {
    for stage in STAGES {
        assert!((stage.supports)(&[256, 8, 2048]), "{} does not support 256x8x2048: the scale test would skip it", stage.name);
    }
    // Rows without edges are exact zeros whatever the bug: the shares are
    // of the rows that have one.
    check_scales(&[256, 8, 2048], "uniform", 0.85);
    check_scales(&[256, 8, 2048], "power-law", 0.3);
    check_scales(&[37, 5, 301], "uniform", 0.85);
}
