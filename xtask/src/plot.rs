//! `cargo xtask plot <namespace>`: SVG figures from committed evidence only
//! (`results/<namespace>/comparison.json`, and each `sweep-<op>.json` the
//! namespace holds). Evidence is validated first: every timed
//! implementation must have been correct before and after its timing loops
//! and carry its 300 span samples; anything else is refused, not drawn.

use crate::compare::results_root;
use crate::report::{implementation_label, workload_label};
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// Span samples each timed implementation must carry.
pub const SPAN_SAMPLES: usize = 300;

/// One bar: label, value, and an optional whisker (low, high).
struct Bar {
    label: String,
    value: f64,
    whisker: Option<(f64, f64)>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(66, 110, 180),
    RGBColor(220, 120, 40),
    RGBColor(80, 160, 90),
    RGBColor(170, 70, 140),
    RGBColor(120, 120, 120),
    RGBColor(200, 60, 60),
];

fn color_for(label: &str) -> RGBColor {
    match label.split_whitespace().next().unwrap_or("") {
        "rust" => COLORS[0],
        "torch" => COLORS[1],
        "torch_compile" => COLORS[2],
        "triton" | "triton_tuned" => COLORS[3],
        "cusparse" => COLORS[4],
        _ => COLORS[5],
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A horizontal bar panel with its own scale.
fn panel(area: &Area, title: &str, unit: &str, bars: &[Bar]) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let max = bars.iter().map(|b| b.whisker.map_or(b.value, |w| w.1.max(b.value))).fold(0.0, f64::max).max(1e-9) * 1.2;
    let n = bars.len();
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(170)
        .build_cartesian_2d(0.0..max, -0.5..n as f64 - 0.5)
        .map_err(e)?;
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc(unit)
        .y_labels(n)
        .y_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 { labels.get(i as usize).cloned().unwrap_or_default() } else { String::new() }
        })
        .draw()
        .map_err(e)?;
    for (i, b) in bars.iter().enumerate() {
        let y = i as f64;
        chart.draw_series([Rectangle::new([(0.0, y - 0.35), (b.value, y + 0.35)], color_for(&b.label).mix(0.85).filled())]).map_err(e)?;
        if let Some((lo, hi)) = b.whisker {
            chart.draw_series([PathElement::new(vec![(lo, y), (hi, y)], BLACK.stroke_width(2))]).map_err(e)?;
        }
        chart
            .draw_series([Text::new(
                format!("{:.2}", b.value),
                (b.value.max(b.whisker.map_or(0.0, |w| w.1)) + max * 0.01, y + 0.15),
                ("sans-serif", 12),
            )])
            .map_err(e)?;
    }
    Ok(())
}

/// The spans a comparison's figure draws: its cold ones in a cold-only
/// session (which takes no hot spans), else the hot ones.
fn span_mode(e: &Value) -> &'static str {
    if e["mode"].as_str() == Some("cold") { "cold" } else { "hot" }
}

