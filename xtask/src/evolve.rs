//! `cargo xtask evolve`: a loop that proposes configurations of an op's
//! parameter space (see `mage_common::space`), measures each against the
//! incumbent and `current` in the same session on GPU kernel time, keeps or
//! rejects it by a paired rule, and writes down why.
//!
//! ```text
//! evolve matmul --dims 1024,1024,1024 --from mage-006 --generations 12 --namespace NAME
//! evolve --audit matmul [--emulate] [--namespace NAME]
//! evolve --report --namespace NAME [--compare results/X/comparison.json]
//! evolve --list matmul [--dims ...]
//! ```
//!
//! A generation: the proposer changes one knob of the incumbent, or, once
//! every one-knob change has been read, two of them together (a proposal
//! the space refuses for these dims is written to the ledger as pruned,
//! with the reason, and never launched); the candidate, the
//! incumbent and `current` are bound to the same uploaded inputs; the
//! candidate's output is checked against the f64 reference; the control
//! copy is read; burn-in pairs run unrecorded; 8 rounds of `C I K K I C`
//! (rotating) give per-round kernel-time ratios; the output is checked
//! again and the control read again. The candidate is kept only if the
//! median ratio against the incumbent is at most 0.99 and every round's
//! ratio is below 1.0, both checks passed and the control stayed within
//! 3% (else the generation is void and says so). Every generation is one
//! ledger line (`ledger`); `--report` renders them (`report`).

mod audit;
mod ledger;
mod measure;
mod propose;
mod report;
mod run;

use crate::compare::results_root;
use crate::outputs::namespace_dir;
use crate::report::table;
use ledger::{Entry, Ledger, Procedure, Start, file_name, now_utc};
use mage_common::control::CONTROL;
use mage_common::fixtures::DEFAULT_SEED;
use mage_common::op::Op;
use mage_common::space::Space;
use measure::{BURN_IN_PAIRS, Bench, ROUND_ORDERS, ROUNDS, calls_per_segment, order_text};
use propose::{CONTROL_LIMIT, KEEP_MAX, KEEP_MEDIAN, Proposer, Search};
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct EvolveArgs {
    /// The op whose space to search, audit or list (`matmul`, `layernorm`).
    pub op: Option<String>,
    /// Dims, comma separated; the op's default if omitted (with --audit: extra shapes besides the sweep's).
    #[arg(long)]
    pub dims: Option<String>,
    /// Start from this stage's point of the space (`mage-006`) or a configuration id.
    #[arg(long)]
    pub from: Option<String>,
    /// Generations to measure in this session (pruned proposals do not
    /// count); 12 if omitted.
    #[arg(long)]
    pub generations: Option<u32>,
    /// The evidence's name: the ledger is results/<NAME>/evolve-<op>-<shape>.jsonl.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Continue an existing ledger (it is refused otherwise, never overwritten).
    #[arg(long)]
    pub resume: bool,
    /// Seed of the generated inputs (the search, and --audit --emulate);
    /// 20260910 if omitted.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run every configuration against the reference instead of searching.
    #[arg(long)]
    pub audit: bool,
    /// With --audit: on the emulator at the space's small shapes.
    #[arg(long)]
    pub emulate: bool,
    /// Render every ledger of the namespace: a table, an SVG, a summary.
    #[arg(long)]
    pub report: bool,
    /// With --report: comparison.json files to take the best alternative from (repeatable).
    #[arg(long)]
    pub compare: Vec<PathBuf>,
    /// Print the op's space: knobs, configurations, stage points.
    #[arg(long)]
    pub list: bool,
}

pub fn evolve(a: &EvolveArgs) -> Result<(), String> {
    let space = || mage_runtime::spaces::find(a.op.as_deref().ok_or("name the op (`matmul`, `layernorm`)")?);
    if a.emulate && !a.audit {
        return Err("--emulate applies to --audit; the search measures on the GPU".into());
    }
    check_flags(a)?;
    match (a.audit, a.report, a.list) {
        (false, false, false) => search(space()?, a),
        (true, false, false) => run_audit(space()?, a),
        (false, true, false) => render(a),
        (false, false, true) => list(space()?, a),
        _ => Err("--audit, --report and --list are separate commands".into()),
    }
}

