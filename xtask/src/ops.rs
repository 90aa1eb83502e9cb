//! The ops xtask drives, their embedded PTX, and the bundle.

use mage_common::op::Op;
use std::path::Path;
use std::process::Command;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/ptx.rs"));
}

/// Every op, in the order tables list them.
pub fn all() -> Vec<&'static Op> {
    vec![&mage_matmul::OP, &mage_gelu::OP, &mage_layernorm::OP, &mage_triangle::OP, &mage_neighbor::OP]
}

pub fn find(name: &str) -> Result<&'static Op, String> {
    all().into_iter().find(|o| o.name == name).ok_or_else(|| {
        let names: Vec<_> = all().iter().map(|o| o.name).collect();
        format!("unknown op `{name}`; the ops are {}", names.join(", "))
    })
}

/// The PTX built into this binary for `package`.
pub fn ptx(package: &str) -> Result<&'static str, String> {
    match embedded::EMBEDDED.iter().find(|(p, _)| *p == package) {
        Some((_, Ok(ptx))) => Ok(ptx),
        Some((_, Err(e))) => Err(format!(
            "this binary was built without the PTX of {package} (see `cargo xtask doctor`, line `nvptx build`): {}",
            e.lines().next().unwrap_or_default()
        )),
        None => Err(format!("no PTX of {package} is built into this binary")),
    }
}

/// `cargo xtask ptx`: builds and prints the PTX path of each package.
pub fn build_all(packages: &[String]) -> Result<(), String> {
    let names: Vec<String> = if packages.is_empty() {
        std::iter::once("mage-common".to_string()).chain(all().iter().map(|o| o.package.to_string())).collect()
    } else {
        packages.iter().map(|p| if p.starts_with("mage-") { p.clone() } else { format!("mage-{p}") }).collect()
    };
    for p in names {
        let path = mage_common::tools::build_ptx(&p)?;
        println!("{p}: {}", path.display());
    }
    Ok(())
}

/// `cargo xtask bundle`: the release binary (PTX inside) and the fixtures,
/// in one folder to copy to a GPU machine. There: `./mage sweep layernorm`.
pub fn bundle(out: &Path) -> Result<(), String> {
    let root = mage_common::tools::workspace_root();
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "xtask"])
        .status()
        .map_err(|e| format!("cargo build --release -p xtask: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --release -p xtask failed ({status})"));
    }
    let out = if out.is_absolute() { out.to_path_buf() } else { root.join(out) };
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let bin = out.join("mage");
    std::fs::copy(root.join("target/release/xtask"), &bin).map_err(|e| format!("copying the binary: {e}"))?;
    copy_dir(&root.join("fixtures"), &out.join("fixtures"))?;
    match root.join("python/mage_compare") {
        p if p.is_dir() => copy_dir(&p, &out.join("python/mage_compare"))?,
        p => eprintln!("warning: {} is missing: this bundle cannot run `compare`", p.display()),
    }
    std::fs::write(
        out.join("README.txt"),
        "Mage bundle: needs only the CUDA driver (and python3 with torch and triton for compare).\n  ./mage doctor\n  ./mage sweep layernorm\n  ./mage run layernorm --dims 4096,768 --stage mage-006\n  ./mage gpu-check\n  ./mage compare --namespace NAME\n  ./mage sanitize layernorm\n  ./mage nsight layernorm --stage mage-006\n",
    )
    .map_err(|e| e.to_string())?;
    println!("{}", out.display());
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}
