//! `cargo xtask e2e`: Mage's ops inside PyTorch models, against PyTorch
//! eager and torch.compile, in one session on one GPU (FP32, TF32 off).
//!
//! This side checks the flags and where the evidence goes, takes the GPU
//! lock and runs the Python harness (`python/mage_e2e`), which builds the
//! models, times and checks them and writes `e2e.json`; then keeps it
//! under `results/<namespace>/` with `e2e.md` (its tables, rendered by
//! [`markdown`], the same renderer as `tables`' `e2e` blocks) and
//! `loss.svg` (the training run's loss curves, [`loss_plot`]).

use mage_common::fixtures::write_atomic;
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[derive(clap::Args, Clone, Debug)]
pub struct E2eArgs {
    /// The evidence's name: results/<NAME>/e2e.json.
    #[arg(long)]
    pub namespace: String,
    /// Only these parts, comma separated (mlp, gnn, triangle, train).
    #[arg(long)]
    pub only: Option<String>,
    /// A smoke run with small shapes and few samples: not evidence.
    #[arg(long)]
    pub quick: bool,
    /// Overwrite the namespace's existing e2e.json.
    #[arg(long)]
    pub force: bool,
    /// The Python with torch.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Keep the evidence of a harness run made elsewhere (`python -m
    /// mage_e2e --out FILE` on a GPU machine) instead of running it here.
    #[arg(long = "from")]
    pub from: Option<std::path::PathBuf>,
}

pub const PARTS: [&str; 4] = ["mlp", "gnn", "triangle", "train"];

pub fn e2e(a: &E2eArgs) -> Result<(), String> {
    if let Some(only) = &a.only {
        for p in only.split(',').filter(|p| !p.is_empty()) {
            if !PARTS.contains(&p) {
                return Err(format!("--only {p}: the parts are {}", PARTS.join(", ")));
            }
        }
    }
    let out_dir = crate::outputs::namespace_dir(&crate::compare::results_root(), &a.namespace)?;
    crate::outputs::check_evidence(&out_dir.join("e2e.json"), a.force)?;
    crate::outputs::check_writable(&out_dir, "--namespace")?;
    if let Some(from) = &a.from {
        let text = crate::outputs::read_text(from, Some("--from"))?;
        let evidence: Value = serde_json::from_str(&text).map_err(|e| format!("--from {}: {e}", from.display()))?;
        let complete = evidence["complete"].as_bool() == Some(true);
        return keep(a, &out_dir, evidence, complete, "the harness run it holds was not complete".into());
    }
    crate::compare::check_program(&a.python)?;
    let _lock = crate::lock::GpuLock::acquire("e2e")?;
    let python_path = crate::compare::python_path()?;
    let temp = crate::outputs::temp_dir("the end-to-end run's evidence")?.join(format!("mage-e2e-{}.json", std::process::id()));
    let _registered = mage_common::cleanup::temporary(&temp);
    let pythonpath = std::env::join_paths(&python_path).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&a.python);
    cmd.args(["-m", "mage_e2e", "--out"]).arg(&temp).env("PYTHONPATH", &pythonpath).env("PYTHONUNBUFFERED", "1");
    if a.quick {
        cmd.arg("--quick");
    }
    if let Some(only) = &a.only {
        cmd.args(["--only", only]);
    }
    let status = cmd.status().map_err(|e| format!("{}: {e} (see `doctor`, line `python3`)", a.python))?;
    let text = crate::outputs::read_text(&temp, None).map_err(|e| format!("{e} (the harness exited {status})"))?;
    let evidence: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", temp.display()))?;
    let _ = std::fs::remove_file(&temp);
    let complete = status.success() && evidence["complete"].as_bool() == Some(true);
    keep(a, &out_dir, evidence, complete, format!("the end-to-end harness stopped ({status})"))
}

/// Writes the evidence under `out_dir`: `e2e.json`, `e2e.md` and
/// `loss.svg` when complete, `e2e.partial.json` (and an error) when not.
fn keep(a: &E2eArgs, out_dir: &Path, mut evidence: Value, complete: bool, why: String) -> Result<(), String> {
    evidence["namespace"] = Value::from(a.namespace.as_str());
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let name = if complete { "e2e.json" } else { "e2e.partial.json" };
    write_atomic(&out_dir.join(name), serde_json::to_string_pretty(&evidence).unwrap().as_bytes())?;
    if !complete {
        return Err(format!(
            "{why}: {}; what ran is in {}",
            evidence["failures"].as_array().and_then(|f| f.last()).map_or("no failure recorded".into(), |f| f.to_string()),
            out_dir.join(name).display()
        ));
    }
    let md = markdown(&evidence);
    write_atomic(&out_dir.join("e2e.md"), md.as_bytes())?;
    if !evidence["training"].is_null() {
        loss_plot(&evidence, &out_dir.join("loss.svg"))?;
    }
    say!("{md}");
    say!("evidence: {}", out_dir.display());
    Ok(())
}

