//! `evolve --report`: a ledger as a table and an SVG of its trajectory,
//! and one summary row per ledger of a namespace.
//!
//! The figure plots kernel µs per generation: each candidate as a point
//! (kept, rejected or void), the incumbent and `current` as lines (both
//! measured in every generation, beside the candidate), and, given a
//! comparison file with the same op and shape, the fastest correct
//! implementation outside Mage as a dashed line.

use super::ledger::{Arms, Entry, Generation, Ledger, Start};
use super::propose::Decision;
use crate::report::{markdown_table, table};
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// The fastest correct implementation that is not Mage's in a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Alternative {
    pub implementation: String,
    pub kernel_us: f64,
    pub source: String,
}

/// The best alternative for `op` at `dims` among comparison files.
pub fn best_alternative(comparisons: &[(String, Value)], op: &str, dims: &[u32]) -> Option<Alternative> {
    let mut best: Option<Alternative> = None;
    for (source, e) in comparisons {
        for r in e["results"].as_array().into_iter().flatten() {
            let same = r["op"].as_str() == Some(op)
                && r["dims"].as_array().is_some_and(|d| d.iter().map(|v| v.as_u64()).eq(dims.iter().map(|&d| Some(d as u64))));
            let correct = r["correct_before"]["passed"].as_bool() == Some(true) && r["correct_after"]["passed"].as_bool() == Some(true);
            if !same || !correct || r["kind"].as_str() == Some("rust") {
                continue;
            }
            if let Some(us) = r["hot"]["kernel_us"].as_f64()
                && best.as_ref().is_none_or(|b| us < b.kernel_us)
            {
                best = Some(Alternative {
                    implementation: r["implementation"].as_str().unwrap_or("?").into(),
                    kernel_us: us,
                    source: source.clone(),
                });
            }
        }
    }
    best
}

/// Where a run ended: the incumbent and its kernel µs beside `current`'s,
/// from the last generation that measured it.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub best: String,
    pub best_us: f64,
    pub current_us: f64,
    /// Median of the per-round ratios of the best against `current`.
    pub best_vs_current: f64,
}

pub fn outcome(start: &Start, generations: &[&Generation]) -> Option<Outcome> {
    let last = generations.iter().rev().find_map(|g| g.arms.as_ref().map(|a| (g, a)));
    match last {
        Some((g, a)) if g.decision == Decision::Kept => Some(Outcome {
            best: g.change.config.clone(),
            best_us: a.candidate_us,
            current_us: a.current_us,
            best_vs_current: a.vs_current.median,
        }),
        Some((g, a)) => Some(Outcome {
            best: g.incumbent.clone(),
            best_us: a.incumbent_us,
            current_us: a.current_us,
            best_vs_current: a.incumbent_vs_current.median,
        }),
        None => start.baseline.as_ref().map(|a| Outcome {
            best: start.incumbent.clone(),
            best_us: a.incumbent_us,
            current_us: a.current_us,
            best_vs_current: a.incumbent_vs_current.median,
        }),
    }
}

fn ratios_text(r: &super::propose::Ratios) -> String {
    format!("{:.3} [{:.3}–{:.3}]", r.median, r.min, r.max)
}

fn decision_text(d: Decision) -> &'static str {
    match d {
        Decision::Kept => "KEPT",
        Decision::Rejected => "rejected",
        Decision::Void => "void",
        Decision::Wrong => "WRONG",
        Decision::Pruned => "pruned",
    }
}

