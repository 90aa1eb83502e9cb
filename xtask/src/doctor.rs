//! `cargo xtask doctor`: one line for each thing a build or a run needs.
//! Other commands that find something missing name the line to read here.
//! It builds and installs nothing (what it cannot see without building, it
//! says how to build), and exits 1 when a line says MISSING.

use mage_common::home::Home;
use mage_toolchain as toolchain;
use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Missing,
    NotHere,
}

/// The lines printed so far, so that the exit code can follow them.
#[derive(Default)]
struct Report {
    missing: Vec<&'static str>,
}

impl Report {
    fn line(&mut self, status: Status, name: &'static str, detail: impl AsRef<str>) {
        let s = match status {
            Status::Ok => "ok     ",
            Status::Missing => "MISSING",
            Status::NotHere => "-      ",
        };
        if status == Status::Missing {
            self.missing.push(name);
        }
        // A failed write is kept and reported when doctor ends.
        let _ = crate::stdout::line(&format!("{s}  {name:<12} {}", detail.as_ref()));
    }
}

/// stdout of a command run in `dir`, where it succeeds.
fn output_in(dir: &Path, cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).current_dir(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    output_in(Path::new("."), cmd, args)
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

/// The toolchain lines of a checkout. `rustc` runs in the checkout so that
/// `rust-toolchain.toml` picks the pinned nightly.
fn checkout_lines(r: &mut Report, root: &Path) {
    match output_in(root, "rustc", &["--version"]) {
        Some(v) => {
            let llvm = toolchain::llvm_bin();
            let src = output_in(root, "rustc", &["--print", "sysroot"])
                .map(|s| Path::new(&s).join("lib/rustlib/src/rust/library/core").exists())
                .unwrap_or(false);
            match (llvm, src) {
                (Ok(_), true) => r.line(Status::Ok, "toolchain", format!("{v} with rust-src and llvm-tools")),
                (Err(e), _) => r.line(Status::Missing, "toolchain", e),
                (_, false) => r.line(Status::Missing, "toolchain", format!("{v}: rust-src missing (rustup component add rust-src)")),
            }
        }
        None => r.line(Status::Missing, "toolchain", "rustc not found: install rustup; rust-toolchain.toml pins the nightly"),
    }
    let pinned = std::env::var_os("MAGE_PTXAS").map(std::path::PathBuf::from).unwrap_or_else(toolchain::installed_ptxas_path);
    if pinned.exists() {
        match toolchain::ptxas_version(&pinned) {
            Ok(v) if v == toolchain::PTXAS_VERSION => r.line(Status::Ok, "ptxas", format!("{v} ({})", pinned.display())),
            Ok(v) => {
                r.line(Status::Missing, "ptxas", format!("{} is ptxas {v}; snapshots need {}", pinned.display(), toolchain::PTXAS_VERSION))
            }
            Err(e) => r.line(Status::Missing, "ptxas", e.lines().next().unwrap_or_default()),
        }
    } else if output("python3", &["-m", "pip", "--version"]).is_some() {
        r.line(
            Status::NotHere,
            "ptxas",
            format!("not installed yet: the first `cargo test` installs {} with pip", toolchain::PTXAS_VERSION),
        );
    } else {
        r.line(Status::Missing, "ptxas", "not installed, and `python3 -m pip` (which installs it) is not available");
    }
}

pub fn run() -> Result<(), String> {
    let mut r = Report::default();
    let home = mage_common::home::home();
    match &home {
        Home::Checkout(root) => checkout_lines(&mut r, root),
        Home::Bundle(_) | Home::Loose => {
            for name in ["toolchain", "ptxas"] {
                r.line(Status::NotHere, name, "not needed here: this binary carries its PTX");
            }
        }
    }
    // The PTX was built with this binary (build.rs), so it tells whether
    // the nvptx build works without running one.
    let failed: Vec<String> =
        std::iter::once("mage-common").chain(crate::ops::packages()).filter_map(|p| crate::ops::ptx(p).err()).collect();
    match failed.first() {
        None if matches!(home, Home::Checkout(_)) => {
            r.line(Status::Ok, "nvptx build", "every op's PTX was built with this binary (`cargo xtask ptx` rebuilds it)")
        }
        None => r.line(Status::Ok, "nvptx build", "every op's PTX was built with this binary"),
        Some(e) => r.line(Status::Missing, "nvptx build", e),
    }
    let sizes: Result<Vec<String>, String> =
        crate::ops::all().iter().map(|op| crate::ops::ptx(op.package).map(|p| format!("{} {} KB", op.name, p.len() / 1024))).collect();
    match sizes {
        Ok(s) => r.line(Status::Ok, "PTX", format!("built in: {}", s.join(", "))),
        Err(e) => r.line(Status::Missing, "PTX", e),
    }
    // Each op's PTX target: an `a` target (sm_90a, for wgmma) loads only on
    // GPUs of exactly that compute capability.
    let targets: Vec<(&str, String)> = crate::ops::all()
        .iter()
        .filter_map(|op| Some((op.name, mage_toolchain::ptx_target(crate::ops::ptx(op.package).ok()?)?.to_string())))
        .collect();
    let specific: Vec<String> =
        targets.iter().filter(|(_, t)| t.ends_with('a')).map(|(op, t)| format!("{op} ({t}: Hopper, H100 and H200, only)")).collect();
    let gpu = mage_runtime::gpu::Gpu::open(0);
    if let Ok(g) = &gpu {
        let (major, minor) = g.info().compute_capability;
        let here = format!("sm_{major}{minor}");
        let fails: Vec<&str> =
            targets.iter().filter(|(_, t)| t.ends_with('a') && t.trim_end_matches('a') != here).map(|(op, _)| *op).collect();
        if fails.is_empty() {
            r.line(Status::Ok, "targets", format!("every op's PTX loads on this {here} GPU; {}", specific.join(", ")));
        } else {
            r.line(Status::NotHere, "targets", format!("{} will not load on this {here} GPU: {}", fails.join(", "), specific.join(", ")));
        }
    } else {
        r.line(Status::NotHere, "targets", format!("needs a CUDA device; built for a single GPU family: {}", specific.join(", ")));
    }
    match gpu {
        Ok(gpu) => {
            let info = gpu.info();
            r.line(Status::Ok, "CUDA driver", format!("{} (PTX ISA up to {})", info.driver_version, ptx_isa(&info.driver_version)));
            let c = gpu.clocks();
            let memory = gpu.memory().map_or_else(|e| e, |(free, total)| format!("{} of {} MiB free", free >> 20, total >> 20));
            r.line(
                Status::Ok,
                "GPU",
                format!(
                    "{}, sm_{}{}, {} SMs, {} MB L2, {memory}; clocks SM {} MHz, memory {} MHz, {}",
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
                Ok(()) => r.line(Status::Ok, "CUPTI", "activity records available"),
                Err(e) => r.line(Status::Missing, "CUPTI", e),
            }
            match output("python3", &["-c", "import torch, triton; print(torch.__version__, triton.__version__)"]) {
                Some(v) => r.line(Status::Ok, "python3", format!("torch {}", v.replace(' ', ", triton "))),
                None => {
                    r.line(Status::NotHere, "python3", "python3 with torch and triton not found (compare needs them; nothing else does)")
                }
            }
        }
        Err(e) => {
            r.line(Status::Missing, "CUDA driver", &e);
            for name in ["GPU", "CUPTI", "python3"] {
                r.line(Status::NotHere, name, "needs a CUDA device");
            }
        }
    }
    if r.missing.is_empty() { Ok(()) } else { Err(format!("doctor: missing {} (see the MISSING lines above)", r.missing.join(", "))) }
}