/// Refuses a flag the chosen command would ignore (`--list --compare F`).
fn check_flags(a: &EvolveArgs) -> Result<(), String> {
    let command = match (a.audit, a.report, a.list) {
        (true, false, false) if a.emulate => "--audit --emulate",
        (true, false, false) => "--audit",
        (false, true, false) => "--report",
        (false, false, true) => "--list",
        (false, false, false) => "the search",
        _ => return Ok(()),
    };
    // Each flag, whether it was given, and the commands it applies to.
    let flags: [(&str, bool, &[&str]); 7] = [
        ("--compare", !a.compare.is_empty(), &["--report"]),
        ("--from", a.from.is_some(), &["the search"]),
        ("--resume", a.resume, &["the search"]),
        ("--generations", a.generations.is_some(), &["the search"]),
        ("--namespace", a.namespace.is_some(), &["the search", "--audit", "--audit --emulate", "--report"]),
        // The audit on the emulator runs the space's own small shapes.
        ("--dims", a.dims.is_some(), &["the search", "--audit", "--list"]),
        ("--seed", a.seed.is_some(), &["the search", "--audit --emulate"]),
    ];
    match flags.iter().find(|(_, given, applies)| *given && !applies.contains(&command)) {
        Some((flag, _, applies)) => Err(format!("{flag} does not apply to {command}; it is for {}", applies.join(", "))),
        None => Ok(()),
    }
}

/// `evolve --list`: knobs, sizes, stage points, and every configuration
/// (with whether it fits the dims).
fn list(space: &Space, a: &EvolveArgs) -> Result<(), String> {
    let dims = space.op.dims_or_default(a.dims.as_deref())?;
    say!("{} space: {}", space.op.name, space.summary);
    for k in space.knobs {
        say!("  {:<10} {:<60} {}", k.name, k.values.join(" "), k.summary);
    }
    let configs = space.configs();
    say!(
        "{} combinations, {} built ({} kernel entries), {} fit {}",
        space.product().len(),
        configs.len(),
        space.kernels.len(),
        configs.iter().filter(|c| (space.fits)(c, &dims).is_ok()).count(),
        Op::dims_label(&dims)
    );
    for p in space.stages {
        say!("  {} = {} ({})", p.stage, p.config, p.likeness);
    }
    let rows: Vec<Vec<String>> = configs
        .iter()
        .map(|c| match (space.fits)(c, &dims) {
            Ok(()) => {
                let plan = (space.plan)(c, &dims);
                let kernels: Vec<&str> = plan.launches.iter().map(|l| l.kernel.name).collect();
                vec![space.id(c), kernels.join(" + "), plan.launches[0].shared_bytes.to_string(), "fits".into()]
            }
            Err(why) => vec![space.id(c), "-".into(), "-".into(), why],
        })
        .collect();
    say!("{}", table(&["configuration", "kernels", "shared B", Op::dims_label(&dims).as_str()], &rows));
    Ok(())
}

fn run_audit(space: &Space, a: &EvolveArgs) -> Result<(), String> {
    let dir = match &a.namespace {
        Some(ns) => namespace_dir(&results_root(), ns)?,
        None => crate::outputs::temp_dir("the audit")?.join("mage-evolve-audit"),
    };
    // The audit is written after every configuration ran: a destination
    // that cannot take it is found now.
    crate::outputs::check_writable(&dir, "--namespace")?;
    if a.emulate {
        let rows = space.audit_on_emulator(space.audit_dims, a.seed.unwrap_or(DEFAULT_SEED))?;
        return audit::finish(space, "emulator", &rows, &dir);
    }
    let op = space.op;
    let mut shapes: Vec<(Vec<u32>, &str)> = op.sweep.iter().map(|w| (w.dims.to_vec(), w.generator)).collect();
    if let Some(d) = &a.dims {
        shapes.push((op.parse_dims(d)?, op.generators[0].name));
    }
    let _lock = crate::lock::GpuLock::acquire("evolve --audit")?;
    let gpu = crate::runner::open_gpu()?;
    let rows = audit::on_gpu(&gpu, space, &shapes)?;
    audit::finish(space, "gpu", &rows, &dir)
}

