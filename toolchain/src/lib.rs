//! The host-side toolchain: building PTX and the Python extension, and
//! asking ptxas what a kernel costs. Host only: `mage-common`, which also
//! compiles for the GPU, keeps none of this.
//!
//! [`build_ptx`] compiles an op crate (or `mage-common`) for
//! `nvptx64-nvidia-cuda` with `-Zbuild-std=core`, `-C target-cpu=sm_90` (or
//! the architecture the package names, see [`package_arch`]), panic=abort
//! and fat LTO, linked by `mage-ptx-linker`. It runs a nested
//! cargo in its own target directory (`target/nvptx`), so tests and build
//! scripts can call it while an outer cargo holds `target/`.
//!
//! [`ptxas`] finds the pinned ptxas (13.0.88, from PyPI's
//! `nvidia-cuda-nvcc`), installing it under `target/tools` the first time.
//! [`resource_requests`] is what an op's resource snapshot records.

pub use mage_common::home::workspace_root;
use mage_common::op::Op;
use mage_common::space::Space;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The ptxas version resource snapshots are made with.
pub const PTXAS_VERSION: &str = "13.0.88";
/// The GPU architecture PTX is built and assembled for, unless the package
/// names another in its `Cargo.toml` ([`package_arch`]).
pub const ARCH: &str = "sm_90";
pub const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // Do not inherit flags meant for the outer (host) build.
    for v in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR", "RUSTC_WRAPPER"] {
        c.env_remove(v);
    }
    c.current_dir(workspace_root());
    c
}

/// Runs `cmd`; its output, or an error with the tail of its stderr.
fn output(mut cmd: Command, what: &str) -> Result<std::process::Output, String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(format!("{what} failed ({}):\n{}", out.status, tail.join("\n")));
    }
    Ok(out)
}

/// Runs `cmd`; its stdout and stderr together.
fn run(cmd: Command, what: &str) -> Result<String, String> {
    let out = output(cmd, what)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// The architecture `package`'s PTX is built for: `arch` under
/// `[package.metadata.mage]` in its `Cargo.toml` (`"sm_90a"` for the
/// `wgmma` instructions, which exist only there), else [`ARCH`].
pub fn package_arch(package: &str) -> Result<String, String> {
    static METADATA: OnceLock<Result<serde_json::Value, String>> = OnceLock::new();
    let metadata = METADATA.get_or_init(|| {
        let mut c = cargo();
        c.args(["metadata", "--format-version", "1", "--no-deps"]);
        let out = output(c, "cargo metadata")?;
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))
    });
    arch_in_metadata(metadata.as_ref().map_err(|e| e.clone())?, package)
}

/// [`package_arch`] from the output of `cargo metadata`.
pub fn arch_in_metadata(metadata: &serde_json::Value, package: &str) -> Result<String, String> {
    let packages = metadata["packages"].as_array().ok_or("cargo metadata lists no packages")?;
    let p = packages.iter().find(|p| p["name"] == package).ok_or_else(|| format!("no package `{package}` in the workspace"))?;
    match &p["metadata"]["mage"]["arch"] {
        serde_json::Value::Null => Ok(ARCH.to_string()),
        serde_json::Value::String(arch) if is_arch(arch) => Ok(arch.clone()),
        other => Err(format!("{package}: [package.metadata.mage] arch = {other} is not a GPU architecture such as \"sm_90a\"")),
    }
}

