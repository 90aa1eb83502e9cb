//! Where commands write, checked before they run: a file the command reads
//! is never its output, a directory is never taken for a file, nothing
//! that exists is replaced without `--force`, and neither the program nor
//! a file of a case is ever an output. A device or a FIFO is written
//! through, never replaced.

use std::path::{Path, PathBuf};

/// `path` with its directory resolved (symlinks, `..`), whether or not the
/// file itself exists yet.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(parent.canonicalize().ok()?.join(path.file_name()?))
}

/// Whether two paths name one file: the same resolved path, or (on Unix)
/// the same inode through a hard link.
fn same_file(a: &Path, b: &Path) -> bool {
    if resolved(a).is_some_and(|ra| resolved(b).is_some_and(|rb| ra == rb)) {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
    }
    false
}

/// How an output reaches its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// A regular file (new, or replaced): written to a temporary beside it
    /// and renamed; a symlink's target is the file, the link stays.
    Atomic(PathBuf),
    /// A character device or a FIFO (`/dev/null`, a pipe): opened and
    /// written, never replaced; nothing is replaced, so no `--force` is
    /// needed.
    Through(PathBuf),
    /// This process's stdout (`/dev/stdout`, or the file stdout goes to):
    /// written after what the command prints, never replaced nor reopened
    /// (a reopened file would be written from its start, over the report).
    Stdout,
}

/// Whether `m` is the file this process's stdout is.
fn is_stdout(m: &std::fs::Metadata) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let out = std::io::stdout().as_fd().try_clone_to_owned().ok().map(std::fs::File::from);
    out.and_then(|f| f.metadata().ok()).is_some_and(|s| s.dev() == m.dev() && s.ino() == m.ino())
}

/// The program running, and the Python module beside it (a bundle's
/// `python/mage/_C.abi3.so`, or in a checkout the one built under
/// `target/python/`): never an output.
fn own_files() -> Vec<(PathBuf, &'static str)> {
    use mage_common::home::{Home, home};
    use mage_toolchain::EXTENSION_FILE;
    let Some(exe) = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok()) else { return vec![] };
    let mut modules: Vec<PathBuf> = exe.parent().map(|d| d.join("python").join(EXTENSION_FILE)).into_iter().collect();
    if let Home::Checkout(root) = home() {
        modules.extend(["debug", "release"].map(|p| root.join("target/python").join(p).join(EXTENSION_FILE)));
    }
    let what = "the Python module beside the program running";
    std::iter::once((exe, "the program running")).chain(modules.into_iter().map(|m| (m, what))).collect()
}

/// The case `path` would land in, if its folder holds a case
/// (`input.json`) and its name is one of that case's files: the folder.
fn case_holding(path: &Path) -> Option<(PathBuf, String)> {
    let real = resolved(path)?;
    let (dir, name) = (real.parent()?.to_path_buf(), real.file_name()?.to_string_lossy().into_owned());
    let json = mage_common::fixtures::read_regular(&dir.join("input.json"), |n| n <= mage_common::fixtures::JSON_LIMIT).ok()?;
    let text = String::from_utf8_lossy(&json);
    let named = serde_json::from_str::<serde_json::Value>(text.trim_start_matches('\u{feff}')).ok();
    let named = named.as_ref().and_then(|v| v["op"].as_str().map(str::to_string));
    // A case of an op this binary knows has its own files; any other
    // case's files are those of every op.
    let files: Vec<String> = match named.as_deref().and_then(|n| crate::ops::find(n).ok()) {
        Some(op) => mage_common::fixtures::case_files(op),
        None => crate::ops::all().iter().flat_map(|op| mage_common::fixtures::case_files(op)).collect(),
    };
    // The folder as the user wrote it, unless a symlink led elsewhere.
    let given = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    files.contains(&name).then_some((if link { dir } else { given }, name))
}

