//! Running a stage on the emulator, and checking its output against the
//! op's f64 reference.

use super::{Arg, CURRENT, HostBuf, OUTPUT_POISON, Op, Plan, Stage};
use crate::emu::{self, Region};
use crate::kernel::ArgValue;

/// Runs one stage on the emulator: the output is poisoned, every launch of
/// the plan runs in order, and the output comes back.
pub fn emulate(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<Vec<f32>, String> {
    op.check_inputs(dims, inputs)?;
    emulate_plan(op, &op.plan_for(stage, dims)?, dims, inputs)
}

/// Runs a plan on the emulator without asking whether the stage supports
/// the shape (tests use this to show what a missing guard would do).
pub fn emulate_plan(op: &Op, plan: &Plan, dims: &[u32], inputs: &[HostBuf]) -> Result<Vec<f32>, String> {
    let mut out = vec![f32::from_bits(OUTPUT_POISON); op.output_len(dims)];
    let mut scratch: Vec<Vec<f32>> = plan.scratch.iter().map(|n| vec![f32::from_bits(OUTPUT_POISON); *n]).collect();
    let mut regions: Vec<Region> = op
        .inputs
        .iter()
        .zip(inputs)
        .map(|(spec, b)| Region { name: spec.role.to_string(), start: b.as_ptr() as usize, bytes: b.byte_len(), writable: false })
        .collect();
    // Each output its own region: a kernel writing past its part into the
    // next output's is caught as an out-of-bounds store.
    let offsets = op.output_offsets(dims);
    let base = out.as_mut_ptr() as usize;
    for (i, o) in op.outputs.iter().enumerate() {
        let name = if op.outputs.len() == 1 { "output".to_string() } else { o.role.to_string() };
        regions.push(Region { name, start: base + offsets[i] * 4, bytes: (offsets[i + 1] - offsets[i]) * 4, writable: true });
    }
    for (i, s) in scratch.iter_mut().enumerate() {
        regions.push(Region { name: format!("scratch{i}"), start: s.as_mut_ptr() as usize, bytes: s.len() * 4, writable: true });
    }
    for launch in &plan.launches {
        let args: Vec<ArgValue> = launch
            .args
            .iter()
            .map(|a| match *a {
                Arg::Input(i) => ArgValue::Ptr(inputs[i].as_ptr() as u64),
                Arg::Output(i) => ArgValue::Ptr((base + offsets[i] * 4) as u64),
                Arg::Scratch(i) => ArgValue::Ptr(scratch[i].as_ptr() as u64),
                Arg::U32(v) => ArgValue::U32(v),
                Arg::F32(v) => ArgValue::F32(v),
            })
            .collect();
        emu::launch_kernel(launch.kernel, &launch.config(), &args, &regions).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Runs a plan on the emulator and compares the output with the op's f64
/// reference under its tolerance; the error names the worst element.
pub fn check_plan(op: &Op, plan: &Plan, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    check_plan_with(op, plan, dims, inputs, (op.tolerance)(dims, inputs))
}

fn check_plan_with(
    op: &Op,
    plan: &Plan,
    dims: &[u32],
    inputs: &[HostBuf],
    tolerance: crate::numeric::Tolerance,
) -> Result<crate::numeric::Comparison, String> {
    let out = emulate_plan(op, plan, dims, inputs)?;
    let cmp = crate::numeric::compare(&out, &(op.reference)(dims, inputs), tolerance);
    if cmp.passed() { Ok(cmp) } else { Err(op.summarize(&cmp, dims)) }
}

/// Runs a stage on the emulator and compares its output with the op's f64
/// reference under the stage's tolerance (the op's, or its own where it is
/// outside the contract), after checking it supports the dims.
pub fn check_stage(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    op.check_inputs(dims, inputs)?;
    check_checked_inputs(op, stage, dims, inputs)
}

/// [`check_stage`] for inputs [`Op::check_inputs`] has passed.
fn check_checked_inputs(op: &Op, stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    let plan = op.plan_for(stage, dims)?;
    check_plan_with(op, &plan, dims, inputs, op.tolerance_for(stage.name, dims, inputs))
        .map_err(|e| format!("{} {} at {}: {e}", op.name, stage.name, Op::dims_label(dims)))
}

/// The nearest dims to `dims` that `stage` supports, changing only the
/// last dim (searching up, then down, within `max`): lets one generated
/// shape exercise every stage.
pub fn fit_last_dim(stage: &Stage, dims: &[u32], max: u32) -> Option<Vec<u32>> {
    let mut d = dims.to_vec();
    let last = d.len() - 1;
    let start = d[last];
    for w in (start..=max).chain((1..start).rev()) {
        d[last] = w;
        if (stage.supports)(&d) {
            return Some(d);
        }
    }
    None
}

/// [`check_stage`] for the stage `current` picks for these inputs.
pub fn check_current(op: &Op, dims: &[u32], inputs: &[HostBuf]) -> Result<crate::numeric::Comparison, String> {
    op.check_inputs(dims, inputs)?;
    let stage = op.dispatch(dims, inputs);
    check_checked_inputs(op, stage, dims, inputs).map_err(|e| format!("{CURRENT} → {e}"))
}
