//! `cargo xtask tables`: every table of measured numbers in the prose
//! (README, CHANGELOG, stage and dispatcher doc comments) rendered from the
//! committed evidence under `results/`, so a number is typed once: by the
//! instrument that measured it.
//!
//! A rendered block sits between two markers, on lines that may carry a
//! prefix (`//! ` in a doc comment):
//!
//! ```text
//! <!-- mage:table sweep results/mage-009/sweep-layernorm.json stages=mage-002,mage-007 -->
//! | shape | mage-002 | mage-007 | current |
//! ...
//! <!-- /mage:table -->
//! ```
//!
//! Kinds: `sweep PATH` (shapes × stages, GPU kernel µs, the fastest bold,
//! and the stage `current` picks), `stage PATH stage=S` (one stage at every
//! shape: kernel and span µs), `compare PATH` (workloads × implementations,
//! kernel µs, the fastest within the op's contract bold), `verdicts PATH`
//! (the A-B-B-A verdicts with their instrument), `errors PATH` (workloads ×
//! implementations: the error of each output against the f64 reference),
//! `headline PATH` (`current` against the best alternative on kernel time:
//! both times, the ratio and the verdict, then a count of the verdicts over
//! every workload of the comparison).
//! Options: `stages=a,b` (for `compare` and `errors`: stages shown beside
//! `current`), `shapes=4096x768,8192x768`, `ops=layernorm,gelu`,
//! `impls=torch,triton` (for `compare` and `errors`: only these of the other
//! implementations), `a=mage-009` (for `verdicts`: only those whose A is
//! that stage), `mode=cold` (for
//! `compare`: cold spans against a cold copy instead of hot kernel time,
//! nothing bold: a span does not decide which kernel is faster).
//!
//! `cargo xtask tables` rewrites every block; `--check` (and the test
//! below, run by `cargo test`) fails where a committed block differs from
//! what its evidence renders.

use crate::report::workload_label;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const OPEN: &str = "<!-- mage:table ";
const CLOSE: &str = "<!-- /mage:table -->";

/// The files whose blocks are rendered: the README, the CHANGELOG, the
/// pages under `docs/`, and every source file of the op crates.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    out.extend(pages);
    let mut sources = vec![];
    // Each crate's modules, and those one folder down (an op's gradient or
    // transposed forms: `src/backward/`, `src/nt/`, ...).
    for op in std::fs::read_dir(root.join("ops")).into_iter().flatten().flatten() {
        let mut dirs = vec![op.path().join("src")];
        while let Some(dir) = dirs.pop() {
            for f in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if f.path().is_dir() && dir.ends_with("src") {
                    dirs.push(f.path());
                } else if f.path().extension().is_some_and(|e| e == "rs") {
                    sources.push(f.path());
                }
            }
        }
    }
    sources.sort();
    out.extend(sources);
    out.into_iter().filter(|p| p.exists()).collect()
}

/// A table request: its kind, evidence path and options.
#[derive(Debug, PartialEq)]
struct Request {
    kind: String,
    path: String,
    options: BTreeMap<String, String>,
}

fn parse_request(text: &str) -> Result<Request, String> {
    let mut words = text.split_whitespace();
    let kind = words.next().ok_or("a table marker names no kind")?.to_string();
    let path = words.next().ok_or_else(|| format!("the `{kind}` table names no evidence file"))?.to_string();
    let mut options = BTreeMap::new();
    for w in words {
        let (k, v) = w.split_once('=').ok_or_else(|| format!("table option `{w}` is not key=value"))?;
        options.insert(k.to_string(), v.to_string());
    }
    Ok(Request { kind, path, options })
}

fn list(options: &BTreeMap<String, String>, key: &str) -> Option<Vec<String>> {
    options.get(key).map(|v| v.split(',').map(str::to_string).collect())
}

