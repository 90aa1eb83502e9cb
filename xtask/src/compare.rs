//! `cargo xtask compare`: Mage's stages beside PyTorch, torch.compile,
//! cuSPARSE and Triton, in one session on one GPU, on the same bytes.
//!
//! This side prepares a work directory (a fixture case per workload and a
//! manifest naming, for each, the stages to run and the pairs to judge) and
//! runs the Python harness (`python/mage_compare`). The harness launches
//! Mage's stages through the Python module `mage` (the same Rust launch
//! path as `run` and `sweep`), beside the Python implementations, checks
//! and times them all, and writes `comparison.json`. The evidence lands in
//! `results/<namespace>/`: `comparison.json`, `comparison.md` and
//! `manifest.json`, written atomically; an existing namespace is kept
//! unless `--force`.

use crate::ops;
use crate::report::{implementation_label, markdown_table, workload_label};
use mage_common::fixtures::{self, CaseSpec, write_atomic};
use mage_common::op::{CURRENT, Op};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args, Clone, Debug)]
pub struct CompareArgs {
    /// Operations to compare, each at its default dims: all if none is
    /// named, unless only `--at` workloads are asked for (then just those).
    pub ops: Vec<String>,
    /// The evidence's name: results/<NAME>/.
    #[arg(long)]
    pub namespace: String,
    /// Also these workloads, `OP:DIMS[:GENERATOR]` (`triangle:256,64`,
    /// `neighbor:4096,64,65536:power-law`); repeatable.
    #[arg(long = "at")]
    pub at: Vec<String>,
    /// Also every workload of each chosen op's sweep list (every op's when
    /// none is named, with or without `--at`).
    #[arg(long)]
    pub sweep: bool,
    /// Also judge stage A against stage B of an op, `OP:A:B`
    /// (`layernorm:mage-009:mage-007`), at each of its workloads where both
    /// run; repeatable. Beyond the op's default dims, where every stage runs
    /// and each is judged against the one before it, a workload runs
    /// `current` and the stages named here.
    #[arg(long = "judge")]
    pub judge: Vec<String>,
    /// `hot` (same buffers every call), `cold` (L2 evicted before each call) or `both`.
    #[arg(long, default_value = "both")]
    pub mode: String,
    /// Also judge pairs on event spans (labelled "launch path"; never a
    /// kernel verdict).
    #[arg(long)]
    pub span_verdicts: bool,
    /// Overwrite an existing namespace.
    #[arg(long)]
    pub force: bool,
    /// The Python with torch and triton.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// A smoke run of every phase with few samples: not evidence (plot refuses it).
    #[arg(long)]
    pub quick: bool,
}

/// Where results go and are read from: `results/` in the current
/// directory, in a checkout (whose root `cargo xtask` is run from) and in a
/// bundle alike; never a folder compiled into the binary.
pub fn results_root() -> PathBuf {
    PathBuf::from("results")
}

/// Checks `--python` names a program that exists and may run: a path to an
/// executable file, or a name found on `PATH`.
pub(crate) fn check_program(program: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let path = Path::new(program);
        return match path.metadata() {
            Err(e) => Err(format!("--python {program}: {e}")),
            Ok(m) if !m.is_file() => Err(format!("--python {program} is not a file")),
            Ok(_) if !runnable(path) => Err(format!("--python {program} is not executable")),
            Ok(_) => Ok(()),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| runnable(&d.join(program))) {
        Ok(())
    } else {
        Err(format!("--python {program} is not found on PATH (see `doctor`, line `python3`)"))
    }
}

/// The work folder of one comparison: removed when dropped (on every
/// error, or an interrupt), unless kept for the partial evidence in it.
struct WorkDir {
    path: PathBuf,
    keep: bool,
    _registered: mage_common::cleanup::Registered,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The directories Python needs on its path: the harness (`mage_compare`)
/// and the package `mage` with its extension (`mage/_C.abi3.so`). In a
/// bundle both sit in `python/`
/// beside the binary; in a checkout the extension is built first.
pub fn python_path() -> Result<Vec<PathBuf>, String> {
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join("python")));
    if let Some(dir) = beside.filter(|d| d.join("mage_compare").is_dir() && d.join(mage_toolchain::EXTENSION_FILE).is_file()) {
        return Ok(vec![dir]);
    }
    let root = mage_common::home::workspace_root();
    if !root.join("python/mage_compare").is_dir() {
        return Err("python/mage_compare not found beside the binary or in the checkout".into());
    }
    let ext_dir = mage_toolchain::build_python_extension(false)?;
    Ok(vec![root.join("python"), ext_dir])
}