/// Checks `--out FILE` before anything runs: not a directory (nor a name
/// ending in `/`), in a directory that exists, none of `reads` (the files
/// the command reads), not the program nor its Python module, no file of
/// a case, and not an existing file unless `force`. A character device or
/// a FIFO is written through; a block device or a socket is refused.
pub fn check_out_file(path: &Path, reads: &[PathBuf], force: bool) -> Result<Out, String> {
    use std::os::unix::fs::FileTypeExt;
    let p = path.display();
    if path.is_dir() {
        return Err(format!("--out {p} is a directory; name a file"));
    }
    let text = path.as_os_str().to_string_lossy();
    if text.ends_with('/') {
        return Err(format!("--out {p} ends in `/`, which names a directory; name a file ({})", text.trim_end_matches('/')));
    }
    let parent = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!("--out {p}: the directory {} does not exist", parent.display()));
    }
    if let Some(read) = reads.iter().find(|r| same_file(path, r)) {
        return Err(format!("--out {p} would overwrite {}, which this command reads; name another file", read.display()));
    }
    if let Some((_, what)) = own_files().iter().find(|(f, _)| same_file(path, f)) {
        return Err(format!("--out {p} is {what}; name another file"));
    }
    if let Some((case, name)) = case_holding(path) {
        return Err(format!("--out {p} is {name} of the case {}; name a file outside a case", case.display()));
    }
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let target = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) if link => {
            return Err(format!("--out {p} is a symlink to {}, which does not exist; name a file", read_link_text(path)));
        }
        Err(_) => return Ok(Out::Atomic(path.to_path_buf())),
    };
    let t = target.file_type();
    if is_stdout(&target) {
        return Ok(Out::Stdout);
    }
    if t.is_char_device() || t.is_fifo() {
        return Ok(Out::Through(path.to_path_buf()));
    }
    if t.is_block_device() || t.is_socket() {
        let kind = if t.is_socket() { "a socket" } else { "a block device" };
        return Err(format!("--out {p} is {kind}; name a file"));
    }
    if !force {
        return Err(format!("--out {p} exists; pass --force to replace it"));
    }
    // Through a symlink the file it names is replaced, not the link.
    Ok(Out::Atomic(if link { path.canonicalize().map_err(|e| format!("--out {p}: {e}"))? } else { path.to_path_buf() }))
}

fn read_link_text(path: &Path) -> String {
    std::fs::read_link(path).map_or("?".into(), |t| t.display().to_string())
}

/// Writes `bytes` where [`check_out_file`] said: atomically (never over an
/// existing file unless `replace`), or through the device or FIFO, where a
/// failed write (`ENOSPC` on `/dev/full`) is the error.
pub fn write_out(out: &Out, bytes: &[u8], replace: bool) -> Result<(), String> {
    match out {
        Out::Atomic(path) if replace => mage_common::fixtures::write_atomic(path, bytes),
        Out::Atomic(path) => mage_common::fixtures::write_new(path, bytes),
        Out::Stdout => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush()).map_err(|e| {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    crate::stdout::CLOSED_PIPE.to_string()
                } else {
                    format!("writing to stdout: {e}")
                }
            })
        }
        Out::Through(path) => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
            f.write_all(bytes).and_then(|()| f.flush()).map_err(|e| format!("writing {}: {e}", path.display()))
        }
    }
}

/// Reads a text file (evidence, or one a flag names: `--compare F`), only
/// if it is a regular file: a FIFO would block. `flag` starts the message.
pub fn read_text(path: &Path, flag: Option<&str>) -> Result<String, String> {
    use mage_common::fixtures::{ReadError, read_regular};
    let p = match flag {
        Some(f) => format!("{f} {}", path.display()),
        None => path.display().to_string(),
    };
    let bytes = read_regular(path, |_| true).map_err(|e| match e {
        ReadError::Io(e) => format!("{p}: {e}"),
        ReadError::NotRegular(kind) => format!("{p} is {kind}, not a regular file"),
        ReadError::Size(n) => format!("{p}: {n} bytes"),
    })?;
    String::from_utf8(bytes).map_err(|e| format!("{p} is not UTF-8 text: {e}"))
}

