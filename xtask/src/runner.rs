//! `run`, `sweep`, `fixtures` and `gpu-check`.

use crate::memory::{self, Machine};
use crate::report::{CurrentPick, INSTRUMENTS, RunReport, SweepReport, runs_table};
use crate::{FixturesArgs, RunArgs, SweepArgs, ops, outputs};
use indicatif::{ProgressBar, ProgressStyle};
use mage_common::fixtures::{self, CaseSpec, write_atomic};
use mage_common::home::{Home, home};
use mage_common::numeric::{Comparison, Reference, Tolerance, compare};
use mage_common::op::{self, CURRENT, HostBuf, Op, Picked, Stage};
use mage_runtime::gpu::{Gpu, TimingConfig};
use std::path::{Path, PathBuf};

/// The GPU with every op's PTX loaded.
/// Where to go when there is no GPU, naming the command the user runs
/// (`cargo xtask doctor` in a checkout, `./mage doctor` in a bundle).
fn emulate_hint() -> String {
    format!("run with --emulate for a CPU check (correctness only); see `{} doctor`, line `CUDA driver`", mage_common::home::command_name())
}

/// Whether there is a GPU at all (before any wait for the GPU lock): the
/// same error as [`open_gpu`]'s without a driver or device, for `command`
/// (`run`, `compare`); only the commands that have `--emulate` point to it.
pub fn gpu_present(command: &str) -> Result<(), String> {
    mage_runtime::gpu::context::driver_present().map_err(|e| {
        if ["run", "sweep", "evolve --audit"].contains(&command) {
            format!("{e}; {}", emulate_hint())
        } else {
            format!("{e}; {command} needs a GPU; see `{} doctor`, line `CUDA driver`", mage_common::home::command_name())
        }
    })
}

pub fn open_gpu() -> Result<Gpu, String> {
    let mut gpu = Gpu::open(0).map_err(|e| format!("{e}; {}", emulate_hint()))?;
    gpu.load_module("mage-common", ops::ptx("mage-common")?)?;
    for package in ops::packages() {
        gpu.load_module(package, ops::ptx(package)?)?;
    }
    Ok(gpu)
}

/// How outputs are checked against a reference.
#[derive(Clone, Copy, Debug)]
struct Check {
    tol: Tolerance,
    /// Whether the inputs may hold NaN or infinities (`--allow-nonfinite`).
    nonfinite: bool,
}

impl Check {
    /// [`compare`] under the tolerance. With `nonfinite`, an element whose
    /// reference is NaN or an infinity passes where the output holds the
    /// same (NaN for NaN, the same infinity) and fails otherwise.
    fn compare(&self, out: &[f32], reference: &Reference) -> Comparison {
        if !self.nonfinite {
            return compare(out, reference, self.tol);
        }
        let same = |o: f32, r: f64| (o.is_nan() && r.is_nan()) || (o.is_infinite() && o as f64 == r);
        // An element whose output matches a non-finite reference is checked as an exact zero.
        let mut matched = Reference { values: Vec::with_capacity(out.len()), magnitudes: reference.magnitudes.clone() };
        let mut outs = Vec::with_capacity(out.len());
        for (i, (&o, &r)) in out.iter().zip(&reference.values).enumerate() {
            let both = same(o, r);
            outs.push(if both { 0.0 } else { o });
            matched.values.push(if both { 0.0 } else { r });
            if both && !matched.magnitudes.is_empty() {
                matched.magnitudes[i] = 0.0;
            }
        }
        compare(&outs, &matched, self.tol)
    }
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
    reference: &Reference,
    check: Check,
    timing: bool,
) -> Result<(RunReport, Vec<f32>), String> {
    let stage = picked.stage;
    op.check_inputs(dims, inputs)?;
    let plan = op.plan_for(stage, dims)?;
    let (min_bytes, _) = (op.cost)(dims);
    let mut report = RunReport {
        op: op.name.into(),
        stage: stage.name.into(),
        by_current: picked.by_current,
        outside_contract: op.outside_contract(stage.name).map(|o| o.why.to_string()),
        dims: dims.to_vec(),
        generator: generator.into(),
        inputs: source.into(),
        machine: if gpu.is_some() { "gpu".into() } else { "emulator".into() },
        check: compare(&[], &Reference::default(), check.tol),
        check_after_timing: None,
        timing: None,
        min_bytes,
        effective_gb_per_s: None,
    };
    let out = match gpu {
        None => {
            let out = op::emulate_plan(op, &plan, dims, inputs)?;
            report.check = check.compare(&out, reference);
            out
        }
        Some(gpu) => {
            let device_inputs = gpu.upload(inputs)?;
            let out = gpu.run(op, &plan, dims, &device_inputs)?;
            report.check = check.compare(&out, reference);
            if report.check.passed() && timing {
                let timing = gpu.time(op, &plan, dims, &device_inputs, &TimingConfig::default())?;
                report.effective_gb_per_s = timing.kernel_us.map(|us| min_bytes as f64 / us / 1e3);
                report.timing = Some(timing);
                let again = gpu.run(op, &plan, dims, &device_inputs)?;
                report.check_after_timing = Some(check.compare(&again, reference));
            }
            out
        }
    };
    Ok((report, out))
}

