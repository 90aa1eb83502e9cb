//! Builds the PTX of every op crate (and the contract probes of
//! mage-common) and embeds it, so the binary that runs kernels needs only a
//! CUDA driver where it runs. A failed PTX build does not fail this build:
//! the binary then says so when a command needs the PTX.

use std::fmt::Write;

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let root = mage_toolchain::workspace_root();
    for dir in ["common/src", "ops", "xtask/ptx-linker/src"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let git = std::process::Command::new("git").current_dir(&root).args(["rev-parse", "--short", "HEAD"]).output();
    let commit = git.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    println!("cargo:rustc-env=MAGE_GIT_COMMIT={}", commit.unwrap_or_else(|| "unknown".into()));
    let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into())).arg("--version").output();
    let version = rustc.ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    println!("cargo:rustc-env=MAGE_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-changed={}", root.join(".git/logs/HEAD").display());
    let mut code = String::from(
        "/// (package, PTX) of every kernel crate, built with this binary.\npub static EMBEDDED: &[(&str, Result<&str, &str>)] = &[\n",
    );
    // mage-common (its contract probes) and every op crate under ops/.
    let mut packages = vec!["mage-common".to_string()];
    let mut ops: Vec<String> = std::fs::read_dir(root.join("ops"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| format!("mage-{}", e.file_name().to_string_lossy()))
        .collect();
    ops.sort();
    packages.extend(ops);
    for pkg in &packages {
        match mage_toolchain::build_ptx(pkg) {
            Ok(path) => writeln!(code, "    ({pkg:?}, Ok(include_str!({:?}))),", path.display().to_string()).unwrap(),
            Err(e) => {
                println!("cargo:warning=PTX of {pkg} not built: {}", e.lines().next().unwrap_or_default());
                writeln!(code, "    ({pkg:?}, Err({e:?})),").unwrap();
            }
        }
    }
    code.push_str("];\n");
    std::fs::write(out.join("ptx.rs"), code).unwrap();
}
