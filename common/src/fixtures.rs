//! Deterministic inputs and fixture cases.
//!
//! A case is a directory:
//!
//! * `input.json`: op, dims, seed, warmup, iterations;
//! * one little-endian file per input (`a.bin`, `b.bin`, `c.bin`, and
//!   `rowptr.bin`, `indices.bin` as u32 for the neighbor op);
//! * optionally `expected.bin`: the output an independent implementation
//!   computed (golden fixtures under `fixtures/`);
//! * `inputs.sha256.json`: the sha256 of each input file and of
//!   `expected.bin` where there is one.
//!
//! Every file of a case is read only if it is a regular file of the size
//! the dims need (a FIFO or a device would block or never end).
//!
//! The generator is SplitMix64 feeding a Box–Muller transform, written out
//! here so the bytes never change with a dependency's version.

use crate::op::{HostBuf, Op};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The seed cases and runs use unless told otherwise.
pub const DEFAULT_SEED: u64 = 20260910;
/// The standard deviation of generated inputs: normal(0, 0.25).
pub const DEFAULT_STD: f32 = 0.25;

/// SplitMix64: small, fast, and stable by construction.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// A child generator for stream `k` (one per input buffer).
    pub fn stream(seed: u64, k: u64) -> Self {
        let mut r = Rng(seed ^ k.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next_u64();
        r
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Standard normal (Box–Muller, one value per call).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    /// `n` values from normal(mean, std), rounded to f32.
    pub fn normal_vec(&mut self, n: usize, mean: f32, std: f32) -> Vec<f32> {
        (0..n).map(|_| (mean as f64 + std as f64 * self.normal()) as f32).collect()
    }
}

/// `normal(0, 0.25)` for input `k` of a case.
pub fn normal_input(seed: u64, k: u64, n: usize) -> Vec<f32> {
    Rng::stream(seed, k).normal_vec(n, 0.0, DEFAULT_STD)
}

/// The `input.json` of a case; a key it does not know is an error.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub op: String,
    pub dims: Vec<u32>,
    pub seed: u64,
    pub warmup: u32,
    pub iterations: u32,
    /// How the inputs were made, for people (`normal(0, 0.25)`, `constant`).
    #[serde(default)]
    pub distribution: String,
    /// The op's generator that drew the inputs (`uniform`, `power-law`);
    /// absent for ops with one generator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generator: String,
}

/// A case read back from disk and checked.
#[derive(Clone, Debug)]
pub struct Case {
    pub dir: PathBuf,
    pub spec: CaseSpec,
    pub inputs: Vec<HostBuf>,
    pub sha256: BTreeMap<String, String>,
    pub expected: Option<Vec<f32>>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a case's files into `dir` (creating it), each through a
/// temporary file and a rename, with `expected.bin` where `expected` is
/// given; `inputs.sha256.json` records every one of them. [`create_case`]
/// is the one to call where `dir` may already hold something.
pub fn write_case(dir: &Path, op: &Op, spec: &CaseSpec, inputs: &[HostBuf], expected: Option<&[f32]>) -> Result<(), String> {
    op.check_inputs(&spec.dims, inputs)?;
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut sums = BTreeMap::new();
    for (spec_in, buf) in op.inputs.iter().zip(inputs) {
        let name = format!("{}.bin", spec_in.file);
        let bytes = buf.to_le_bytes();
        sums.insert(name.clone(), sha256_hex(&bytes));
        write_atomic(&dir.join(&name), &bytes)?;
    }
    if let Some(values) = expected {
        let n = op.output_len(&spec.dims);
        if values.len() != n {
            return Err(format!("expected.bin: {} values; the output has {n}", values.len()));
        }
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        sums.insert(EXPECTED.into(), sha256_hex(&bytes));
        write_atomic(&dir.join(EXPECTED), &bytes)?;
    }
    write_atomic(&dir.join("inputs.sha256.json"), json_bytes(&sums).as_slice())?;
    write_atomic(&dir.join("input.json"), json_bytes(spec).as_slice())?;
    Ok(())
}

/// What a case directory about to be written would land on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Nothing there yet.
    New,
    /// An empty directory.
    Empty,
    /// A case, to be replaced whole.
    Case,
}