/// Refuses work whose host memory need exceeds what the host has.
fn check_host_memory(need: &memory::Need) -> Result<(), String> {
    match memory::host_available() {
        Some(available) => memory::check_fits(need, available, "host"),
        None => Ok(()),
    }
}

/// Refuses work whose device memory need exceeds the GPU's free memory.
fn check_gpu_memory(gpu: &Gpu, need: &memory::Need) -> Result<(), String> {
    let (free, _) = gpu.memory()?;
    memory::check_fits(need, memory::Available { bytes: free, source: "free on the GPU, cuMemGetInfo" }, "GPU")
}

/// `--dims 4,127`-style text of dims.
fn dims_flag(dims: &[u32]) -> String {
    dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
}

/// `layernorm mage-006 does not support --dims 4,127 (stages that do: ...)`.
fn unsupported(op: &Op, stage: &Stage, dims: &[u32]) -> String {
    let able: Vec<&str> = op.stages.iter().filter(|s| (s.supports)(dims)).map(|s| s.name).collect();
    let able = if able.is_empty() { "none".to_string() } else { able.join(", ") };
    format!("{} {} does not support --dims {} (stages that do: {able})", op.name, stage.name, dims_flag(dims))
}

/// Dims parsed from `--dims`; where the text holds an `x` (`0x10`, which
/// may have been meant as hexadecimal), the error says how it was read:
/// dims are decimal, separated by `,` or `x`.
fn dims_hint(text: Option<&str>, parsed: Result<Vec<u32>, String>) -> Result<Vec<u32>, String> {
    parsed.map_err(|e| match text {
        Some(t) if t.contains('x') => {
            format!(
                "{e} (--dims {t} reads as {}: dims are decimal, separated by `,` or `x`)",
                t.split(['x', ',']).collect::<Vec<_>>().join(",")
            )
        }
        _ => e,
    })
}

