//! The ops xtask drives (from `mage-runtime`, with their embedded PTX), and the bundle.

use std::path::Path;
use std::process::Command;

pub use mage_runtime::ops::{all, find, packages, ptx};

/// The sha256 of each package's embedded PTX, for the evidence a command
/// writes.
pub fn ptx_sha256<'a>(packages: impl IntoIterator<Item = &'a str>) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    packages.into_iter().map(|p| Ok((p.to_string(), mage_common::fixtures::sha256_hex(ptx(p)?.as_bytes()).into()))).collect()
}

/// `cargo xtask ptx`: builds and prints the PTX path of each package.
pub fn build_all(packages: &[String]) -> Result<(), String> {
    let names: Vec<String> = if packages.is_empty() {
        std::iter::once("mage-common".to_string()).chain(mage_runtime::ops::packages().iter().map(|p| p.to_string())).collect()
    } else {
        packages.iter().map(|p| if p.starts_with("mage-") { p.clone() } else { format!("mage-{p}") }).collect()
    };
    for p in names {
        let path = mage_toolchain::build_ptx(&p)?;
        say!("{p}: {}", path.display());
    }
    Ok(())
}

/// `cargo xtask bundle`: the release binary (PTX inside), the Python
/// extension and harness, and the fixtures, in one folder to copy to a GPU
/// machine. There: `./mage sweep layernorm`.
pub fn bundle(out: &Path) -> Result<(), String> {
    let root = mage_common::home::workspace_root();
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "xtask"])
        .status()
        .map_err(|e| format!("cargo build --release -p xtask: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --release -p xtask failed ({status})"));
    }
    let ext_dir = mage_toolchain::build_python_extension(true)?;
    let out = if out.is_absolute() { out.to_path_buf() } else { root.join(out) };
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let bin = out.join("mage");
    std::fs::copy(root.join("target/release/xtask"), &bin).map_err(|e| format!("copying the binary: {e}"))?;
    copy_dir(&root.join("fixtures"), &out.join("fixtures"))?;
    copy_dir(&root.join("python/mage_compare"), &out.join("python/mage_compare"))?;
    copy_dir(&root.join("python/gpu_checks"), &out.join("python/gpu_checks"))?;
    copy_dir(&root.join("python/mage_e2e"), &out.join("python/mage_e2e"))?;
    // The package `mage`: its .py files and the extension inside it.
    copy_dir(&root.join("python/mage"), &out.join("python/mage"))?;
    let ext = mage_toolchain::EXTENSION_FILE;
    std::fs::copy(ext_dir.join(ext), out.join("python").join(ext)).map_err(|e| format!("copying the extension: {e}"))?;
    // The module of the flat layout before the package, if an older bundle left it.
    let _ = std::fs::remove_file(out.join("python/mage.abi3.so"));
    std::fs::write(
        out.join("README.txt"),
        "Mage bundle: needs only the CUDA driver (and python3 with torch and triton for compare).\n  ./mage doctor\n  ./mage sweep layernorm\n  ./mage run layernorm --dims 4096,768 --stage mage-006\n  ./mage gpu-check\n  ./mage compare --namespace NAME\n  ./mage e2e --namespace NAME\n  PYTHONPATH=python python3 -c 'import mage; print(mage.ops())'\n  PYTHONPATH=python python3 python/gpu_checks/torch_ops.py\n  ./mage sanitize layernorm\n  ./mage nsight layernorm --stage mage-006\n",
    )
    .map_err(|e| e.to_string())?;
    say!("{}", out.display());
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.file_name() == "__pycache__" {
            continue;
        } else if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}