/// `evolve --report`: every ledger of the namespace as markdown and SVG,
/// and the summary of all of them.
fn render(a: &EvolveArgs) -> Result<(), String> {
    let ns = a.namespace.as_deref().ok_or("--report needs --namespace")?;
    let dir = namespace_dir(&results_root(), ns)?;
    let comparisons = a
        .compare
        .iter()
        .map(|p| {
            let text = crate::outputs::read_text(p, Some("--compare"))?;
            Ok((p.display().to_string(), serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("evolve-") && n.ends_with(".jsonl")))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!("{} holds no evolve-*.jsonl ledger", dir.display()));
    }
    let ledgers = paths.iter().map(|p| Ledger::read(p)).collect::<Result<Vec<_>, _>>()?;
    let mut rows = vec![];
    for l in &ledgers {
        let start = l.starts().next().ok_or(format!("{} has no start entry", l.path.display()))?;
        let alt = report::best_alternative(&comparisons, &start.op, &start.dims);
        let md = report::markdown(l, alt.as_ref())?;
        mage_common::fixtures::write_atomic(&l.path.with_extension("md"), md.as_bytes())?;
        report::svg(l, alt.as_ref(), &l.path.with_extension("svg"))?;
        say!("{}\n{}", l.path.with_extension("md").display(), l.path.with_extension("svg").display());
        rows.push((l, alt));
    }
    let summary = format!("# evolve runs in `{ns}`\n\n{}", report::summary(&rows));
    let path = dir.join("evolve-summary.md");
    mage_common::fixtures::write_atomic(&path, summary.as_bytes())?;
    say!("{summary}\n{}", path.display());
    Ok(())
}

