//! `run`, `sweep`, `fixtures` and `gpu-check`.

use crate::report::{CurrentPick, INSTRUMENTS, RunReport, SweepReport, runs_table};
use crate::{RunArgs, SweepArgs, ops};
use indicatif::{ProgressBar, ProgressStyle};
use mage_common::fixtures::{self, CaseSpec, write_atomic};
use mage_common::numeric::{Tolerance, compare};
use mage_common::op::{self, CURRENT, HostBuf, Op, Picked, Stage};
use mage_runtime::gpu::{Gpu, TimingConfig};
use std::path::PathBuf;

/// The GPU with every op's PTX loaded.
pub fn open_gpu() -> Result<Gpu, String> {
    let mut gpu = Gpu::open()?;
    gpu.load_module("mage-common", ops::ptx("mage-common")?)?;
    for op in ops::all() {
        gpu.load_module(op.package, ops::ptx(op.package)?)?;
    }
    Ok(gpu)
}

/// Checks, then (on a GPU) times, then checks again.
#[allow(clippy::too_many_arguments)]
fn run_one(
    gpu: Option<&Gpu>,
    op: &Op,
    picked: Picked,
    dims: &[u32],
    generator: &str,
    inputs: &[HostBuf],
    source: &str,
    reference: &[f64],
    tol: Tolerance,
    timing: bool,
) -> Result<(RunReport, Vec<f32>), String> {
    let stage = picked.stage;
    op.check_inputs(dims, inputs)?;
    if !(stage.supports)(dims) {
        return Err(format!("{} {} does not support dims {}", op.name, stage.name, Op::dims_label(dims)));
    }
    let plan = (stage.plan)(dims);
    let (min_bytes, _) = (op.cost)(dims);
    let mut report = RunReport {
        op: op.name.into(),
        stage: stage.name.into(),
        by_current: picked.by_current,
        dims: dims.to_vec(),
        generator: generator.into(),
        inputs: source.into(),
        machine: if gpu.is_some() { "gpu".into() } else { "emulator".into() },
        check: compare(&[], &[], tol),
        check_after_timing: None,
        timing: None,
        min_bytes,
        effective_gb_per_s: None,
    };
    let out = match gpu {
        None => {
            let out = op::emulate_plan(op, &plan, dims, inputs)?;
            report.check = compare(&out, reference, tol);
            out
        }
        Some(gpu) => {
            let device_inputs = gpu.upload(inputs)?;
            let out = gpu.run(op, &plan, dims, &device_inputs)?;
            report.check = compare(&out, reference, tol);
            if report.check.passed() && timing {
                let timing = gpu.time(op, &plan, dims, &device_inputs, &TimingConfig::default())?;
                report.effective_gb_per_s = timing.kernel_us.map(|us| min_bytes as f64 / us / 1e3);
                report.timing = Some(timing);
                let again = gpu.run(op, &plan, dims, &device_inputs)?;
                report.check_after_timing = Some(compare(&again, reference, tol));
            }
            out
        }
    };
    Ok((report, out))
}

fn dims_or_default(op: &Op, dims: Option<&str>) -> Result<Vec<u32>, String> {
    match dims {
        Some(d) => op.parse_dims(d),
        None => Ok(op.default_dims.to_vec()),
    }
}

/// `cargo xtask run`.
pub fn run(a: &RunArgs) -> Result<(), String> {
    let op = ops::find(&a.op)?;
    let stage_name = a.stage.as_deref().unwrap_or(CURRENT);
    op.check_stage_name(stage_name)?;
    let (dims, generator, inputs, source) = match &a.case {
        Some(dir) => {
            let case = fixtures::read_case(dir, op)?;
            if let Some(d) = &a.dims {
                if op.parse_dims(d)? != case.spec.dims {
                    return Err(format!("--dims {d} disagrees with case {} ({})", dir.display(), Op::dims_label(&case.spec.dims)));
                }
            }
            let generator = op.generator(Some(&case.spec.generator))?.name;
            (case.spec.dims.clone(), generator, case.inputs, format!("case {}", dir.display()))
        }
        None => {
            let dims = dims_or_default(op, a.dims.as_deref())?;
            let generator = op.generator(a.generator.as_deref())?;
            let inputs = (generator.generate)(&dims, a.seed);
            (dims, generator.name, inputs, format!("generated ({}), seed {}", generator.name, a.seed))
        }
    };
    op.check_inputs(&dims, &inputs)?;
    let picked = op.pick(stage_name, &dims, &inputs)?;
    let _lock = if a.emulate { None } else { Some(crate::lock::GpuLock::acquire("run")?) };
    let gpu = if a.emulate { None } else { Some(open_gpu()?) };
    let reference = (op.reference)(&dims, &inputs);
    let tol = (op.tolerance)(&dims, &inputs);
    let (report, out) = run_one(gpu.as_ref(), op, picked, &dims, generator, &inputs, &source, &reference, tol, !a.no_timing)?;
    if let Some(path) = &a.out {
        fixtures::write_f32(path, &out, true)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    } else {
        println!("{} on the {}, inputs {}", op.name, report.machine, report.inputs);
        println!("{}", runs_table(std::slice::from_ref(&report)));
        println!("check: {}", report.check.summary(&dims));
        if gpu.is_some() {
            println!("kernel µs: {}\nspan µs: {}\nb2b µs: {}", INSTRUMENTS.kernel_us, INSTRUMENTS.span_us, INSTRUMENTS.back_to_back_us);
        }
    }
    if report.correct() { Ok(()) } else { Err(format!("{} {} is wrong: {}", op.name, picked.label(), report.check.summary(&dims))) }
}

