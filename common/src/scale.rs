//! The checks that hold an op's tolerance to data of any scale: inputs
//! multiplied by 1e-6, 1, 1e6 and 1e15, and rows scaled by 10^U(-3,3). On
//! each, a correct stage passes, an output of zeros fails wherever the
//! reference is not zero, and an output with one term misplaced fails.
//! Each op's `tests/scale.rs` runs them on every stage.

use crate::fixtures::Rng;
use crate::numeric::compare;
use crate::op::{HostBuf, Op, Stage, check_stage};

/// The scales every contraction is checked at.
pub const SCALES: [f32; 4] = [1e-6, 1.0, 1e6, 1e15];

/// `inputs` with the f32 inputs numbered in `which` multiplied by `scale`.
pub fn scaled(inputs: &[HostBuf], which: &[usize], scale: f32) -> Vec<HostBuf> {
    let mut out = inputs.to_vec();
    for &i in which {
        out[i] = HostBuf::F32(inputs[i].as_f32().iter().map(|v| v * scale).collect());
    }
    out
}

/// Input `which` with each run of `row` consecutive values multiplied by
/// its own 10^U(-3,3), drawn from `seed`.
pub fn rows_scaled(inputs: &[HostBuf], which: usize, row: usize, seed: u64) -> Vec<HostBuf> {
    let mut r = Rng::stream(seed, 99);
    let mut out = inputs.to_vec();
    let values = inputs[which].as_f32();
    let factors: Vec<f32> = (0..values.len().div_ceil(row.max(1))).map(|_| 10f64.powf(6.0 * r.uniform() - 3.0) as f32).collect();
    out[which] = HostBuf::F32(values.iter().enumerate().map(|(i, v)| v * factors[i / row.max(1)]).collect());
    out
}

/// On `inputs`: `stage` passes under the op's tolerance for it; an output
/// of zeros fails on at least 90% of the elements whose reference is
/// above 2^-126 in magnitude; and `misplaced` (the reference of a computation with one term of
/// each output misplaced, as the op's test builds it, rounded to f32) fails
/// on at least `misplaced_share` of the elements. Returns a line for a
/// failure message.
pub fn check_on(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf], misplaced: &[f32], misplaced_share: f64) -> Result<(), String> {
    let at = format!("{} {} at {}", op.name, stage.name, Op::dims_label(dims));
    check_stage(op, stage, dims, inputs).map_err(|e| format!("a correct stage failed: {e}"))?;
    let reference = (op.reference)(dims, inputs);
    let tol = op.tolerance_for(stage.name, dims, inputs);
    // Below 2^-126 an FP32 output of 0 is as right as any (the stages
    // flush there and every tolerance allows 2^-126): those elements count
    // as zero.
    let nonzero = reference.values.iter().filter(|v| v.abs() > crate::numeric::FLUSHED).count();
    let zeros = compare(&vec![0.0; reference.len()], &reference, tol);
    if nonzero == 0 || (zeros.failures as f64) < 0.9 * nonzero as f64 {
        return Err(format!("{at}: an output of zeros fails on only {} of {nonzero} elements above 2^-126", zeros.failures));
    }
    let wrong = compare(misplaced, &reference, tol);
    if (wrong.failures as f64) < misplaced_share * reference.len() as f64 {
        return Err(format!(
            "{at}: an output with a misplaced term fails on only {} of {} elements (want {misplaced_share})",
            wrong.failures,
            reference.len()
        ));
    }
    Ok(())
}
