//! `cargo xtask compare`: Mage's stages beside PyTorch, torch.compile,
//! cuSPARSE and Triton, in one session on one GPU, on the same bytes.
//!
//! This side prepares a work directory (a fixture case per op, the PTX of
//! every package, the launch plans of every stage, a manifest) and runs the
//! Python harness (`python/mage_compare`), which loads the PTX beside the
//! Python implementations, checks and times them all, and writes
//! `comparison.json`. The evidence lands in `results/<namespace>/`:
//! `comparison.json`, `comparison.md` and `manifest.json`, written
//! atomically; an existing namespace is kept unless `--force`.

use crate::ops;
use mage_common::fixtures::{self, CaseSpec, sha256_hex, write_atomic};
use mage_common::op::{Arg, Op, Plan};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args, Clone, Debug)]
pub struct CompareArgs {
    /// Operations to compare (all if none).
    pub ops: Vec<String>,
    /// The evidence's name: results/<NAME>/.
    #[arg(long)]
    pub namespace: String,
    /// `hot` (same buffers every call), `cold` (L2 evicted before each span sample) or `both`.
    #[arg(long, default_value = "both")]
    pub mode: String,
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

/// Where results go: the workspace's `results/` in a checkout, else `./results`.
pub fn results_root() -> PathBuf {
    let root = mage_common::tools::workspace_root();
    if root.join("Cargo.toml").exists() { root.join("results") } else { PathBuf::from("results") }
}

/// The Python package: beside the binary in a bundle, else in the checkout.
fn python_dir() -> Result<PathBuf, String> {
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join("python")));
    let candidates = beside.into_iter().chain([mage_common::tools::workspace_root().join("python")]);
    candidates
        .into_iter()
        .find(|d| d.join("mage_compare").is_dir())
        .ok_or_else(|| "python/mage_compare not found beside the binary or in the checkout".to_string())
}

fn arg_json(a: &Arg) -> Value {
    match *a {
        Arg::Input(i) => json!({ "input": i }),
        Arg::Output => json!({ "output": true }),
        Arg::Scratch(i) => json!({ "scratch": i }),
        Arg::U32(v) => json!({ "u32": v }),
        Arg::F32(v) => json!({ "f32": v }),
    }
}

