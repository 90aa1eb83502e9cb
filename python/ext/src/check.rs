//! `mage.compare`: the one check rule (`mage_common::numeric::compare`)
//! for Python code, on little-endian bytes, returning the check block the
//! harness writes into `comparison.json`.

use crate::error;
use mage_common::numeric::{Comparison, Reference, Tolerance, compare};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

fn words<'a, const N: usize>(what: &str, bytes: &'a [u8]) -> PyResult<impl Iterator<Item = [u8; N]> + 'a> {
    if !bytes.len().is_multiple_of(N) {
        return Err(error(format!("{what} holds {} bytes, not a whole number of {N}-byte values", bytes.len())));
    }
    Ok(bytes.chunks_exact(N).map(|c| c.try_into().expect("chunks of N")))
}

/// A finite value, or `None` (JSON's null) for an infinity or NaN.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// The check block of `c` (see `python/mage_compare/numeric.py`).
pub fn block<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("passed", c.passed())?;
    d.set_item("checked", c.elements)?;
    d.set_item("failures", c.failures)?;
    d.set_item("nan_count", c.nan_count)?;
    d.set_item("max_abs_err", if c.nan_count == c.elements { None } else { finite(c.max_abs_err) })?;
    d.set_item("rel_l2_err", finite(c.rel_l2_err))?;
    d.set_item("max_rel_err", finite(c.max_rel_err))?;
    d.set_item("worst_ratio", finite(c.worst_ratio))?;
    let first = PyList::empty(py);
    for &(index, out, reference) in &c.first_failures {
        let f = PyDict::new(py);
        f.set_item("index", index)?;
        f.set_item("out", finite(out as f64))?;
        f.set_item("ref", finite(reference))?;
        first.append(f)?;
    }
    d.set_item("first_failures", first)?;
    let t = PyDict::new(py);
    t.set_item("abs", c.tolerance.abs)?;
    t.set_item("rel", c.tolerance.rel)?;
    t.set_item("of_magnitude", c.tolerance.of_magnitude)?;
    d.set_item("tolerance", t)?;
    Ok(d)
}

/// Compares `out` (float32 values, little-endian bytes) with `reference`
/// (float64) under `|out - ref| <= abs + rel·|ref| + of_magnitude·m`, `m`
/// from `magnitudes` (float64, one per element; needed where
/// `of_magnitude` is not 0): the same function `run`, `sweep` and
/// `gpu-check` use. Returns the check block: passed, checked, failures,
/// nan_count, max_abs_err, rel_l2_err, max_rel_err, worst_ratio,
/// first_failures, tolerance.
#[pyfunction]
#[pyo3(name = "compare", signature = (out, reference, abs, rel, magnitudes = None, of_magnitude = 0.0))]
pub fn compare_bytes<'py>(
    py: Python<'py>,
    out: &[u8],
    reference: &[u8],
    abs: f64,
    rel: f64,
    magnitudes: Option<&[u8]>,
    of_magnitude: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let out: Vec<f32> = words::<4>("out", out)?.map(f32::from_le_bytes).collect();
    let values: Vec<f64> = words::<8>("reference", reference)?.map(f64::from_le_bytes).collect();
    if out.len() != values.len() {
        return Err(error(format!("output has {} values; the reference {}", out.len(), values.len())));
    }
    let magnitudes: Vec<f64> = match magnitudes {
        Some(m) => words::<8>("magnitudes", m)?.map(f64::from_le_bytes).collect(),
        None => vec![],
    };
    if of_magnitude != 0.0 && magnitudes.len() != values.len() {
        return Err(error("a tolerance scaled by magnitudes needs one magnitude per element"));
    }
    if !magnitudes.is_empty() && magnitudes.len() != values.len() {
        return Err(error(format!("{} magnitudes for {} values", magnitudes.len(), values.len())));
    }
    let tol = Tolerance { abs, rel, of_magnitude };
    let c = py.detach(|| compare(&out, &Reference { values, magnitudes }, tol));
    block(py, &c)
}