/// Whether a case may be written at `dir`: nothing there, or an empty
/// directory, or (only with `replace`) an existing case that holds nothing
/// but a case's files. A file, a directory with other contents, or a case
/// holding anything else (notes, a folder) is refused even with `replace`:
/// replacing it whole would delete them.
pub fn case_destination(dir: &Path, op: &Op, replace: bool) -> Result<Destination, String> {
    let d = dir.display();
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Destination::New),
        Err(e) => return Err(format!("{d}: {e}")),
    };
    if !meta.is_dir() {
        return Err(format!("{d} exists and is not a directory; name a new directory for the case"));
    }
    let empty = fs::read_dir(dir).map_err(|e| format!("{d}: {e}"))?.next().is_none();
    if empty {
        Ok(Destination::Empty)
    } else if !dir.join("input.json").is_file() {
        Err(format!("{d} is a directory that holds other files, not a case (no input.json); name a new or empty directory"))
    } else if replace {
        let others = foreign_entries(dir, op)?;
        if others.is_empty() {
            Ok(Destination::Case)
        } else {
            let (n, shown) = (others.len(), others.iter().take(3).cloned().collect::<Vec<_>>().join(", "));
            let more = if n > 3 { format!(" and {} more", n - 3) } else { String::new() };
            Err(format!(
                "the case {d} also holds {shown}{more}, not files of a case; --force replaces a case whole, so move {} out first or name another directory",
                if n == 1 { "it" } else { "them" }
            ))
        }
    } else {
        Err(format!("the directory {d} already holds a case; pass --force to replace it whole (expected.bin included)"))
    }
}

