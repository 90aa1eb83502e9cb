//! `nsight` and `sanitize`: NVIDIA's tools around one launch of a stage.
//! Both run this binary's `run --no-timing` (correctness check, one launch
//! of the plan) under the tool, inside this process's GPU lock.

use crate::ops;
use mage_common::fixtures::write_atomic;
use mage_common::op::Op;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tool(name: &str) -> Result<PathBuf, String> {
    let out = Command::new("sh").args(["-c", &format!("command -v {name}")]).output().map_err(|e| e.to_string())?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if path.is_empty() {
        Err(format!(
            "`{name}` is not on PATH (it comes with the CUDA toolkit or Nsight; see `{} doctor`)",
            mage_common::home::command_name()
        ))
    } else {
        Ok(PathBuf::from(path))
    }
}

fn self_run(op: &str, stage: &str, dims: &[u32], generator: &str) -> Vec<String> {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "mage".into());
    vec![
        exe,
        "run".into(),
        op.into(),
        "--stage".into(),
        stage.into(),
        "--dims".into(),
        Op::dims_label(dims).replace('x', ","),
        "--gen".into(),
        generator.into(),
        "--no-timing".into(),
    ]
}

/// The metrics `nsight` summarises, with the label it prints.
const METRICS: &[(&str, &str)] = &[
    ("gpu__time_duration.sum", "duration"),
    ("dram__bytes_read.sum", "DRAM read"),
    ("dram__bytes_write.sum", "DRAM written"),
    ("lts__t_bytes.sum", "L2 traffic"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy"),
    ("launch__occupancy_limit_registers", "occupancy limit (registers)"),
    ("launch__registers_per_thread", "registers per thread"),
    ("launch__shared_mem_per_block_dynamic", "dynamic shared per block"),
    ("launch__shared_mem_per_block_static", "static shared per block"),
];

/// `cargo xtask nsight <op> [--stage S] [--dims D]`.
pub fn nsight(
    op_name: &str,
    stage: &str,
    dims: Option<&str>,
    generator: Option<&str>,
    systems: bool,
    out_dir: &Path,
) -> Result<(), String> {
    let op = ops::find(op_name)?;
    op.check_stage_name(stage)?;
    let generator = op.generator(generator)?.name;
    let dims = op.dims_or_default(dims)?;
    // The report lands there after the profiled run: checked first.
    crate::outputs::check_writable(out_dir, "--out")?;
    let _lock = crate::lock::GpuLock::acquire("nsight")?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let base = out_dir.join(format!("{}-{stage}-{}", op.name, op.workload_label(&dims, generator).replace(' ', "-")));
    if systems {
        let nsys = tool("nsys")?;
        let status = Command::new(nsys)
            .args(["profile", "--force-overwrite", "true", "-o"])
            .arg(&base)
            .args(self_run(op.name, stage, &dims, generator))
            .status()
            .map_err(|e| e.to_string())?;
        return if status.success() {
            {
                say!("{}.nsys-rep", base.display());
                Ok(())
            }
        } else {
            Err(format!("nsys failed ({status})"))
        };
    }
    let ncu = tool("ncu")?;
    let rep = base.with_extension("ncu-rep");
    let metrics: Vec<&str> = METRICS.iter().map(|m| m.0).collect();
    let status = Command::new(&ncu)
        .args(["--clock-control", "none", "--force-overwrite", "--section", "WarpStateStats", "--section", "SpeedOfLight"])
        .args(["--metrics", &metrics.join(","), "-o"])
        .arg(&base)
        .args(self_run(op.name, stage, &dims, generator))
        .status()
        .map_err(|e| format!("ncu: {e}"))?;
    if !status.success() {
        return Err(format!("ncu failed ({status})"));
    }
    let csv = Command::new(&ncu).args(["--import"]).arg(&rep).args(["--page", "raw", "--csv"]).output().map_err(|e| e.to_string())?;
    let summary = summarise(&String::from_utf8_lossy(&csv.stdout));
    let json = serde_json::json!({"op": op.name, "stage": stage, "dims": dims, "report": rep.file_name().map(|f| f.to_string_lossy().to_string()), "kernels": summary});
    write_atomic(&base.with_extension("json"), serde_json::to_string_pretty(&json).unwrap().as_bytes())?;
    for k in json["kernels"].as_array().into_iter().flatten() {
        say!("{}", k["kernel"].as_str().unwrap_or("?"));
        for (m, label) in METRICS {
            say!("  {label:<28} {} {}", k["metrics"][m]["value"].as_str().unwrap_or("-"), k["metrics"][m]["unit"].as_str().unwrap_or(""));
        }
        say!("  top warp stalls (cycles per issued instruction):");
        for s in k["stalls"].as_array().into_iter().flatten() {
            say!("    {:<26} {}", s[0].as_str().unwrap_or("?"), s[1].as_f64().map_or("-".into(), |v| format!("{v:.2}")));
        }
    }
    say!("{}", rep.display());
    Ok(())
}

/// Reads `ncu --page raw --csv`: one row per kernel launch, a header row of
/// metric names and a row of units. Keeps the last launch of each kernel
/// (warmup launches of other kernels come first), our metrics, and the five
/// largest warp-stall reasons.
fn summarise(csv: &str) -> Vec<serde_json::Value> {
    let rows: Vec<Vec<String>> = csv.lines().filter(|l| l.starts_with('"')).map(split_csv).collect();
    if rows.len() < 3 {
        return vec![];
    }
    let (header, units) = (&rows[0], &rows[1]);
    let col = |name: &str| header.iter().position(|h| h == name);
    let mut out: Vec<serde_json::Value> = vec![];
    for row in &rows[2..] {
        let kernel = col("Kernel Name").and_then(|i| row.get(i)).cloned().unwrap_or_default();
        let mut metrics = serde_json::Map::new();
        for (m, _) in METRICS {
            if let Some(i) = col(m) {
                metrics.insert(m.to_string(), serde_json::json!({"value": row[i], "unit": units[i]}));
            }
        }
        let mut stalls: Vec<(String, f64)> = header
            .iter()
            .enumerate()
            .filter(|(_, h)| {
                h.starts_with("smsp__average_warp_latency_issue_stalled_") || h.starts_with("smsp__average_warps_issue_stalled_")
            })
            .filter(|(_, h)| h.ends_with("_per_issue_active.ratio"))
            .filter_map(|(i, h)| {
                Some((
                    h.split("stalled_").nth(1)?.trim_end_matches("_per_issue_active.ratio").to_string(),
                    row[i].replace(',', "").parse().ok()?,
                ))
            })
            .collect();
        stalls.sort_by(|a, b| b.1.total_cmp(&a.1));
        stalls.truncate(5);
        let entry = serde_json::json!({"kernel": kernel, "metrics": metrics, "stalls": stalls});
        out.retain(|e| e["kernel"] != entry["kernel"]);
        out.push(entry);
    }
    out
}

fn split_csv(line: &str) -> Vec<String> {
    let mut cells = vec![];
    let mut cell = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

/// `cargo xtask sanitize <op> [--stage S]`: every stage (or the one named)
/// under compute-sanitizer's memcheck, racecheck, synccheck and initcheck,
/// on a small shape and on the default one. Any report fails.
pub fn sanitize(op_name: &str, stage: Option<&str>) -> Result<(), String> {
    let op = ops::find(op_name)?;
    let stages: Vec<_> = match stage {
        Some(s) => vec![op.stage(s)?],
        None => op.stages.to_vec(),
    };
    let sanitizer = tool("compute-sanitizer")?;
    let _lock = crate::lock::GpuLock::acquire("sanitize")?;
    let small = crate::probes::differential_shapes(op).into_iter().next();
    let default = (op.default_dims.to_vec(), op.generators[0].name);
    let mut failures = vec![];
    for stage in stages {
        for (dims, generator) in small.iter().cloned().chain([default.clone()]) {
            if !(stage.supports)(&dims) {
                continue;
            }
            for check in ["memcheck", "racecheck", "synccheck", "initcheck"] {
                let out = Command::new(&sanitizer)
                    .args(["--tool", check, "--error-exitcode", "97"])
                    .args(self_run(op.name, stage.name, &dims, generator))
                    .output()
                    .map_err(|e| format!("compute-sanitizer: {e}"))?;
                let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
                let summary =
                    text.lines().rev().find(|l| l.contains("ERROR SUMMARY") || l.contains("RACECHECK SUMMARY")).unwrap_or("").trim();
                let ok = out.status.success();
                say!(
                    "{:<10} {:<9} {:<12} {:<10} {} {summary}",
                    op.name,
                    stage.name,
                    Op::dims_label(&dims),
                    check,
                    if ok { "ok" } else { "FAILED" }
                );
                if !ok {
                    failures.push(format!("{} {} {} {check}", op.name, stage.name, Op::dims_label(&dims)));
                    let tail: Vec<&str> = text.lines().rev().take(12).collect();
                    eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
                }
            }
        }
    }
    if failures.is_empty() { Ok(()) } else { Err(format!("sanitizer reports: {}", failures.join("; "))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ncu_raw_csv() {
        let csv = "==PROF== noise\n\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"smsp__average_warp_latency_issue_stalled_long_scoreboard_per_issue_active.ratio\",\"smsp__average_warp_latency_issue_stalled_barrier_per_issue_active.ratio\"\n\"\",\"\",\"usecond\",\"ratio\",\"ratio\"\n\"0\",\"k\",\"5.10\",\"3.5\",\"0.5\"\n\"1\",\"k\",\"5.00\",\"4.5\",\"0.25\"\n";
        let s = summarise(csv);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0]["metrics"]["gpu__time_duration.sum"]["value"], "5.00");
        assert_eq!(s[0]["metrics"]["gpu__time_duration.sum"]["unit"], "usecond");
        assert_eq!(s[0]["stalls"][0][0], "long_scoreboard");
        assert_eq!(s[0]["stalls"][0][1], 4.5);
    }

    #[test]
    fn a_missing_tool_is_a_clear_error() {
        let e = tool("surely-not-a-tool-mage").unwrap_err();
        assert!(e.contains("not on PATH"), "{e}");
    }
}
