//! One GPU measurement at a time: every command that runs kernels on the GPU
//! holds an exclusive lock on a file in the temp directory. A second run
//! says who holds it and waits. On a machine with no GPU nothing waits:
//! that is said first.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};

/// Set for child processes of a lock holder (nsight, sanitize), which run
/// inside their parent's lock.
const HELD_BY_PARENT: &str = "MAGE_GPU_LOCK_HELD";

pub struct GpuLock(Option<File>);

impl GpuLock {
    /// Takes the lock, waiting (and saying for whom) if another run holds
    /// it; first checks there is a GPU to wait for, and a temp directory.
    pub fn acquire(what: &str) -> Result<GpuLock, String> {
        if std::env::var_os(HELD_BY_PARENT).is_some() {
            return Ok(GpuLock(None));
        }
        crate::runner::gpu_present(what)?;
        let path = crate::outputs::temp_dir("the GPU lock, mage-gpu.lock,")?.join("mage-gpu.lock");
        GpuLock::take(&path, what)
    }

    /// Takes the lock on `path`, waiting if another process holds it.
    fn take(path: &std::path::Path, what: &str) -> Result<GpuLock, String> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if file.try_lock().is_err() {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            eprintln!("waiting for the GPU: {} holds {}", holder.trim(), path.display());
            file.lock().map_err(|e| format!("locking {}: {e}", path.display()))?;
        }
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        file.set_len(0).and_then(|_| file.seek(SeekFrom::Start(0))).map_err(|e| e.to_string())?;
        writeln!(file, "pid {} ({what}), since unix time {stamp}", std::process::id()).map_err(|e| e.to_string())?;
        unsafe { std::env::set_var(HELD_BY_PARENT, "1") };
        Ok(GpuLock(Some(file)))
    }
}

impl Drop for GpuLock {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            let _ = f.set_len(0);
            let _ = f.unlock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_names_its_holder_and_excludes_others_until_dropped() {
        let path = std::env::temp_dir().join(format!("mage-gpu-test-{}.lock", std::process::id()));
        let lock = GpuLock::take(&path, "test").unwrap();
        let other = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        assert!(other.try_lock().is_err(), "a second process could take the lock");
        let holder = std::fs::read_to_string(&path).unwrap();
        assert!(holder.contains(&format!("pid {} (test)", std::process::id())), "{holder}");
        drop(lock);
        assert!(other.try_lock().is_ok(), "the lock outlived its holder");
        other.unlock().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