/// `sm_` then a number, then optionally `a` or `f` (`sm_90`, `sm_90a`).
fn is_arch(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("sm_") else { return false };
    let digits = rest.strip_suffix(['a', 'f']).unwrap_or(rest);
    digits.len() >= 2 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The architecture a PTX text is for: its `.target` directive.
pub fn ptx_target(ptx: &str) -> Option<&str> {
    ptx.lines().find_map(|l| l.trim().strip_prefix(".target ")).and_then(|t| t.split([',', ' ']).find(|w| !w.is_empty()))
}

/// The sysroot's LLVM tools folder (from rustup's `llvm-tools`).
pub fn llvm_bin() -> Result<PathBuf, String> {
    let mut c = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    c.current_dir(workspace_root()).args(["--print", "sysroot"]);
    let sysroot = run(c, "rustc --print sysroot")?.trim().to_string();
    let mut host = Command::new("rustc");
    host.current_dir(workspace_root()).args(["-vV"]);
    let vv = run(host, "rustc -vV")?;
    let triple = vv.lines().find_map(|l| l.strip_prefix("host: ")).ok_or("rustc -vV printed no host")?.trim().to_string();
    let bin = Path::new(&sysroot).join("lib/rustlib").join(triple).join("bin");
    if !bin.join("llc").exists() {
        return Err(format!(
            "{} has no llc: the pinned toolchain's `llvm-tools` component is missing (see `cargo xtask doctor`, line `toolchain`)",
            bin.display()
        ));
    }
    Ok(bin)
}

/// Builds `mage-ptx-linker` and returns its path.
fn linker() -> Result<PathBuf, String> {
    let dir = workspace_root().join("target/nvptx");
    let mut c = cargo();
    c.args(["build", "--quiet", "--release", "-p", "mage-ptx-linker", "--target-dir"]).arg(&dir);
    run(c, "building mage-ptx-linker")?;
    Ok(dir.join("release/mage-ptx-linker"))
}

/// Builds the PTX of `package` (`mage-layernorm`, or `mage-common` for the
/// numerical-contract probes) and returns the `.ptx` path. Concurrent calls
/// in one process build once; cargo's own lock serialises processes.
pub fn build_ptx(package: &str) -> Result<PathBuf, String> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let linker = linker()?;
    let llvm = llvm_bin()?;
    let arch = package_arch(package)?;
    let dir = workspace_root().join("target/nvptx");
    let mut c = cargo();
    c.env("MAGE_LLVM_BIN", &llvm)
        .args(["rustc", "--quiet", "--lib", "-p", package, "--profile", "ptx", "--target", NVPTX_TARGET])
        .args(["-Zbuild-std=core", "--crate-type", "cdylib", "--target-dir"])
        .arg(&dir)
        .args(if package == "mage-common" { &["--features", "probes"][..] } else { &[] })
        .args(["--", "-C", &format!("target-cpu={arch}"), "-C"])
        .arg(format!("linker={}", linker.display()));
    run(c, &format!("building the PTX of {package}"))?;
    let ptx = dir.join(NVPTX_TARGET).join("ptx").join(format!("{}.ptx", package.replace('-', "_")));
    if !ptx.exists() {
        return Err(format!("the build of {package} wrote no {}", ptx.display()));
    }
    Ok(ptx)
}

/// The pinned ptxas: `$MAGE_PTXAS`, else the copy under `target/tools`,
/// installed from PyPI (`nvidia-cuda-nvcc==13.0.88`) on first use.
pub fn ptxas() -> Result<PathBuf, String> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(p) = std::env::var_os("MAGE_PTXAS") {
            return Ok(PathBuf::from(p));
        }
        let root = workspace_root().join("target/tools/pypi");
        let bin = installed_ptxas_path();
        if !bin.exists() {
            let mut c = Command::new("python3");
            c.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
                .arg(&root)
                .arg(format!("nvidia-cuda-nvcc=={PTXAS_VERSION}"));
            run(c, "installing ptxas (python3 -m pip install nvidia-cuda-nvcc)")
                .map_err(|e| format!("{e}\n(see `cargo xtask doctor`, line `ptxas`)"))?;
        }
        let version = ptxas_version(&bin)?;
        if version != PTXAS_VERSION {
            return Err(format!("{} is ptxas {version}; snapshots need {PTXAS_VERSION}", bin.display()));
        }
        Ok(bin)
    })
    .clone()
}

/// Where [`ptxas`] installs the pinned ptxas (which may not exist yet).
pub fn installed_ptxas_path() -> PathBuf {
    workspace_root().join("target/tools/pypi/nvidia/cu13/bin/ptxas")
}

/// The version ptxas reports (`13.0.88`).
pub fn ptxas_version(bin: &Path) -> Result<String, String> {
    let mut c = Command::new(bin);
    c.arg("--version");
    let out = run(c, &format!("{} --version", bin.display()))?;
    out.lines()
        .find_map(|l| l.split("V").last().filter(|_| l.contains("Cuda compilation tools")))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| format!("could not read a version from `{} --version`", bin.display()))
}

/// What ptxas reports for one kernel entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resources {
    pub entry: String,
    pub registers: u32,
    pub barriers: u32,
    pub static_shared_bytes: u32,
    pub stack_frame_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
}

/// Where the extension module `mage._C` lies under a directory on
/// Python's path (the stable ABI, so one build serves every Python from
/// 3.9 on): inside the package folder `mage/`, beside its `.py` files in a
/// bundle or a wheel.
pub const EXTENSION_FILE: &str = "mage/_C.abi3.so";

/// Builds the Python extension `mage._C` (crate `mage-python`) and returns
/// the directory to put on Python's path after `python/` (the package's
/// `.py` files): `target/python/<profile>/`, which holds
/// [`EXTENSION_FILE`] (the package's `__init__.py` extends its path to
/// it). Its own target directory lets a test or build script call this
/// while an outer cargo holds `target/`.
pub fn build_python_extension(release: bool) -> Result<PathBuf, String> {
    let target = workspace_root().join("target/python");
    let mut c = cargo();
    c.args(["build", "--quiet", "-p", "mage-python", "--target-dir"]).arg(&target);
    if release {
        c.arg("--release");
    }
    run(c, "cargo build -p mage-python")?;
    let dir = target.join(if release { "release" } else { "debug" });
    let ext = dir.join(EXTENSION_FILE);
    std::fs::create_dir_all(ext.parent().expect("a file in a folder")).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::copy(dir.join("libmage.so"), &ext).map_err(|e| format!("{}: {e}", dir.join("libmage.so").display()))?;
    // The module of the flat layout before the package, if an older build left it.
    let _ = std::fs::remove_file(dir.join("mage.abi3.so"));
    Ok(dir)
}

