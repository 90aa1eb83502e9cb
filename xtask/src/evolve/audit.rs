//! `evolve --audit <op>`: every configuration of the op's space against
//! the f64 reference, on the GPU at the op's sweep shapes (where a
//! configuration fits them), or with `--emulate` on the emulator at the
//! space's small audit shapes (what `cargo test` runs in CI). Any failure
//! fails the command; a summary and every row are written.

use mage_common::fixtures::{DEFAULT_SEED, write_atomic};
use mage_common::op::Op;
use mage_common::space::{AuditRow, Outcome, Space};
use mage_runtime::gpu::{DeviceInputs, Gpu};
use std::path::Path;

/// Every configuration at every shape, on the GPU: each shape's inputs
/// uploaded once.
pub fn on_gpu(gpu: &Gpu, space: &Space, shapes: &[(Vec<u32>, &str)]) -> Result<Vec<AuditRow>, String> {
    let op = space.op;
    let cases = shapes
        .iter()
        .map(|(dims, generator)| Ok((dims.clone(), (op.generator(Some(generator))?.generate)(dims, DEFAULT_SEED))))
        .collect::<Result<Vec<_>, String>>()?;
    let mut device: Option<(usize, DeviceInputs)> = None;
    space.audit(&cases, |i, plan| {
        let (dims, inputs) = &cases[i];
        if device.as_ref().is_none_or(|(at, _)| *at != i) {
            eprintln!("{} {}: {} configurations", op.name, Op::dims_label(dims), space.configs().len());
            device = None;
            device = Some((i, gpu.upload(inputs)?));
        }
        gpu.run(op, plan, dims, &device.as_ref().unwrap().1)
    })
}

/// Counts of one shape's rows: (passed, failed, unfit, largest error of those that passed).
fn counts<'a>(rows: impl Iterator<Item = &'a AuditRow>) -> (usize, usize, usize, f64) {
    rows.fold((0, 0, 0, 0.0), |(p, f, u, e), r| match &r.outcome {
        Outcome::Passed { max_abs_err } => (p + 1, f, u, e.max(*max_abs_err)),
        Outcome::Failed { .. } => (p, f + 1, u, e),
        Outcome::Unfit { .. } => (p, f, u + 1, e),
    })
}

/// The audit as markdown: totals, one row per shape, every failure, and
/// why configurations did not fit (grouped).
pub fn markdown(space: &Space, machine: &str, rows: &[AuditRow]) -> String {
    let mut shapes: Vec<&Vec<u32>> = vec![];
    for r in rows {
        if !shapes.contains(&&r.dims) {
            shapes.push(&r.dims);
        }
    }
    let (passed, failed, unfit, _) = counts(rows.iter());
    let mut s = format!(
        "# Audit of the {} space on the {machine}\n\n{} configurations at {} shapes, against the f64 reference: {passed} passed, {failed} failed, {unfit} did not fit.\n\n",
        space.op.name,
        space.configs().len(),
        shapes.len()
    );
    let table: Vec<Vec<String>> = shapes
        .iter()
        .map(|dims| {
            let (p, f, u, e) = counts(rows.iter().filter(|r| &r.dims == *dims));
            vec![Op::dims_label(dims), p.to_string(), f.to_string(), u.to_string(), format!("{e:.2e}")]
        })
        .collect();
    s += &crate::report::markdown_table(&["dims", "passed", "failed", "did not fit", "largest error of those that passed"], &table);
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed { error } => Some(format!("- `{}` at {}: {error}", r.config, Op::dims_label(&r.dims))),
            _ => None,
        })
        .collect();
    if !failures.is_empty() {
        s += &format!("\nFailures:\n\n{}\n", failures.join("\n"));
    }
    let mut reasons: Vec<(String, usize)> = vec![];
    for r in rows {
        if let Outcome::Unfit { why } = &r.outcome {
            let key = format!("{}: {why}", Op::dims_label(&r.dims));
            match reasons.iter_mut().find(|(k, _)| *k == key) {
                Some((_, n)) => *n += 1,
                None => reasons.push((key, 1)),
            }
        }
    }
    if !reasons.is_empty() {
        s += "\nDid not fit:\n\n";
        for (why, n) in reasons {
            s += &format!("- {n} × {why}\n");
        }
    }
    s
}

/// Writes `evolve-audit-<op>-<machine>.md` and `.json` into `dir`; an
/// error names the failures.
pub fn finish(space: &Space, machine: &str, rows: &[AuditRow], dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let stem = dir.join(format!("evolve-audit-{}-{machine}", space.op.name));
    let md = markdown(space, machine, rows);
    write_atomic(&stem.with_extension("md"), md.as_bytes())?;
    write_atomic(&stem.with_extension("json"), serde_json::to_string_pretty(rows).unwrap().as_bytes())?;
    say!("{md}");
    say!("audit: {}.md", stem.display());
    let (_, failed, _, _) = counts(rows.iter());
    if failed == 0 { Ok(()) } else { Err(format!("{failed} (configuration, shape) pairs of the {} space failed", space.op.name)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_and_names_failures_and_misfits() {
        let space = &mage_layernorm::space::SPACE;
        let row = |config: &str, dims: &[u32], outcome| AuditRow { config: config.into(), dims: dims.to_vec(), outcome };
        let rows = vec![
            row("warp-t256-stream-f1", &[8, 768], Outcome::Passed { max_abs_err: 2e-6 }),
            row("warp-t256-hold1-f1", &[8, 768], Outcome::Unfit { why: "too wide".into() }),
            row("warp-t128-hold1-f1", &[8, 768], Outcome::Unfit { why: "too wide".into() }),
            row("warp-t256-hold8-f1", &[8, 768], Outcome::Failed { error: "3 of 6144 elements outside".into() }),
        ];
        let md = markdown(space, "gpu", &rows);
        assert!(md.contains("1 passed, 1 failed, 2 did not fit"), "{md}");
        assert!(md.contains("| 8x768 | 1 | 1 | 2 | 2.00e-6 |"), "{md}");
        assert!(md.contains("- `warp-t256-hold8-f1` at 8x768: 3 of 6144 elements outside"), "{md}");
        assert!(md.contains("- 2 × 8x768: too wide"), "{md}");
        let dir = std::env::temp_dir().join(format!("mage-audit-test-{}", std::process::id()));
        let e = finish(space, "gpu", &rows, &dir).unwrap_err();
        assert!(e.contains("1 (configuration, shape) pairs"), "{e}");
        let back: Vec<AuditRow> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("evolve-audit-layernorm-gpu.json")).unwrap()).unwrap();
        assert_eq!(back, rows);
        let _ = std::fs::remove_dir_all(dir);
    }
}