/// Checks the evidence before anything is drawn.
pub fn validate(e: &Value) -> Result<(), String> {
    let mut problems = vec![];
    if e["complete"].as_bool() != Some(true) {
        problems.push(format!("the session did not complete ({})", e["error"].as_str().unwrap_or("no error recorded")));
    }
    let results = e["results"].as_array().ok_or("comparison.json has no results")?;
    for r in results {
        let name = format!("{} {}", r["op"].as_str().unwrap_or("?"), r["implementation"].as_str().unwrap_or("?"));
        if r["hot"].is_null() {
            continue;
        }
        for check in ["correct_before", "correct_after"] {
            if r[check]["passed"].as_bool() != Some(true) {
                problems.push(format!("{name}: timed but {check} did not pass"));
            }
        }
        let samples = r[span_mode(e)]["span"]["samples_us"].as_array().map_or(0, |s| s.len());
        if samples != SPAN_SAMPLES {
            problems.push(format!("{name}: {samples} span samples, not {SPAN_SAMPLES}"));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(format!("refusing to plot: {}", problems.join("; "))) }
}

fn timed(e: &Value) -> Vec<&Value> {
    e["results"].as_array().into_iter().flatten().filter(|r| !r["hot"].is_null()).collect()
}

fn ops_in(e: &Value) -> Vec<String> {
    let mut ops: Vec<String> = vec![];
    for r in timed(e) {
        let op = r["op"].as_str().unwrap_or("?").to_string();
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    ops
}

/// Every (op, workload label) of the evidence, in order.
fn workloads_in(e: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    for r in timed(e) {
        let w = (r["op"].as_str().unwrap_or("?").to_string(), workload_label(r));
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// A panel per workload, a bar per implementation: `view` picks the value (and whisker).
fn by_op(e: &Value, path: &Path, title: &str, view: impl Fn(&Value) -> Option<Bar>) -> Result<(), String> {
    let workloads = workloads_in(e);
    let root = SVGBackend::new(path, (900, 260 * workloads.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, body) = root.split_vertically(30);
    head.draw_text(title, &("sans-serif", 18).into_text_style(&head), (10, 6)).map_err(|e| e.to_string())?;
    for (area, (op, label)) in body.split_evenly((workloads.len().max(1), 1)).iter().zip(&workloads) {
        let rows: Vec<&Value> = timed(e).into_iter().filter(|r| r["op"].as_str() == Some(op) && workload_label(r) == *label).collect();
        let bars: Vec<Bar> = rows.iter().filter_map(|r| view(r)).collect();
        panel(area, &format!("{op} {label}"), "µs", &bars)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Each stage's kernel time, oldest first, with the speed-up over the stage before.
fn progression(e: &Value, path: &Path) -> Result<(), String> {
    let ops: Vec<String> = ["matmul", "layernorm"].iter().map(|s| s.to_string()).filter(|o| ops_in(e).contains(o)).collect();
    let root = SVGBackend::new(path, (900, 300 * ops.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, body) = root.split_vertically(30);
    head.draw_text(
        "Stage progression: GPU kernel time per call (CUPTI), speed-up over the stage before",
        &("sans-serif", 18).into_text_style(&head),
        (10, 6),
    )
    .map_err(|e| e.to_string())?;
    for (area, op) in body.split_evenly((ops.len().max(1), 1)).iter().zip(&ops) {
        let mut prev: Option<f64> = None;
        // The op's first workload: the one whose history the comparison measured.
        let first = workloads_in(e).into_iter().find(|(o, _)| o == op).map(|w| w.1).unwrap_or_default();
        let bars: Vec<Bar> = timed(e)
            .into_iter()
            .filter(|r| r["op"].as_str() == Some(op) && workload_label(r) == first)
            .filter(|r| r["kind"] == "rust" && r["stage"].as_str().is_some_and(|s| s.starts_with("mage-")))
            .filter_map(|r| {
                let v = r["hot"]["kernel_us"].as_f64()?;
                let speedup = prev.map(|p| format!(" (x{:.2})", p / v)).unwrap_or_default();
                prev = Some(v);
                Some(Bar { label: format!("rust {}{speedup}", r["stage"].as_str().unwrap_or("?")), value: v, whisker: None })
            })
            .collect();
        panel(area, &format!("{op} {first}"), "kernel µs", &bars)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// A sweep: one panel per shape, a bar per stage.
fn sweep(s: &Value, path: &Path) -> Result<(), String> {
    let runs = s["runs"].as_array().ok_or("sweep has no runs")?;
    let op = s["op"].as_str().unwrap_or("?");
    let mut shapes: Vec<String> = vec![];
    for r in runs {
        let shape = workload_label(r);
        if r["check"]["failures"].as_u64() != Some(0) {
            return Err(format!("refusing to plot the sweep: {shape} {} was wrong", r["stage"]));
        }
        if !shapes.contains(&shape) {
            shapes.push(shape);
        }
    }
    let root = SVGBackend::new(path, (900, 220 * shapes.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, body) = root.split_vertically(30);
    head.draw_text(
        &format!("{op} sweep: GPU kernel time per call (CUPTI), every stage that supports the shape"),
        &("sans-serif", 18).into_text_style(&head),
        (10, 6),
    )
    .map_err(|e| e.to_string())?;
    for (area, shape) in body.split_evenly((shapes.len().max(1), 1)).iter().zip(&shapes) {
        let bars: Vec<Bar> = runs
            .iter()
            .filter(|r| workload_label(r) == *shape)
            .filter(|r| r["stage"] != "current")
            .filter_map(|r| {
                Some(Bar { label: format!("rust {}", r["stage"].as_str()?), value: r["timing"]["kernel_us"].as_f64()?, whisker: None })
            })
            .collect();
        panel(area, shape, "kernel µs", &bars)?;
    }
    root.present().map_err(|e| e.to_string())
}

pub fn plot(namespace: &str) -> Result<(), String> {
    let dir = crate::outputs::namespace_dir(&results_root(), namespace)?;
    let mut written = vec![];
    // An end-to-end run's loss curves, where the namespace holds one.
    let e2e = dir.join("e2e.json");
    if e2e.exists() {
        let e: Value = serde_json::from_str(&crate::outputs::read_text(&e2e, None)?).map_err(|e| format!("{}: {e}", e2e.display()))?;
        if !e["training"].is_null() {
            let out = dir.join("loss.svg");
            crate::e2e::loss_plot(&e, &out)?;
            written.push(out);
        }
        if !dir.join("comparison.json").exists() {
            for w in written {
                say!("{}", w.display());
            }
            return Ok(());
        }
    }
    let path = dir.join("comparison.json");
    let text = crate::outputs::read_text(&path, None)?;
    let e: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    validate(&e)?;
    let kernel = dir.join("kernel.svg");
    by_op(&e, &kernel, "GPU kernel time per call (sum of kernel durations, CUPTI via the PyTorch profiler), hot L2", |r| {
        Some(Bar { label: implementation_label(r)?, value: r["hot"]["kernel_us"].as_f64()?, whisker: None })
    })?;
    written.push(kernel);
    let span = dir.join("span.svg");
    let mode = span_mode(&e);
    let title = match mode {
        "cold" => "CUDA-event span around one call, L2 evicted before each sample: median of 300; whisker = range of the round medians",
        _ => "CUDA-event span around one call: median of 300 samples; whisker = range of the 3 round medians",
    };
    by_op(&e, &span, title, |r| {
        let block = &r[mode]["span"];
        let rounds: Vec<f64> = block["round_medians_us"].as_array()?.iter().filter_map(|v| v.as_f64()).collect();
        let lo = rounds.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = rounds.iter().cloned().fold(0.0, f64::max);
        Some(Bar {
            label: implementation_label(r)?,
            value: block["median_us"].as_f64()?,
            whisker: (!rounds.is_empty()).then_some((lo, hi)),
        })
    })?;
    written.push(span);
    let prog = dir.join("progression.svg");
    progression(&e, &prog)?;
    written.push(prog);
    for op in crate::ops::all() {
        let sweep_path = dir.join(format!("sweep-{}.json", op.name));
        if sweep_path.exists() {
            let s: Value = serde_json::from_str(&crate::outputs::read_text(&sweep_path, None)?)
                .map_err(|e| format!("{}: {e}", sweep_path.display()))?;
            let out = dir.join(format!("sweep-{}.svg", op.name));
            sweep(&s, &out)?;
            written.push(out);
        }
    }
    for w in written {
        say!("{}", w.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(op: &str, imp: &str, kind: &str, stage: Option<&str>, us: f64, samples: usize, passed: bool) -> Value {
        json!({
            "op": op, "dims": [4, 8], "implementation": imp, "kind": kind, "stage": stage,
            "correct_before": {"passed": passed}, "correct_after": {"passed": true},
            "hot": {"kernel_us": us, "kernels_per_call": 1, "span": {"median_us": us + 5.0, "round_medians_us": [us + 4.0, us + 5.0, us + 6.0], "range_us": 2.0, "samples_us": vec![us; samples]}, "b2b_us": {"median": us + 1.0}},
        })
    }

    fn evidence(samples: usize, passed: bool) -> Value {
        json!({"namespace": "t", "complete": true, "results": [
            result("layernorm", "rust mage-001", "rust", Some("mage-001"), 18.0, SPAN_SAMPLES, true),
            result("layernorm", "rust mage-002", "rust", Some("mage-002"), 7.0, SPAN_SAMPLES, true),
            result("layernorm", "triton", "triton", None, 5.4, samples, passed),
            {"op": "layernorm", "dims": [4, 8], "implementation": "broken", "error": "bad", "hot": null},
        ]})
    }

    #[test]
    fn refuses_wrong_or_short_evidence() {
        assert!(validate(&evidence(SPAN_SAMPLES, true)).is_ok());
        let e = validate(&evidence(299, true)).unwrap_err();
        assert!(e.contains("299 span samples"), "{e}");
        let e = validate(&evidence(SPAN_SAMPLES, false)).unwrap_err();
        assert!(e.contains("correct_before did not pass"), "{e}");
    }

    #[test]
    fn a_cold_only_session_is_checked_on_its_cold_spans() {
        let cold = |samples: usize| {
            let mut e = evidence(SPAN_SAMPLES, true);
            e["mode"] = json!("cold");
            for r in e["results"].as_array_mut().unwrap() {
                if !r["hot"].is_null() {
                    r["cold"] = json!({"span": {"samples_us": vec![1.0; samples]}});
                    r["hot"]["span"] = Value::Null;
                }
            }
            e
        };
        assert!(validate(&cold(SPAN_SAMPLES)).is_ok());
        assert!(validate(&cold(299)).unwrap_err().contains("299 span samples"));
    }

    #[test]
    fn draws_the_figures() {
        let dir = std::env::temp_dir().join(format!("mage-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = evidence(SPAN_SAMPLES, true);
        by_op(&e, &dir.join("k.svg"), "t", |r| {
            Some(Bar { label: r["implementation"].as_str()?.into(), value: r["hot"]["kernel_us"].as_f64()?, whisker: None })
        })
        .unwrap();
        progression(&e, &dir.join("p.svg")).unwrap();
        let k = std::fs::read_to_string(dir.join("k.svg")).unwrap();
        assert!(k.contains("triton") && k.contains("5.40") && !k.contains("broken"), "{k}");
        let p = std::fs::read_to_string(dir.join("p.svg")).unwrap();
        assert!(p.contains("rust mage-002 (x2.57)"), "the speed-up label is missing");
        let _ = std::fs::remove_dir_all(dir);
    }
}