/// The entries of a case directory that are not files of a case: of `op`,
/// or of the op its `input.json` names. Sorted; a folder ends in `/`.
fn foreign_entries(dir: &Path, op: &Op) -> Result<Vec<String>, String> {
    let d = dir.display();
    let mut ours = case_files(op);
    let named = fs::read_to_string(dir.join("input.json")).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let named = named.as_ref().and_then(|v| v["op"].as_str()).unwrap_or_default().to_string();
    if named != op.name {
        // The case being replaced may be of another op, with other inputs;
        // any op's input file names are a case's.
        ours.extend(["a", "b", "c", "rowptr", "indices"].iter().map(|f| format!("{f}.bin")));
    }
    let mut others = vec![];
    for entry in fs::read_dir(dir).map_err(|e| format!("{d}: {e}"))? {
        let entry = entry.map_err(|e| format!("{d}: {e}"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file {
            others.push(if entry.file_type().is_ok_and(|t| t.is_dir()) { format!("{name}/") } else { name });
        } else if !ours.contains(&name) {
            others.push(name);
        }
    }
    others.sort();
    Ok(others)
}

/// Writes a case directory whole, or not at all: the files go to a
/// temporary directory beside `dir`, renamed to `dir` once complete. An
/// existing case at `dir` is replaced only with `replace`, and then every
/// old file goes (a stale `expected.bin` would pass against new inputs).
/// Interrupted (a signal, see [`crate::cleanup`]), the staging goes and
/// the old case stays.
pub fn create_case(dir: &Path, op: &Op, spec: &CaseSpec, inputs: &[HostBuf], replace: bool) -> Result<(), String> {
    let destination = case_destination(dir, op, replace)?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    let staged = temp_beside(dir, "new");
    let _staged = crate::cleanup::temporary(&staged);
    let written = write_case(&staged, op, spec, inputs, None).and_then(|()| match destination {
        Destination::New | Destination::Empty => rename(&staged, dir),
        Destination::Case => {
            let old = temp_beside(dir, "old");
            let _old = crate::cleanup::moved_aside(&old, dir);
            {
                let _whole = crate::cleanup::critical();
                rename(dir, &old)?;
                if let Err(e) = rename(&staged, dir) {
                    let _ = fs::rename(&old, dir);
                    return Err(e);
                }
            }
            fs::remove_dir_all(&old).map_err(|e| format!("removing the replaced case {}: {e}", old.display()))
        }
    });
    if written.is_err() {
        let _ = fs::remove_dir_all(&staged);
    }
    written
}

fn rename(from: &Path, to: &Path) -> Result<(), String> {
    fs::rename(from, to).map_err(|e| format!("renaming {} to {}: {e}", from.display(), to.display()))
}

/// The independent output of a case, where it has one.
pub const EXPECTED: &str = "expected.bin";

/// The files of a case that `run --case` reads, by name.
pub fn case_files(op: &Op) -> Vec<String> {
    let inputs = op.inputs.iter().map(|i| format!("{}.bin", i.file));
    ["input.json", "inputs.sha256.json"].into_iter().map(String::from).chain(inputs).chain([EXPECTED.to_string()]).collect()
}

/// The files of a case `inputs.sha256.json` records: every input, and
/// `expected.bin`.
pub fn hashed_files(op: &Op) -> Vec<String> {
    op.inputs.iter().map(|i| format!("{}.bin", i.file)).chain([EXPECTED.to_string()]).collect()
}

fn json_bytes<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("serialising json");
    s.push('\n');
    s.into_bytes()
}

/// `.NAME.KIND<pid>` beside `path`: hidden, and unique to this process.
fn temp_beside(path: &Path, kind: &str) -> PathBuf {
    let name = path.file_name().map_or("out".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{kind}{}", std::process::id()))
}

/// Writes `bytes` to `path` through a temporary file beside it, synced,
/// and a rename, replacing what `path` held (the folder synced after). On
/// any error the temporary file is removed and `path` is as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!("{} is a directory; name a file", path.display()));
    }
    let tmp = temp_beside(path, "tmp");
    let _tmp = crate::cleanup::temporary(&tmp);
    let synced = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, bytes)?;
        f.sync_all()
    };
    let written = synced().map_err(|e| format!("writing {}: {e}", path.display())).and_then(|()| rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    } else if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The rename is on disk once the folder is; a folder that cannot be
        // opened to sync (some filesystems) still holds the file.
        let _ = fs::File::open(dir).and_then(|d| d.sync_all());
    }
    written
}

/// [`write_atomic`] that never replaces anything: an existing `path` is
/// an error and stays as it was.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = temp_beside(path, "tmp");
    let _tmp = crate::cleanup::temporary(&tmp);
    let exists = || format!("{} exists; it is left as it was", path.display());
    let written = fs::write(&tmp, bytes).map_err(|e| format!("writing {}: {e}", path.display())).and_then(|()| {
        // A hard link never replaces its target, so a file that appeared
        // since any earlier check survives.
        match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists()),
            Err(_) if fs::symlink_metadata(path).is_ok() => Err(exists()),
            Err(_) => rename(&tmp, path),
        }
    });
    let _ = fs::remove_file(&tmp);
    written
}

/// The most a case's JSON file (`input.json`, `inputs.sha256.json`) may hold.
pub const JSON_LIMIT: u64 = 1 << 20;