fn us(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn fmt(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "–".into(),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    }
}

/// The implementations' columns, in order, as the harness names them.
const IMPLS: [(&str, &str); 8] = [
    ("mage", "Mage"),
    ("mage+graph", "Mage + graph"),
    ("mage_compile", "Mage, compiled"),
    ("mage_compile+graph", "Mage, compiled + graph"),
    ("torch", "eager"),
    ("torch+graph", "eager + graph"),
    ("torch_compile", "torch.compile"),
    ("torch_compile+graph", "torch.compile + graph"),
];

fn best<'a>(impls: &'a Value, prefix: &str, key: &str) -> Option<(f64, &'a str)> {
    impls
        .as_object()?
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .filter_map(|(k, v)| Some((us(&v[key])?, k.as_str())))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// One of the evidence's tables as markdown lines: `kernel` (GPU kernel
/// time per step), `wall` (wall time per step), `errors` (against
/// float64) or `training`.
pub fn table(e: &Value, view: &str) -> Result<Vec<String>, String> {
    table_of(e, view, None)
}

/// [`table`] of the workloads of these blocks only (`mlp`, `gnn`,
/// `triangle`), all where `None`.
pub fn table_of(e: &Value, view: &str, blocks: Option<&[String]>) -> Result<Vec<String>, String> {
    let all = e["workloads"].as_array().ok_or("the evidence has no workloads")?;
    let rows: Vec<&Value> =
        all.iter().filter(|r| blocks.is_none_or(|b| b.iter().any(|x| Some(x.as_str()) == r["name"].as_str()))).collect();
    if rows.is_empty() && view != "training" {
        return Err("no workload of those blocks in the evidence".into());
    }
    let mut out = vec![];
    let head = |cols: &[String]| vec![format!("| {} |", cols.join(" | ")), format!("|{}", "---|".repeat(cols.len()))];
    match view {
        "kernel" | "wall" => {
            let key = if view == "kernel" { "kernel_us" } else { "wall_us" };
            let present: Vec<&(&str, &str)> = IMPLS.iter().filter(|(k, _)| rows.iter().any(|r| !r["impls"][*k].is_null())).collect();
            let mut cols = vec!["block".to_string(), "shape".into(), "step".into()];
            cols.extend(present.iter().map(|(_, l)| l.to_string()));
            cols.push("best Mage / best PyTorch".into());
            cols.push("Mage / torch.compile".into());
            out.extend(head(&cols));
            for r in &rows {
                let i = &r["impls"];
                let mut line = vec![
                    r["name"].as_str().unwrap_or("?").to_string(),
                    r["shape"].as_str().unwrap_or("?").into(),
                    r["mode"].as_str().unwrap_or("?").into(),
                ];
                let bm = best(i, "mage", key);
                let bt = best(i, "torch", key);
                for (k, _) in &present {
                    let v = us(&i[k][key]);
                    let cell = fmt(v);
                    line.push(if v.is_some() && (bm.map(|b| b.1) == Some(k) || bt.map(|b| b.1) == Some(k)) {
                        format!("**{cell}**")
                    } else {
                        cell
                    });
                }
                line.push(ratio(bm.map(|b| b.0), bt.map(|b| b.0)));
                let (m, c) = if view == "kernel" { ("mage", "torch_compile") } else { ("mage+graph", "torch_compile+graph") };
                line.push(ratio(us(&i[m][key]), us(&i[c][key])));
                out.push(format!("| {} |", line.join(" | ")));
            }
        }
        "errors" => {
            let cols: Vec<String> =
                ["block", "shape", "step", "Mage", "eager FP32", "torch.compile FP32", "Mage / eager", "largest for Mage"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            out.extend(head(&cols));
            for r in &rows {
                let i = &r["impls"];
                let worst = |k: &str| us(&i[k]["worst_error"]);
                let which = i["mage"]["errors"]
                    .as_object()
                    .and_then(|m| {
                        m.iter().filter_map(|(k, v)| Some((k, v.as_f64()?))).max_by(|a, b| a.1.total_cmp(&b.1)).map(|(k, _)| k.clone())
                    })
                    .unwrap_or("–".into());
                let e = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.2e}"));
                out.push(format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} |",
                    r["name"].as_str().unwrap_or("?"),
                    r["shape"].as_str().unwrap_or("?"),
                    r["mode"].as_str().unwrap_or("?"),
                    e(worst("mage")),
                    e(worst("torch")),
                    e(worst("torch_compile")),
                    ratio(worst("mage"), worst("torch")),
                    which
                ));
            }
        }
        "training" => {
            let t = &e["training"];
            let runs = &t["runs"];
            if runs.is_null() {
                return Err("the evidence has no training run".into());
            }
            out.extend(head(&[
                "run".to_string(),
                "first loss".into(),
                "last loss".into(),
                "max deviation from float64".into(),
                "time per step, µs".into(),
            ]));
            for (k, label) in [("mage", "Mage FP32"), ("torch", "PyTorch FP32"), ("float64", "PyTorch float64")] {
                let loss = runs[k]["loss"].as_array().ok_or(format!("the training run has no `{k}` losses"))?;
                let dev = match k {
                    "mage" => format!("{:.2e}", t["agreement"]["mage_vs_float64"].as_f64().unwrap_or(f64::NAN)),
                    "torch" => format!("{:.2e}", t["agreement"]["torch_vs_float64"].as_f64().unwrap_or(f64::NAN)),
                    _ => "–".into(),
                };
                let f = |v: Option<&Value>| v.and_then(|v| v.as_f64()).map_or("–".into(), |x| format!("{x:.6}"));
                out.push(format!("| {label} | {} | {} | {dev} | {} |", f(loss.first()), f(loss.last()), fmt(us(&runs[k]["step_us"]))));
            }
            let a = &t["agreement"];
            out.push(String::new());
            out.push(format!(
                "{} steps; Mage's curve against float64's: {:.2e}, within the bound {} × {:.2e} + {:.0e} = {:.2e}: {}.",
                t["steps"],
                a["mage_vs_float64"].as_f64().unwrap_or(f64::NAN),
                a["factor"],
                a["torch_vs_float64"].as_f64().unwrap_or(f64::NAN),
                a["floor"].as_f64().unwrap_or(f64::NAN),
                a["bound"].as_f64().unwrap_or(f64::NAN),
                if a["agree"].as_bool() == Some(true) { "agree" } else { "DISAGREE" }
            ));
        }
        v => return Err(format!("view `{v}`: kernel, wall, errors or training")),
    }
    Ok(out)
}

