//! `mage-ptx-linker`: the program rustc's `nvptx64-nvidia-cuda` target runs as
//! its `llvm-bitcode-linker` (passed with `-C linker=`).
//!
//! rustc calls it with `--export-symbol NAME` (repeated), bitcode objects and
//! rlibs, `--target`, `--target-cpu CPU`, `--target-feature=...`, `-o OUT` and
//! `-O<level>`. It links every bitcode module with `llvm-link`, internalizes
//! all but the exported kernels and optimizes with `opt`, then lowers to PTX
//! with `llc`. The three tools come with rustup's `llvm-tools` component; their
//! folder is `$MAGE_LLVM_BIN`, or found from `rustc --print sysroot`.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

struct Args {
    exports: Vec<String>,
    inputs: Vec<PathBuf>,
    cpu: String,
    features: Vec<String>,
    output: PathBuf,
    opt_level: String,
}

fn parse(mut raw: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut a = Args {
        exports: vec![],
        inputs: vec![],
        cpu: "sm_90".into(),
        features: vec![],
        output: PathBuf::from("out.ptx"),
        opt_level: "3".into(),
    };
    let next = |raw: &mut dyn Iterator<Item = OsString>, flag: &str| {
        raw.next().map(|s| s.to_string_lossy().into_owned()).ok_or(format!("{flag} needs a value"))
    };
    while let Some(arg) = raw.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "--export-symbol" => a.exports.push(next(&mut raw, &s)?),
            "--target" | "-L" => drop(next(&mut raw, &s)?),
            "--target-cpu" => a.cpu = next(&mut raw, &s)?,
            "-o" => a.output = PathBuf::from(next(&mut raw, &s)?),
            "--debug" | "--bitcode-linker-flavor" => {}
            _ if s.starts_with("--target-feature=") => {
                a.features.extend(s["--target-feature=".len()..].split(',').filter(|f| !f.is_empty()).map(String::from))
            }
            _ if s.starts_with("--target-feature") => {
                let v = next(&mut raw, &s)?;
                a.features.extend(v.split(',').filter(|f| !f.is_empty()).map(String::from));
            }
            _ if s.starts_with("-O") => a.opt_level = s[2..].to_string(),
            _ if s.starts_with('-') => return Err(format!("unknown flag `{s}`")),
            _ => a.inputs.push(PathBuf::from(arg)),
        }
    }
    Ok(a)
}

/// Members of a System V `ar` archive (an rlib) that hold LLVM bitcode.
fn bitcode_members(rlib: &Path, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let data = fs::read(rlib).map_err(|e| format!("{}: {e}", rlib.display()))?;
    if !data.starts_with(b"!<arch>\n") {
        return Err(format!("{} is not an ar archive", rlib.display()));
    }
    let stem = rlib.file_stem().unwrap().to_string_lossy().into_owned();
    let (mut pos, mut out, mut long_names) = (8usize, vec![], Vec::<u8>::new());
    while pos + 60 <= data.len() {
        let header = &data[pos..pos + 60];
        let name = String::from_utf8_lossy(&header[..16]).trim_end().to_string();
        let size: usize =
            String::from_utf8_lossy(&header[48..58]).trim().parse().map_err(|_| format!("{}: bad member size", rlib.display()))?;
        let body = &data[pos + 60..pos + 60 + size];
        if name == "//" {
            long_names = body.to_vec();
        } else if body.starts_with(b"BC\xC0\xDE") {
            let _ = &long_names;
            let file = dir.join(format!("{stem}-{}.bc", out.len()));
            fs::write(&file, body).map_err(|e| e.to_string())?;
            out.push(file);
        }
        pos += 60 + size + (size & 1);
    }
    Ok(out)
}

fn llvm_bin() -> Result<PathBuf, String> {
    if let Some(dir) = env::var_os("MAGE_LLVM_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).args(["--print", "sysroot"]).output().map_err(|e| format!("rustc --print sysroot: {e}"))?;
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let host = env!("MAGE_HOST_TRIPLE");
    Ok(Path::new(&sysroot).join("lib/rustlib").join(host).join("bin"))
}

fn run(tool: &Path, args: &[OsString]) -> Result<(), String> {
    let status = Command::new(tool)
        .args(args)
        .status()
        .map_err(|e| format!("{}: {e} (is rustup's llvm-tools component installed?)", tool.display()))?;
    if status.success() { Ok(()) } else { Err(format!("{} failed: {status}", tool.display())) }
}

fn link(a: Args) -> Result<(), String> {
    let bin = llvm_bin()?;
    let work = a.output.with_extension("link.d");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    let mut modules = vec![];
    for input in &a.inputs {
        match input.extension().and_then(|e| e.to_str()) {
            Some("rlib") | Some("a") => modules.extend(bitcode_members(input, &work)?),
            _ => modules.push(input.clone()),
        }
    }
    let linked = work.join("linked.bc");
    let mut args: Vec<OsString> = modules.iter().map(|m| m.clone().into_os_string()).collect();
    args.extend(["-o".into(), linked.clone().into_os_string()]);
    run(&bin.join("llvm-link"), &args)?;

    let optimized = work.join("optimized.bc");
    let level = match a.opt_level.as_str() {
        "0" => "O0",
        "1" => "O1",
        "2" => "O2",
        "s" => "Os",
        "z" => "Oz",
        _ => "O3",
    };
    run(
        &bin.join("opt"),
        &[
            format!("--internalize-public-api-list={}", a.exports.join(",")).into(),
            format!("-passes=internalize,default<{level}>,globaldce").into(),
            linked.into_os_string(),
            "-o".into(),
            optimized.clone().into_os_string(),
        ],
    )?;

    let mut llc: Vec<OsString> =
        vec![format!("-mcpu={}", a.cpu).into(), format!("-{level}").replace("-Os", "-O2").replace("-Oz", "-O2").into()];
    if !a.features.is_empty() {
        llc.push(format!("-mattr={}", a.features.join(",")).into());
    }
    llc.extend([optimized.into_os_string(), "-o".into(), a.output.clone().into_os_string()]);
    run(&bin.join("llc"), &llc)?;
    let _ = fs::remove_dir_all(&work);
    Ok(())
}

fn main() -> ExitCode {
    match parse(env::args_os().skip(1)).and_then(link) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mage-ptx-linker: {e}");
            ExitCode::FAILURE
        }
    }
}