/// What a file that is not a regular file is, for messages.
fn kind_of(t: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Why a file of a case cannot be read as one.
pub enum ReadError {
    /// Opening or reading failed (missing, no permission).
    Io(std::io::Error),
    /// Not a regular file (`a FIFO`, `a directory`): never read.
    NotRegular(&'static str),
    /// A regular file of this many bytes, not the size wanted: never read.
    Size(u64),
}

/// Reads `path` only if it is a regular file (a FIFO would block, a device
/// never end) whose size `size_ok` accepts; both are checked on the opened
/// file before a byte is read. It is opened without blocking, so a FIFO
/// with no writer does not hang the open.
pub fn read_regular(path: &Path, size_ok: impl Fn(u64) -> bool) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(ReadError::Io)?;
    let meta = f.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind_of(meta.file_type())));
    }
    if !size_ok(meta.len()) {
        return Err(ReadError::Size(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if !size_ok(bytes.len() as u64) {
        return Err(ReadError::Size(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Reads a case's JSON file (`input.json`, `inputs.sha256.json`): a
/// regular file of at most [`JSON_LIMIT`] bytes, in UTF-8, a leading byte
/// order mark (as some editors write) skipped.
fn read_case_json(dir: &Path, name: &str) -> Result<String, String> {
    let d = dir.display();
    let bytes = read_regular(&dir.join(name), |n| n <= JSON_LIMIT).map_err(|e| match e {
        ReadError::Io(e) => format!("case {d}: {name}: {e}"),
        ReadError::NotRegular(kind) => format!("case {d}: {name} is {kind}, not a regular file"),
        ReadError::Size(n) => format!("case {d}: {name} holds {n} bytes; a case's JSON file holds at most {JSON_LIMIT}"),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| format!("case {d}: {name} is not UTF-8 text: {e}"))?;
    Ok(text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text))
}

/// Reads and checks a case's `input.json` alone: it names this op, dims
/// the op accepts and one of its generators, and no key it does not know.
pub fn read_spec(dir: &Path, op: &Op) -> Result<CaseSpec, String> {
    let d = dir.display();
    if !dir.is_dir() {
        return Err(format!("case {d} is not a directory"));
    }
    let spec_text = read_case_json(dir, "input.json")?;
    let spec: CaseSpec = serde_json::from_str(&spec_text).map_err(|e| format!("case {d}: input.json: {e}"))?;
    if spec.op != op.name {
        return Err(format!("case {d} is a `{}` case, not `{}`", spec.op, op.name));
    }
    op.check_dims(&spec.dims).map_err(|e| format!("case {d}: input.json: {e}"))?;
    op.generator(Some(&spec.generator)).map_err(|e| format!("case {d}: input.json: {e}"))?;
    Ok(spec)
}

/// Checks `bytes` of the case file `name` against `inputs.sha256.json`.
fn check_sha256(d: &std::path::Display, sha256: &BTreeMap<String, String>, name: &str, bytes: &[u8]) -> Result<(), String> {
    let got = sha256_hex(bytes);
    match sha256.get(name) {
        Some(s) if *s == got => Ok(()),
        Some(s) => Err(format!("case {d}: {name} has sha256 {got}, but inputs.sha256.json records {s}")),
        None => Err(format!("case {d}: inputs.sha256.json has no entry for {name}")),
    }
}

/// Reads and checks a case: `input.json` names this op and valid dims;
/// `inputs.sha256.json` names only files of the case; every input file,
/// and `expected.bin` where there is one, is a regular file of the right
/// length whose sha256 is recorded and matches.
pub fn read_case(dir: &Path, op: &Op) -> Result<Case, String> {
    let d = dir.display();
    let spec = read_spec(dir, op)?;
    let sums_text = read_case_json(dir, "inputs.sha256.json")?;
    let sha256: BTreeMap<String, String> = serde_json::from_str(&sums_text).map_err(|e| format!("case {d}: inputs.sha256.json: {e}"))?;
    let hashed = hashed_files(op);
    if let Some(stray) = sha256.keys().find(|k| !hashed.contains(k)) {
        return Err(format!(
            "case {d}: inputs.sha256.json records {stray}, which is not a file of a {} case ({})",
            op.name,
            hashed.join(", ")
        ));
    }
    let lens = op.input_lens(&spec.dims);
    let mut inputs = vec![];
    for (input, want) in op.inputs.iter().zip(&lens) {
        let name = format!("{}.bin", input.file);
        let need = *want as u64 * 4;
        let bytes = read_regular(&dir.join(&name), |n| n == need).map_err(|e| match e {
            ReadError::Io(e) => format!("case {d}: {name} ({}): {e}", input.role),
            ReadError::NotRegular(kind) => format!("case {d}: {name} ({}) is {kind}, not a regular file", input.role),
            ReadError::Size(n) => format!(
                "case {d}: {name} ({}) holds {n} bytes; dims {} need {need} ({want} values)",
                input.role,
                Op::dims_label(&spec.dims)
            ),
        })?;
        check_sha256(&d, &sha256, &name, &bytes)?;
        inputs.push(HostBuf::from_le_bytes(input.elem, &bytes));
    }
    op.check_inputs(&spec.dims, &inputs).map_err(|e| format!("case {d}: {e}"))?;
    let n = op.output_len(&spec.dims);
    let expected = match read_regular(&dir.join(EXPECTED), |len| len == n as u64 * 4) {
        Ok(bytes) => {
            check_sha256(&d, &sha256, EXPECTED, &bytes)?;
            Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
        }
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            if sha256.contains_key(EXPECTED) {
                return Err(format!("case {d}: inputs.sha256.json records {EXPECTED}, which the case does not have"));
            }
            None
        }
        Err(ReadError::Io(e)) => return Err(format!("case {d}: {EXPECTED}: {e}")),
        Err(ReadError::NotRegular(kind)) => return Err(format!("case {d}: {EXPECTED} is {kind}, not a regular file")),
        Err(ReadError::Size(len)) => return Err(format!("case {d}: {EXPECTED} holds {len} bytes; the output has {n} values")),
    };
    Ok(Case { dir: dir.to_path_buf(), spec, inputs, sha256, expected })
}

/// Writes an output as little-endian f32; an existing file is replaced
/// only with `replace`.
pub fn write_f32(path: &Path, values: &[f32], replace: bool) -> Result<(), String> {
    let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    if replace { write_atomic(path, &bytes) } else { write_new(path, &bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_stable() {
        // These values are part of the fixture format: changing the
        // generator changes every committed case.
        let mut r = Rng::new(DEFAULT_SEED);
        assert_eq!(r.next_u64(), 11233741371356590328_u64, "SplitMix64 stream moved");
        let v = normal_input(DEFAULT_SEED, 0, 4);
        assert!(v.iter().all(|x| x.is_finite() && x.abs() < 2.0));
    }

    /// A fresh empty directory under the system temp directory.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mage-fixtures-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        n.sort();
        n
    }

    #[test]
    fn a_failed_atomic_write_leaves_no_temporary_file() {
        let dir = scratch_dir("atomic");
        fs::create_dir(dir.join("out")).unwrap();
        let e = write_atomic(&dir.join("out"), b"x").unwrap_err();
        assert!(e.contains("is a directory"), "{e}");
        let e = write_atomic(&dir.join("missing/out.bin"), b"x").unwrap_err();
        assert!(e.starts_with("writing"), "{e}");
        assert_eq!(names(&dir), ["out"]);
        write_atomic(&dir.join("f.bin"), b"new").unwrap();
        assert_eq!(names(&dir), ["f.bin", "out"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_new_never_replaces_a_file() {
        let dir = scratch_dir("new");
        let path = dir.join("f.bin");
        write_new(&path, b"first").unwrap();
        let e = write_new(&path, b"second").unwrap_err();
        assert!(e.contains("exists"), "{e}");
        assert_eq!(fs::read(&path).unwrap(), b"first");
        assert_eq!(names(&dir), ["f.bin"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_new_empty_or_replaceable_case_directories_are_destinations() {
        let dir = scratch_dir("destination");
        let op = &crate::control::CONTROL;
        assert_eq!(case_destination(&dir.join("new"), op, false), Ok(Destination::New));
        fs::create_dir(dir.join("empty")).unwrap();
        assert_eq!(case_destination(&dir.join("empty"), op, false), Ok(Destination::Empty));
        fs::create_dir(dir.join("case")).unwrap();
        fs::write(dir.join("case/input.json"), "{}").unwrap();
        assert!(case_destination(&dir.join("case"), op, false).unwrap_err().contains("pass --force"));
        assert_eq!(case_destination(&dir.join("case"), op, true), Ok(Destination::Case));
        fs::write(dir.join("case/NOTES.md"), "").unwrap();
        fs::create_dir(dir.join("case/plots")).unwrap();
        let e = case_destination(&dir.join("case"), op, true).unwrap_err();
        assert!(e.contains("also holds NOTES.md, plots/, not files of a case"), "{e}");
        fs::create_dir(dir.join("other")).unwrap();
        fs::write(dir.join("other/notes.txt"), "").unwrap();
        assert!(case_destination(&dir.join("other"), op, true).unwrap_err().contains("not a case"));
        fs::write(dir.join("file"), "").unwrap();
        assert!(case_destination(&dir.join("file"), op, true).unwrap_err().contains("not a directory"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn normal_has_the_requested_spread() {
        let v = Rng::new(7).normal_vec(100_000, 1.0, 0.25);
        let mean = v.iter().map(|x| *x as f64).sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
        assert!((var.sqrt() - 0.25).abs() < 0.01, "std {}", var.sqrt());
    }
}

/// Every committed case directory under `fixtures/` for `op`, sorted.
pub fn committed_cases(op: &Op) -> Vec<PathBuf> {
    let root = crate::home::workspace_root().join("fixtures");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            fs::read_to_string(p.join("input.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<CaseSpec>(&t).ok())
                .is_some_and(|s| s.op == op.name)
        })
        .collect();
    dirs.sort();
    dirs
}

/// Checks an op against its committed golden cases: the Rust f64
/// reference agrees with the independent `expected.bin` to f32 rounding,
/// and every stage that supports a case's dims matches it under the op's
/// tolerance (a stage outside the contract under its own) on the emulator,
/// and `current` picks one of those stages.
/// Returns how many (case, stage) pairs were checked, `current`'s pick
/// included.
pub fn check_golden_cases(op: &Op) -> Result<usize, String> {
    let cases = committed_cases(op);
    if cases.is_empty() {
        return Err(format!("no committed fixture cases for {}", op.name));
    }
    let mut checked = 0;
    for dir in cases {
        let case = read_case(&dir, op)?;
        let dims = &case.spec.dims;
        let expected = case.expected.as_ref().ok_or_else(|| format!("{} has no expected.bin", dir.display()))?;
        let reference = (op.reference)(dims, &case.inputs);
        for (i, (e, r)) in expected.iter().zip(&reference.values).enumerate() {
            if (*e as f64 - r).abs() > 2.0 * f32::EPSILON as f64 * r.abs().max(1e-30) + 1e-30 {
                return Err(format!("{}: reference and expected.bin disagree at {i}: {r} vs {e}", dir.display()));
            }
        }
        let expected64 = reference.with_values(expected.iter().map(|v| *v as f64).collect());
        for stage in op.stages.iter().filter(|s| (s.supports)(dims)) {
            let out = crate::op::emulate(op, stage, dims, &case.inputs)?;
            let cmp = crate::numeric::compare(&out, &expected64, op.tolerance_for(stage.name, dims, &case.inputs));
            if !cmp.passed() {
                return Err(format!("{} {} on {}: {}", op.name, stage.name, dir.display(), op.summarize(&cmp, dims)));
            }
            checked += 1;
        }
        // `current`'s pick is one of the stages just checked, on the same
        // inputs; it only has to be among them.
        let picked = op.dispatch(dims, &case.inputs);
        if !(picked.supports)(dims) {
            return Err(format!(
                "{} {} → {} on {}, which does not support dims {}",
                op.name,
                crate::op::CURRENT,
                picked.name,
                dir.display(),
                Op::dims_label(dims)
            ));
        }
        checked += 1;
    }
    Ok(checked)
}