/// The ledger as markdown: its sessions, one row per generation, the
/// pruned proposals, and where it ended.
pub fn markdown(ledger: &Ledger, alternative: Option<&Alternative>) -> Result<String, String> {
    let start = ledger.starts().next().ok_or("the ledger has no start entry")?;
    let shape = mage_common::op::Op::dims_label(&start.dims);
    let mut s = format!("# evolve {} {shape}\n\n", start.op);
    for st in ledger.starts() {
        s += &format!(
            "Session {} ({}): from `{}` ({}), incumbent `{}`; `current` runs {}; {} of {} configurations fit; proposer {}; {} rounds ({}) of {} calls a segment after {} burn-in pairs, CUPTI kernel time; keep if the median ratio ≤ {} and every round < {}; control: {} within {:.0}%.\n",
            st.session,
            st.started_utc,
            st.from,
            if st.from == st.incumbent { "a configuration" } else { "a stage's point" },
            st.incumbent,
            st.current_stage,
            st.fitting_configurations,
            st.space_configurations,
            st.proposer,
            st.procedure.rounds,
            st.procedure.round_orders.join(", "),
            st.procedure.calls_per_segment,
            st.procedure.burn_in_pairs,
            st.procedure.keep_median_at_most,
            st.procedure.keep_max_below,
            st.procedure.control,
            st.procedure.control_limit * 100.0,
        );
        if let Some(b) = &st.baseline {
            s += &format!(
                "Baseline: the incumbent against a second copy of itself {} (µs {:.2} / {:.2}); against `current` {} ({:.2} / {:.2} µs).\n",
                ratios_text(&b.vs_incumbent),
                b.candidate_us,
                b.incumbent_us,
                ratios_text(&b.incumbent_vs_current),
                b.incumbent_us,
                b.current_us
            );
        }
    }
    let gens: Vec<&Generation> = ledger.generations().collect();
    let rows: Vec<Vec<String>> = gens
        .iter()
        .map(|g| {
            let a = g.arms.as_ref();
            let us = |f: fn(&Arms) -> f64| a.map_or("–".into(), |a| format!("{:.2}", f(a)));
            vec![
                g.generation.to_string(),
                format!("{}: {} → {}", g.change.knob, g.change.from, g.change.to),
                format!("`{}`", g.change.config),
                us(|a| a.candidate_us),
                us(|a| a.incumbent_us),
                us(|a| a.current_us),
                a.map_or("–".into(), |a| ratios_text(&a.vs_incumbent)),
                a.map_or("–".into(), |a| ratios_text(&a.vs_current)),
                g.control.as_ref().map_or("–".into(), |c| format!("{:+.1}%", c.drift * 100.0)),
                decision_text(g.decision).into(),
                g.reason.clone(),
            ]
        })
        .collect();
    s += "\n";
    s += &markdown_table(
        &["gen", "change", "candidate", "cand. µs", "inc. µs", "current µs", "vs incumbent", "vs current", "control", "decision", "why"],
        &rows,
    );
    let pruned: Vec<String> = ledger
        .entries
        .iter()
        .filter_map(|e| {
            if let Entry::Pruned(p) = e {
                Some(format!("- `{}` ({}: {} → {}): {}", p.change.config, p.change.knob, p.change.from, p.change.to, p.reason))
            } else {
                None
            }
        })
        .collect();
    if !pruned.is_empty() {
        s += &format!("\nPruned before any launch ({}):\n\n{}\n", pruned.len(), pruned.join("\n"));
    }
    if let Some(o) = outcome(start, &gens) {
        s += &format!(
            "\nBest: `{}`, {:.2} µs against `current`'s {:.2} (median per-round ratio {:.3}){}.\n",
            o.best,
            o.best_us,
            o.current_us,
            o.best_vs_current,
            alternative.map_or(String::new(), |alt| format!(
                "; best alternative {} {:.2} µs ({}), ratio {:.3}",
                alt.implementation,
                alt.kernel_us,
                alt.source,
                o.best_us / alt.kernel_us
            ))
        );
    }
    Ok(s)
}

