//! Temporaries a command leaves only while it runs: the hidden files and
//! folders of an atomic write, a staged case, a work folder. Each is
//! registered while it exists; [`clean_up`] (what a signal handler calls
//! before the process exits) removes every one still registered, and puts
//! back a case moved aside for its replacement.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

enum Pending {
    /// A temporary file or folder, removed.
    Remove(PathBuf),
    /// A folder moved aside (`old`) while its replacement is renamed to
    /// `to`: put back where `to` is missing, else removed.
    Restore { old: PathBuf, to: PathBuf },
}

static PENDING: Mutex<Vec<(u64, Pending)>> = Mutex::new(Vec::new());
static NEXT: Mutex<u64> = Mutex::new(0);
/// Held across a sequence of renames that must not be cleaned up halfway.
static CRITICAL: Mutex<()> = Mutex::new(());

/// A registered temporary; dropping it unregisters it (the temporary
/// itself is the owner's to remove or rename).
#[must_use]
pub struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|(id, _)| *id != self.0);
    }
}

fn register(p: Pending) -> Registered {
    let id = {
        let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
        *next += 1;
        *next
    };
    PENDING.lock().unwrap_or_else(|e| e.into_inner()).push((id, p));
    Registered(id)
}

/// Registers a temporary file or folder to remove if the process is
/// interrupted.
pub fn temporary(path: &Path) -> Registered {
    register(Pending::Remove(path.to_path_buf()))
}

/// Registers a folder moved aside while its replacement goes to `to`.
pub fn moved_aside(old: &Path, to: &Path) -> Registered {
    register(Pending::Restore { old: old.to_path_buf(), to: to.to_path_buf() })
}

/// Holds off [`clean_up`] until the guard is dropped (a swap of two
/// renames is done whole).
pub fn critical() -> std::sync::MutexGuard<'static, ()> {
    CRITICAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes a file or a folder; a folder the interrupted command is still
/// writing into is tried again until it is gone (its writes fail once the
/// folder is).
fn remove(path: &Path) {
    for _ in 0..50 {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(path);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(path);
            }
            Err(_) => return,
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Removes every registered temporary, and puts back a folder moved aside
/// whose replacement is not in place. The caller holds the returned guard
/// until it exits, so no swap starts after the clean-up.
pub fn clean_up() -> std::sync::MutexGuard<'static, ()> {
    let guard = critical();
    let pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    settle(&pending);
    guard
}

fn settle(pending: &[(u64, Pending)]) {
    for (_, p) in pending.iter().rev() {
        match p {
            Pending::Remove(path) => remove(path),
            Pending::Restore { old, to } => {
                if std::fs::symlink_metadata(to).is_err() && std::fs::rename(old, to).is_ok() {
                    continue;
                }
                remove(old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_lasts_until_dropped() {
        let path = Path::new("/nonexistent/mage-cleanup-registration");
        let r = temporary(path);
        let held = |p: &Path| PENDING.lock().unwrap().iter().any(|(_, q)| matches!(q, Pending::Remove(x) if x == p));
        assert!(held(path));
        drop(r);
        assert!(!held(path));
    }

    #[test]
    fn clean_up_removes_what_is_registered_and_restores_what_was_moved() {
        let dir = std::env::temp_dir().join(format!("mage-cleanup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("staged")).unwrap();
        std::fs::write(dir.join("staged/a.bin"), b"x").unwrap();
        std::fs::write(dir.join(".f.tmp"), b"x").unwrap();
        std::fs::create_dir_all(dir.join("old")).unwrap();
        std::fs::write(dir.join("old/input.json"), b"{}").unwrap();
        std::fs::write(dir.join("kept"), b"x").unwrap();
        let pending = vec![
            (1, Pending::Remove(dir.join("staged"))),
            (2, Pending::Remove(dir.join(".f.tmp"))),
            (3, Pending::Restore { old: dir.join("old"), to: dir.join("case") }),
        ];
        settle(&pending);
        let mut names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["case", "kept"]);
        assert!(dir.join("case/input.json").is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