/// One workload of the comparison.
struct Workload {
    op: &'static Op,
    dims: Vec<u32>,
    generator: &'static str,
    /// Run every stage and judge each against the one before it (the op's
    /// default dims); elsewhere only `current` and the judged stages run.
    history: bool,
}

/// Parses `OP:A:B`: judge stage A against stage B of OP.
fn parse_judge(text: &str) -> Result<(&'static Op, &'static str, &'static str), String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [op, a, b] = parts[..] else {
        return Err(format!("--judge {text}: expected OP:A:B, such as layernorm:mage-009:mage-007"));
    };
    let op = ops::find(op)?;
    let (a, b) = (op.stage(a)?, op.stage(b)?);
    if a.name == b.name {
        return Err(format!("--judge {text}: a stage against itself"));
    }
    Ok((op, a.name, b.name))
}

/// Parses `OP:DIMS[:GENERATOR]`.
fn parse_at(text: &str) -> Result<Workload, String> {
    let mut parts = text.splitn(3, ':');
    let (op, dims) = (parts.next().unwrap_or(""), parts.next());
    let op = ops::find(op)?;
    let dims = dims.ok_or_else(|| format!("--at {text}: expected OP:DIMS[:GENERATOR], such as triangle:256,64"))?;
    let dims = op.parse_dims(dims)?;
    let generator = op.generator(parts.next())?.name;
    Ok(Workload { op, dims, generator, history: false })
}

