//! The tolerance follows the data at the extremes, for every stage: rows of
//! mean 1e4 and spread 1, values of 1e-20, a variance far below eps, x as
//! large as the range check allows, and gamma and beta of 1e-6 and 1e6 that
//! cancel. A correct stage passes; zeros and an output with gamma and
//! beta a column off fail. Rows past FP32's range are refused as the input's fault.

use mage_common::fixtures::Rng;
use mage_common::op::HostBuf;
use mage_common::scale::check_on;
use mage_layernorm::{LARGEST_SQUARES, OP, STAGES};

fn inputs(rows: usize, width: usize, mean: f32, spread: f32, gamma: f32, beta: f32, seed: u64) -> Vec<HostBuf> {
    let mut r = Rng::new(seed);
    vec![
        HostBuf::F32(r.normal_vec(rows * width, mean, spread)),
        HostBuf::F32(r.normal_vec(width, 0.0, gamma)),
        HostBuf::F32(r.normal_vec(width, 0.0, beta)),
    ]
}

/// The output with gamma and beta read one column off: every element has
/// its terms misplaced.
fn swapped(dims: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    let mut moved = inputs.to_vec();
    for i in [1, 2] {
        let mut v = inputs[i].as_f32().to_vec();
        v.rotate_left(1);
        moved[i] = HostBuf::F32(v);
    }
    (OP.reference)(dims, &moved).values.iter().map(|v| *v as f32).collect()
}

#[test]
fn every_stage_holds_its_tolerance_at_the_extremes() {
    for width in [128u32, 768] {
        let dims = [8, width];
        let w = width as usize;
        // The largest spread the range check takes, with a margin of 4.
        let largest = ((LARGEST_SQUARES / 4.0 / (4.0 * w as f64)).sqrt()) as f32;
        let cases: Vec<(&str, Vec<HostBuf>)> = vec![
            ("mean 1e4, spread 1", inputs(8, w, 1e4, 1.0, 1.0, 1.0, 1)),
            ("mean 1e3, spread 1e-2", inputs(8, w, 1e3, 1e-2, 1.0, 1.0, 2)),
            ("values of 1e-20 (variance far below eps)", inputs(8, w, 0.0, 1e-20, 1.0, 1.0, 3)),
            ("spread 1e-4 (variance below eps)", inputs(8, w, 0.5, 1e-4, 1.0, 1.0, 4)),
            ("x near the range limit", inputs(8, w, 0.0, largest / 4.0, 1.0, 1.0, 5)),
            ("gamma and beta of 1e6", inputs(8, w, 0.0, 1.0, 1e6, 1e6, 6)),
            ("gamma and beta of 1e-6", inputs(8, w, 0.0, 1.0, 1e-6, 1e-6, 7)),
        ];
        for (what, data) in &cases {
            OP.check_range(&dims, data, &(OP.reference)(&dims, data)).unwrap_or_else(|e| panic!("{what}: {e}"));
            let wrong = swapped(&dims, data);
            let mut ran = 0;
            for stage in STAGES.iter().filter(|s| (s.supports)(&dims)) {
                check_on(&OP, stage, &dims, data, &wrong, 0.9).unwrap_or_else(|e| panic!("{what}: {e}"));
                ran += 1;
            }
            assert!(ran >= 4, "{ran} stages at {dims:?}");
        }
    }
}

/// x · gamma and beta cancelling: beta = -gamma·x̂ to f32 rounding, outputs
/// near zero made of terms near 1e6. An allowance relative to |ref| would
/// refuse correct outputs here; one relative to the terms does not.
#[test]
fn cancelling_gamma_and_beta_pass() {
    let dims = [1u32, 128];
    let mut data = inputs(1, 128, 0.0, 1.0, 1e6, 1.0, 8);
    let xhat: Vec<f64> = {
        let g1 = vec![HostBuf::F32(data[0].as_f32().to_vec()), HostBuf::F32(vec![1.0; 128]), HostBuf::F32(vec![0.0; 128])];
        (OP.reference)(&dims, &g1).values
    };
    let gamma = data[1].as_f32().to_vec();
    data[2] = HostBuf::F32(xhat.iter().zip(&gamma).map(|(x, g)| (-x * *g as f64) as f32).collect());
    for stage in STAGES.iter().filter(|s| (s.supports)(&dims)) {
        mage_common::op::check_stage(&OP, stage, &dims, &data).unwrap();
    }
}

#[test]
fn a_row_past_fp32_is_refused_as_the_inputs_range() {
    let dims = [2u32, 768];
    let mut x = vec![1.0f32; 2 * 768];
    x[768 + 5] = 3e37;
    let data = vec![HostBuf::F32(x), HostBuf::F32(vec![1.0; 768]), HostBuf::F32(vec![0.0; 768])];
    let e = OP.check_range(&dims, &data, &(OP.reference)(&dims, &data)).unwrap_err();
    assert_eq!(
        e,
        "a.bin (x) row 1 spreads too far for FP32: the sum of its squared deviations is 9.000e74 (values up to 3.000e37), \
         beyond 8.507e37; scale the input down"
    );
}

/// A gradient whose column sums pass FP32's range is refused as the
/// inputs' range, naming the output and the element (not a flat index).
#[test]
fn gradients_past_fp32_name_their_output() {
    let op = &mage_layernorm::BACKWARD;
    let dims = [64, 3];
    let mut inputs = (op.generators[0].generate)(&dims, 7);
    inputs[2] = HostBuf::F32(vec![1e37; 64 * 3]);
    let reference = (op.reference)(&dims, &inputs);
    let e = op.check_range(&dims, &inputs, &reference).unwrap_err();
    assert!(e.contains("output dgamma [") || e.contains("output dbeta ["), "{e}");
}