/// `cargo xtask sweep`.
pub fn sweep(a: &SweepArgs) -> Result<(), String> {
    let op = ops::find(&a.op)?;
    let mut workloads: Vec<(Vec<u32>, &'static str)> = op
        .sweep
        .iter()
        .map(|w| (w.dims.to_vec(), op.generator(Some(w.generator)).map(|g| g.name)))
        .map(|(d, g)| g.map(|g| (d, g)))
        .collect::<Result<_, _>>()?;
    for d in &a.dims {
        let d = (op.parse_dims(d)?, op.generator(a.generator.as_deref())?.name);
        if !workloads.contains(&d) {
            workloads.push(d);
        }
    }
    let stages: Vec<&Stage> =
        if a.stage.is_empty() { op.stages.to_vec() } else { a.stage.iter().map(|s| op.stage(s)).collect::<Result<_, _>>()? };
    let _lock = if a.emulate { None } else { Some(crate::lock::GpuLock::acquire("sweep")?) };
    let gpu = if a.emulate { None } else { Some(open_gpu()?) };
    let clocks_start = gpu.as_ref().map(|g| g.clocks());
    let work: Vec<(&(Vec<u32>, &str), &Stage)> =
        workloads.iter().flat_map(|w| stages.iter().filter(|s| (s.supports)(&w.0)).map(move |s| (w, *s))).collect();
    let bar = ProgressBar::new(work.len() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}").unwrap());
    let mut runs = vec![];
    let mut current = vec![];
    let mut inputs_for: Option<((Vec<u32>, &str), Vec<HostBuf>, Vec<f64>, Tolerance)> = None;
    for (workload, stage) in work {
        let (dims, generator) = (&workload.0, workload.1);
        bar.set_message(format!("{} {}", op.workload_label(dims, generator), stage.name));
        if inputs_for.as_ref().is_none_or(|(w, ..)| w != workload) {
            let inputs = (op.generator(Some(generator))?.generate)(dims, fixtures::DEFAULT_SEED);
            let reference = (op.reference)(dims, &inputs);
            let tol = (op.tolerance)(dims, &inputs);
            current.push(CurrentPick { dims: dims.clone(), generator: generator.into(), stage: op.dispatch(dims, &inputs).name.into() });
            inputs_for = Some((workload.clone(), inputs, reference, tol));
        }
        let (_, inputs, reference, tol) = inputs_for.as_ref().unwrap();
        let source = format!("generated ({generator}), seed {}", fixtures::DEFAULT_SEED);
        let picked = Picked { stage, by_current: false };
        let (report, _) = run_one(gpu.as_ref(), op, picked, dims, generator, inputs, &source, reference, *tol, true)?;
        runs.push(report);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let report = SweepReport {
        op: op.name.into(),
        machine: if gpu.is_some() { "gpu".into() } else { "emulator".into() },
        device: gpu.as_ref().map(|g| g.info()),
        clocks_start,
        clocks_end: gpu.as_ref().map(|g| g.clocks()),
        ptx_sha256: fixtures::sha256_hex(ops::ptx(op.package).unwrap_or_default().as_bytes()),
        commit: mage_runtime::BUILD_COMMIT.into(),
        instruments: INSTRUMENTS,
        current,
        runs,
    };
    let json = serde_json::to_string_pretty(&report).unwrap();
    let results = a.results.clone().unwrap_or_else(crate::compare::results_root);
    std::fs::create_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let path = results.join(format!("sweep-{}-{}-{stamp}.json", op.name, report.machine));
    write_atomic(&path, json.as_bytes())?;
    if let Some(ns) = &a.namespace {
        let dir = results.join(ns);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        write_atomic(&dir.join(format!("sweep-{}.json", op.name)), json.as_bytes())?;
    }
    if a.json {
        println!("{json}");
    } else {
        if let Some(d) = &report.device {
            println!("{} ({} SMs), driver {}", d.name, d.sm_count, d.driver_version);
        }
        println!("{}", runs_table(&report.runs));
        for c in &report.current {
            println!("{CURRENT} at {}: {}", op.workload_label(&c.dims, &c.generator), c.stage);
        }
        if gpu.is_some() {
            println!("\nkernel µs: {}\nspan µs: {}\nb2b µs: {}", INSTRUMENTS.kernel_us, INSTRUMENTS.span_us, INSTRUMENTS.back_to_back_us);
        }
        println!("results: {}", path.display());
    }
    let wrong: Vec<String> =
        report.runs.iter().filter(|r| !r.correct()).map(|r| format!("{} {}", Op::dims_label(&r.dims), r.stage)).collect();
    if wrong.is_empty() { Ok(()) } else { Err(format!("wrong results: {}", wrong.join(", "))) }
}

/// `cargo xtask fixtures`.
pub fn fixtures(
    name: &str,
    dims: Option<&str>,
    generator: Option<&str>,
    seed: u64,
    constant: Option<f32>,
    out: Option<PathBuf>,
) -> Result<(), String> {
    let op = ops::find(name)?;
    let dims = dims_or_default(op, dims)?;
    let generator = op.generator(generator)?;
    let mut inputs = (generator.generate)(&dims, seed);
    let distribution = match constant {
        Some(c) => {
            if let Some(HostBuf::F32(v)) = inputs.first_mut() {
                v.fill(c);
            }
            format!("{} constant {c}; otherwise {}", op.inputs[0].role, generator.summary)
        }
        None => generator.summary.to_string(),
    };
    let dir = out.unwrap_or_else(|| {
        let suffix = if constant.is_some() { "-constant" } else { "" };
        let label = op.workload_label(&dims, generator.name).replace(' ', "-");
        mage_common::tools::workspace_root().join("fixtures").join(format!("{}-{label}{suffix}", op.name))
    });
    let multi = op.generators.len() > 1;
    let spec = CaseSpec {
        op: op.name.into(),
        dims,
        seed,
        warmup: 20,
        iterations: 100,
        distribution,
        generator: if multi { generator.name.into() } else { String::new() },
    };
    fixtures::write_case(&dir, op, &spec, &inputs)?;
    println!("{}", dir.display());
    Ok(())
}

/// `cargo xtask gpu-check`: the numerical contract measured, then every
/// stage on the GPU against the emulator on small shapes.
pub fn gpu_check(json: bool) -> Result<(), String> {
    let _lock = crate::lock::GpuLock::acquire("gpu-check")?;
    let gpu = open_gpu()?;
    let mut lines = vec![];
    let mut failures = vec![];
    for probe in crate::probes::all() {
        let r = probe.measure(&gpu)?;
        if !r.within_bound {
            failures.push(format!("{}: {:.3e} > bound {:.3e}", r.name, r.max_rel_err, r.bound));
        }
        lines.push(serde_json::to_value(&r).unwrap());
        if !json {
            println!(
                "contract {:<22} max rel err vs host {:.3e} (bound {:.3e}) {}",
                r.name,
                r.max_rel_err,
                r.bound,
                if r.within_bound { "ok" } else { "EXCEEDED" }
            );
        }
    }
    for op in ops::all() {
        for stage in op.stages {
            for (dims, generator) in crate::probes::differential_shapes(op) {
                if !(stage.supports)(&dims) {
                    continue;
                }
                let inputs = (op.generator(Some(generator))?.generate)(&dims, 12345);
                let emu = op::emulate(op, stage, &dims, &inputs)?;
                let dev_in = gpu.upload(&inputs)?;
                let dev = gpu.run(op, &(stage.plan)(&dims), &dims, &dev_in)?;
                let magnitude = emu.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
                let bound = mage_common::numeric::differential_bound(crate::probes::contraction_terms(op, &dims), magnitude);
                let diff = emu
                    .iter()
                    .zip(&dev)
                    .map(|(a, b)| (*a as f64 - *b as f64).abs())
                    .fold(0f64, |m, d| if d.is_nan() { f64::INFINITY } else { m.max(d) });
                let identical = emu.iter().zip(&dev).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
                let ok = diff <= bound;
                if !ok {
                    failures.push(format!(
                        "{} {} {}: |gpu - emulator| {diff:.3e} > {bound:.3e}",
                        op.name,
                        stage.name,
                        Op::dims_label(&dims)
                    ));
                }
                let v = serde_json::json!({"op": op.name, "stage": stage.name, "dims": dims, "max_abs_diff": diff, "bound": bound, "bit_identical": identical, "elements": emu.len()});
                if !json {
                    println!(
                        "differential {:<10} {:<9} {:<9} max |gpu - emulator| {diff:.3e} (bound {bound:.3e}), {identical}/{} bit-identical {}",
                        op.name,
                        stage.name,
                        Op::dims_label(&dims),
                        emu.len(),
                        if ok { "ok" } else { "EXCEEDED" }
                    );
                }
                lines.push(v);
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&lines).unwrap());
    }
    if failures.is_empty() { Ok(()) } else { Err(failures.join("; ")) }
}
