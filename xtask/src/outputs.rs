//! Where commands write, checked before they run: a file the command reads
//! is never its output, a directory is never taken for a file, and nothing
//! that exists is replaced without `--force`.

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

/// Checks `--out FILE` before anything runs: not a directory, in a
/// directory that exists, none of `reads` (the files the command reads),
/// and not an existing file unless `force`.
pub fn check_out_file(path: &Path, reads: &[PathBuf], force: bool) -> Result<(), String> {
    let p = path.display();
    if path.is_dir() {
        return Err(format!("--out {p} is a directory; name a file"));
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
    if path.exists() && !force {
        return Err(format!("--out {p} exists; pass --force to replace it"));
    }
    Ok(())
}

/// The folder of `--namespace NAME` under the results folder `root`,
/// where `NAME` is a plain folder name (no path that leads elsewhere).
pub fn namespace_dir(root: &Path, name: &str) -> Result<PathBuf, String> {
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\']);
    if plain { Ok(root.join(name)) } else { Err(format!("--namespace `{name}` must be a plain folder name under results/")) }
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
        assert!(check_out_file(&dir.join("other.bin"), &[input], false).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn namespaces_are_plain_names() {
        assert_eq!(namespace_dir(Path::new("results"), "mage-007"), Ok(PathBuf::from("results/mage-007")));
        for bad in ["", ".", "..", "../x", "a/b"] {
            assert!(namespace_dir(Path::new("results"), bad).is_err(), "{bad}");
        }
    }
}