/// The manifest entry of one workload: its case (written under `work`),
/// the stages that support it, and the pairs to judge: `current` against
/// the best alternative always, and at the op's default dims each stage
/// against the one before it.
fn op_entry(w: &Workload, judge: &[(&'static Op, &'static str, &'static str)], work: &Path) -> Result<Value, String> {
    let op = w.op;
    let generator = op.generator(Some(w.generator))?;
    let inputs = (generator.generate)(&w.dims, fixtures::DEFAULT_SEED);
    let label = op.workload_label(&w.dims, generator.name);
    let case_rel = format!("cases/{}-{}", op.name, label.replace(' ', "-"));
    let spec = CaseSpec {
        op: op.name.into(),
        dims: w.dims.clone(),
        seed: fixtures::DEFAULT_SEED,
        warmup: 20,
        iterations: 100,
        distribution: generator.summary.into(),
        generator: if op.generators.len() > 1 { generator.name.into() } else { String::new() },
    };
    fixtures::write_case(&work.join(&case_rel), op, &spec, &inputs, None)?;
    let supported = |name: &str| op.stage(name).is_ok_and(|s| (s.supports)(&w.dims));
    let judged: Vec<(&str, &str)> =
        judge.iter().filter(|(o, a, b)| o.name == op.name && supported(a) && supported(b)).map(|(_, a, b)| (*a, *b)).collect();
    let stages: Vec<&str> = op
        .stages
        .iter()
        .filter(|s| (s.supports)(&w.dims))
        .map(|s| s.name)
        .filter(|n| w.history || judged.iter().any(|(a, b)| a == n || b == n))
        .collect();
    let mut pairs = vec![];
    if w.history {
        pairs.extend(stages.windows(2).map(|p| json!({ "a": format!("rust {}", p[1]), "b": format!("rust {}", p[0]) })));
    }
    for (a, b) in judged {
        let pair = json!({ "a": format!("rust {a}"), "b": format!("rust {b}") });
        if !pairs.contains(&pair) {
            pairs.push(pair);
        }
    }
    Ok(json!({
        "op": op.name,
        "dims": w.dims,
        "generator": generator.name,
        "label": label,
        "case_dir": case_rel,
        "stages": std::iter::once(CURRENT).chain(stages.iter().copied()).collect::<Vec<_>>(),
        "current_picks": op.dispatch(&w.dims, &inputs).name,
        "pairs": pairs,
    }))
}

/// The ops whose default dims (and, with `--sweep`, sweep lists) run: those
/// named, or every op when none is named, unless only `--at` workloads
/// were asked for.
fn chosen_ops(a: &CompareArgs) -> Result<Vec<&'static Op>, String> {
    if !a.ops.is_empty() {
        a.ops.iter().map(|o| ops::find(o)).collect()
    } else if a.at.is_empty() || a.sweep {
        Ok(ops::all())
    } else {
        Ok(vec![])
    }
}

pub fn compare(a: &CompareArgs) -> Result<(), String> {
    if !["hot", "cold", "both"].contains(&a.mode.as_str()) {
        return Err(format!("--mode {} is not one of hot, cold, both", a.mode));
    }
    let chosen = chosen_ops(a)?;
    let mut workloads: Vec<Workload> =
        chosen.iter().map(|op| Workload { op, dims: op.default_dims.to_vec(), generator: op.generators[0].name, history: true }).collect();
    if a.sweep {
        for op in &chosen {
            for w in op.sweep {
                workloads.push(Workload { op, dims: w.dims.to_vec(), generator: op.generator(Some(w.generator))?.name, history: false });
            }
        }
    }
    for at in &a.at {
        workloads.push(parse_at(at)?);
    }
    let mut seen = vec![];
    workloads.retain(|w| {
        let key = (w.op.name, w.dims.clone(), w.generator);
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    // Every check before any work: the flags, where the evidence goes, the
    // interpreter, the GPU, the temp directory; then the extension build.
    let judge = a.judge.iter().map(|j| parse_judge(j)).collect::<Result<Vec<_>, _>>()?;
    let out_dir = crate::outputs::namespace_dir(&results_root(), &a.namespace)?;
    crate::outputs::check_evidence(&out_dir.join("comparison.json"), a.force)?;
    crate::outputs::check_writable(&out_dir, "--namespace")?;
    check_program(&a.python)?;
    let _lock = crate::lock::GpuLock::acquire("compare")?;
    let temp = crate::outputs::temp_dir("the comparison's work folder")?;
    let python_path = python_path()?;
    let path = temp.join(format!("mage-compare-{}-{}", a.namespace, std::process::id()));
    let mut work = WorkDir { _registered: mage_common::cleanup::temporary(&path), path, keep: false };
    std::fs::create_dir_all(&work.path).map_err(|e| format!("{}: {e}", work.path.display()))?;
    let ptx_sha = ops::ptx_sha256(std::iter::once("mage-common").chain(chosen.iter().map(|o| o.package)))?;
    let entries = workloads.iter().map(|w| op_entry(w, &judge, &work.path)).collect::<Result<Vec<_>, _>>()?;
    let manifest = json!({
        "namespace": a.namespace,
        "mode": a.mode,
        "span_verdicts": a.span_verdicts,
        "environment": {
            "mage_commit": mage_runtime::BUILD_COMMIT,
            "toolchain": mage_runtime::BUILD_RUSTC,
            "ptxas": mage_toolchain::PTXAS_VERSION,
            "ptx_sha256": ptx_sha,
        },
        "ops": entries,
    });
    let manifest_text = serde_json::to_string_pretty(&manifest).unwrap();
    write_atomic(&work.path.join("manifest.json"), manifest_text.as_bytes())?;
    let out_json = work.path.join("comparison.json");
    let pythonpath = std::env::join_paths(&python_path).map_err(|e| e.to_string())?;
    let status = Command::new(&a.python)
        .args(["-m", "mage_compare"])
        .arg(&work.path)
        .arg("--out")
        .arg(&out_json)
        .args(a.quick.then_some("--quick"))
        .env("PYTHONPATH", &pythonpath)
        .env("PYTHONUNBUFFERED", "1")
        .status()
        .map_err(|e| format!("{}: {e} (see `doctor`, line `python3`)", a.python))?;
    let text =
        std::fs::read_to_string(&out_json).map_err(|e| format!("{}: {e} (the Python harness exited {status})", out_json.display()))?;
    let evidence: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", out_json.display()))?;
    if !status.success() || evidence["complete"].as_bool() != Some(true) {
        work.keep = true;
        return Err(format!(
            "the Python harness stopped ({status}): {}; its partial evidence is in {}",
            evidence["error"].as_str().unwrap_or("no error recorded"),
            work.path.display()
        ));
    }
    let table = markdown(&evidence);
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    write_atomic(&out_dir.join("manifest.json"), manifest_text.as_bytes())?;
    write_atomic(&out_dir.join("comparison.json"), text.as_bytes())?;
    write_atomic(&out_dir.join("comparison.md"), table.as_bytes())?;
    drop(work);
    say!("{table}");
    say!("evidence: {}", out_dir.display());
    Ok(())
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("–".into(), |x| format!("{x:.digits$}"))
}

/// The evidence as markdown: environment and control, one row per
/// implementation, then the verdicts.
pub fn markdown(e: &Value) -> String {
    let mut s = format!("# Comparison `{}`\n\n", e["namespace"].as_str().unwrap_or("?"));
    let env = &e["environment"];
    let smi = |at: &str, key: &str| env["nvidia_smi"][at]["gpu"][key].to_string().trim_matches('"').to_string();
    s += &format!(
        "GPU {} (driver {}), torch {}, triton {}, toolchain {}, commit {}; started {}, finished {}.\n\
         Clocks at start: SM {} MHz, memory {} MHz, {}; at the end: SM {} MHz, memory {} MHz, {}.\n",
        env["gpu"]["name"].as_str().unwrap_or("?"),
        smi("start", "driver_version"),
        env["torch"].as_str().unwrap_or("?"),
        env["triton"].as_str().unwrap_or("?"),
        env["manifest"]["toolchain"].as_str().unwrap_or("?"),
        env["manifest"]["mage_commit"].as_str().unwrap_or("?"),
        e["started_utc"].as_str().unwrap_or("?"),
        e["finished_utc"].as_str().unwrap_or("?"),
        smi("start", "sm_mhz"),
        smi("start", "mem_mhz"),
        smi("start", "pstate"),
        smi("end", "sm_mhz"),
        smi("end", "mem_mhz"),
        smi("end", "pstate"),
    );
    let c = &e["control"];
    s += &format!(
        "Control (256 MiB device copy, median event span): {} µs at the start, {} µs at the end, drift {}{}.\n\n",
        num(&c["start_us"], 2),
        num(&c["end_us"], 2),
        c["drift"].as_f64().map_or("?".into(), |d| format!("{:+.1}%", d * 100.0)),
        if c["flagged"].as_bool() == Some(true) { " — FLAGGED: more than 3%" } else { "" }
    );
    s += "kernel µs: sum of GPU kernel durations per call (PyTorch profiler, CUPTI), 100 calls, hot L2. span µs: median CUDA-event span \
          around one call, 300 samples in 3 rounds with rotating order [range of round medians]. b2b µs: 100 back-to-back calls / 100. \
          cold span µs: the same span with L2 evicted before each sample.\n\n";
    let rows: Vec<Vec<String>> = e["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let ok = r["correct_before"]["passed"].as_bool() == Some(true) && r["correct_after"]["passed"].as_bool() == Some(true);
            let check = match r["error"].as_str() {
                Some(err) if !err.is_empty() => format!("ERROR: {err}"),
                _ if ok => format!("ok ({})", r["correct_before"]["max_abs_err"].as_f64().map_or("?".into(), |v| format!("{v:.1e}"))),
                _ => "WRONG".into(),
            };
            let hot = &r["hot"];
            vec![
                r["op"].as_str().unwrap_or("?").into(),
                workload_label(r),
                implementation_label(r).unwrap_or_else(|| "?".into()),
                check,
                num(&hot["kernel_us"], 2),
                num(&hot["kernels_per_call"], 0),
                format!("{} [{}]", num(&hot["span"]["median_us"], 2), num(&hot["span"]["range_us"], 2)),
                num(&hot["b2b_us"]["median"], 2),
                num(&r["cold"]["span"]["median_us"], 2),
            ]
        })
        .collect();
    s += &markdown_table(
        &["op", "workload", "implementation", "check", "kernel µs", "kernels/call", "span µs [range]", "b2b µs", "cold span µs"],
        &rows,
    );
    s += "\n## Verdicts (A-B-B-A rounds, per-round ratios of A's median over B's)\n\n\
          Instrument `kernel`: per-call GPU kernel time (CUPTI records through the PyTorch profiler, every kernel of a call summed); \
          the only instrument that says which kernel is faster. `span (launch path)`: CUDA-event span around one call, launch path included.\n\n";
    let rows: Vec<Vec<String>> = e["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let b = v["b_implementation"].as_str().map(|i| format!("{} ({i})", v["b"].as_str().unwrap_or("?")));
            let instrument = match v["instrument"].as_str() {
                Some("span") => "span (launch path)",
                Some(other) => other,
                None => "?",
            };
            vec![
                v["op"].as_str().unwrap_or("?").into(),
                workload_label(v),
                v["mode"].as_str().unwrap_or("?").into(),
                instrument.into(),
                v["a"].as_str().unwrap_or("?").into(),
                b.unwrap_or_else(|| v["b"].as_str().unwrap_or("?").to_string()),
                num(&v["median_ratio"], 3),
                format!(
                    "{}–{} ({})",
                    num(&v["spread"]["low"], 3),
                    num(&v["spread"]["high"], 3),
                    v["spread"]["kind"].as_str().unwrap_or("?")
                ),
                v["verdict"].as_str().unwrap_or(v["error"].as_str().map_or("?", |_| "not measured")).into(),
            ]
        })
        .collect();
    s += &markdown_table(&["op", "workload", "mode", "instrument", "A", "B", "median ratio", "spread", "verdict"], &rows);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_with_no_op_named_takes_every_op_even_beside_at() {
        let args = |ops: &[&str], at: &[&str], sweep: bool| CompareArgs {
            ops: ops.iter().map(|s| s.to_string()).collect(),
            namespace: "x".into(),
            at: at.iter().map(|s| s.to_string()).collect(),
            sweep,
            judge: vec![],
            mode: "hot".into(),
            span_verdicts: false,
            force: false,
            python: "python3".into(),
            quick: false,
        };
        let names = |a: &CompareArgs| chosen_ops(a).unwrap().iter().map(|o| o.name).collect::<Vec<_>>();
        let every: Vec<_> = ops::all().iter().map(|o| o.name).collect();
        assert_eq!(names(&args(&[], &[], false)), every);
        assert_eq!(names(&args(&[], &["gelu:8,8"], true)), every);
        assert!(names(&args(&[], &["gelu:8,8"], false)).is_empty(), "only the --at workloads");
        assert_eq!(names(&args(&["gelu"], &["matmul:8,8,8"], true)), ["gelu"]);
    }

    #[test]
    fn every_op_entry_names_its_case_stages_and_pairs() {
        let work = std::env::temp_dir().join(format!("mage-compare-test-{}", std::process::id()));
        for op in ops::all() {
            let w = Workload { op, dims: op.default_dims.to_vec(), generator: op.generators[0].name, history: true };
            let entry = op_entry(&w, &[], &work).unwrap();
            let case = work.join(entry["case_dir"].as_str().unwrap());
            assert!(case.join("inputs.sha256.json").exists());
            fixtures::read_case(&case, op).unwrap();
            let stages = entry["stages"].as_array().unwrap();
            assert_eq!(stages[0], "current", "{}", op.name);
            assert_eq!(entry["pairs"].as_array().unwrap().len() + 2, stages.len(), "{}: one pair per step of the history", op.name);
        }
        let _ = std::fs::remove_dir_all(work);
    }

    #[test]
    fn judged_pairs_and_their_stages_join_every_workload_of_the_op() {
        let work = std::env::temp_dir().join(format!("mage-compare-judge-{}", std::process::id()));
        let judge = vec![parse_judge("layernorm:mage-007:mage-002").unwrap(), parse_judge("gelu:mage-002:mage-001").unwrap()];
        let w = Workload { op: &mage_layernorm::OP, dims: vec![64, 768], generator: "normal", history: false };
        let entry = op_entry(&w, &judge, &work).unwrap();
        assert_eq!(entry["stages"], json!(["current", "mage-002", "mage-007"]));
        assert_eq!(entry["pairs"], json!([{"a": "rust mage-007", "b": "rust mage-002"}]));
        // Where a judged stage does not support the shape, the pair is left out.
        let w = Workload { op: &mage_layernorm::OP, dims: vec![64, 4096], generator: "normal", history: false };
        assert_eq!(op_entry(&w, &judge, &work).unwrap()["pairs"], json!([]));
        assert!(parse_judge("layernorm:mage-007").err().unwrap().contains("OP:A:B"));
        assert!(parse_judge("layernorm:mage-007:mage-999").err().unwrap().contains("no stage `mage-999`"));
        let _ = std::fs::remove_dir_all(work);
    }

    #[test]
    fn workloads_parse_with_their_generator() {
        let w = parse_at("neighbor:4096,64,65536:power-law").unwrap();
        assert_eq!((w.op.name, w.dims.as_slice(), w.generator), ("neighbor", &[4096u32, 64, 65536][..], "power-law"));
        assert_eq!(parse_at("triangle:256,64").unwrap().generator, "normal");
        assert!(parse_at("triangle").err().unwrap().contains("OP:DIMS"));
        assert!(parse_at("neighbor:4,4,4:zipf").err().unwrap().contains("no generator `zipf`"));
    }

    #[test]
    fn the_table_marks_wrong_and_flagged_evidence_and_names_instruments() {
        let e = json!({
            "namespace": "t", "environment": {"gpu": "G"}, "control": {"start_us": 10.0, "end_us": 10.5, "drift": 0.05, "flagged": true},
            "results": [
                {"op": "gelu", "dims": [2, 3], "label": "2x3", "implementation": "torch", "correct_before": {"passed": true, "max_abs_err": 1e-7},
                 "correct_after": {"passed": true}, "hot": {"kernel_us": 5.0, "kernels_per_call": 2.0, "span": {"median_us": 20.0, "range_us": 1.0}, "b2b_us": {"median": 15.0}}, "cold": null},
                {"op": "gelu", "dims": [2, 3], "implementation": "rust current", "stage": "current", "info": {"stage_run": "mage-001"},
                 "correct_before": {"passed": false}, "correct_after": {"passed": false}, "hot": null}
            ],
            "verdicts": [
                {"op": "gelu", "dims": [2, 3], "mode": "hot", "instrument": "kernel", "a": "rust current", "b": "best alternative", "b_implementation": "torch",
                 "median_ratio": 0.5, "spread": {"kind": "min-max", "low": 0.4, "high": 0.6}, "verdict": "FASTER"},
                {"op": "gelu", "dims": [2, 3], "mode": "hot", "instrument": "span", "a": "rust current", "b": "best alternative", "b_implementation": "torch",
                 "median_ratio": 1.5, "spread": {"kind": "min-max", "low": 1.4, "high": 1.6}, "verdict": "SLOWER"}
            ]
        });
        let t = markdown(&e);
        assert!(t.contains("FLAGGED"), "{t}");
        assert!(t.contains("| gelu | 2x3 | torch | ok (1.0e-7) | 5.00 | 2 | 20.00 [1.00] | 15.00 | – |"), "{t}");
        assert!(t.contains("| rust current → mage-001 | WRONG |"), "{t}");
        assert!(
            t.contains("| gelu | 2x3 | hot | kernel | rust current | best alternative (torch) | 0.500 | 0.400–0.600 (min-max) | FASTER |"),
            "{t}"
        );
        assert!(t.contains("| hot | span (launch path) | rust current |"), "{t}");
    }
}