/// One summary row per ledger: the closing table of a namespace.
pub fn summary(ledgers: &[(&Ledger, Option<Alternative>)]) -> String {
    let rows: Vec<Vec<String>> = ledgers
        .iter()
        .filter_map(|(l, alt)| {
            let start = l.starts().next()?;
            let gens: Vec<&Generation> = l.generations().collect();
            let count = |d: Decision| gens.iter().filter(|g| g.decision == d).count();
            let o = outcome(start, &gens);
            let kept: Vec<String> = gens
                .iter()
                .filter(|g| g.decision == Decision::Kept)
                .map(|g| format!("{} {}→{}", g.change.knob, g.change.from, g.change.to))
                .collect();
            Some(vec![
                format!("{} {}", start.op, mage_common::op::Op::dims_label(&start.dims)),
                start.from.clone(),
                gens.len().to_string(),
                count(Decision::Kept).to_string(),
                format!("{} / {}", count(Decision::Void), count(Decision::Wrong)),
                o.as_ref().map_or("–".into(), |o| format!("`{}`", o.best)),
                o.as_ref().map_or("–".into(), |o| format!("{:.2}", o.best_us)),
                o.as_ref().map_or("–".into(), |o| format!("{:.2} ({:.3})", o.current_us, o.best_vs_current)),
                match (alt, &o) {
                    (Some(a), Some(o)) => format!("{} {:.2} ({:.3})", a.implementation, a.kernel_us, o.best_us / a.kernel_us),
                    _ => "–".into(),
                },
                if kept.is_empty() { "none kept".into() } else { kept.join("; ") },
            ])
        })
        .collect();
    markdown_table(
        &[
            "run",
            "from",
            "generations",
            "kept",
            "void / wrong",
            "best",
            "best µs",
            "current µs (ratio)",
            "best alternative µs (ratio)",
            "kept steps",
        ],
        &rows,
    )
}

/// The plain-text table `evolve` prints as it goes.
pub fn progress_table(ledger: &Ledger) -> String {
    let rows: Vec<Vec<String>> = ledger
        .generations()
        .map(|g| {
            let a = g.arms.as_ref();
            vec![
                g.generation.to_string(),
                format!("{} {}→{}", g.change.knob, g.change.from, g.change.to),
                a.map_or("-".into(), |a| format!("{:.2}", a.candidate_us)),
                a.map_or("-".into(), |a| format!("{:.2}", a.incumbent_us)),
                a.map_or("-".into(), |a| format!("{:.2}", a.current_us)),
                a.map_or("-".into(), |a| ratios_text(&a.vs_incumbent)),
                decision_text(g.decision).into(),
            ]
        })
        .collect();
    table(&["gen", "change", "cand µs", "inc µs", "current µs", "vs incumbent", "decision"], &rows)
}

/// The incumbent's kernel µs once a generation is decided: the candidate's
/// where it was kept.
fn after_us(a: &Arms, d: Option<Decision>) -> f64 {
    if d == Some(Decision::Kept) { a.candidate_us } else { a.incumbent_us }
}

/// The incumbent as a step line: its µs after each measured generation,
/// held until the next.
fn incumbent_steps(points: &[(f64, &Arms, Option<Decision>)]) -> Vec<(f64, f64)> {
    let mut line: Vec<(f64, f64)> = vec![];
    for (g, a, d) in points {
        if let Some(&(_, before)) = line.last() {
            line.push((*g, before));
        }
        line.push((*g, after_us(a, *d)));
    }
    line
}