/// `e2e.md`: the environment, then every table.
pub fn markdown(e: &Value) -> String {
    let env = &e["environment"];
    let mut s = format!(
        "# End to end `{}`\n\nGPU {}, torch {}, triton {}, Mage {}; {}, TF32 off ({}).\n\n",
        e["namespace"].as_str().unwrap_or("?"),
        env["gpu"]["name"].as_str().unwrap_or("?"),
        env["torch"].as_str().unwrap_or("?"),
        env["triton"].as_str().unwrap_or("?"),
        env["mage_commit"].as_str().unwrap_or("?"),
        if e["quick"].as_bool() == Some(true) { "QUICK RUN, not evidence" } else { "FP32" },
        env["torch_settings"]["float32_matmul_precision"].as_str().unwrap_or("?"),
    );
    for (view, title) in [
        ("kernel", "GPU kernel time per step, µs (CUPTI records, summed over the step's kernels; median over rounds)"),
        ("wall", "Wall time per step, µs (CUDA events around back-to-back steps; median over rounds)"),
        ("errors", "Largest relative error against float64 (Frobenius, over the output and every gradient)"),
        ("training", "Training"),
    ] {
        if let Ok(lines) = table(e, view) {
            s += &format!("## {title}\n\n{}\n\n", lines.join("\n"));
        }
    }
    if let Some(f) = e["failures"].as_array().filter(|f| !f.is_empty()) {
        s += "## What did not run\n\n";
        for x in f {
            s += &format!("- {x}\n");
        }
    }
    s
}