/// The search.
fn search(space: &'static Space, a: &EvolveArgs) -> Result<(), String> {
    let op = space.op;
    let dims = space.op.dims_or_default(a.dims.as_deref())?;
    let ns = a.namespace.as_deref().ok_or("name the evidence: --namespace NAME")?;
    let path = namespace_dir(&results_root(), ns)?.join(file_name(op.name, &dims));
    let mut ledger = Ledger::open(&path, a.resume, op.name, &dims)?;
    // The ledger's first line is written after the baseline's GPU work.
    crate::outputs::check_writable(path.parent().expect("results/NAME/file"), "--namespace")?;
    let resumed_from = ledger.starts().next().map(|s| s.from.clone());
    let from = match (&a.from, &resumed_from) {
        (Some(f), Some(r)) if f != r => return Err(format!("{} started from {r}, not {f}", path.display())),
        (_, Some(r)) => r.clone(),
        (Some(f), None) => f.clone(),
        (None, None) => return Err("start from a stage's point or a configuration: --from mage-006".into()),
    };
    let incumbent = if ledger.entries.is_empty() { space.resolve(&from)? } else { ledger.state(space)?.incumbent };
    space.valid(&incumbent, &dims).map_err(|e| format!("{} does not fit {}: {e}", space.id(&incumbent), Op::dims_label(&dims)))?;

    let _lock = crate::lock::GpuLock::acquire("evolve")?;
    let gpu = crate::runner::open_gpu()?;
    let clocks_start = gpu.clocks();
    eprintln!("{} {}: inputs and the f64 reference", op.name, Op::dims_label(&dims));
    let seed = a.seed.unwrap_or(DEFAULT_SEED);
    let inputs = op.generate(&dims, seed);
    let reference = op.reference_on_all_cores(&dims, &inputs);
    let device_inputs = gpu.upload(&inputs)?;
    let control_dims = CONTROL.default_dims;
    let control_inputs = gpu.upload(&CONTROL.generate(control_dims, 0))?;
    let control = gpu.prepare(&CONTROL, &(CONTROL.stages[0].plan)(control_dims), control_dims, &control_inputs)?;
    let mut bench = Bench {
        gpu: &gpu,
        op,
        dims: &dims,
        inputs: &device_inputs,
        reference: &reference,
        tolerance: (op.tolerance)(&dims, &inputs),
        control,
        calls: 0,
    };
    let current_stage = op.dispatch(&dims, &inputs);
    let current = bench.prepare(&(current_stage.plan)(&dims))?;
    let first = bench.check_under(&current, op.tolerance_for(current_stage.name, &dims, &inputs))?;
    if !first.passed {
        return Err(format!("current ({}) fails the reference: {}", current_stage.name, first.summary));
    }
    let incumbent_plan = (space.plan)(&incumbent, &dims);
    let (twin, inc) = (bench.prepare(&incumbent_plan)?, bench.prepare(&incumbent_plan)?);
    let checked = bench.check(&inc)?;
    if !checked.passed {
        return Err(format!("the incumbent {} fails the reference: {}", space.id(&incumbent), checked.summary));
    }
    bench.calls = calls_per_segment(bench.quick_us(&inc)?);
    eprintln!("baseline: the incumbent against itself and current, {} calls a segment", bench.calls);
    let baseline = bench.rounds(&twin, &inc, &current)?;
    drop((twin, inc));

    let session = ledger.next_session();
    let fitting = space.configs().iter().filter(|c| (space.fits)(c, &dims).is_ok()).count();
    let ptx_sha256 = crate::ops::ptx_sha256([op.package, "mage-common"])?;
    let environment = serde_json::json!({
        "device": gpu.info(),
        "clocks_start": clocks_start,
        "commit": mage_runtime::BUILD_COMMIT,
        "toolchain": mage_runtime::BUILD_RUSTC,
        "ptxas_snapshots": mage_toolchain::PTXAS_VERSION,
        "ptx_sha256": ptx_sha256,
        "seed": seed,
    });
    ledger.append(Entry::Start(Box::new(Start {
        session,
        op: op.name.into(),
        dims: dims.clone(),
        from: from.clone(),
        incumbent: space.id(&incumbent),
        current_stage: current_stage.name.into(),
        proposer: Search::default().name().into(),
        space_configurations: space.configs().len(),
        fitting_configurations: fitting,
        procedure: Procedure {
            instrument: "CUPTI kernel activity records (CONCURRENT_KERNEL): per-call sum of kernel durations, hot L2".into(),
            rounds: ROUNDS,
            round_orders: ROUND_ORDERS.iter().map(order_text).collect(),
            burn_in_pairs: BURN_IN_PAIRS,
            calls_per_segment: bench.calls,
            keep_median_at_most: KEEP_MEDIAN,
            keep_max_below: KEEP_MAX,
            control: format!(
                "a {} MiB device copy kernel, median of 20 calls, at the start and the end of each generation",
                control_dims[0] / (1 << 18)
            ),
            control_limit: CONTROL_LIMIT,
        },
        baseline: Some(baseline),
        environment,
        started_utc: now_utc(),
    })))?;
    say!("ledger: {}", path.display());

    let mut measurer = measure::OnGpu { bench: &bench, current: &current, space };
    match run::run(space, &dims, session, &mut ledger, &mut Search::default(), &mut measurer, a.generations.unwrap_or(12))? {
        run::Ended::Done { measured } => say!("{measured} generations measured"),
        run::Ended::Exhausted { measured, incumbent } => say!(
            "{measured} generations measured; every one-knob change of {incumbent}, and every pair of them, has been tried: a local optimum of this space"
        ),
    }
    say!("{}", report::progress_table(&ledger));
    say!("ledger: {}\nrender: evolve --report --namespace {ns}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_of_a_run_is_named_by_op_and_shape() {
        assert_eq!(file_name("matmul", &[1024, 1024, 1024]), "evolve-matmul-1024x1024x1024.jsonl");
        assert_eq!(file_name("layernorm", &[4096, 768]), "evolve-layernorm-4096x768.jsonl");
    }

    #[test]
    fn runs_start_from_the_stages_the_issue_names() {
        let mm = mage_runtime::spaces::find("matmul").unwrap();
        for d in [[1024, 1024, 1024], [4096, 4096, 4096]] {
            mm.valid(&mm.resolve("mage-006").unwrap(), &d).unwrap();
        }
        let ln = mage_runtime::spaces::find("layernorm").unwrap();
        for d in [[4096, 768], [4096, 4096]] {
            ln.valid(&ln.resolve("mage-002").unwrap(), &d).unwrap();
        }
        assert!(mage_runtime::spaces::find("gelu").unwrap_err().contains("these ops do: matmul, layernorm"));
    }
}