/// The temp directory, where `TMPDIR` (if set) names a directory that
/// exists; `what` says what goes there.
pub fn temp_dir(what: &str) -> Result<PathBuf, String> {
    if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
        let t = PathBuf::from(t);
        if !t.is_dir() {
            return Err(format!("TMPDIR {} is not a directory ({what} goes there); make it or unset TMPDIR", t.display()));
        }
    }
    Ok(std::env::temp_dir())
}

/// Checks a file can be created in `dir`, or (where `dir` does not exist
/// yet) in the nearest folder above it that does, by creating and
/// removing a hidden one: a read-only destination is found before hours of
/// work, not after.
pub fn check_writable(dir: &Path, what: &str) -> Result<(), String> {
    let mut at = dir.to_path_buf();
    while std::fs::symlink_metadata(&at).is_err() {
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if at == Path::new(".") {
            break;
        }
    }
    if !at.is_dir() {
        return Err(format!("{what} {}: {} is not a directory", dir.display(), at.display()));
    }
    let probe = at.join(format!(".mage-probe{}", std::process::id()));
    let _probe = mage_common::cleanup::temporary(&probe);
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => {
            let place = if at == dir { String::new() } else { format!(" (in {})", at.display()) };
            Err(format!("{what} {}: no file can be created there{place}: {e}", dir.display()))
        }
    }
}

/// The longest folder name (bytes) a filesystem takes.
pub const NAME_MAX: usize = 255;

/// The folder of `--namespace NAME` under the results folder `root`,
/// where `NAME` is a plain folder name (no path that leads elsewhere, at
/// most [`NAME_MAX`] bytes) and not an existing file.
pub fn namespace_dir(root: &Path, name: &str) -> Result<PathBuf, String> {
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
    if !plain {
        return Err(format!("--namespace `{name}` must be a plain folder name under results/"));
    }
    if name.len() > NAME_MAX {
        let start: String = name.chars().take(16).collect();
        return Err(format!("--namespace `{start}…` is {} bytes long; a folder name is at most {NAME_MAX}", name.len()));
    }
    let dir = root.join(name);
    if std::fs::symlink_metadata(&dir).is_ok() && !dir.is_dir() {
        return Err(format!("--namespace `{name}`: {} exists and is not a directory", dir.display()));
    }
    Ok(dir)
}

/// Checks a results directory can take files: absent (it will be made) or
/// a directory.
pub fn check_results_dir(dir: &Path) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("--results {} exists and is not a directory", dir.display()));
    }
    Ok(())
}

/// Checks a file of evidence (`results/NAME/sweep-OP.json`) is not there
/// yet, unless `force`.
pub fn check_evidence(path: &Path, force: bool) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()));
    }
    if path.exists() && !force {
        return Err(format!("{} exists; pass --force to replace it", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hard_link_to_an_input_is_that_input() {
        let dir = std::env::temp_dir().join(format!("mage-outputs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("a.bin");
        std::fs::write(&input, b"x").unwrap();
        std::fs::hard_link(&input, dir.join("alias.bin")).unwrap();
        let e = check_out_file(&dir.join("alias.bin"), std::slice::from_ref(&input), true).unwrap_err();
        assert!(e.contains("which this command reads"), "{e}");
        let e = check_out_file(&dir.join("./sub/../a.bin"), std::slice::from_ref(&input), true).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert_eq!(check_out_file(&dir.join("other.bin"), &[input], false), Ok(Out::Atomic(dir.join("other.bin"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn namespaces_are_plain_names() {
        assert_eq!(namespace_dir(Path::new("results"), "mage-007"), Ok(PathBuf::from("results/mage-007")));
        for bad in ["", ".", "..", "../x", "a/b"] {
            assert!(namespace_dir(Path::new("results"), bad).is_err(), "{bad}");
        }
        assert!(namespace_dir(Path::new("results"), &"n".repeat(255)).is_ok());
        let e = namespace_dir(Path::new("results"), &"n".repeat(256)).unwrap_err();
        assert!(e.ends_with("is 256 bytes long; a folder name is at most 255"), "{e}");
    }
}