/// The trajectory: kernel µs per generation.
pub fn svg(ledger: &Ledger, alternative: Option<&Alternative>, path: &Path) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let start = ledger.starts().next().ok_or("the ledger has no start entry")?;
    let gens: Vec<&Generation> = ledger.generations().collect();
    // (generation, arms): the baseline is generation 0.
    let mut points: Vec<(f64, &Arms, Option<Decision>)> = start.baseline.iter().map(|a| (0.0, a, None)).collect();
    points.extend(gens.iter().filter_map(|g| g.arms.as_ref().map(|a| (g.generation as f64, a, Some(g.decision)))));
    let values = points.iter().flat_map(|(_, a, _)| [a.candidate_us, a.incumbent_us, a.current_us]).chain(alternative.map(|a| a.kernel_us));
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo * 0.9, hi * 1.1) } else { (0.0, 1.0) };
    let last = gens.iter().map(|g| g.generation).max().unwrap_or(1).max(1) as f64;

    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let title = format!(
        "evolve {} {}: kernel µs per generation (CUPTI, median of 8 rounds)",
        start.op,
        mage_common::op::Op::dims_label(&start.dims)
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..last + 0.5, lo..hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("generation (0: the incumbent against itself)")
        .y_desc("kernel µs")
        .x_labels(last as usize + 2)
        .x_label_formatter(&|v| if (v - v.round()).abs() < 1e-9 { format!("{v:.0}") } else { String::new() })
        .draw()
        .map_err(e)?;

    let (blue, grey, green, red, orange) =
        (RGBColor(66, 110, 180), RGBColor(120, 120, 120), RGBColor(60, 150, 70), RGBColor(200, 60, 60), RGBColor(220, 120, 40));
    chart
        .draw_series(LineSeries::new(points.iter().map(|(g, a, _)| (*g, a.current_us)), grey.stroke_width(2)))
        .map_err(e)?
        .label(format!("current ({})", start.current_stage))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(incumbent_steps(&points), blue.stroke_width(2)))
        .map_err(e)?
        .label("incumbent after each generation")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue.stroke_width(2)));
    if let Some(alt) = alternative {
        chart
            .draw_series(DashedLineSeries::new([(-0.5, alt.kernel_us), (last + 0.5, alt.kernel_us)], 6, 4, orange.stroke_width(2)))
            .map_err(e)?
            .label(format!("best alternative: {} {:.2} µs", alt.implementation, alt.kernel_us))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], orange.stroke_width(2)));
    }
    let candidates = |d: Decision| points.iter().filter(move |(_, _, dd)| *dd == Some(d)).map(|(g, a, _)| (*g, a.candidate_us));
    chart
        .draw_series(candidates(Decision::Kept).map(|p| Circle::new(p, 6, green.filled())))
        .map_err(e)?
        .label("candidate kept")
        .legend(move |(x, y)| Circle::new((x + 9, y), 5, green.filled()));
    chart
        .draw_series(candidates(Decision::Rejected).map(|p| Cross::new(p, 6, red.stroke_width(2))))
        .map_err(e)?
        .label("candidate rejected")
        .legend(move |(x, y)| Cross::new((x + 9, y), 5, red.stroke_width(2)));
    chart
        .draw_series(candidates(Decision::Void).map(|p| Circle::new(p, 6, grey.stroke_width(2))))
        .map_err(e)?
        .label("void (control drifted)")
        .legend(move |(x, y)| Circle::new((x + 9, y), 5, grey.stroke_width(2)));
    // Generations whose output failed the reference were not timed: marked at the incumbent's level.
    let wrong: Vec<(f64, f64)> = gens
        .iter()
        .filter(|g| g.decision == Decision::Wrong)
        .filter_map(|g| {
            let level = points.iter().rev().find(|(at, ..)| *at <= g.generation as f64).map(|(_, a, d)| after_us(a, *d))?;
            Some((g.generation as f64, level))
        })
        .collect();
    if !wrong.is_empty() {
        chart
            .draw_series(wrong.into_iter().map(|p| TriangleMarker::new(p, 7, BLACK.filled())))
            .map_err(e)?
            .label("wrong output (not timed)")
            .legend(|(x, y)| TriangleMarker::new((x + 9, y), 5, BLACK.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolve::ledger::tests::{generation, start};
    use serde_json::json;

    fn ledger(name: &str) -> Ledger {
        let dir = std::env::temp_dir().join(format!("mage-evolve-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("evolve-layernorm-4096x768.jsonl");
        let mut l = Ledger::open(&path, false, "layernorm", &[4096, 768]).unwrap();
        let (s, a, b) = ("warp-t256-stream-f1", "warp-t256-hold8-f1", "warp-t128-hold8-f1");
        l.append(start("layernorm", &[4096, 768], s)).unwrap();
        l.append(generation(1, a, s, "held", Decision::Kept, a, (6.0, 6.9, 5.6))).unwrap();
        l.append(generation(2, b, a, "threads", Decision::Rejected, a, (6.2, 6.05, 5.65))).unwrap();
        l
    }

    fn comparison() -> (String, Value) {
        let r = |imp: &str, kind: &str, us: f64, ok: bool| {
            json!({"op": "layernorm", "dims": [4096, 768], "implementation": imp, "kind": kind,
            "correct_before": {"passed": ok}, "correct_after": {"passed": true}, "hot": {"kernel_us": us}})
        };
        let e = json!({"results": [r("rust current", "rust", 5.7, true), r("triton", "triton", 5.52, true), r("torch", "torch", 12.9, true),
            r("broken", "torch_compile", 1.0, false), {"op": "layernorm", "dims": [8192, 768], "implementation": "triton", "kind": "triton",
            "correct_before": {"passed": true}, "correct_after": {"passed": true}, "hot": {"kernel_us": 0.5}}]});
        ("results/x/comparison.json".into(), e)
    }

    #[test]
    fn the_best_alternative_is_correct_outside_mage_and_at_the_same_shape() {
        let alt = best_alternative(&[comparison()], "layernorm", &[4096, 768]).unwrap();
        assert_eq!((alt.implementation.as_str(), alt.kernel_us), ("triton", 5.52));
        assert_eq!(best_alternative(&[comparison()], "matmul", &[4096, 768]), None);
    }

    #[test]
    fn the_outcome_is_the_incumbent_as_last_measured() {
        let l = ledger("outcome");
        let gens: Vec<&Generation> = l.generations().collect();
        let o = outcome(l.starts().next().unwrap(), &gens).unwrap();
        assert_eq!(o.best, "warp-t256-hold8-f1");
        assert_eq!((o.best_us, o.current_us), (6.05, 5.65));
        assert!((o.best_vs_current - 6.05 / 5.65).abs() < 1e-12);
        let o = outcome(l.starts().next().unwrap(), &gens[..1]).unwrap();
        assert_eq!((o.best_us, o.current_us), (6.0, 5.6));
        let _ = std::fs::remove_dir_all(l.path.parent().unwrap());
    }

    #[test]
    fn the_table_lists_every_generation_and_the_summary_each_run() {
        let l = ledger("table");
        let alt = best_alternative(&[comparison()], "layernorm", &[4096, 768]);
        let md = markdown(&l, alt.as_ref()).unwrap();
        assert!(md.contains("| 1 | held: a → b | `warp-t256-hold8-f1` | 6.00 | 6.90 | 5.60 | 0.870 [0.870–0.870] |"), "{md}");
        assert!(md.contains("| rejected | because |"), "{md}");
        assert!(md.contains("Baseline: the incumbent against a second copy of itself 1.000"), "{md}");
        assert!(md.contains("Best: `warp-t256-hold8-f1`, 6.05 µs against `current`'s 5.65"), "{md}");
        assert!(md.contains("best alternative triton 5.52 µs"), "{md}");
        let sum = summary(&[(&l, alt)]);
        assert!(sum.contains("| layernorm 4096x768 | mage-002 | 2 | 1 | 0 / 0 | `warp-t256-hold8-f1` | 6.05 | 5.65 (1.071) | triton 5.52 (1.096) | held a→b |"), "{sum}");
        let _ = std::fs::remove_dir_all(l.path.parent().unwrap());
    }

    #[test]
    fn the_figure_draws_every_series() {
        let l = ledger("figure");
        let alt = best_alternative(&[comparison()], "layernorm", &[4096, 768]);
        let path = l.path.with_extension("svg");
        svg(&l, alt.as_ref(), &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        for label in
            ["current (mage-007)", "incumbent after each", "best alternative: triton 5.52 µs", "candidate kept", "candidate rejected"]
        {
            assert!(text.contains(label), "no `{label}` in the figure");
        }
        let _ = std::fs::remove_dir_all(l.path.parent().unwrap());
    }
}