/// Runs `ptxas -v` on a PTX file, for the architecture its `.target` names,
/// and returns each entry's resources, sorted by entry name.
pub fn ptxas_resources(ptx: &Path) -> Result<Vec<Resources>, String> {
    let source = std::fs::read_to_string(ptx).map_err(|e| format!("{}: {e}", ptx.display()))?;
    let arch = ptx_target(&source).ok_or_else(|| format!("{} has no .target directive", ptx.display()))?;
    let bin = ptxas()?;
    let out_file = std::env::temp_dir().join(format!("mage-{}-{}.cubin", std::process::id(), ptx.file_stem().unwrap().to_string_lossy()));
    let mut c = Command::new(&bin);
    c.args(["-v", &format!("-arch={arch}"), "-o"]).arg(&out_file).arg(ptx);
    let text = run(c, &format!("ptxas {}", ptx.display()))?;
    let _ = std::fs::remove_file(&out_file);
    Ok(parse_ptxas(&text))
}

fn number_before(line: &str, unit: &str) -> u32 {
    line.split(',')
        .find(|part| part.contains(unit))
        .and_then(|part| part.split_whitespace().rev().find_map(|w| w.parse().ok()))
        .unwrap_or(0)
}

/// Parses `ptxas -v` output. A function's stack line follows its
/// `Function properties for NAME` line; an entry's block may be followed by
/// the blocks of the non-inlined functions it calls (panic helpers), whose
/// stack lines are not the entry's.
pub fn parse_ptxas(text: &str) -> Vec<Resources> {
    let mut all: Vec<Resources> = vec![];
    let mut properties_of_entry = false;
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default();
            all.push(Resources { entry: name.to_string(), ..Default::default() });
        } else if let Some(r) = all.last_mut() {
            if let Some(function) = line.split("Function properties for ").nth(1) {
                properties_of_entry = function.trim() == r.entry;
            } else if line.contains("bytes stack frame") && properties_of_entry {
                r.stack_frame_bytes = number_before(line, "stack frame");
                r.spill_store_bytes = number_before(line, "spill stores");
                r.spill_load_bytes = number_before(line, "spill loads");
            } else if line.contains("Used ") && line.contains("registers") {
                r.registers =
                    line.split("Used ").nth(1).and_then(|s| s.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or(0);
                r.barriers = number_before(line, "barriers");
                r.static_shared_bytes = number_before(line, "bytes smem");
            }
        }
    }
    all.sort_by(|a, b| a.entry.cmp(&b.entry));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_verbose_output() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'b_kernel' for 'sm_90'\n\
ptxas info    : Function properties for b_kernel\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 40 registers, used 1 barriers, 32 bytes smem, 400 bytes cmem[0]\n\
ptxas info    : Function properties for _RNvNtCs1_4core9panicking9panic_fmt\n\
    24 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads\n\