/// Whether a comparison's result row is asked for: its op (`ops=`), its
/// workload (`shapes=`), and for a Mage stage `current` or one of
/// `stages=`, for another implementation one of `impls=` (all if absent).
fn selected(r: &Request, row: &Value) -> bool {
    let has = |key: &str, v: &str| list(&r.options, key).is_none_or(|l| l.iter().any(|x| x == v));
    let name = row["implementation"].as_str().unwrap_or("?");
    let shown = match name.strip_prefix("rust ") {
        Some(stage) => stage == "current" || list(&r.options, "stages").is_some_and(|l| l.iter().any(|s| s == stage)),
        None => has("impls", name),
    };
    shown && has("ops", row["op"].as_str().unwrap_or("?")) && has("shapes", &workload_label(row))
}

fn us(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn fmt_us(v: f64) -> String {
    if v >= 1000.0 { format!("{v:.0}") } else { format!("{v:.2}") }
}

/// A markdown table as lines.
fn table(header: &[String], rows: &[Vec<String>]) -> Vec<String> {
    crate::report::markdown_table(header, rows).lines().map(String::from).collect()
}

/// Shapes × stages of a sweep: kernel µs, the fastest bold, and `current`'s pick.
fn render_sweep(e: &Value, r: &Request) -> Result<Vec<String>, String> {
    let runs = e["runs"].as_array().ok_or("a sweep has `runs`")?;
    let mut shapes: Vec<String> = vec![];
    let mut stages: Vec<String> = vec![];
    let mut cell: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut picks: BTreeMap<String, String> = BTreeMap::new();
    for run in runs {
        let shape = workload_label(run);
        let stage = run["stage"].as_str().unwrap_or("?").to_string();
        if stage == "current" {
            // Older evidence measured the dispatcher as a row of its own.
            if let Some(to) = run["dispatched_to"].as_str() {
                picks.insert(shape.clone(), to.to_string());
            }
            continue;
        }
        if !shapes.contains(&shape) {
            shapes.push(shape.clone());
        }
        if !stages.contains(&stage) {
            stages.push(stage.clone());
        }
        if let Some(k) = us(&run["timing"]["kernel_us"]) {
            cell.insert((shape, stage), k);
        }
    }
    for c in e["current"].as_array().into_iter().flatten() {
        picks.insert(workload_label(c), c["stage"].as_str().unwrap_or("?").to_string());
    }
    if let Some(want) = list(&r.options, "stages") {
        stages.retain(|s| want.contains(s));
    }
    if let Some(want) = list(&r.options, "shapes") {
        shapes.retain(|s| want.contains(&s.replace(' ', "-")) || want.contains(s));
    }
    let mut header = vec!["shape".to_string()];
    header.extend(stages.iter().cloned());
    header.push("current".into());
    let rows: Vec<Vec<String>> = shapes
        .iter()
        .map(|shape| {
            let best = stages.iter().filter_map(|s| cell.get(&(shape.clone(), s.clone()))).copied().fold(f64::INFINITY, f64::min);
            let mut row = vec![shape.clone()];
            for s in &stages {
                row.push(match cell.get(&(shape.clone(), s.clone())) {
                    Some(&k) if k == best => format!("**{}**", fmt_us(k)),
                    Some(&k) => fmt_us(k),
                    None => "–".into(),
                });
            }
            row.push(picks.get(shape).cloned().unwrap_or_else(|| "–".into()));
            row
        })
        .collect();
    if rows.is_empty() {
        return Err("the sweep has no run for the shapes and stages asked".into());
    }
    Ok(table(&header, &rows))
}

/// One stage at every shape of a sweep: kernel and span µs.
fn render_stage(e: &Value, r: &Request) -> Result<Vec<String>, String> {
    let stage = r.options.get("stage").ok_or("a `stage` table needs stage=NAME")?;
    let rows: Vec<Vec<String>> = e["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|run| run["stage"].as_str() == Some(stage))
        .filter_map(|run| {
            let t = &run["timing"];
            Some(vec![workload_label(run), fmt_us(us(&t["kernel_us"])?), fmt_us(us(&t["span"]["median_us"])?)])
        })
        .collect();
    if rows.is_empty() {
        return Err(format!("the sweep has no timed run of {stage}"));
    }
    Ok(table(&["shape".into(), "kernel µs".into(), "span µs".into()], &rows))
}

/// Workloads × implementations of a comparison: kernel µs (kernels per
/// call where more than one), the fastest bold.
fn render_compare(e: &Value, r: &Request) -> Result<Vec<String>, String> {
    let results = e["results"].as_array().ok_or("a comparison has `results`")?;
    let cold = match r.options.get("mode").map(String::as_str) {
        None | Some("hot") => false,
        Some("cold") => true,
        Some(m) => return Err(format!("mode `{m}`: hot or cold")),
    };
    let mut impls: Vec<String> = vec![];
    let mut workloads: Vec<(String, String)> = vec![];
    let mut cell: BTreeMap<(String, String, String), (f64, f64)> = BTreeMap::new();
    let mut current: BTreeMap<(String, String), String> = BTreeMap::new();
    // Outside the op's FP32 contract (a TF32 product): shown, never bold.
    let mut outside: std::collections::BTreeSet<String> = Default::default();
    for row in results.iter().filter(|row| selected(r, row)) {
        let op = row["op"].as_str().unwrap_or("?").to_string();
        let name = row["implementation"].as_str().unwrap_or("?").to_string();
        let w = (op.clone(), workload_label(row));
        if !workloads.contains(&w) {
            workloads.push(w.clone());
        }
        if !impls.contains(&name) {
            impls.push(name.clone());
        }
        let ok = row["error"].is_null() && row["correct_after"]["passed"].as_bool() == Some(true);
        let time = if cold { us(&row["cold"]["span"]["median_us"]) } else { us(&row["hot"]["kernel_us"]) };
        if let (true, Some(k)) = (ok, time) {
            let per_call = if cold { 1.0 } else { row["hot"]["kernels_per_call"].as_f64().unwrap_or(1.0) };
            cell.insert((w.0.clone(), w.1.clone(), name.clone()), (k, per_call));
        }
        if row["info"]["outside_contract"].is_string() {
            outside.insert(name.clone());
        }
        if let (true, Some(s)) = (name == "rust current", row["info"]["stage_run"].as_str()) {
            current.insert(w, s.to_string());
        }
    }
    let floors: BTreeMap<(String, String), f64> = e["ops"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let floor = if cold { &o["floor"]["cold_copy_us"] } else { &o["floor"]["floor_us"] };
            Some(((o["op"].as_str()?.to_string(), workload_label(o)), floor.as_f64()?))
        })
        .collect();
    let with_floor = !floors.is_empty();
    let mut header = vec!["op".to_string(), "workload".into()];
    header.extend(impls.iter().map(|i| if i == "rust current" { "Mage current".to_string() } else { i.clone() }));
    if with_floor {
        let floor = if cold { "cold copy" } else { "floor" };
        header.extend([floor.to_string(), format!("Mage / {floor}")]);
    }
    let rows: Vec<Vec<String>> = workloads
        .iter()
        .map(|(op, w)| {
            let key = |i: &String| (op.clone(), w.clone(), i.clone());
            let best =
                impls.iter().filter(|i| !outside.contains(*i)).filter_map(|i| cell.get(&key(i))).map(|c| c.0).fold(f64::INFINITY, f64::min);
            let mut row = vec![op.clone(), w.clone()];
            for i in &impls {
                row.push(match cell.get(&key(i)) {
                    Some(&(k, n)) => {
                        // Spans never mark a winner: only kernel time does.
                        let v = if k == best && !cold { format!("**{}**", fmt_us(k)) } else { fmt_us(k) };
                        let v = if n > 1.0 { format!("{v} ({n:.0})") } else { v };
                        match (i.as_str(), current.get(&(op.clone(), w.clone()))) {
                            ("rust current", Some(s)) => format!("{v} {s}"),
                            _ => v,
                        }
                    }
                    None => "–".into(),
                });
            }
            if with_floor {
                let floor = floors.get(&(op.clone(), w.clone()));
                row.push(floor.map_or("–".into(), |f| fmt_us(*f)));
                let mage = cell.get(&key(&"rust current".to_string())).map(|c| c.0);
                row.push(match (mage, floor) {
                    (Some(m), Some(f)) => format!("{:.2}", m / f),
                    _ => "–".into(),
                });
            }
            row
        })
        .collect();
    if rows.is_empty() {
        return Err("the comparison has no result for the ops asked".into());
    }
    Ok(table(&header, &rows))
}

/// The error of every implementation's output against the f64 reference
/// (the check before timing): max abs, max abs over max |ref|, and
/// Frobenius-relative, with the tolerance it was checked under.
fn render_errors(e: &Value, r: &Request) -> Result<Vec<String>, String> {
    let sci = |v: &Value| v.as_f64().map_or("–".to_string(), |x| format!("{x:.2e}"));
    let rows: Vec<Vec<String>> = e["results"]
        .as_array()
        .ok_or("a comparison has `results`")?
        .iter()
        .filter(|row| selected(r, row))
        .map(|row| {
            let c = &row["correct_before"];
            let name = match (row["implementation"].as_str(), row["info"]["stage_run"].as_str()) {
                (Some("rust current"), Some(s)) => format!("Mage current ({s})"),
                (Some(n), _) => n.to_string(),
                _ => "?".into(),
            };
            let within = match c["passed"].as_bool() {
                Some(true) if row["info"]["outside_contract"].is_string() => "own tolerance",
                Some(true) => "yes",
                Some(false) => "NO",
                None => "not checked",
            };
            vec![
                row["op"].as_str().unwrap_or("?").to_string(),
                workload_label(row),
                name,
                sci(&c["max_abs_err"]),
                sci(&c["max_rel_err"]),
                sci(&c["rel_l2_err"]),
                within.to_string(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return Err("the comparison has no result for the ops asked".into());
    }
    let header: Vec<String> =
        ["op", "workload", "implementation", "max abs error", "max abs / largest ref", "Frobenius relative", "within the op's tolerance"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    Ok(table(&header, &rows))
}

/// The verdicts of a comparison, each with its instrument.
fn render_verdicts(e: &Value, r: &Request) -> Result<Vec<String>, String> {
    let ops = list(&r.options, "ops");
    let a = r.options.get("a").map(|s| format!("rust {s}"));
    let rows: Vec<Vec<String>> = e["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| ops.as_ref().is_none_or(|o| o.iter().any(|x| Some(x.as_str()) == v["op"].as_str())))
        .filter(|v| a.as_ref().is_none_or(|a| v["a"].as_str() == Some(a.as_str())))
        .map(|v| {
            let instrument = match v["instrument"].as_str() {
                Some("kernel") => "kernel time",
                Some("span") => "span (launch path)",
                _ => "?",
            };
            let b = match v["b_implementation"].as_str() {
                Some(i) if Some(i) != v["b"].as_str() => format!("{} ({i})", v["b"].as_str().unwrap_or("?")),
                _ => v["b"].as_str().unwrap_or("?").to_string(),
            };
            let ratio = match (v["median_ratio"].as_f64(), v["spread"]["low"].as_f64(), v["spread"]["high"].as_f64()) {
                (Some(m), Some(lo), Some(hi)) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
                _ => "–".into(),
            };
            vec![
                v["op"].as_str().unwrap_or("?").to_string(),
                workload_label(v),
                v["mode"].as_str().unwrap_or("?").to_string(),
                instrument.to_string(),
                v["a"].as_str().unwrap_or("?").to_string(),
                b,
                ratio,
                v["verdict"].as_str().unwrap_or("not measured").to_string(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return Err("the comparison has no verdict for the ops asked".into());
    }
    let header: Vec<String> =
        ["op", "workload", "L2", "instrument", "A", "B", "A/B median [spread]", "verdict"].iter().map(|s| s.to_string()).collect();
    Ok(table(&header, &rows))
}

/// `current` against the best alternative, kernel-time verdicts only: the
/// two kernel times, the ratio with its spread and the verdict for the
/// workloads asked (`shapes=`, a space in a label written `_`: `8x4x16_power-law`;
/// `ops=`), then one line counting the verdicts
/// over every workload of the comparison.
fn render_headline(e: &Value, r: &Request) -> Result<Vec<String>, String> {
    let ops = list(&r.options, "ops");
    let shapes = list(&r.options, "shapes");
    let kernel_us = |v: &Value, implementation: &str| {
        e["results"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|row| {
                row["op"] == v["op"] && workload_label(row) == workload_label(v) && row["implementation"].as_str() == Some(implementation)
            })
            .and_then(|row| Some((us(&row["hot"]["kernel_us"])?, row["info"]["stage_run"].as_str().map(str::to_string))))
    };
    let headline: Vec<&Value> = e["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["a"] == "rust current" && v["b"] == "best alternative" && v["instrument"] == "kernel" && v["mode"] == "hot")
        .collect();
    let rows: Vec<Vec<String>> = headline
        .iter()
        .filter(|v| ops.as_ref().is_none_or(|o| o.iter().any(|x| Some(x.as_str()) == v["op"].as_str())))
        .filter(|v| shapes.as_ref().is_none_or(|s| s.contains(&workload_label(v).replace(' ', "_"))))
        .map(|v| {
            let b = v["b_implementation"].as_str().unwrap_or("?");
            let mage = match kernel_us(v, "rust current") {
                Some((t, Some(stage))) => format!("{} ({stage})", fmt_us(t)),
                Some((t, None)) => fmt_us(t),
                None => "–".into(),
            };
            let best = kernel_us(v, b).map_or("–".into(), |(t, _)| format!("{} ({b})", fmt_us(t)));
            let ratio = match (v["median_ratio"].as_f64(), v["spread"]["low"].as_f64(), v["spread"]["high"].as_f64()) {
                (Some(m), Some(lo), Some(hi)) => format!("{m:.2} [{lo:.2}, {hi:.2}]"),
                _ => "–".into(),
            };
            let verdict = v["verdict"].as_str().unwrap_or("not measured").to_string();
            vec![v["op"].as_str().unwrap_or("?").to_string(), workload_label(v), mage, best, ratio, verdict]
        })
        .collect();
    if rows.is_empty() {
        return Err("the comparison has no kernel-time verdict of current against the best alternative for the workloads asked".into());
    }
    let header: Vec<String> = ["op", "workload", "Mage current, µs", "best alternative, µs", "current / best [spread]", "verdict"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut lines = table(&header, &rows);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &headline {
        *counts.entry(v["verdict"].as_str().unwrap_or("not measured")).or_default() += 1;
    }
    let order = ["FASTER", "SAME", "UNCERTAIN", "SLOWER"];
    let mut parts: Vec<String> = order.iter().filter_map(|k| counts.get(k).map(|n| format!("{k} on {n}"))).collect();
    parts.extend(counts.iter().filter(|(k, _)| !order.contains(k)).map(|(k, n)| format!("{k} on {n}")));
    lines.push(String::new());
    lines.push(format!(
        "Over all {} workloads of this comparison, `current` against the best alternative on kernel time: {}.",
        headline.len(),
        parts.join(", ")
    ));
    Ok(lines)
}

fn render(root: &Path, r: &Request) -> Result<Vec<String>, String> {
    let path = root.join(&r.path);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", r.path))?;
    let e: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", r.path))?;
    match r.kind.as_str() {
        "sweep" => render_sweep(&e, r),
        "stage" => render_stage(&e, r),
        "compare" => render_compare(&e, r),
        "verdicts" => render_verdicts(&e, r),
        "errors" => render_errors(&e, r),
        "headline" => render_headline(&e, r),
        "e2e" => crate::e2e::table_of(&e, r.options.get("view").map_or("kernel", String::as_str), list(&r.options, "blocks").as_deref()),
        k => Err(format!("unknown table kind `{k}` (sweep, stage, compare, verdicts, errors, headline, e2e)")),
    }
    .map_err(|e| format!("{}: {e}", r.path))
}

/// `text` with every block rendered anew.
fn rerender(root: &Path, text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n');
    let mut n = 0;
    while let Some(line) = lines.next() {
        n += 1;
        out.push_str(line);
        let Some(at) = line.find(OPEN) else { continue };
        let prefix = &line[..at];
        let spec = line[at + OPEN.len()..].trim_end().strip_suffix("-->").ok_or(format!("line {n}: a table marker must end with -->"))?;
        let request = parse_request(spec).map_err(|e| format!("line {n}: {e}"))?;
        let opened = n;
        loop {
            let Some(l) = lines.next() else { return Err(format!("line {opened}: the table block is never closed ({CLOSE})")) };
            n += 1;
            if l.contains(CLOSE) {
                for row in render(root, &request).map_err(|e| format!("line {opened}: {e}"))? {
                    out.push_str(format!("{prefix}{row}").trim_end());
                    out.push('\n');
                }
                out.push_str(l);
                break;
            }
        }
    }
    Ok(out)
}

/// Renders every block; with `check`, changes nothing and fails where a
/// committed block differs from its evidence.
pub fn tables(check: bool) -> Result<(), String> {
    let root = mage_common::home::workspace_root();
    let mut stale = vec![];
    let mut blocks = 0;
    for path in files(&root) {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !text.contains(OPEN) {
            continue;
        }
        blocks += text.matches(OPEN).count();
        let rel = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        let new = rerender(&root, &text).map_err(|e| format!("{rel}: {e}"))?;
        if new != text {
            stale.push(rel.clone());
            if !check {
                mage_common::fixtures::write_atomic(&path, new.as_bytes())?;
            }
        }
    }
    match (check, stale.is_empty()) {
        (true, false) => Err(format!("tables differ from their evidence in {}; `cargo xtask tables` renders them anew", stale.join(", "))),
        (false, false) => crate::stdout::line(&format!("rendered {blocks} tables; rewrote {}", stale.join(", "))),
        (_, true) => crate::stdout::line(&format!("{blocks} tables match their evidence")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The committed tables are what their evidence renders.
    #[test]
    fn committed_tables_match_their_evidence() {
        tables(true).unwrap();
    }

    fn sweep() -> Value {
        json!({"runs": [
            {"stage": "mage-001", "dims": [4, 8], "timing": {"kernel_us": 9.0, "span": {"median_us": 15.0}}},
            {"stage": "mage-002", "dims": [4, 8], "timing": {"kernel_us": 5.0, "span": {"median_us": 12.0}}},
            {"stage": "mage-001", "dims": [16, 8], "generator": "power-law", "timing": {"kernel_us": 1234.5, "span": {"median_us": 1240.0}}}
        ], "current": [{"dims": [4, 8], "generator": "normal", "stage": "mage-002"}]})
    }

    #[test]
    fn a_sweep_renders_shapes_by_stages_with_the_fastest_bold() {
        let r = parse_request("sweep x.json").unwrap();
        assert_eq!(
            render_sweep(&sweep(), &r).unwrap(),
            vec![
                "| shape | mage-001 | mage-002 | current |",
                "|---|---|---|---|",
                "| 4x8 | 9.00 | **5.00** | mage-002 |",
                "| 16x8 power-law | **1234** | – | – |",
            ]
        );
        let r = parse_request("sweep x.json stages=mage-001 shapes=4x8").unwrap();
        assert_eq!(render_sweep(&sweep(), &r).unwrap()[2], "| 4x8 | **9.00** | mage-002 |");
        let r = parse_request("stage x.json stage=mage-002").unwrap();
        assert_eq!(render_stage(&sweep(), &r).unwrap()[2], "| 4x8 | 5.00 | 12.00 |");
    }

    #[test]
    fn a_block_is_rendered_in_place_with_its_prefix_and_a_stale_one_is_seen() {
        let root = std::env::temp_dir().join(format!("mage-tables-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("s.json"), sweep().to_string()).unwrap();
        let text = "//! before\n//! <!-- mage:table sweep s.json stages=mage-002 -->\n//! stale\n//! <!-- /mage:table -->\n//! after\n";
        let new = rerender(&root, text).unwrap();
        assert_eq!(
            new,
            "//! before\n//! <!-- mage:table sweep s.json stages=mage-002 -->\n//! | shape | mage-002 | current |\n//! |---|---|---|\n//! | 4x8 | **5.00** | mage-002 |\n//! | 16x8 power-law | – | – |\n//! <!-- /mage:table -->\n//! after\n"
        );
        assert_eq!(rerender(&root, &new).unwrap(), new, "rendering is stable");
        assert!(rerender(&root, "<!-- mage:table sweep s.json -->\n").unwrap_err().contains("never closed"));
        assert!(rerender(&root, "<!-- mage:table sweep nothere.json -->\n<!-- /mage:table -->\n").unwrap_err().contains("nothere.json"));
        assert!(rerender(&root, "<!-- mage:table plot s.json -->\n<!-- /mage:table -->\n").unwrap_err().contains("unknown table kind"));
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn verdicts_name_their_instrument() {
        let e = json!({"verdicts": [{"op": "gelu", "dims": [2, 3], "mode": "hot", "instrument": "kernel", "a": "rust current",
            "b": "best alternative", "b_implementation": "triton", "median_ratio": 0.9, "spread": {"low": 0.88, "high": 0.93}, "verdict": "FASTER"}]});
        let rows = render_verdicts(&e, &parse_request("verdicts x.json").unwrap()).unwrap();
        assert_eq!(
            rows[2],
            "| gelu | 2x3 | hot | kernel time | rust current | best alternative (triton) | 0.900 [0.880, 0.930] | FASTER |"
        );
    }

    #[test]
    fn the_headline_sets_current_against_the_best_alternative_and_counts_every_verdict() {
        let verdict = |dims: [u32; 2], b: &str, ratio: f64, verdict: &str| {
            json!({"op": "gelu", "dims": dims, "mode": "hot", "instrument": "kernel", "a": "rust current", "b": "best alternative",
                "b_implementation": b, "median_ratio": ratio, "spread": {"low": ratio - 0.01, "high": ratio + 0.01}, "verdict": verdict})
        };
        let result = |dims: [u32; 2], implementation: &str, us: f64| json!({"op": "gelu", "dims": dims, "implementation": implementation, "info": {"stage_run": "mage-002"}, "hot": {"kernel_us": us}});
        let e = json!({
            "verdicts": [verdict([2, 3], "triton", 0.9, "FASTER"), verdict([4, 5], "torch", 1.2, "SLOWER"),
                json!({"op": "gelu", "dims": [2, 3], "mode": "hot", "instrument": "span", "a": "rust current", "b": "best alternative", "verdict": "FASTER"})],
            "results": [result([2, 3], "rust current", 4.5), result([2, 3], "triton", 5.0), result([4, 5], "rust current", 6.0), result([4, 5], "torch", 5.0)]});
        let rows = render_headline(&e, &parse_request("headline x.json shapes=2x3").unwrap()).unwrap();
        assert_eq!(rows[2], "| gelu | 2x3 | 4.50 (mage-002) | 5.00 (triton) | 0.90 [0.89, 0.91] | FASTER |");
        assert_eq!(rows.len(), 5, "one row asked for, then a blank line and the count: {rows:?}");
        assert_eq!(
            rows[4],
            "Over all 2 workloads of this comparison, `current` against the best alternative on kernel time: FASTER on 1, SLOWER on 1.",
            "the span verdict is not counted"
        );
        assert!(render_headline(&e, &parse_request("headline x.json shapes=9x9").unwrap()).is_err());
    }

    #[test]
    fn errors_name_the_stage_and_whether_the_tolerance_was_the_ops() {
        let e = json!({"results": [
            {"op": "matmul", "dims": [2, 3, 4], "implementation": "rust current", "info": {"stage_run": "mage-009"},
             "correct_before": {"passed": true, "max_abs_err": 1.5e-6, "max_rel_err": 2e-7, "rel_l2_err": 3e-7}},
            {"op": "matmul", "dims": [2, 3, 4], "implementation": "rust mage-001", "info": {},
             "correct_before": {"passed": true, "max_abs_err": 1e-6, "max_rel_err": 1e-7, "rel_l2_err": 1e-7}},
            {"op": "matmul", "dims": [2, 3, 4], "implementation": "torch_tf32", "info": {"outside_contract": "TF32"},
             "correct_before": {"passed": true, "max_abs_err": 1e-3, "rel_l2_err": 3e-4}}]});
        let rows = render_errors(&e, &parse_request("errors x.json").unwrap()).unwrap();
        assert_eq!(rows.len(), 4, "header, rule and two rows (mage-001 is not asked for): {rows:?}");
        assert_eq!(rows[2], "| matmul | 2x3x4 | Mage current (mage-009) | 1.50e-6 | 2.00e-7 | 3.00e-7 | yes |");
        assert_eq!(rows[3], "| matmul | 2x3x4 | torch_tf32 | 1.00e-3 | – | 3.00e-4 | own tolerance |");
    }

    #[test]
    fn a_cold_comparison_sets_cold_spans_against_the_cold_copy() {
        let e = json!({"ops": [{"op": "gelu", "dims": [2, 3], "floor": {"floor_us": 1.0, "cold_copy_us": 4.0}}],
            "results": [{"op": "gelu", "dims": [2, 3], "implementation": "rust current", "info": {"stage_run": "mage-002"},
                "error": null, "correct_after": {"passed": true}, "hot": {"kernel_us": 2.0}, "cold": {"span": {"median_us": 5.0}}}]});
        let rows = render_compare(&e, &parse_request("compare x.json mode=cold").unwrap()).unwrap();
        assert_eq!(rows[0], "| op | workload | Mage current | cold copy | Mage / cold copy |");
        assert_eq!(rows[2], "| gelu | 2x3 | 5.00 mage-002 | 4.00 | 1.25 |", "spans: no winner in bold");
        assert!(render_compare(&e, &parse_request("compare x.json mode=warm").unwrap()).is_err());
    }

    #[test]
    fn an_implementation_outside_the_contract_is_never_bold() {
        let tf32 = json!({"results": [
            {"op": "matmul", "dims": [2, 3, 4], "implementation": "torch", "info": {}, "error": null,
             "correct_after": {"passed": true}, "hot": {"kernel_us": 9.0}},
            {"op": "matmul", "dims": [2, 3, 4], "implementation": "torch_tf32", "info": {"outside_contract": "TF32"}, "error": null,
             "correct_after": {"passed": true}, "hot": {"kernel_us": 3.0}}]});
        let r = render_compare(&tf32, &parse_request("compare x.json").unwrap()).unwrap();
        assert_eq!(r[2], "| matmul | 2x3x4 | **9.00** | 3.00 |", "outside the contract, never bold");
    }
}
