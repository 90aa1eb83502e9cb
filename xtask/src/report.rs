//! Reports of runs and sweeps: serde for `--json` and `results/`, and
//! plain tables for people.

use mage_common::numeric::Comparison;
use mage_runtime::gpu::{DeviceInfo, Timing};
use serde::Serialize;

/// One stage run on one shape.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub op: String,
    /// The stage that ran.
    pub stage: String,
    /// Whether `current` picked it.
    pub by_current: bool,
    /// Where the stage is outside the op's numerical contract, what differs
    /// (its check used its own tolerance).
    pub outside_contract: Option<String>,
    pub dims: Vec<u32>,
    /// The generator of the inputs (`normal`, `uniform`, `power-law`).
    pub generator: String,
    /// `generated (normal), seed N` or `case DIR`.
    pub inputs: String,
    /// `gpu` or `emulator`.
    pub machine: String,
    /// The output against the f64 reference, before timing.
    pub check: Comparison,
    /// Again after the timing loops (GPU only).
    pub check_after_timing: Option<Comparison>,
    pub timing: Option<Timing>,
    /// Fewest bytes one call moves, and the bandwidth that implies.
    pub min_bytes: u64,
    pub effective_gb_per_s: Option<f64>,
}

impl RunReport {
    pub fn correct(&self) -> bool {
        self.check.passed() && self.check_after_timing.as_ref().is_none_or(|c| c.passed())
    }
}

/// A sweep: its device and every run.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    pub op: String,
    pub machine: String,
    pub device: Option<DeviceInfo>,
    pub clocks_start: Option<mage_runtime::gpu::Clocks>,
    pub clocks_end: Option<mage_runtime::gpu::Clocks>,
    pub ptx_sha256: String,
    /// The commit the binary was built from.
    pub commit: String,
    pub instruments: Instruments,
    /// The stage `current` picks at each workload (its time is that stage's row).
    pub current: Vec<CurrentPick>,
    pub runs: Vec<RunReport>,
}

/// What `current` picks for one workload of a sweep.
#[derive(Clone, Debug, Serialize)]
pub struct CurrentPick {
    pub dims: Vec<u32>,
    pub generator: String,
    pub stage: String,
}

/// What each number in a timing was measured with.
#[derive(Clone, Debug, Serialize)]
pub struct Instruments {
    pub kernel_us: &'static str,
    pub span_us: &'static str,
    pub back_to_back_us: &'static str,
}

pub const INSTRUMENTS: Instruments = Instruments {
    kernel_us: "CUPTI kernel activity records (CONCURRENT_KERNEL): sum of kernel durations per call over 100 calls, hot L2",
    span_us: "CUDA-event span around one call: median of 300 warmed samples in 3 rounds, [range of round medians]",
    back_to_back_us: "CUDA-event span around 100 back-to-back calls, divided by 100; median of 3",
};

fn fmt_us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// A table with a header row, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string()
    };
    let mut out = vec![line(header.iter().map(|s| s.to_string()).collect())];
    out.push(line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

/// A markdown table, `|` in a cell escaped; each line ends in `\n`.
pub fn markdown_table(header: &[impl AsRef<str>], rows: &[Vec<String>]) -> String {
    let header: Vec<&str> = header.iter().map(AsRef::as_ref).collect();
    let mut s = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for r in rows {
        s += &format!("| {} |\n", r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
    }
    s
}

/// The workload of a row of evidence: the label it carries, or its dims
/// (`4096x768`) with a generator other than the default (`normal` or, for
/// graphs, `uniform`) after them.
pub fn workload_label(row: &serde_json::Value) -> String {
    if let Some(l) = row["label"].as_str() {
        return l.to_string();
    }
    let dims: Vec<String> = row["dims"].as_array().into_iter().flatten().map(|d| d.to_string()).collect();
    match row["generator"].as_str() {
        Some(g) if !g.is_empty() && g != "normal" && g != "uniform" => format!("{} {g}", dims.join("x")),
        _ => dims.join("x"),
    }
}

/// `rust current → mage-007` where the evidence says which stage `current`
/// ran; `None` for a row with no implementation.
pub fn implementation_label(row: &serde_json::Value) -> Option<String> {
    let name = row["implementation"].as_str()?;
    Some(match row["info"]["stage_run"].as_str() {
        Some(stage) if row["stage"].as_str() == Some(mage_common::op::CURRENT) => format!("{name} → {stage}"),
        _ => name.to_string(),
    })
}

/// The table of a sweep or a run: one row per (shape, stage).
pub fn runs_table(runs: &[RunReport]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let t = r.timing.as_ref();
            let stage = if r.by_current { format!("current → {}", r.stage) } else { r.stage.clone() };
            vec![
                mage_common::op::Op::dims_label(&r.dims),
                stage,
                if r.correct() { format!("ok {:.1e}", r.check.max_abs_err) } else { "WRONG".into() },
                fmt_us(t.and_then(|t| t.kernel_us)),
                t.and_then(|t| t.kernels_per_call).map_or("-".into(), |k| format!("{k:.0}")),
                t.map_or("-".into(), |t| format!("{:.2} [{:.2}]", t.span.median_us, t.span.round_range_us)),
                fmt_us(t.map(|t| t.back_to_back.median_us)),
                r.effective_gb_per_s.map_or("-".into(), |g| format!("{g:.0}")),
            ]
        })
        .collect();
    table(&["shape", "stage", "check (max err)", "kernel µs", "k/call", "span µs [range]", "b2b µs", "GB/s"], &rows)
}