ptxas info    : Compiling entry function 'a_kernel' for 'sm_90'\n\
ptxas info    : Function properties for a_kernel\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 12 registers, 380 bytes cmem[0]\n";
        let r = parse_ptxas(text);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].entry, "a_kernel");
        assert_eq!((r[0].registers, r[0].barriers, r[0].static_shared_bytes), (12, 0, 0));
        assert_eq!(
            r[1],
            Resources {
                entry: "b_kernel".into(),
                registers: 40,
                barriers: 1,
                static_shared_bytes: 32,
                stack_frame_bytes: 8,
                spill_store_bytes: 4,
                spill_load_bytes: 12
            }
        );
    }

    fn metadata(arch: &str) -> serde_json::Value {
        let mage = if arch.is_empty() { "null".to_string() } else { format!(r#"{{"mage": {{"arch": {arch}}}}}"#) };
        serde_json::from_str(&format!(
            r#"{{"packages": [{{"name": "other", "metadata": null}}, {{"name": "mage-x", "metadata": {mage}}}]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn a_package_names_its_architecture_or_gets_the_default() {
        assert_eq!(arch_in_metadata(&metadata(""), "mage-x").unwrap(), ARCH);
        assert_eq!(arch_in_metadata(&metadata(""), "other").unwrap(), ARCH);
        assert_eq!(arch_in_metadata(&metadata(r#""sm_90a""#), "mage-x").unwrap(), "sm_90a");
        assert_eq!(arch_in_metadata(&metadata(r#""sm_100f""#), "mage-x").unwrap(), "sm_100f");
        for bad in [r#""90a""#, r#""sm_9""#, r#""sm_90b""#, r#""compute_90a""#, "90"] {
            let err = arch_in_metadata(&metadata(bad), "mage-x").unwrap_err();
            assert!(err.contains("not a GPU architecture"), "{bad}: {err}");
        }
        assert!(arch_in_metadata(&metadata(""), "missing").unwrap_err().contains("no package `missing`"));
    }

    #[test]
    fn this_workspace_builds_mage_common_for_the_default_architecture() {
        assert_eq!(package_arch("mage-common").unwrap(), ARCH);
    }

    #[test]
    fn the_ptx_target_names_the_ptxas_architecture() {
        let ptx = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n.target sm_90a\n.address_size 64\n";
        assert_eq!(ptx_target(ptx), Some("sm_90a"));
        assert_eq!(ptx_target(".version 7.8\n.target sm_90, texmode_independent\n"), Some("sm_90"));
        assert_eq!(ptx_target(".version 7.8\n"), None);
    }
}

/// One kernel entry's resource request, as snapshots record it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EntryRequest {
    pub stage: String,
    #[serde(flatten)]
    pub resources: Resources,
    /// Dynamic shared bytes the stage asks for at the op's default dims
    /// (`None` where the stage does not launch this entry there).
    pub dynamic_shared_bytes_at_default: Option<u32>,
}

/// Registers of an SM of the H200 (and of every GPU since sm_50).
pub const SM_REGISTERS: u64 = 64 * 1024;
/// The most dynamic shared memory one block may opt in to on the H200.
pub const MAX_BLOCK_SHARED_BYTES: u32 = 227 * 1024;

/// Whether every launch of every stage of `op` at its sweep shapes and
/// default dims can run, by the ptxas `requests`: its block's threads
/// times the entry's registers (allotted in multiples of 8) fit an SM, and
/// its dynamic shared memory is within the opt-in limit. A block that does
/// not fit fails at launch on the GPU, never on the emulator. Returns how
/// many launches it checked.
pub fn check_launches_fit_an_sm(op: &Op, requests: &[EntryRequest]) -> Result<usize, String> {
    let mut checked = 0;
    for dims in op.sweep.iter().map(|w| w.dims).chain([op.default_dims]) {
        for stage in op.stages.iter().filter(|s| (s.supports)(dims)) {
            for launch in (stage.plan)(dims).launches {
                let entry = requests
                    .iter()
                    .find(|r| r.resources.entry == launch.kernel.name)
                    .ok_or_else(|| format!("ptxas reported no entry `{}`", launch.kernel.name))?;
                let registers = (entry.resources.registers as u64).div_ceil(8) * 8 * launch.block.count();
                if registers > SM_REGISTERS {
                    return Err(format!(
                        "{} at {dims:?}: {} threads x {} registers",
                        stage.name,
                        launch.block.count(),
                        entry.resources.registers
                    ));
                }
                if launch.shared_bytes > MAX_BLOCK_SHARED_BYTES {
                    return Err(format!("{} at {dims:?}: {} B of shared memory", stage.name, launch.shared_bytes));
                }
                checked += 1;
            }
        }
    }
    Ok(checked)
}

/// The ptxas resource request of every kernel entry of every stage of `op`,
/// in registry order: what a resource snapshot records.
pub fn resource_requests(op: &Op) -> Result<Vec<EntryRequest>, String> {
    let ptx = build_ptx(op.package)?;
    let all = ptxas_resources(&ptx)?;
    let mut out = vec![];
    for stage in op.stages {
        let at_default = ((stage.supports)(op.default_dims)).then(|| (stage.plan)(op.default_dims));
        for k in stage.kernels {
            let r = all
                .iter()
                .find(|r| r.entry == k.name)
                .ok_or_else(|| format!("ptxas reported no entry `{}` in {}", k.name, ptx.display()))?;
            let dynamic = at_default.as_ref().and_then(|p| p.launches.iter().find(|l| l.kernel.name == k.name).map(|l| l.shared_bytes));
            out.push(EntryRequest { stage: stage.name.into(), resources: r.clone(), dynamic_shared_bytes_at_default: dynamic });
        }
    }
    Ok(out)
}

/// ptxas' resource request of every kernel entry of a parameter space
/// (builds the op's PTX), in the order of [`Space::kernels`].
pub fn space_resources(space: &Space) -> Result<Vec<Resources>, String> {
    let ptx = build_ptx(space.op.package)?;
    let all = ptxas_resources(&ptx)?;
    space
        .kernels
        .iter()
        .map(|k| all.iter().find(|r| r.entry == k.name).cloned().ok_or_else(|| format!("ptxas reported no entry `{}`", k.name)))
        .collect()
}
