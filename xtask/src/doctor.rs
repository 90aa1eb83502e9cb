//! `cargo xtask doctor`: one line for each thing a build or a run needs.
//! Other commands that find something missing name the line to read here.

use std::process::Command;

enum Status {
    Ok,
    Missing,
    NotHere,
}

fn line(status: Status, name: &str, detail: impl AsRef<str>) {
    let s = match status {
        Status::Ok => "ok     ",
        Status::Missing => "MISSING",
        Status::NotHere => "-      ",
    };
    println!("{s}  {name:<12} {}", detail.as_ref());
}

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The highest PTX ISA a CUDA driver version accepts.
fn ptx_isa(driver: &str) -> &'static str {
    match driver {
        v if v.starts_with("13.") => "9.0",
        v if v.starts_with("12.9") => "8.8",
        v if v.starts_with("12.8") => "8.7",
        v if v.starts_with("12.") => "8.x",
        _ => "unknown",
    }
}

pub fn run() -> Result<(), String> {
    // A bundle on a GPU machine has no cargo and needs none: its PTX is inside.
    let in_workspace =
        mage_common::tools::workspace_root().join("rust-toolchain.toml").exists() && output("cargo", &["--version"]).is_some();
    if in_workspace {
        match output("rustc", &["--version"]) {
            Some(v) => {
                let llvm = mage_common::tools::llvm_bin();
                let src = output("rustc", &["--print", "sysroot"])
                    .map(|s| std::path::Path::new(&s).join("lib/rustlib/src/rust/library/core").exists())
                    .unwrap_or(false);
                match (llvm, src) {
                    (Ok(_), true) => line(Status::Ok, "toolchain", format!("{v} with rust-src and llvm-tools")),
                    (Err(e), _) => line(Status::Missing, "toolchain", e),
                    (_, false) => line(Status::Missing, "toolchain", format!("{v}: rust-src missing (rustup component add rust-src)")),
                }
            }
            None => line(Status::Missing, "toolchain", "rustc not found: install rustup; rust-toolchain.toml pins the nightly"),
        }
        match mage_common::tools::build_ptx("mage-common") {
            Ok(p) => line(Status::Ok, "nvptx build", format!("{}", p.display())),
            Err(e) => line(Status::Missing, "nvptx build", e.lines().next().unwrap_or_default()),
        }
        match mage_common::tools::ptxas() {
            Ok(p) => line(Status::Ok, "ptxas", format!("{} ({})", mage_common::tools::PTXAS_VERSION, p.display())),
            Err(e) => line(Status::Missing, "ptxas", e.lines().next().unwrap_or_default()),
        }
    } else {
        for name in ["toolchain", "nvptx build", "ptxas"] {
            line(Status::NotHere, name, "not needed here: this binary carries its PTX");
        }
    }
    let sizes: Result<Vec<String>, String> =
        crate::ops::all().iter().map(|op| crate::ops::ptx(op.package).map(|p| format!("{} {} KB", op.name, p.len() / 1024))).collect();
    match sizes {
        Ok(s) => line(Status::Ok, "PTX", format!("built in: {}", s.join(", "))),
        Err(e) => line(Status::Missing, "PTX", e),
    }
    match mage_runtime::gpu::Gpu::open() {
        Ok(gpu) => {
            let info = gpu.info();
            line(Status::Ok, "CUDA driver", format!("{} (PTX ISA up to {})", info.driver_version, ptx_isa(&info.driver_version)));
            let c = gpu.clocks();
            line(
                Status::Ok,
                "GPU",
                format!(
                    "{}, sm_{}{}, {} SMs, {} MB L2; clocks SM {} MHz, memory {} MHz, {}",
                    info.name,
                    info.compute_capability.0,
                    info.compute_capability.1,
                    info.sm_count,
                    info.l2_bytes >> 20,
                    c.sm_mhz.map_or("?".into(), |v| v.to_string()),
                    c.mem_mhz.map_or("?".into(), |v| v.to_string()),
                    c.pstate.clone().unwrap_or("pstate ?".into())
                ),
            );
            match gpu.cupti_available() {
                Ok(()) => line(Status::Ok, "CUPTI", "activity records available"),
                Err(e) => line(Status::Missing, "CUPTI", e),
            }
            match output("python3", &["-c", "import torch, triton; print(torch.__version__, triton.__version__)"]) {
                Some(v) => line(Status::Ok, "python3", format!("torch {}", v.replace(' ', ", triton "))),
                None => line(Status::Missing, "python3", "python3 with torch and triton not found (needed by compare only)"),
            }
        }
        Err(e) => {
            line(Status::Missing, "CUDA driver", e);
            for name in ["GPU", "CUPTI", "python3"] {
                line(Status::NotHere, name, "needs a CUDA device");
            }
        }
    }
    Ok(())
}
