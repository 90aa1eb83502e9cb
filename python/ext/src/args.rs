//! The module's arguments read from Python values: every misuse (a negative
//! dim, a name that is not a str, a device past the count) is a
//! `MageError` naming the argument and its value, never pyo3's
//! `OverflowError` or `TypeError`.

use crate::error;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyList, PyString, PyTuple};

/// `-4`, or `'4' (a str)`: a value as a message shows it, its repr cut to 40
/// characters, with its type where it is not an int.
pub fn shown(obj: &Bound<'_, PyAny>) -> String {
    let repr = obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    let repr = if repr.chars().count() > 40 { format!("{}…", repr.chars().take(40).collect::<String>()) } else { repr };
    let kind = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    if is_integer(obj) { repr } else { format!("{repr} ({} {kind})", if kind.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }) }
}

/// An int or an object with `__index__` (a NumPy integer), not a bool.
fn is_integer(obj: &Bound<'_, PyAny>) -> bool {
    !obj.is_instance_of::<PyBool>() && obj.hasattr("__index__").unwrap_or(false)
}

/// A whole number that fits `T`, or an error `{what} is {value}; {rule}`.
fn whole<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, what: &str, rule: &str) -> PyResult<T> {
    if is_integer(obj)
        && let Ok(v) = obj.extract::<T>()
    {
        return Ok(v);
    }
    Err(error(format!("{what} is {}; {rule}", shown(obj))))
}

/// The items of a list or a tuple (a `torch.Size` too), or an error
/// `{what} is {value}; it must be {must}`.
pub fn items<'py>(obj: &Bound<'py, PyAny>, what: &str, must: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(list) = obj.cast::<PyList>() {
        return Ok(list.iter().collect());
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return Ok(tuple.iter().collect());
    }
    Err(error(format!("{what} is {}; it must be {must}", shown(obj))))
}

pub const DIM_RULE: &str = "a dim is a whole number from 0 to 2^32 - 1";

/// An op's dims: a list or tuple of whole numbers below 2^32.
pub fn dims(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    items(obj, "dims", "a list or tuple of whole numbers")?
        .iter()
        .enumerate()
        .map(|(i, d)| whole(d, &format!("dims[{i}]"), DIM_RULE))
        .collect()
}

/// The shapes of an op's inputs: a list of lists (or tuples, `torch.Size`)
/// of whole numbers.
pub fn shapes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<usize>>> {
    if let Some(shapes) = plain_shapes(obj) {
        return Ok(shapes);
    }
    items(obj, "shapes", "a list of shapes, one per input")?
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            items(shape, &format!("shapes[{i}]"), "a list or tuple of axis lengths")?
                .iter()
                .enumerate()
                .map(|(j, len)| whole(len, &format!("shapes[{i}][{j}]"), "an axis length is a whole number from 0 to 2^64 - 1"))
                .collect()
        })
        .collect()
}

/// Shapes of lists or tuples of Python ints, read with no message made
/// (a plan lookup's host time); None for anything else, which the checked
/// path reads or refuses.
fn plain_shapes(obj: &Bound<'_, PyAny>) -> Option<Vec<Vec<usize>>> {
    fn seq<'py>(obj: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
        match obj.cast::<PyList>() {
            Ok(l) => Some(l.iter().collect()),
            Err(_) => obj.cast::<PyTuple>().ok().map(|t| t.iter().collect()),
        }
    }
    seq(obj)?
        .iter()
        .map(|shape| seq(shape)?.iter().map(|len| if len.is_exact_instance_of::<PyInt>() { len.extract().ok() } else { None }).collect())
        .collect()
}

/// A str argument: an op or a stage name.
pub fn name(obj: &Bound<'_, PyAny>, what: &str, must: &str) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(error(format!("{what} is {}; it must be {must}", shown(obj)))),
    }
}

/// An op by name.
pub fn op(obj: &Bound<'_, PyAny>) -> PyResult<&'static mage_common::op::Op> {
    let names: Vec<_> = mage_runtime::ops::all().iter().map(|o| o.name).collect();
    let name = name(obj, "op", &format!("the name of an op (a str): {}", names.join(", ")))?;
    mage_runtime::ops::find(&name).map_err(error)
}

/// A stage name (`mage-006`) or `current`.
pub fn stage(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    name(obj, "stage", "a stage name (a str such as `mage-001`) or `current`")
}

/// A device ordinal (whether the device exists is asked of the driver).
pub fn device(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    whole(obj, "device", "a device is a whole number from 0 to the device count - 1 (cuda:0 is 0)")
}

/// A case directory's path: a str or an `os.PathLike`.
pub fn path(obj: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    if obj.cast::<PyString>().is_err() && !obj.hasattr("__fspath__")? {
        return Err(error(format!("path is {}; it must be a str or an os.PathLike naming a case directory", shown(obj))));
    }
    obj.extract().map_err(|_| error(format!("path is {}; it must be a str or an os.PathLike naming a case directory", shown(obj))))
}

/// One input's little-endian bytes (`bytes` or `bytearray`), or `None`.
pub fn input_bytes(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<u8>>> {
    if obj.is_none() {
        Ok(None)
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(Some(b.as_bytes().to_vec()))
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        Ok(Some(b.to_vec()))
    } else {
        Err(error(format!("{what} is {}; it must be bytes (little-endian, 4 per value) or None", shown(obj))))
    }
}