/// The loss curves of the training run (Mage FP32, PyTorch FP32, PyTorch
/// float64), log scale, and below them each FP32 curve's relative
/// deviation from float64's.
pub fn loss_plot(e: &Value, path: &Path) -> Result<(), String> {
    let err = |x: DrawingAreaErrorKind<std::io::Error>| x.to_string();
    let runs = &e["training"]["runs"];
    let curve = |k: &str| -> Result<Vec<f64>, String> {
        runs[k]["loss"]
            .as_array()
            .ok_or(format!("the training run has no `{k}` losses"))?
            .iter()
            .map(|v| v.as_f64().ok_or("a loss is not a number".to_string()))
            .collect()
    };
    let (m, t, f) = (curve("mage")?, curve("torch")?, curve("float64")?);
    if m.is_empty() || m.len() != t.len() || m.len() != f.len() {
        return Err("the training run's curves differ in length".into());
    }
    let n = m.len();
    let (lo, hi) = m.iter().chain(&t).chain(&f).fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let root = SVGBackend::new(path, (900, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(380);
    let mut c = ChartBuilder::on(&top)
        .caption("Training loss: Mage's ops and PyTorch FP32 from the same weights on the same batches, and float64", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0..n, (lo * 0.9..hi * 1.1).log_scale())
        .map_err(err)?;
    c.configure_mesh().x_desc("step").y_desc("MSE loss").draw().map_err(err)?;
    let series = [
        (&f, "PyTorch float64", RGBColor(120, 120, 120)),
        (&t, "PyTorch FP32", RGBColor(220, 120, 40)),
        (&m, "Mage FP32", RGBColor(66, 110, 180)),
    ];
    for (data, label, color) in series {
        c.draw_series(LineSeries::new(data.iter().enumerate().map(|(i, &v)| (i, v)), color.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    c.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(err)?;
    let dev = |a: &[f64]| -> Vec<f64> { a.iter().zip(&f).map(|(x, r)| ((x - r) / r).abs().max(1e-12)).collect() };
    let (dm, dt) = (dev(&m), dev(&t));
    let (dlo, dhi) = dm.iter().chain(&dt).fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let mut d = ChartBuilder::on(&bottom)
        .caption("|loss − float64's loss| / float64's loss", ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0..n, (dlo * 0.5..dhi * 2.0).log_scale())
        .map_err(err)?;
    d.configure_mesh().x_desc("step").draw().map_err(err)?;
    for (data, label, color) in [(&dt, "PyTorch FP32", RGBColor(220, 120, 40)), (&dm, "Mage FP32", RGBColor(66, 110, 180))] {
        d.draw_series(LineSeries::new(data.iter().enumerate().map(|(i, &v)| (i, v)), color.stroke_width(1)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    d.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(err)?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn impl_(k: f64, w: f64, err: f64) -> Value {
        json!({"kernel_us": k, "wall_us": w, "worst_error": err, "errors": {"y": err / 2.0, "d_fc1.weight": err}})
    }

    fn evidence() -> Value {
        json!({
            "namespace": "t", "complete": true, "quick": false,
            "environment": {"gpu": {"name": "G"}, "torch": "2.11", "triton": "3.6", "mage_commit": "abc", "torch_settings": {"float32_matmul_precision": "highest"}},
            "workloads": [{"name": "mlp", "shape": "512x768", "mode": "forward+backward", "impls": {
                "mage": impl_(100.0, 180.0, 2e-7), "mage+graph": impl_(100.0, 110.0, 2e-7),
                "torch": impl_(200.0, 260.0, 3e-7), "torch+graph": impl_(200.0, 205.0, 3e-7),
                "torch_compile": impl_(150.0, 230.0, 3e-7), "torch_compile+graph": impl_(150.0, 155.0, 3e-7)}}],
            "training": {"steps": 3, "runs": {"mage": {"loss": [1.0, 0.5, 0.25], "step_us": 900.0}, "torch": {"loss": [1.0, 0.5, 0.2500001], "step_us": 1000.0},
                "float64": {"loss": [1.0, 0.5, 0.25000005], "step_us": 3000.0}},
                "agreement": {"mage_vs_float64": 2e-7, "torch_vs_float64": 2e-7, "factor": 4.0, "floor": 1e-6, "bound": 1.8e-6, "agree": true}},
            "failures": [],
        })
    }

    #[test]
    fn renders_each_view() {
        let e = evidence();
        let k = table(&e, "kernel").unwrap();
        assert!(k[0].contains("Mage + graph") && !k[0].contains("compiled"), "{}", k[0]);
        // best Mage 100 against best PyTorch 150; Mage against torch.compile 100/150.
        assert!(k[2].ends_with("| 0.67 | 0.67 |"), "{}", k[2]);
        let w = table(&e, "wall").unwrap();
        // best Mage (graph) 110 against best PyTorch (compile + graph) 155.
        assert!(w[2].contains("**110**") && w[2].contains("**155**") && w[2].ends_with("| 0.71 | 0.71 |"), "{}", w[2]);
        let er = table(&e, "errors").unwrap();
        assert!(er[2].contains("2.00e-7") && er[2].contains("0.67") && er[2].ends_with("d_fc1.weight |"), "{}", er[2]);
        let t = table(&e, "training").unwrap();
        assert!(t[2].starts_with("| Mage FP32 | 1.000000 | 0.250000 | 2.00e-7 | 900 |"), "{}", t[2]);
        assert!(t.last().unwrap().ends_with("agree."), "{:?}", t.last());
        assert!(table(&e, "spans").unwrap_err().contains("kernel, wall"));
        let md = markdown(&e);
        assert!(md.contains("## Training") && md.contains("GPU G"), "{md}");
    }

    #[test]
    fn draws_the_loss_curves() {
        let path = std::env::temp_dir().join(format!("mage-e2e-loss-{}.svg", std::process::id()));
        loss_plot(&evidence(), &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("Mage FP32") && svg.contains("float64"));
        let _ = std::fs::remove_file(&path);
        let mut short = evidence();
        short["training"]["runs"]["mage"]["loss"] = json!([1.0]);
        assert!(loss_plot(&short, &path).unwrap_err().contains("length"));
    }
}