/// `cargo xtask run`.
pub fn run(a: &RunArgs) -> Result<(), String> {
    let op = ops::find(&a.op)?;
    let stage_name = a.stage.as_deref().unwrap_or(CURRENT);
    op.check_stage_name(stage_name)?;
    // The dims and generator, from the case's input.json or the flags;
    // nothing is read or generated before every check below has passed.
    let (dims, generator) = match &a.case {
        Some(dir) => {
            let spec = fixtures::read_spec(dir, op)?;
            let d = dir.display();
            if let Some(text) = &a.dims
                && dims_hint(Some(text), op.parse_dims(text))? != spec.dims
            {
                return Err(format!("--dims {text} disagrees with case {d} ({})", Op::dims_label(&spec.dims)));
            }
            let generator = op.generator(Some(&spec.generator))?;
            if let Some(g) = &a.generator
                && op.generator(Some(g))?.name != generator.name
            {
                return Err(format!("--gen {g} disagrees with case {d}, drawn by `{}`", generator.name));
            }
            if let Some(seed) = a.seed {
                return Err(format!("--seed {seed} does not apply to --case {d}: its inputs are fixed (drawn with seed {})", spec.seed));
            }
            (spec.dims, generator)
        }
        None => (dims_hint(a.dims.as_deref(), op.dims_or_default(a.dims.as_deref()))?, op.generator(a.generator.as_deref())?),
    };
    if stage_name != CURRENT {
        let stage = op.stage(stage_name)?;
        if !(stage.supports)(&dims) {
            return Err(unsupported(op, stage, &dims));
        }
    }
    if a.force && a.out.is_none() {
        return Err("--force applies to --out (it replaces an existing file), and no --out is named".into());
    }
    let out_to = match &a.out {
        Some(out) => {
            let reads: Vec<PathBuf> =
                a.case.iter().flat_map(|dir| fixtures::case_files(op).into_iter().map(move |f| dir.join(f))).collect();
            Some(outputs::check_out_file(out, &reads, a.force)?)
        }
        None => None,
    };
    let machine = if a.emulate { Machine::Emulator } else { Machine::Gpu };
    let scratch = memory::scratch_bytes(op, stage_name, &dims);
    check_host_memory(&memory::host_need_run(op, &dims, scratch, machine))?;
    let _lock = if a.emulate { None } else { Some(crate::lock::GpuLock::acquire("run")?) };
    let gpu = if a.emulate { None } else { Some(open_gpu()?) };
    if let Some(gpu) = &gpu {
        check_gpu_memory(gpu, &memory::gpu_need(op, &dims, scratch))?;
    }
    let (inputs, expected, source) = match &a.case {
        Some(dir) => {
            let case = fixtures::read_case(dir, op)?;
            (case.inputs, case.expected, format!("case {}", dir.display()))
        }
        None => {
            let seed = a.seed.unwrap_or(fixtures::DEFAULT_SEED);
            ((generator.generate)(&dims, seed), None, format!("generated ({}), seed {seed}", generator.name))
        }
    };
    op.check_inputs(&dims, &inputs)?;
    if !a.allow_nonfinite {
        op.check_finite(&dims, &inputs).map_err(|e| {
            format!("{source}: {e}; pass --allow-nonfinite to run it and check the output's NaN and infinities against the reference")
        })?;
    }
    let picked = op.pick(stage_name, &dims, &inputs)?;
    let reference = op.reference_on_all_cores(&dims, &inputs);
    if !a.allow_nonfinite {
        op.check_range(&dims, &inputs, &reference).map_err(|e| format!("{source}: {e}"))?;
    }
    let check = Check { tol: op.tolerance_for(picked.stage.name, &dims, &inputs), nonfinite: a.allow_nonfinite };
    let (report, out) = run_one(gpu.as_ref(), op, picked, &dims, generator.name, &inputs, &source, &reference, check, !a.no_timing)?;
    // An independent implementation's output, where the case has one.
    let against_expected = expected.map(|e| check.compare(&out, &reference.with_values(e.iter().map(|v| *v as f64).collect())));
    // The report goes to stdout; where stdout fails (a full disk, a closed
    // pipe) the checks still decide, `--out` is still written, and the
    // failure is the error after that.
    let shown = (|| -> Result<(), String> {
        if a.json {
            say!("{}", serde_json::to_string_pretty(&report).unwrap());
        } else {
            say!("{} on the {}, inputs {}", op.name, report.machine, report.inputs);
            say!("{}", runs_table(std::slice::from_ref(&report)));
            say!("check: {}", op.summarize(&report.check, &dims));
            if let Some(c) = &against_expected {
                say!("expected.bin: {}", op.summarize(c, &dims));
            }
            if gpu.is_some() {
                say!("kernel µs: {}\nspan µs: {}\nb2b µs: {}", INSTRUMENTS.kernel_us, INSTRUMENTS.span_us, INSTRUMENTS.back_to_back_us);
            }
        }
        Ok(())
    })();
    if !report.correct() {
        return Err(format!("{} {} is wrong: {}", op.name, picked.label(), op.summarize(&report.check, &dims)));
    }
    if let Some(c) = against_expected.filter(|c| !c.passed()) {
        return Err(format!(
            "{source}: the output of {} {} disagrees with expected.bin: {}",
            op.name,
            picked.label(),
            op.summarize(&c, &dims)
        ));
    }
    if let Some(to) = &out_to {
        let bytes: Vec<u8> = out.iter().flat_map(|x| x.to_le_bytes()).collect();
        outputs::write_out(to, &bytes, a.force)?;
    }
    shown
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
    if a.force && a.namespace.is_none() {
        return Err("--force applies to --namespace (it replaces the namespace's sweep-<op>.json), and no --namespace is named".into());
    }
    if let Some(g) = a.generator.as_deref().filter(|_| a.dims.is_empty()) {
        return Err(format!(
            "--gen {g} applies to the extra --dims shapes, and none is named; the sweep's own shapes keep their generators"
        ));
    }
    if a.stage.iter().any(|s| s == CURRENT) {
        let names: Vec<&str> = op.stages.iter().map(|s| s.name).collect();
        return Err(format!(
            "--stage {CURRENT} is not a stage: sweep runs stages by name ({}) and reports what `{CURRENT}` picks at every shape",
            names.join(", ")
        ));
    }
    let mut asked = vec![];
    for d in &a.dims {
        let d = (dims_hint(Some(d), op.parse_dims(d))?, op.generator(a.generator.as_deref())?.name);
        asked.push(d.0.clone());
        if !workloads.contains(&d) {
            workloads.push(d);
        }
    }
    let stages: Vec<&Stage> =
        if a.stage.is_empty() { op.stages.to_vec() } else { a.stage.iter().map(|s| op.stage(s)).collect::<Result<_, _>>()? };
    if !a.stage.is_empty() {
        // A stage and shape both named, that cannot run together, would
        // otherwise be a row silently missing from the results.
        let refused: Vec<String> =
            asked.iter().flat_map(|d| stages.iter().filter(|s| !(s.supports)(d)).map(|s| unsupported(op, s, d))).collect();
        if !refused.is_empty() {
            return Err(format!("{}; nothing ran", refused.join("; ")));
        }
    }
    let work: Vec<(&(Vec<u32>, &str), &Stage)> =
        workloads.iter().flat_map(|w| stages.iter().filter(|s| (s.supports)(&w.0)).map(move |s| (w, *s))).collect();
    if work.is_empty() {
        let names: Vec<&str> = stages.iter().map(|s| s.name).collect();
        return Err(format!("{} {} supports none of the sweep's shapes; nothing ran", op.name, names.join(", ")));
    }
    let results = a.results.clone().unwrap_or_else(crate::compare::results_root);
    outputs::check_results_dir(&results)?;
    let evidence = match &a.namespace {
        Some(ns) => {
            let path = outputs::namespace_dir(&results, ns)?.join(format!("sweep-{}.json", op.name));
            outputs::check_evidence(&path, a.force)?;
            Some(path)
        }
        None => None,
    };
    // Both files are written after the whole sweep: where they cannot be,
    // that is found now.
    outputs::check_writable(&results, "--results")?;
    if let Some(dir) = evidence.as_ref().and_then(|p| p.parent()) {
        outputs::check_writable(dir, "--namespace")?;
    }
    let machine = if a.emulate { Machine::Emulator } else { Machine::Gpu };
    let scratch = |dims: &[u32]| stages.iter().filter(|s| (s.supports)(dims)).map(|s| memory::scratch_bytes(op, s.name, dims)).max();
    let largest = |need: &dyn Fn(&[u32]) -> memory::Need| {
        let runnable = workloads.iter().filter(|(d, _)| scratch(d).is_some());
        runnable.map(|(d, _)| need(d)).max_by_key(memory::Need::total).expect("the sweep has work")
    };
    check_host_memory(&largest(&|d| memory::host_need_run(op, d, scratch(d).unwrap_or(0), machine)))?;
    let _lock = if a.emulate { None } else { Some(crate::lock::GpuLock::acquire("sweep")?) };
    let gpu = if a.emulate { None } else { Some(open_gpu()?) };
    if let Some(gpu) = &gpu {
        check_gpu_memory(gpu, &largest(&|d| memory::gpu_need(op, d, scratch(d).unwrap_or(0))))?;
    }
    let clocks_start = gpu.as_ref().map(|g| g.clocks());
    let bar = ProgressBar::new(work.len() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}").unwrap());
    let mut runs = vec![];
    let mut current = vec![];
    let mut inputs_for: Option<((Vec<u32>, &str), Vec<HostBuf>, Reference)> = None;
    for (workload, stage) in work {
        let (dims, generator) = (&workload.0, workload.1);
        bar.set_message(format!("{} {}", op.workload_label(dims, generator), stage.name));
        if inputs_for.as_ref().is_none_or(|(w, ..)| w != workload) {
            let inputs = (op.generator(Some(generator))?.generate)(dims, fixtures::DEFAULT_SEED);
            let reference = op.reference_on_all_cores(dims, &inputs);
            current.push(CurrentPick { dims: dims.clone(), generator: generator.into(), stage: op.dispatch(dims, &inputs).name.into() });
            inputs_for = Some((workload.clone(), inputs, reference));
        }
        let (_, inputs, reference) = inputs_for.as_ref().unwrap();
        let source = format!("generated ({generator}), seed {}", fixtures::DEFAULT_SEED);
        let picked = Picked { stage, by_current: false };
        let check = Check { tol: op.tolerance_for(stage.name, dims, inputs), nonfinite: false };
        let (report, _) = run_one(gpu.as_ref(), op, picked, dims, generator, inputs, &source, reference, check, true)?;
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
    std::fs::create_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
    let path = write_stamped(&results, &format!("sweep-{}-{}", op.name, report.machine), json.as_bytes())?;
    if let Some(evidence) = &evidence {
        let dir = evidence.parent().expect("results/NAME/file");
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if a.force { write_atomic(evidence, json.as_bytes()) } else { fixtures::write_new(evidence, json.as_bytes()) }?;
    }
    if a.json {
        say!("{json}");
    } else {
        if let Some(d) = &report.device {
            say!("{} ({} SMs), driver {}", d.name, d.sm_count, d.driver_version);
        }
        say!("{}", runs_table(&report.runs));
        for c in &report.current {
            say!("{CURRENT} at {}: {}", op.workload_label(&c.dims, &c.generator), c.stage);
        }
        if gpu.is_some() {
            say!("\nkernel µs: {}\nspan µs: {}\nb2b µs: {}", INSTRUMENTS.kernel_us, INSTRUMENTS.span_us, INSTRUMENTS.back_to_back_us);
        }
        say!("results: {}", path.display());
    }
    let wrong: Vec<String> =
        report.runs.iter().filter(|r| !r.correct()).map(|r| format!("{} {}", Op::dims_label(&r.dims), r.stage)).collect();
    if wrong.is_empty() { Ok(()) } else { Err(format!("wrong results: {}", wrong.join(", "))) }
}

/// Writes `dir/NAME-<unix seconds>.json`, never over an earlier file (two
/// sweeps in one second get `-2`, `-3`, ...).
fn write_stamped(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    for n in 1..100 {
        let suffix = if n == 1 { String::new() } else { format!("-{n}") };
        let path = dir.join(format!("{name}-{stamp}{suffix}.json"));
        if !path.exists() && fixtures::write_new(&path, bytes).is_ok() {
            return Ok(path);
        }
    }
    Err(format!("{}: could not find a free name for {name}-{stamp}.json", dir.display()))
}

/// Where `fixtures` writes without `--out`: `fixtures/<op>-<workload>` of
/// the checkout, or of the bundle beside the binary.
fn default_case_dir(op: &Op, dims: &[u32], generator: &str, constant: bool) -> Result<PathBuf, String> {
    let root = match home() {
        Home::Checkout(root) => root.join("fixtures"),
        Home::Bundle(dir) => dir.join("fixtures"),
        Home::Loose => return Err("fixtures: name the case directory with --out (this binary is in no checkout or bundle)".into()),
    };
    let suffix = if constant { "-constant" } else { "" };
    Ok(root.join(format!("{}-{}{suffix}", op.name, op.workload_label(dims, generator).replace(' ', "-"))))
}

/// `cargo xtask fixtures`.
pub fn fixtures(a: &FixturesArgs) -> Result<(), String> {
    let op = ops::find(&a.op)?;
    let dims = dims_hint(a.dims.as_deref(), op.dims_or_default(a.dims.as_deref()))?;
    let generator = op.generator(a.generator.as_deref())?;
    if a.allow_nonfinite && a.constant.is_none() {
        return Err("--allow-nonfinite applies to --constant (generated inputs are always finite), and no --constant is named".into());
    }
    if let Some(c) = a.constant.filter(|c| !c.is_finite() && !a.allow_nonfinite) {
        return Err(format!("--constant {c} is not finite; pass --allow-nonfinite to write such a case (running it needs the flag too)"));
    }
    let dir = match &a.out {
        Some(dir) => dir.clone(),
        None => default_case_dir(op, &dims, generator.name, a.constant.is_some())?,
    };
    fixtures::case_destination(&dir, op, a.force)?;
    check_host_memory(&memory::host_need_fixtures(op, &dims))?;
    let mut inputs = (generator.generate)(&dims, a.seed);
    let distribution = match a.constant {
        Some(c) => {
            if let Some(HostBuf::F32(v)) = inputs.first_mut() {
                v.fill(c);
            }
            format!("{} constant {c}; otherwise {}", op.inputs[0].role, generator.summary)
        }
        None => generator.summary.to_string(),
    };
    let multi = op.generators.len() > 1;
    let spec = CaseSpec {
        op: op.name.into(),
        dims,
        seed: a.seed,
        warmup: 20,
        iterations: 100,
        distribution,
        generator: if multi { generator.name.into() } else { String::new() },
    };
    fixtures::create_case(&dir, op, &spec, &inputs, a.force)?;
    say!("{}", dir.display());
    Ok(())
}

/// `cargo xtask gpu-check`: the numerical contract measured, then every
/// stage on the GPU against the emulator on small shapes.
pub fn gpu_check(only: &[String], json: bool) -> Result<(), String> {
    let chosen: Vec<&'static Op> =
        if only.is_empty() { ops::all() } else { only.iter().map(|n| ops::find(n)).collect::<Result<_, _>>()? };
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
            say!(
                "contract {:<22} max rel err vs host {:.3e} (bound {:.3e}) {}",
                r.name,
                r.max_rel_err,
                r.bound,
                if r.within_bound { "ok" } else { "EXCEEDED" }
            );
        }
    }
    for op in chosen {
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
                // The GPU's output against the f64 reference, under the bound every other check uses.
                let against = compare(&dev, &op.reference_on_all_cores(&dims, &inputs), op.tolerance_for(stage.name, &dims, &inputs));
                let ok = diff <= bound && against.passed();
                if diff > bound {
                    failures.push(format!(
                        "{} {} {}: |gpu - emulator| {diff:.3e} > {bound:.3e}",
                        op.name,
                        stage.name,
                        Op::dims_label(&dims)
                    ));
                }
                if !against.passed() {
                    failures.push(format!(
                        "{} {} {}: the GPU's output against the reference: {}",
                        op.name,
                        stage.name,
                        Op::dims_label(&dims),
                        op.summarize(&against, &dims)
                    ));
                }
                let v = serde_json::json!({"op": op.name, "stage": stage.name, "dims": dims, "max_abs_diff": diff, "bound": bound, "bit_identical": identical, "elements": emu.len(), "reference_check": against});
                if !json {
                    say!(
                        "differential {:<10} {:<9} {:<9} max |gpu - emulator| {diff:.3e} (bound {bound:.3e}), {identical}/{} bit-identical, worst {:.3} of the tolerance {}",
                        op.name,
                        stage.name,
                        Op::dims_label(&dims),
                        emu.len(),
                        against.worst_ratio,
                        if ok { "ok" } else { "EXCEEDED" }
                    );
                }
                lines.push(v);
            }
        }
    }
    if json {
        say!("{}", serde_json::to_string_pretty(&lines).unwrap());
    }
    if failures.is_empty() { Ok(()) } else { Err(failures.join("; ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_gpu_without_a_gpu_points_to_the_emulator() {
        if Path::new("/proc/driver/nvidia/version").exists() {
            return; // a machine with a driver: nothing to check here
        }
        let e = open_gpu().err().expect("no driver, yet the GPU opened");
        assert!(e.starts_with("no CUDA driver or device:") && e.contains("--emulate"), "{e}");
    }

    #[test]
    fn the_parallel_reference_is_the_reference() {
        for (op, dims) in [(&mage_matmul::OP, vec![37, 20, 16]), (&mage_layernorm::OP, vec![29, 44])] {
            let inputs = op.generate(&dims, 3);
            assert_eq!(op.reference_on_all_cores(&dims, &inputs), (op.reference)(&dims, &inputs), "{}", op.name);
        }
        // An op whose other inputs depend on dim 0 falls back to its own reference.
        let op = &mage_neighbor::OP;
        let dims = op.default_dims.to_vec();
        let inputs = op.generate(&dims, 3);
        assert_eq!(op.reference_on_all_cores(&dims, &inputs), (op.reference)(&dims, &inputs));
    }
}