/// A plan as the manifest carries it.
pub fn plan_json(plan: &Plan) -> Value {
    json!({
        "scratch": plan.scratch,
        "launches": plan.launches.iter().map(|l| json!({
            "kernel": l.kernel.name,
            "grid": [l.grid.x, l.grid.y, l.grid.z],
            "block": [l.block.x, l.block.y, l.block.z],
            "shared_bytes": l.shared_bytes,
            "args": l.args.iter().map(arg_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The manifest entry of one op: its case, its stages' plans, and which
/// stage pairs get an A-B-B-A verdict (each stage against the one before).
fn op_entry(op: &Op, work: &Path) -> Result<(Value, Vec<Value>), String> {
    let dims = op.default_dims.to_vec();
    let inputs = (op.generate)(&dims, fixtures::DEFAULT_SEED);
    let case_rel = format!("cases/{}-{}", op.name, Op::dims_label(&dims));
    let spec = CaseSpec {
        op: op.name.into(),
        dims: dims.clone(),
        seed: fixtures::DEFAULT_SEED,
        warmup: 20,
        iterations: 100,
        distribution: "normal(0, 0.25)".into(),
    };
    fixtures::write_case(&work.join(&case_rel), op, &spec, &inputs)?;
    let stages: Vec<_> = op.stages.iter().filter(|s| (s.supports)(&dims)).collect();
    let rust: Vec<Value> = stages
        .iter()
        .map(|s| {
            json!({
                "name": format!("rust {}", s.name),
                "stage": s.name,
                "ptx": format!("ptx/{}.ptx", op.package),
                "plan": plan_json(&(s.plan)(&dims)),
            })
        })
        .collect();
    let history: Vec<&str> = stages.iter().map(|s| s.name).filter(|n| *n != "current").collect();
    let pairs =
        history.windows(2).map(|w| json!({ "op": op.name, "a": format!("rust {}", w[1]), "b": format!("rust {}", w[0]) })).collect();
    let entry = json!({
        "op": op.name,
        "dims": dims,
        "case_dir": case_rel,
        "inputs": op.inputs.iter().zip((op.input_lens)(&dims)).map(|(i, n)| json!({
            "file": format!("{}.bin", i.file), "role": i.role, "elem": i.elem, "len": n,
        })).collect::<Vec<_>>(),
        "output_len": op.output_len(&dims),
        "output_shape": (op.output_shape)(&dims),
        "tolerance": (op.tolerance)(&dims),
        "rust": rust,
    });
    Ok((entry, pairs))
}

pub fn compare(a: &CompareArgs) -> Result<(), String> {
    if !["hot", "cold", "both"].contains(&a.mode.as_str()) {
        return Err(format!("--mode {} is not one of hot, cold, both", a.mode));
    }
    let chosen: Vec<&Op> = if a.ops.is_empty() { ops::all() } else { a.ops.iter().map(|o| ops::find(o)).collect::<Result<_, _>>()? };
    let out_dir = results_root().join(&a.namespace);
    if out_dir.join("comparison.json").exists() && !a.force {
        return Err(format!("{} already holds a comparison; pass --force to overwrite it", out_dir.display()));
    }
    let python = python_dir()?;
    let _lock = crate::lock::GpuLock::acquire("compare")?;
    let work = std::env::temp_dir().join(format!("mage-compare-{}-{}", a.namespace, std::process::id()));
    std::fs::create_dir_all(work.join("ptx")).map_err(|e| format!("{}: {e}", work.display()))?;
    let mut ptx_sha = serde_json::Map::new();
    for package in std::iter::once("mage-common").chain(chosen.iter().map(|o| o.package)) {
        let ptx = ops::ptx(package)?;
        write_atomic(&work.join(format!("ptx/{package}.ptx")), ptx.as_bytes())?;
        ptx_sha.insert(package.into(), sha256_hex(ptx.as_bytes()).into());
    }
    let (mut entries, mut pairs) = (vec![], vec![]);
    for op in &chosen {
        let (e, p) = op_entry(op, &work)?;
        entries.push(e);
        pairs.extend(p);
    }
    let manifest = json!({
        "namespace": a.namespace,
        "mode": a.mode,
        "environment": {
            "mage_commit": env!("MAGE_GIT_COMMIT"),
            "toolchain": env!("MAGE_RUSTC_VERSION"),
            "ptxas": mage_common::tools::PTXAS_VERSION,
            "ptx_sha256": ptx_sha,
        },
        "ops": entries,
        "verdict_pairs": pairs,
    });
    let manifest_text = serde_json::to_string_pretty(&manifest).unwrap();
    write_atomic(&work.join("manifest.json"), manifest_text.as_bytes())?;
    let out_json = work.join("comparison.json");
    let status = Command::new(&a.python)
        .args(["-m", "mage_compare"])
        .arg(&work)
        .arg("--out")
        .arg(&out_json)
        .args(a.quick.then_some("--quick"))
        .env("PYTHONPATH", &python)
        .env("PYTHONUNBUFFERED", "1")
        .status()
        .map_err(|e| format!("{}: {e} (see `cargo xtask doctor`, line `python3`)", a.python))?;
    let text =
        std::fs::read_to_string(&out_json).map_err(|e| format!("{}: {e} (the Python harness exited {status})", out_json.display()))?;
    let evidence: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", out_json.display()))?;
    if !status.success() || evidence["complete"].as_bool() != Some(true) {
        return Err(format!(
            "the Python harness stopped ({status}): {}; its partial evidence is in {}",
            evidence["error"].as_str().unwrap_or("no error recorded"),
            work.display()
        ));
    }
    let table = markdown(&evidence);
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    write_atomic(&out_dir.join("manifest.json"), manifest_text.as_bytes())?;
    write_atomic(&out_dir.join("comparison.json"), text.as_bytes())?;
    write_atomic(&out_dir.join("comparison.md"), table.as_bytes())?;
    let _ = std::fs::remove_dir_all(&work);
    println!("{table}");
    println!("evidence: {}", out_dir.display());
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
    s += "| op | dims | implementation | check | kernel µs | kernels/call | span µs [range] | b2b µs | cold span µs |\n|---|---|---|---|---|---|---|---|---|\n";
    for r in e["results"].as_array().into_iter().flatten() {
        let ok = r["correct_before"]["passed"].as_bool() == Some(true) && r["correct_after"]["passed"].as_bool() == Some(true);
        let check = match r["error"].as_str() {
            Some(err) if !err.is_empty() => format!("ERROR: {err}"),
            _ if ok => format!("ok ({})", r["correct_before"]["max_abs_err"].as_f64().map_or("?".into(), |v| format!("{v:.1e}"))),
            _ => "WRONG".into(),
        };
        let hot = &r["hot"];
        let dims: Vec<String> = r["dims"].as_array().into_iter().flatten().map(|d| d.to_string()).collect();
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} [{}] | {} | {} |\n",
            r["op"].as_str().unwrap_or("?"),
            dims.join("x"),
            r["implementation"].as_str().unwrap_or("?"),
            check,
            num(&hot["kernel_us"], 2),
            num(&hot["kernels_per_call"], 0),
            num(&hot["span"]["median_us"], 2),
            num(&hot["span"]["range_us"], 2),
            num(&hot["b2b_us"]["median"], 2),
            num(&r["cold"]["span"]["median_us"], 2),
        );
    }
    s += "\n## Verdicts (A-B-B-A rounds of event spans, per-round ratios of A over B)\n\n\
          | op | mode | A | B | median ratio | spread | verdict |\n|---|---|---|---|---|---|---|\n";
    for v in e["verdicts"].as_array().into_iter().flatten() {
        let b = v["b_implementation"].as_str().map(|i| format!("{} ({i})", v["b"].as_str().unwrap_or("?")));
        s += &format!(
            "| {} | {} | {} | {} | {} | {}–{} ({}) | {} |\n",
            v["op"].as_str().unwrap_or("?"),
            v["mode"].as_str().unwrap_or("?"),
            v["a"].as_str().unwrap_or("?"),
            b.unwrap_or_else(|| v["b"].as_str().unwrap_or("?").to_string()),
            num(&v["median_ratio"], 3),
            num(&v["spread"]["low"], 3),
            num(&v["spread"]["high"], 3),
            v["spread"]["kind"].as_str().unwrap_or("?"),
            v["verdict"].as_str().unwrap_or("?"),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_serialise_with_every_argument_kind() {
        let plan = (mage_layernorm::OP.current().plan)(&[4096, 768]);
        let v = plan_json(&plan);
        assert_eq!(v["launches"][0]["block"], json!([256, 1, 1]));
        assert_eq!(v["launches"][0]["args"][3], json!({"output": true}));
        assert_eq!(v["launches"][0]["args"][5], json!({"u32": 768}));
    }

    #[test]
    fn every_op_entry_describes_its_output_and_case() {
        let work = std::env::temp_dir().join(format!("mage-compare-test-{}", std::process::id()));
        for op in ops::all() {
            let (entry, pairs) = op_entry(op, &work).unwrap();
            let shape: Vec<u64> = entry["output_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
            assert_eq!(shape.iter().product::<u64>(), entry["output_len"].as_u64().unwrap(), "{}", op.name);
            assert!(work.join(entry["case_dir"].as_str().unwrap()).join("inputs.sha256.json").exists());
            assert!(entry["rust"].as_array().unwrap().iter().any(|r| r["stage"] == "current"), "{}", op.name);
            assert_eq!(pairs.len() + 2, entry["rust"].as_array().unwrap().len(), "{}: one verdict per step of the history", op.name);
        }
        let _ = std::fs::remove_dir_all(work);
    }

    #[test]
    fn the_table_marks_wrong_and_flagged_evidence() {
        let e = json!({
            "namespace": "t", "environment": {"gpu": "G"}, "control": {"start_us": 10.0, "end_us": 10.5, "drift": 0.05, "flagged": true},
            "results": [
                {"op": "gelu", "dims": [2, 3], "implementation": "torch", "correct_before": {"passed": true, "max_abs_err": 1e-7},
                 "correct_after": {"passed": true}, "hot": {"kernel_us": 5.0, "kernels_per_call": 2.0, "span": {"median_us": 20.0, "range_us": 1.0}, "b2b_us": {"median": 15.0}}, "cold": null},
                {"op": "gelu", "dims": [2, 3], "implementation": "rust current", "correct_before": {"passed": false}, "correct_after": {"passed": false}, "hot": null}
            ],
            "verdicts": [{"op": "gelu", "mode": "hot", "a": "rust current", "b": "best alternative", "b_implementation": "torch", "median_ratio": 0.5,
                          "spread": {"kind": "min-max", "low": 0.4, "high": 0.6}, "verdict": "FASTER"}]
        });
        let t = markdown(&e);
        assert!(t.contains("FLAGGED"), "{t}");
        assert!(t.contains("| gelu | 2x3 | torch | ok (1.0e-7) | 5.00 | 2 | 20.00 [1.00] | 15.00 | – |"), "{t}");
        assert!(t.contains("| rust current | WRONG |"), "{t}");
        assert!(t.contains("| gelu | hot | rust current | best alternative (torch) | 0.500 | 0.400–0.600 (min-max) | FASTER |"), "{t}");
    }
}
