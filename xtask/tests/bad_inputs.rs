//! Every bad input and misuse listed in docs/bad-inputs.md, one test each.
//! The built binary runs (on the emulator where a run is needed) in a
//! scratch directory of its own; each test checks the one-line message,
//! the exit code, and that no file on disk changed.

use mage_common::fixtures::sha256_hex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_xtask");

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask/ sits in the checkout").to_path_buf()
}

/// A directory of the test's own under the temp directory, removed when
/// the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("mage-bad-inputs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file and directory under `dir`, with each file's sha256; a
/// symlink is recorded by its target and a FIFO or device by its kind
/// (neither is read: a FIFO would block, `/dev/full` never end).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    use std::os::unix::fs::FileTypeExt;
    let mut all = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let t = std::fs::symlink_metadata(&path).unwrap().file_type();
            let what = if t.is_symlink() {
                format!("symlink to {}", std::fs::read_link(&path).unwrap().display())
            } else if t.is_dir() {
                stack.push(path.clone());
                "directory".into()
            } else if t.is_fifo() {
                "fifo".into()
            } else if t.is_char_device() || t.is_block_device() {
                "device".into()
            } else {
                sha256_hex(&std::fs::read(&path).unwrap())
            };
            all.insert(path, what);
        }
    }
    all
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn command_in(dir: &Path, program: &str, args: &[&str]) -> Outcome {
    let out = Command::new(program).current_dir(dir).args(args).output().unwrap();
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cmd` (stdout and stderr captured unless set already) and waits at
/// most `secs`: where it has not ended by then (a read blocked on a FIFO,
/// a wait for a lock) it is killed and the test fails, never hangs.
fn within(mut cmd: Command, secs: u64) -> Outcome {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = reader(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {secs} s (killed): {}", err.join().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Outcome { code: status.code(), stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// The binary in `dir` with `args`, as a command to adjust and run [`within`].
fn mage_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).args(args).stdout(std::process::Stdio::piped());
    c
}

fn mage(dir: &Path, args: &[&str]) -> Outcome {
    command_in(dir, BIN, args)
}

/// The binary under an address-space limit (`ulimit -v`, KiB).
fn mage_limited(dir: &Path, kib: u64, args: &[&str]) -> Outcome {
    let script = format!("ulimit -v {kib} && exec \"$0\" \"$@\"");
    let mut all = vec!["-c", &script, BIN];
    all.extend_from_slice(args);
    command_in(dir, "sh", &all)
}

/// Exit code of a refused input; usage errors (clap's) exit with 2.
const REFUSED: i32 = 1;
const USAGE: i32 = 2;

/// Checks a refusal: exit code 1, one line on stderr, `error: ` and then
/// `message` (the whole message where it ends with `$`, else its start),
/// and every file under `watched` as it was. Returns the message.
#[track_caller]
fn assert_refused(before: &[BTreeMap<PathBuf, String>], watched: &[&Path], out: Outcome, message: &str) -> String {
    assert_refused_with(REFUSED, before, watched, out, message)
}

#[track_caller]
fn assert_refused_with(code: i32, before: &[BTreeMap<PathBuf, String>], watched: &[&Path], out: Outcome, message: &str) -> String {
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line on stderr:\n{}", out.stderr);
    let text = lines[0].strip_prefix("error: ").unwrap_or_else(|| panic!("no `error: ` line: {}", out.stderr));
    match message.strip_suffix('$') {
        Some(whole) => assert_eq!(text, whole),
        None => assert!(text.starts_with(message), "message\n  {text}\ndoes not start with\n  {message}"),
    }
    assert_eq!(out.code, Some(code), "exit code; stdout:\n{}", out.stdout);
    for (dir, was) in watched.iter().zip(before) {
        assert_eq!(&snapshot(dir), was, "files under {} changed", dir.display());
    }
    text.to_string()
}

/// Runs `args` in `dir` and checks the refusal, with nothing under `dir`
/// or `also` changed.
#[track_caller]
fn refused_watching(dir: &Path, args: &[&str], message: &str, also: &[&Path]) -> String {
    let watched: Vec<&Path> = std::iter::once(dir).chain(also.iter().copied()).collect();
    let before: Vec<_> = watched.iter().map(|d| snapshot(d)).collect();
    let out = mage(dir, args);
    assert_refused(&before, &watched, out, message)
}

#[track_caller]
fn refused(dir: &Path, args: &[&str], message: &str) -> String {
    refused_watching(dir, args, message, &[])
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A copy of the committed case `fixtures/<name>` at `<dir>/case`.
fn copy_case(name: &str, dir: &Path) -> PathBuf {
    let case = dir.join("case");
    copy_dir(&checkout().join("fixtures").join(name), &case);
    case
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_words(path: &Path) -> Vec<[u8; 4]> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect()
}

fn read_f32(path: &Path) -> Vec<f32> {
    read_words(path).into_iter().map(f32::from_le_bytes).collect()
}

fn read_u32(path: &Path) -> Vec<u32> {
    read_words(path).into_iter().map(u32::from_le_bytes).collect()
}

/// Replaces an input file (or `expected.bin`) of a case and records its
/// new sha256, so that only the contents are wrong.
fn set_input(case: &Path, file: &str, bytes: &[u8]) {
    std::fs::write(case.join(file), bytes).unwrap();
    let sums = case.join("inputs.sha256.json");
    let mut map: BTreeMap<String, String> = serde_json::from_str(&std::fs::read_to_string(&sums).unwrap()).unwrap();
    map.insert(file.into(), sha256_hex(bytes));
    std::fs::write(sums, serde_json::to_string_pretty(&map).unwrap()).unwrap();
}

/// Removes a file of a case and its entry in `inputs.sha256.json`.
fn remove_from_case(case: &Path, file: &str) {
    let _ = std::fs::remove_file(case.join(file));
    let sums = case.join("inputs.sha256.json");
    let mut map: BTreeMap<String, String> = serde_json::from_str(&std::fs::read_to_string(&sums).unwrap()).unwrap();
    map.remove(file);
    std::fs::write(sums, serde_json::to_string_pretty(&map).unwrap()).unwrap();
}

fn set_input_f32(case: &Path, file: &str, edit: impl FnOnce(&mut Vec<f32>)) {
    let mut v = read_f32(&case.join(file));
    edit(&mut v);
    set_input(case, file, &f32_bytes(&v));
}

fn set_input_u32(case: &Path, file: &str, edit: impl FnOnce(&mut Vec<u32>)) {
    let mut v = read_u32(&case.join(file));
    edit(&mut v);
    set_input(case, file, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
}

fn edit_text(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} holds no `{from}`", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Whether this machine has an NVIDIA driver (then the no-GPU rows do not apply).
fn has_gpu() -> bool {
    Path::new("/proc/driver/nvidia/version").exists()
}

/// A bundle as `cargo xtask bundle` lays it out: the binary as `mage` with
/// `fixtures/` beside it (one committed case copied in).
fn bundle(s: &Scratch) -> PathBuf {
    let dir = s.join("bundle");
    std::fs::create_dir_all(dir.join("fixtures")).unwrap();
    if std::fs::hard_link(BIN, dir.join("mage")).is_err() {
        std::fs::copy(BIN, dir.join("mage")).unwrap();
    }
    copy_dir(&checkout().join("fixtures/layernorm-4x128"), &dir.join("fixtures/layernorm-4x128"));
    dir
}

// Names, flags and dims.

/// Checks a usage error: exit code 2, one line, nothing under `dir` changed.
#[track_caller]
fn usage_refused(dir: &Path, args: &[&str], message: &str) {
    let before = [snapshot(dir)];
    let out = mage(dir, args);
    assert_refused_with(USAGE, &before, &[dir], out, message);
}

#[test]
fn unknown_flag() {
    let s = Scratch::new("unknown-flag");
    usage_refused(
        s.path(),
        &["run", "layernorm", "--dimz", "4,128", "--emulate"],
        "unexpected argument '--dimz' found; tip: a similar argument exists: '--dims' (see --help)$",
    );
}

#[test]
fn flag_value_that_is_not_a_number() {
    let s = Scratch::new("flag-value");
    usage_refused(
        s.path(),
        &["run", "layernorm", "--seed", "abc", "--emulate"],
        "invalid value 'abc' for '--seed <SEED>': invalid digit found in string (see --help)$",
    );
}

#[test]
fn missing_op() {
    let s = Scratch::new("missing-op");
    usage_refused(s.path(), &["run", "--emulate"], "the following required arguments were not provided: <OP> (see --help)$");
}

#[test]
fn unknown_op() {
    let s = Scratch::new("unknown-op");
    refused(
        s.path(),
        &["run", "nosuch", "--emulate"],
        "unknown op `nosuch`; the ops are matmul, gelu, gelu_erf, layernorm, triangle, neighbor, layernorm_backward, gelu_backward, gelu_erf_backward, triangle_backward, neighbor_backward, matmul_nt, matmul_tn$",
    );
}

#[test]
fn unknown_stage() {
    let s = Scratch::new("unknown-stage");
    refused(s.path(), &["run", "layernorm", "--stage", "mage-999", "--emulate"], "layernorm has no stage `mage-999`; its stages are ");
}

#[test]
fn unknown_generator() {
    let s = Scratch::new("unknown-generator");
    refused(
        s.path(),
        &["run", "neighbor", "--gen", "zipf", "--emulate"],
        "neighbor has no generator `zipf`; its generators are uniform, power-law$",
    );
}

#[test]
fn zero_dim() {
    let s = Scratch::new("zero-dim");
    refused(s.path(), &["run", "layernorm", "--dims", "0,768", "--emulate"], "layernorm dim `rows` is 0; it must be at least 1$");
}

#[test]
fn non_numeric_dim() {
    let s = Scratch::new("non-numeric-dim");
    refused(s.path(), &["run", "layernorm", "--dims", "4,abc", "--emulate"], "`abc` in --dims 4,abc is not a whole number below 2^32$");
}

#[test]
fn negative_dim() {
    let s = Scratch::new("negative-dim");
    refused(s.path(), &["run", "layernorm", "--dims=-4,128", "--emulate"], "`-4` in --dims -4,128 is not a whole number below 2^32$");
}

#[test]
fn dim_above_u32() {
    let s = Scratch::new("dim-above-u32");
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4294967296,8", "--emulate"],
        "`4294967296` in --dims 4294967296,8 is not a whole number below 2^32$",
    );
}

#[test]
fn too_many_dims() {
    let s = Scratch::new("too-many-dims");
    refused(s.path(), &["run", "layernorm", "--dims", "4,128,3", "--emulate"], "layernorm takes 2 dims (rows,width), got 3$");
}

#[test]
fn too_few_dims() {
    let s = Scratch::new("too-few-dims");
    refused(s.path(), &["run", "neighbor", "--dims", "4096,64", "--emulate"], "neighbor takes 3 dims (n,width,edges), got 2$");
}

const TRIANGLE_OVERFLOW: &str = "dims 2147483648x4 overflow: input A (a.bin) would hold 18446744073709551616 elements (at most 2^30)$";

#[test]
fn overflowing_dims_on_run() {
    let s = Scratch::new("overflow-run");
    refused(s.path(), &["run", "triangle", "--dims", "2147483648,4", "--emulate"], TRIANGLE_OVERFLOW);
}

#[test]
fn overflowing_dims_on_sweep() {
    let s = Scratch::new("overflow-sweep");
    refused(s.path(), &["sweep", "triangle", "--dims", "2147483648,4", "--emulate", "--results", "results"], TRIANGLE_OVERFLOW);
}

#[test]
fn overflowing_dims_on_fixtures() {
    let s = Scratch::new("overflow-fixtures");
    refused(s.path(), &["fixtures", "triangle", "--dims", "2147483648,4", "--out", "case"], TRIANGLE_OVERFLOW);
}

#[test]
fn stage_that_does_not_support_the_dims() {
    let s = Scratch::new("stage-unsupported");
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,127", "--stage", "mage-006", "--emulate"],
        "layernorm mage-006 does not support --dims 4,127 (stages that do: ",
    );
}

#[test]
fn sweep_stage_that_does_not_support_the_dims() {
    let s = Scratch::new("sweep-stage-unsupported");
    let e = refused(
        s.path(),
        &["sweep", "layernorm", "--dims", "4,127", "--stage", "mage-006", "--emulate", "--results", "results"],
        "layernorm mage-006 does not support --dims 4,127 (stages that do: ",
    );
    assert!(e.ends_with("; nothing ran"), "{e}");
}

// The case directory of `run --case`.

#[test]
fn case_directory_missing() {
    let s = Scratch::new("case-missing");
    refused(s.path(), &["run", "layernorm", "--case", "nowhere", "--emulate"], "case nowhere is not a directory$");
}

#[test]
fn case_input_json_missing() {
    let s = Scratch::new("input-json-missing");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::remove_file(case.join("input.json")).unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: input.json: No such file or directory");
}

#[test]
fn case_input_json_malformed() {
    let s = Scratch::new("input-json-malformed");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::write(case.join("input.json"), "dims: 4,128\n").unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: input.json: expected value at line 1 column 1$");
}

#[test]
fn case_of_another_op() {
    let s = Scratch::new("case-other-op");
    copy_case("gelu-3x257", s.path());
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case is a `gelu` case, not `layernorm`$");
}

#[test]
fn case_with_invalid_dims() {
    let s = Scratch::new("case-invalid-dims");
    let case = copy_case("layernorm-4x128", s.path());
    edit_text(&case.join("input.json"), "\n    4,", "\n    0,");
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: input.json: layernorm dim `rows` is 0; it must be at least 1$",
    );
}

#[test]
fn case_with_unknown_generator() {
    let s = Scratch::new("case-unknown-generator");
    let case = copy_case("neighbor-7x9x23", s.path());
    edit_text(&case.join("input.json"), "\"uniform\"", "\"zipf\"");
    refused(
        s.path(),
        &["run", "neighbor", "--case", "case", "--emulate"],
        "case case: input.json: neighbor has no generator `zipf`; its generators are uniform, power-law$",
    );
}

#[test]
fn dims_that_disagree_with_the_case() {
    let s = Scratch::new("dims-disagree");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--dims", "8,128", "--emulate"],
        "--dims 8,128 disagrees with case case (4x128)$",
    );
}

#[test]
fn generator_that_disagrees_with_the_case() {
    let s = Scratch::new("gen-disagree");
    copy_case("neighbor-7x9x23", s.path());
    refused(
        s.path(),
        &["run", "neighbor", "--case", "case", "--gen", "power-law", "--emulate"],
        "--gen power-law disagrees with case case, drawn by `uniform`$",
    );
}

#[test]
fn seed_with_a_case() {
    let s = Scratch::new("seed-with-case");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--seed", "1", "--emulate"],
        "--seed 1 does not apply to --case case: its inputs are fixed (drawn with seed 7)$",
    );
}

#[test]
fn sha256_file_missing() {
    let s = Scratch::new("sha-file-missing");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::remove_file(case.join("inputs.sha256.json")).unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: inputs.sha256.json: No such file or directory");
}

#[test]
fn sha256_file_malformed() {
    let s = Scratch::new("sha-file-malformed");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::write(case.join("inputs.sha256.json"), "[1, 2]").unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: inputs.sha256.json: invalid type: sequence");
}

#[test]
fn input_file_missing() {
    let s = Scratch::new("bin-missing");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::remove_file(case.join("b.bin")).unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: b.bin (gamma): No such file or directory");
}

#[test]
fn input_file_short() {
    let s = Scratch::new("bin-short");
    let case = copy_case("layernorm-4x128", s.path());
    let bytes = std::fs::read(case.join("a.bin")).unwrap();
    std::fs::write(case.join("a.bin"), &bytes[..bytes.len() - 4]).unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: a.bin (x) holds 2044 bytes; dims 4x128 need 2048 (512 values)$",
    );
}

#[test]
fn input_file_long() {
    let s = Scratch::new("bin-long");
    let case = copy_case("layernorm-4x128", s.path());
    let mut bytes = std::fs::read(case.join("c.bin")).unwrap();
    bytes.extend([0; 4]);
    std::fs::write(case.join("c.bin"), &bytes).unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: c.bin (beta) holds 516 bytes; dims 4x128 need 512 (128 values)$",
    );
}

#[test]
fn input_file_sha256_mismatch() {
    let s = Scratch::new("sha-mismatch");
    let case = copy_case("layernorm-4x128", s.path());
    let mut bytes = std::fs::read(case.join("a.bin")).unwrap();
    bytes[0] ^= 1;
    std::fs::write(case.join("a.bin"), &bytes).unwrap();
    let e = refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: a.bin has sha256 ");
    assert!(e.contains(", but inputs.sha256.json records "), "{e}");
}

#[test]
fn input_file_without_sha256_entry() {
    let s = Scratch::new("sha-entry-missing");
    let case = copy_case("layernorm-4x128", s.path());
    let bytes = std::fs::read(case.join("a.bin")).unwrap();
    remove_from_case(&case, "a.bin");
    std::fs::write(case.join("a.bin"), bytes).unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: inputs.sha256.json has no entry for a.bin$");
}

#[test]
fn expected_file_of_the_wrong_size() {
    let s = Scratch::new("expected-size");
    let case = copy_case("layernorm-4x128", s.path());
    let bytes = std::fs::read(case.join("expected.bin")).unwrap();
    std::fs::write(case.join("expected.bin"), &bytes[..bytes.len() - 4]).unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: expected.bin holds 2044 bytes; the output has 512 values$",
    );
}

#[test]
fn expected_file_that_disagrees_with_the_output() {
    let s = Scratch::new("expected-disagrees");
    let case = copy_case("layernorm-4x128", s.path());
    let mut expected = read_f32(&case.join("expected.bin"));
    expected[7] += 1.0;
    set_input(&case, "expected.bin", &f32_bytes(&expected));
    let e =
        refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate", "--out", "out.bin"], "case case: the output of layernorm ");
    assert!(e.contains("disagrees with expected.bin: 1 of 512 elements outside") && e.contains("(flat 7)"), "{e}");
}

#[test]
fn nan_in_an_input() {
    let s = Scratch::new("nan-input");
    let case = copy_case("layernorm-4x128", s.path());
    set_input_f32(&case, "a.bin", |v| v[130] = f32::NAN);
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate", "--out", "out.bin"],
        "case case: a.bin (x) holds NaN at index 130 ([1, 2] of shape [4, 128]); pass --allow-nonfinite to run it",
    );
}

#[test]
fn infinity_in_an_input() {
    let s = Scratch::new("inf-input");
    let case = copy_case("layernorm-4x128", s.path());
    set_input_f32(&case, "c.bin", |v| v[5] = f32::NEG_INFINITY);
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: c.bin (beta) holds -inf at index 5 ([5] of shape [128]); pass --allow-nonfinite",
    );
}

#[test]
fn layernorm_row_past_fp32() {
    let s = Scratch::new("layernorm-range");
    let case = copy_case("layernorm-4x128", s.path());
    set_input_f32(&case, "a.bin", |v| v[130] = 3e37);
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate", "--out", "out.bin"],
        "case case: a.bin (x) row 1 spreads too far for FP32: the sum of its squared deviations is 9.000e74 (values up to 3.000e37), \
         beyond 8.507e37; scale the input down$",
    );
}

#[test]
fn contraction_whose_terms_pass_fp32() {
    let s = Scratch::new("matmul-range");
    let case = copy_case("matmul-17x19x23", s.path());
    for file in ["a.bin", "b.bin"] {
        set_input_f32(&case, file, |v| v.iter_mut().for_each(|x| *x *= 1e20));
    }
    refused(
        s.path(),
        &["run", "matmul", "--case", "case", "--emulate", "--out", "out.bin"],
        "case case: the inputs are out of FP32's range: output [0, 0] sums terms of magnitude ",
    );
}

/// Values of about 1e-3 (outputs about 3e-5) and an `expected.bin` of zeros:
/// the bound follows the terms, so zeros are refused (a fixed 3.4e-5 passed them).
#[test]
fn expected_zeros_on_small_data() {
    let s = Scratch::new("expected-zeros-small");
    let case = copy_case("matmul-64x48x40", s.path());
    for file in ["a.bin", "b.bin"] {
        set_input_f32(&case, file, |v| v.iter_mut().for_each(|x| *x *= 1e-3));
    }
    set_input(&case, "expected.bin", &vec![0u8; 64 * 48 * 4]);
    let e = refused(s.path(), &["run", "matmul", "--case", "case", "--emulate"], "case case: the output of matmul current → ");
    assert!(e.contains("disagrees with expected.bin: 3072 of 3072 elements outside"), "{e}");
}

/// Correct outputs on data of any scale pass (a bound from the dims refused them at 1e15).
#[test]
fn every_scale_passes() {
    for (scale, name) in [(1e15f32, "large"), (1e-6, "small")] {
        let s = Scratch::new(&format!("scale-{name}"));
        let case = copy_case("matmul-17x19x23", s.path());
        for file in ["a.bin", "b.bin"] {
            set_input_f32(&case, file, |v| v.iter_mut().for_each(|x| *x *= scale));
        }
        remove_from_case(&case, "expected.bin");
        for stage in ["current", "mage-001", "mage-007", "mage-009", "mage-010"] {
            let out = mage(s.path(), &["run", "matmul", "--case", "case", "--emulate", "--stage", stage]);
            assert_eq!(out.code, Some(0), "{scale:e} {stage}: {}", out.stderr);
        }
    }
}

#[test]
fn allow_nonfinite_runs_and_checks_the_nan_positions() {
    let s = Scratch::new("allow-nonfinite");
    let case = copy_case("layernorm-4x128", s.path());
    remove_from_case(&case, "expected.bin");
    set_input_f32(&case, "a.bin", |v| v[130] = f32::NAN);
    let out = mage(s.path(), &["run", "layernorm", "--case", "case", "--emulate", "--allow-nonfinite", "--out", "out.bin"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // A NaN in row 1 makes that row of the reference NaN; the run passed,
    // so the output is NaN exactly there.
    let got = read_f32(&s.join("out.bin"));
    assert!(got.iter().enumerate().all(|(i, v)| v.is_nan() == (128..256).contains(&i)));
}

#[test]
fn allow_nonfinite_with_nan_positions_that_disagree() {
    let s = Scratch::new("nonfinite-positions");
    let case = copy_case("layernorm-4x128", s.path());
    // expected.bin keeps finite values in row 1, where the output is NaN.
    set_input_f32(&case, "a.bin", |v| v[130] = f32::NAN);
    let e = refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate", "--allow-nonfinite"], "case case: the output of ");
    assert!(e.contains("disagrees with expected.bin: 128 of 512 elements outside"), "{e}");
}

// Malformed CSR graphs (neighbor).

#[test]
fn csr_rowptr_not_starting_at_zero() {
    let s = Scratch::new("csr-start");
    let case = copy_case("neighbor-7x9x23", s.path());
    set_input_u32(&case, "rowptr.bin", |r| r[0] = 1);
    refused(
        s.path(),
        &["run", "neighbor", "--case", "case", "--emulate"],
        "case case: rowptr.bin: rowptr[0] is 1; a CSR row pointer must start at 0$",
    );
}

#[test]
fn csr_rowptr_decreasing() {
    let s = Scratch::new("csr-decreasing");
    let case = copy_case("neighbor-7x9x23", s.path());
    set_input_u32(&case, "rowptr.bin", |r| r[2] = r[3] + 1);
    refused(s.path(), &["run", "neighbor", "--case", "case", "--emulate"], "case case: rowptr.bin: rowptr decreases at row 2: ");
}

#[test]
fn csr_rowptr_not_ending_at_the_edge_count() {
    let s = Scratch::new("csr-end");
    let case = copy_case("neighbor-7x9x23", s.path());
    set_input_u32(&case, "rowptr.bin", |r| r[7] = 24);
    refused(
        s.path(),
        &["run", "neighbor", "--case", "case", "--emulate"],
        "case case: rowptr.bin: rowptr[7] is 24; it must equal the edge count 23$",
    );
}

#[test]
fn csr_index_out_of_range() {
    let s = Scratch::new("csr-index");
    let case = copy_case("neighbor-7x9x23", s.path());
    set_input_u32(&case, "indices.bin", |ix| ix[5] = 7);
    refused(
        s.path(),
        &["run", "neighbor", "--case", "case", "--emulate"],
        "case case: indices.bin: indices[5] is 7; every index must be below n = 7$",
    );
}

// Where outputs go.

#[test]
fn out_is_an_input_of_the_case() {
    let s = Scratch::new("out-input");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate", "--out", "case/a.bin", "--force"],
        "--out case/a.bin would overwrite case/a.bin, which this command reads; name another file$",
    );
}

#[test]
fn out_is_the_case_description() {
    let s = Scratch::new("out-input-json");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate", "--out", "case/input.json"],
        "--out case/input.json would overwrite case/input.json, which this command reads",
    );
}

#[test]
fn out_is_the_expected_output_by_another_path() {
    let s = Scratch::new("out-expected");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate", "--out", "./case/../case/expected.bin", "--force"],
        "--out ./case/../case/expected.bin would overwrite case/expected.bin, which this command reads",
    );
}

#[test]
fn out_is_a_directory() {
    let s = Scratch::new("out-directory");
    std::fs::create_dir(s.join("results")).unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "results"],
        "--out results is a directory; name a file$",
    );
}

#[test]
fn out_in_a_missing_directory() {
    let s = Scratch::new("out-missing-dir");
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "nowhere/out.bin"],
        "--out nowhere/out.bin: the directory nowhere does not exist$",
    );
}

#[test]
fn out_that_exists_without_force() {
    let s = Scratch::new("out-exists");
    std::fs::write(s.join("out.bin"), "keep me").unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "out.bin"],
        "--out out.bin exists; pass --force to replace it$",
    );
    let out = mage(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "out.bin", "--force"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(std::fs::read(s.join("out.bin")).unwrap().len(), 4 * 128 * 4);
}

#[test]
fn fixtures_over_an_existing_case() {
    let s = Scratch::new("fixtures-existing");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["fixtures", "layernorm", "--dims", "4,64", "--out", "case"],
        "the directory case already holds a case; pass --force to replace it whole (expected.bin included)$",
    );
}

#[test]
fn fixtures_without_out_over_a_committed_case() {
    let s = Scratch::new("fixtures-committed");
    let committed = checkout().join("fixtures");
    let e = refused_watching(s.path(), &["fixtures", "layernorm", "--dims", "4,128"], "the directory ", &[&committed]);
    assert!(e.ends_with("fixtures/layernorm-4x128 already holds a case; pass --force to replace it whole (expected.bin included)"), "{e}");
}

#[test]
fn fixtures_into_a_directory_that_is_not_a_case() {
    let s = Scratch::new("fixtures-other-dir");
    std::fs::create_dir(s.join("notes")).unwrap();
    std::fs::write(s.join("notes/todo.txt"), "mine").unwrap();
    refused(
        s.path(),
        &["fixtures", "layernorm", "--dims", "4,64", "--out", "notes", "--force"],
        "notes is a directory that holds other files, not a case (no input.json); name a new or empty directory$",
    );
}

#[test]
fn fixtures_into_a_file() {
    let s = Scratch::new("fixtures-file");
    std::fs::write(s.join("case"), "mine").unwrap();
    refused(
        s.path(),
        &["fixtures", "layernorm", "--dims", "4,64", "--out", "case", "--force"],
        "case exists and is not a directory; name a new directory for the case$",
    );
}

#[test]
fn fixtures_force_replaces_the_whole_case() {
    let s = Scratch::new("fixtures-force");
    let case = copy_case("layernorm-4x128", s.path());
    let out = mage(s.path(), &["fixtures", "layernorm", "--dims", "4,64", "--out", "case", "--force"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The old expected.bin would otherwise be checked against new inputs.
    assert!(!case.join("expected.bin").exists());
    let names: Vec<String> = snapshot(s.path()).keys().map(|p| p.strip_prefix(s.path()).unwrap().display().to_string()).collect();
    assert_eq!(names, ["case", "case/a.bin", "case/b.bin", "case/c.bin", "case/input.json", "case/inputs.sha256.json"]);
    let out = mage(s.path(), &["run", "layernorm", "--case", "case", "--emulate"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[test]
fn fixtures_with_a_nonfinite_constant() {
    let s = Scratch::new("fixtures-nan-constant");
    refused(
        s.path(),
        &["fixtures", "layernorm", "--dims", "4,64", "--constant", "NaN", "--out", "case"],
        "--constant NaN is not finite; pass --allow-nonfinite to write such a case (running it needs the flag too)$",
    );
}

#[test]
fn sweep_over_existing_evidence() {
    let s = Scratch::new("sweep-evidence");
    std::fs::create_dir_all(s.join("results/kept")).unwrap();
    std::fs::write(s.join("results/kept/sweep-layernorm.json"), "{}").unwrap();
    refused(
        s.path(),
        &["sweep", "layernorm", "--emulate", "--results", "results", "--namespace", "kept"],
        "results/kept/sweep-layernorm.json exists; pass --force to replace it$",
    );
}

#[test]
fn sweep_namespace_that_is_a_path() {
    let s = Scratch::new("sweep-namespace-path");
    refused(
        s.path(),
        &["sweep", "layernorm", "--emulate", "--results", "results", "--namespace", "../elsewhere"],
        "--namespace `../elsewhere` must be a plain folder name under results/$",
    );
}

#[test]
fn evolve_namespace_that_is_a_path() {
    let s = Scratch::new("evolve-namespace-path");
    refused(
        s.path(),
        &["evolve", "--report", "--namespace", "../elsewhere"],
        "--namespace `../elsewhere` must be a plain folder name under results/$",
    );
}

#[test]
fn plot_namespace_that_is_a_path() {
    let s = Scratch::new("plot-namespace-path");
    refused(s.path(), &["plot", "../elsewhere"], "--namespace `../elsewhere` must be a plain folder name under results/$");
}

#[test]
fn e2e_namespace_that_is_a_path() {
    let s = Scratch::new("e2e-namespace-path");
    refused(s.path(), &["e2e", "--namespace", "../elsewhere"], "--namespace `../elsewhere` must be a plain folder name under results/$");
}

#[test]
fn e2e_part_that_does_not_exist() {
    let s = Scratch::new("e2e-unknown-part");
    refused(
        s.path(),
        &["e2e", "--namespace", "x", "--only", "mlp,attention"],
        "--only attention: the parts are mlp, gnn, triangle, train$",
    );
}

#[test]
fn e2e_from_a_file_that_does_not_exist() {
    let s = Scratch::new("e2e-from-missing");
    refused(s.path(), &["e2e", "--namespace", "x", "--from", "missing.json"], "--from missing.json: No such file or directory");
}

#[test]
fn sweep_results_that_is_a_file() {
    let s = Scratch::new("sweep-results-file");
    std::fs::write(s.join("results"), "mine").unwrap();
    refused(s.path(), &["sweep", "layernorm", "--emulate", "--results", "results"], "--results results exists and is not a directory$");
}

// Memory, refused before anything is generated (under `ulimit -v`, or
// less where the machine has less).

const TRIANGLE_8192_RUN_NEED: &str = "triangle 8192x4 needs 8589934592 bytes (8.0 GiB) of host memory (inputs 2147483648, file staging 1073741824, output 1073741824, f64 reference and magnitudes 4294967296); ";

#[test]
fn run_that_needs_more_host_memory_than_there_is() {
    let s = Scratch::new("memory-run");
    let before = [snapshot(s.path())];
    let out = mage_limited(s.path(), 2_000_000, &["run", "triangle", "--dims", "8192,4", "--emulate", "--out", "out.bin"]);
    let e = assert_refused(&before, &[s.path()], out, TRIANGLE_8192_RUN_NEED);
    assert!(e.contains(" available ("), "{e}");
}

#[test]
fn sweep_that_needs_more_host_memory_than_there_is() {
    let s = Scratch::new("memory-sweep");
    let before = [snapshot(s.path())];
    let out = mage_limited(s.path(), 2_000_000, &["sweep", "triangle", "--dims", "8192,4", "--emulate", "--results", "results"]);
    assert_refused(&before, &[s.path()], out, TRIANGLE_8192_RUN_NEED);
}

#[test]
fn fixtures_that_need_more_host_memory_than_there_is() {
    let s = Scratch::new("memory-fixtures");
    let before = [snapshot(s.path())];
    let out = mage_limited(s.path(), 2_000_000, &["fixtures", "triangle", "--dims", "8192,4", "--out", "case"]);
    assert_refused(
        &before,
        &[s.path()],
        out,
        "triangle 8192x4 needs 3221225472 bytes (3.0 GiB) of host memory (inputs 2147483648, file staging 1073741824); ",
    );
}

// The GPU, doctor, and a bundle.

#[test]
fn no_gpu_names_the_checkout_command() {
    if has_gpu() {
        return;
    }
    let s = Scratch::new("no-gpu");
    let e = refused(s.path(), &["run", "layernorm", "--dims", "4,128", "--out", "out.bin"], "no CUDA driver or device: ");
    assert!(e.ends_with("run with --emulate for a CPU check (correctness only); see `cargo xtask doctor`, line `CUDA driver`"), "{e}");
}

#[test]
fn no_gpu_in_a_bundle_names_the_bundle_command() {
    if has_gpu() {
        return;
    }
    let s = Scratch::new("no-gpu-bundle");
    let dir = bundle(&s);
    let before = [snapshot(&dir)];
    let out = command_in(&dir, "./mage", &["run", "layernorm", "--dims", "4,128"]);
    let e = assert_refused(&before, &[&dir], out, "no CUDA driver or device: ");
    assert!(e.ends_with("see `./mage doctor`, line `CUDA driver`"), "{e}");
}

#[test]
fn fixtures_in_a_bundle_default_to_its_own_fixtures() {
    let s = Scratch::new("bundle-fixtures");
    let dir = bundle(&s);
    let committed = checkout().join("fixtures");
    let before = [snapshot(&dir), snapshot(&committed)];
    let out = command_in(&dir, "./mage", &["fixtures", "layernorm", "--dims", "4,128"]);
    let e = assert_refused(&before, &[&dir, &committed], out, "the directory ");
    assert!(e.contains("bundle/fixtures/layernorm-4x128 already holds a case"), "{e}");
    let out = command_in(&dir, "./mage", &["fixtures", "layernorm", "--dims", "2,8"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(dir.join("fixtures/layernorm-2x8/input.json").is_file());
    assert_eq!(snapshot(&committed), before[1], "the checkout's fixtures changed");
}

#[test]
fn doctor_exit_code_follows_its_missing_lines() {
    let s = Scratch::new("doctor-exit");
    let out = mage(s.path(), &["doctor"]);
    let missing: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("MISSING")).collect();
    if missing.is_empty() {
        assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    } else {
        assert_eq!(out.code, Some(1), "{}", out.stdout);
        let names: Vec<&str> = missing.iter().map(|l| l.split_whitespace().nth(1).unwrap()).collect();
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.starts_with(&format!("error: doctor: missing {}", names[0])), "{}", out.stderr);
    }
    if !has_gpu() {
        assert!(out.stdout.contains("MISSING  CUDA driver  no CUDA driver or device"), "{}", out.stdout);
    }
}

#[test]
fn doctor_builds_nothing() {
    let s = Scratch::new("doctor-builds-nothing");
    // A cargo that answers `--version` and records every other call (a
    // build): doctor must make none.
    let bin = s.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = s.join("cargo-calls");
    let fake = bin.join("cargo");
    let script =
        format!("#!/bin/sh\n[ \"$1\" = --version ] && echo 'cargo 1.97.0' && exit 0\necho \"$@\" >> '{}'\nexit 1\n", log.display());
    std::fs::write(&fake, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(BIN).arg("doctor").env("PATH", path).env("CARGO", &fake).current_dir(s.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!log.exists(), "doctor ran cargo: {}", std::fs::read_to_string(&log).unwrap());
    assert!(stdout.contains("nvptx build"), "{stdout}");
}

// Special files, the program's own files and other cases as `--out`.

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
}

fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

#[test]
fn out_on_a_full_device() {
    let s = Scratch::new("out-full-device");
    // Through a link of the test's own: were the link replaced, only it goes.
    std::os::unix::fs::symlink("/dev/full", s.join("full")).unwrap();
    let before = [snapshot(s.path())];
    let out = within(mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "full", "--force"]), 120);
    assert_refused(&before, &[s.path()], out, "writing full: No space left on device (os error 28)$");
    assert!(is_char_device(Path::new("/dev/full")));
}

#[test]
fn out_to_a_device_or_a_fifo_is_written_through() {
    let s = Scratch::new("out-device-fifo");
    std::os::unix::fs::symlink("/dev/null", s.join("null")).unwrap();
    std::os::unix::fs::symlink("/dev/stdout", s.join("stdout")).unwrap();
    mkfifo(&s.join("fifo"));
    let before = snapshot(s.path());
    // No --force: nothing is replaced.
    for out in ["null", "stdout"] {
        let got = within(mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", out]), 120);
        assert_eq!(got.code, Some(0), "--out {out}: {}", got.stderr);
        if out == "stdout" {
            assert!(got.stdout.len() >= 4 * 128 * 4, "the output went to stdout: {} bytes", got.stdout.len());
        }
    }
    let fifo = s.join("fifo");
    let reader = std::thread::spawn(move || std::fs::read(fifo).unwrap());
    let got = within(mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "fifo"]), 120);
    // Checked before the reader is joined: a FIFO replaced by a file would
    // leave the reader waiting for a writer for ever.
    assert_eq!(snapshot(s.path()), before, "a link or the FIFO was replaced");
    assert_eq!(got.code, Some(0), "{}", got.stderr);
    assert_eq!(reader.join().unwrap().len(), 4 * 128 * 4);
    assert!(is_char_device(Path::new("/dev/null")));
}

#[test]
fn out_through_a_symlink_replaces_its_target_and_keeps_the_link() {
    let s = Scratch::new("out-symlink");
    std::fs::write(s.join("target.bin"), "old").unwrap();
    std::os::unix::fs::symlink("target.bin", s.join("link.bin")).unwrap();
    let out = mage(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "link.bin", "--force"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(std::fs::read_link(s.join("link.bin")).unwrap(), Path::new("target.bin"));
    assert_eq!(std::fs::read(s.join("target.bin")).unwrap().len(), 4 * 128 * 4);
}

#[test]
fn out_that_is_a_dangling_symlink() {
    let s = Scratch::new("out-dangling");
    std::os::unix::fs::symlink("nowhere/x.bin", s.join("link.bin")).unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "link.bin", "--force"],
        "--out link.bin is a symlink to nowhere/x.bin, which does not exist; name a file$",
    );
}

#[test]
fn out_is_the_program_or_its_python_module() {
    let s = Scratch::new("out-program");
    let dir = bundle(&s);
    std::fs::create_dir_all(dir.join("python/mage")).unwrap();
    std::fs::write(dir.join("python/mage/_C.abi3.so"), "the module").unwrap();
    for (out, what) in [("./mage", "the program running"), ("python/mage/_C.abi3.so", "the Python module beside the program running")] {
        let before = [snapshot(&dir)];
        let got = command_in(&dir, "./mage", &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", out, "--force"]);
        assert_refused(&before, &[&dir], got, &format!("--out {out} is {what}; name another file$"));
    }
}

#[test]
fn out_is_a_file_of_another_case() {
    let s = Scratch::new("out-other-case");
    copy_case("layernorm-4x128", s.path());
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "case/expected.bin", "--force"],
        "--out case/expected.bin is expected.bin of the case case; name a file outside a case$",
    );
    refused(
        s.path(),
        &["run", "gelu", "--dims", "3,257", "--emulate", "--out", "./case/b.bin", "--force"],
        "--out ./case/b.bin is b.bin of the case ./case; name a file outside a case$",
    );
}

#[test]
fn out_with_a_trailing_slash() {
    let s = Scratch::new("out-trailing-slash");
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "newfile.bin/"],
        "--out newfile.bin/ ends in `/`, which names a directory; name a file (newfile.bin)$",
    );
}

#[test]
fn fixtures_force_over_a_case_holding_other_files() {
    let s = Scratch::new("fixtures-force-others");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::write(case.join("NOTES.md"), "mine").unwrap();
    std::fs::create_dir(case.join("plots")).unwrap();
    std::fs::write(case.join("plots/a.svg"), "mine").unwrap();
    refused(
        s.path(),
        &["fixtures", "layernorm", "--dims", "4,64", "--out", "case", "--force"],
        "the case case also holds NOTES.md, plots/, not files of a case; --force replaces a case whole, so move them out first or name another directory$",
    );
}

// Where results go.

#[test]
fn results_are_the_current_directorys() {
    let s = Scratch::new("results-cwd");
    let dir = bundle(&s);
    std::fs::create_dir_all(dir.join("results/kept")).unwrap();
    std::fs::write(dir.join("results/kept/sweep-layernorm.json"), "{}").unwrap();
    let committed = checkout().join("results");
    let before = [snapshot(&dir)];
    // Without --results: the bundle's (the current directory's) results/,
    // never the checkout's the binary was built in.
    let out = command_in(&dir, "./mage", &["sweep", "layernorm", "--emulate", "--namespace", "kept"]);
    assert_refused(&before, &[&dir], out, "results/kept/sweep-layernorm.json exists; pass --force to replace it$");
    let out = command_in(&dir, "./mage", &["evolve", "--report", "--namespace", "kept"]);
    assert_refused(&before, &[&dir], out, "results/kept holds no evolve-*.jsonl ledger$");
    assert!(!committed.join("kept").exists());
}

// Case files that are not regular files.

#[test]
fn case_files_that_are_fifos() {
    for (file, message) in [
        ("input.json", "case case: input.json is a FIFO, not a regular file$"),
        ("inputs.sha256.json", "case case: inputs.sha256.json is a FIFO, not a regular file$"),
        ("a.bin", "case case: a.bin (x) is a FIFO, not a regular file$"),
        ("expected.bin", "case case: expected.bin is a FIFO, not a regular file$"),
    ] {
        let s = Scratch::new(&format!("fifo-{file}"));
        let case = copy_case("layernorm-4x128", s.path());
        std::fs::remove_file(case.join(file)).unwrap();
        mkfifo(&case.join(file));
        let before = [snapshot(s.path())];
        let out = within(mage_cmd(s.path(), &["run", "layernorm", "--case", "case", "--emulate"]), 60);
        assert_refused(&before, &[s.path()], out, message);
    }
}

#[test]
fn case_input_that_is_a_directory() {
    let s = Scratch::new("input-directory");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::remove_file(case.join("c.bin")).unwrap();
    std::fs::create_dir(case.join("c.bin")).unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: c.bin (beta) is a directory, not a regular file$");
}

// input.json and inputs.sha256.json.

#[test]
fn case_input_json_with_an_unknown_key() {
    let s = Scratch::new("input-json-unknown-key");
    let case = copy_case("layernorm-4x128", s.path());
    edit_text(&case.join("input.json"), "\"seed\"", "\"rowz\": 4,\n  \"seed\"");
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: input.json: unknown field `rowz`, expected one of ",
    );
}

#[test]
fn case_input_json_with_a_byte_order_mark() {
    let s = Scratch::new("input-json-bom");
    let case = copy_case("layernorm-4x128", s.path());
    let text = std::fs::read(case.join("input.json")).unwrap();
    std::fs::write(case.join("input.json"), [&b"\xef\xbb\xbf"[..], &text].concat()).unwrap();
    let out = mage(s.path(), &["run", "layernorm", "--case", "case", "--emulate"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[test]
fn sha256_entry_for_a_file_not_of_the_case() {
    let s = Scratch::new("sha-stray-entry");
    let case = copy_case("layernorm-4x128", s.path());
    edit_text(&case.join("inputs.sha256.json"), "{", "{\n  \"../../etc/passwd\": \"00\",");
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: inputs.sha256.json records ../../etc/passwd, which is not a file of a layernorm case (a.bin, b.bin, c.bin, expected.bin)$",
    );
}

#[test]
fn sha256_entry_for_a_missing_expected_file() {
    let s = Scratch::new("sha-missing-expected");
    let case = copy_case("layernorm-4x128", s.path());
    std::fs::remove_file(case.join("expected.bin")).unwrap();
    refused(
        s.path(),
        &["run", "layernorm", "--case", "case", "--emulate"],
        "case case: inputs.sha256.json records expected.bin, which the case does not have$",
    );
}

#[test]
fn expected_file_sha256_mismatch() {
    let s = Scratch::new("expected-sha-mismatch");
    let case = copy_case("layernorm-4x128", s.path());
    let mut bytes = std::fs::read(case.join("expected.bin")).unwrap();
    bytes[0] ^= 1;
    std::fs::write(case.join("expected.bin"), &bytes).unwrap();
    let e = refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: expected.bin has sha256 ");
    assert!(e.contains(", but inputs.sha256.json records "), "{e}");
}

#[test]
fn expected_file_without_sha256_entry() {
    let s = Scratch::new("expected-sha-entry");
    let case = copy_case("layernorm-4x128", s.path());
    let bytes = std::fs::read(case.join("expected.bin")).unwrap();
    remove_from_case(&case, "expected.bin");
    std::fs::write(case.join("expected.bin"), bytes).unwrap();
    refused(s.path(), &["run", "layernorm", "--case", "case", "--emulate"], "case case: inputs.sha256.json has no entry for expected.bin$");
}

#[test]
fn every_committed_case_records_every_file() {
    for entry in std::fs::read_dir(checkout().join("fixtures")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(sums) = std::fs::read_to_string(dir.join("inputs.sha256.json")) else { continue };
        let map: BTreeMap<String, String> = serde_json::from_str(&sums).unwrap();
        for file in std::fs::read_dir(&dir).unwrap() {
            let name = file.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".bin") {
                let bytes = std::fs::read(dir.join(&name)).unwrap();
                assert_eq!(map.get(&name), Some(&sha256_hex(&bytes)), "{}: {name}", dir.display());
            }
        }
    }
}

// Flags that would be ignored, or that read unclearly.

#[test]
fn sweep_generator_without_dims() {
    let s = Scratch::new("sweep-gen-no-dims");
    refused(
        s.path(),
        &["sweep", "neighbor", "--gen", "power-law", "--emulate", "--results", "results"],
        "--gen power-law applies to the extra --dims shapes, and none is named; the sweep's own shapes keep their generators$",
    );
}

#[test]
fn sweep_stage_current() {
    let s = Scratch::new("sweep-stage-current");
    let e = refused(
        s.path(),
        &["sweep", "layernorm", "--stage", "current", "--emulate", "--results", "results"],
        "--stage current is not a stage: sweep runs stages by name (mage-001, ",
    );
    assert!(e.ends_with(") and reports what `current` picks at every shape"), "{e}");
}

#[test]
fn evolve_flag_that_does_not_apply() {
    let s = Scratch::new("evolve-flag");
    refused(s.path(), &["evolve", "layernorm", "--list", "--compare", "F"], "--compare does not apply to --list; it is for --report$");
    refused(
        s.path(),
        &["evolve", "--report", "--namespace", "x", "--from", "mage-002"],
        "--from does not apply to --report; it is for the search$",
    );
    refused(
        s.path(),
        &["evolve", "layernorm", "--audit", "--emulate", "--dims", "8,64"],
        "--dims does not apply to --audit --emulate; it is for the search, --audit, --list$",
    );
    refused(
        s.path(),
        &["evolve", "layernorm", "--list", "--seed", "3"],
        "--seed does not apply to --list; it is for the search, --audit --emulate$",
    );
}

#[test]
fn dims_that_look_hexadecimal() {
    let s = Scratch::new("dims-hex");
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "0x10", "--emulate"],
        "layernorm dim `rows` is 0; it must be at least 1 (--dims 0x10 reads as 0,10: dims are decimal, separated by `,` or `x`)$",
    );
}

#[test]
fn checkout_commands_in_a_bundle() {
    let s = Scratch::new("bundle-checkout-commands");
    let dir = bundle(&s);
    for command in ["ptx", "bundle", "tables"] {
        let before = [snapshot(&dir)];
        let out = command_in(&dir, "./mage", &[command]);
        let e =
            assert_refused(&before, &[&dir], out, &format!("{command} works on the sources of a Mage checkout, and this is a bundle ("));
        assert!(e.ends_with(&format!("); run `cargo xtask {command}` in a checkout")), "{e}");
    }
}

// Checked before any work.

/// A directory no file can be created in, even by root: mode 0555, or
/// where that does not stop root, immutable (`chattr +i`). None where
/// neither works.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn new(dir: PathBuf) -> Option<ReadOnly> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let writable = |d: &Path| {
            let probe = d.join("probe");
            let ok = std::fs::write(&probe, "").is_ok();
            let _ = std::fs::remove_file(probe);
            ok
        };
        if !writable(&dir) {
            return Some(ReadOnly(dir));
        }
        let chattr = Command::new("chattr").arg("+i").arg(&dir).status();
        if chattr.is_ok_and(|s| s.success()) && !writable(&dir) {
            return Some(ReadOnly(dir));
        }
        None
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn sweep_results_that_cannot_be_written() {
    let s = Scratch::new("sweep-read-only");
    let Some(_ro) = ReadOnly::new(s.join("results")) else {
        eprintln!("no read-only directory can be made here; nothing to check");
        return;
    };
    let e = refused(
        s.path(),
        &["sweep", "layernorm", "--emulate", "--results", "results"],
        "--results results: no file can be created there: ",
    );
    assert!(!e.contains("wrong results"), "{e}");
}

#[test]
fn sweep_namespace_too_long() {
    let s = Scratch::new("sweep-namespace-long");
    let name = "n".repeat(300);
    refused(
        s.path(),
        &["sweep", "layernorm", "--emulate", "--results", "results", "--namespace", &name],
        "--namespace `nnnnnnnnnnnnnnnn…` is 300 bytes long; a folder name is at most 255$",
    );
}

#[test]
fn sweep_namespace_that_is_a_file() {
    let s = Scratch::new("sweep-namespace-file");
    std::fs::create_dir(s.join("results")).unwrap();
    std::fs::write(s.join("results/kept"), "mine").unwrap();
    refused(
        s.path(),
        &["sweep", "layernorm", "--emulate", "--results", "results", "--namespace", "kept"],
        "--namespace `kept`: results/kept exists and is not a directory$",
    );
    refused(s.path(), &["compare", "--namespace", "kept"], "--namespace `kept`: results/kept exists and is not a directory$");
}

#[test]
fn compare_python_that_does_not_exist() {
    let s = Scratch::new("compare-python");
    let tmp = s.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let before = [snapshot(s.path())];
    let mut cmd = mage_cmd(s.path(), &["compare", "--namespace", "x", "--python", "/missing"]);
    cmd.env("TMPDIR", &tmp);
    let out = within(cmd, 60);
    assert_refused(&before, &[s.path()], out, "--python /missing: No such file or directory (os error 2)$");
    let mut cmd = mage_cmd(s.path(), &["compare", "--namespace", "x", "--python", "no-such-python-9"]);
    cmd.env("TMPDIR", &tmp);
    let out = within(cmd, 60);
    assert_refused(&before, &[s.path()], out, "--python no-such-python-9 is not found on PATH");
}

#[test]
fn compare_with_a_malformed_judge_leaves_nothing() {
    let s = Scratch::new("compare-judge");
    let tmp = s.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let before = [snapshot(s.path())];
    let mut cmd = mage_cmd(s.path(), &["compare", "--namespace", "x", "--judge", "layernorm:mage-007"]);
    cmd.env("TMPDIR", &tmp);
    let out = within(cmd, 60);
    assert_refused(&before, &[s.path()], out, "--judge layernorm:mage-007: expected OP:A:B, such as layernorm:mage-009:mage-007$");
}

// The GPU lock and the temp directory, on a machine with no GPU.

#[test]
fn gpu_lock_held_on_a_machine_without_a_gpu() {
    if has_gpu() {
        return;
    }
    let s = Scratch::new("lock-held");
    let lock = std::fs::File::create(s.join("mage-gpu.lock")).unwrap();
    lock.lock().unwrap();
    let before = [snapshot(s.path())];
    let mut cmd = mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128"]);
    cmd.env("TMPDIR", s.path());
    let out = within(cmd, 60);
    assert_refused(&before, &[s.path()], out, "no CUDA driver or device: ");
    drop(lock);
}

#[test]
fn missing_tmpdir_does_not_hide_the_missing_gpu() {
    if has_gpu() {
        return;
    }
    let s = Scratch::new("tmpdir-missing");
    let before = [snapshot(s.path())];
    let mut cmd = mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128"]);
    cmd.env("TMPDIR", s.join("nowhere"));
    let out = within(cmd, 60);
    assert_refused(&before, &[s.path()], out, "no CUDA driver or device: ");
}

// stdout: a closed pipe, a full disk.

#[test]
fn stdout_a_closed_pipe() {
    let s = Scratch::new("stdout-closed-pipe");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = mage_cmd(s.path(), &["evolve", "layernorm", "--list"]);
    cmd.stdout(writer);
    let out = within(cmd, 60);
    // Quiet, with the status of a process SIGPIPE ended: no panic, no message.
    assert_eq!(out.stderr, "", "stderr");
    assert_eq!(out.code, Some(141));
}

#[test]
fn stdout_on_a_full_disk() {
    let s = Scratch::new("stdout-full");
    let before = [snapshot(s.path())];
    let mut cmd = mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "out.bin"]);
    cmd.stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap());
    let out = within(cmd, 120);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines, ["error: writing to stdout: No space left on device (os error 28)"]);
    assert_eq!(out.code, Some(1));
    // The output passed every check: it is written all the same.
    assert_eq!(std::fs::read(s.join("out.bin")).unwrap().len(), 4 * 128 * 4);
    let mut after = snapshot(s.path());
    after.remove(&s.join("out.bin"));
    assert_eq!(after, before[0]);
    let mut cmd = mage_cmd(s.path(), &["evolve", "layernorm", "--list"]);
    cmd.stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap());
    let e = within(cmd, 60);
    assert_eq!(e.stderr.trim_end(), "error: writing to stdout: No space left on device (os error 28)");
}

// An interrupt.

#[test]
fn interrupted_fixtures_leave_no_staging() {
    let s = Scratch::new("fixtures-interrupted");
    let mut child = Command::new(BIN)
        .current_dir(s.path())
        .args(["fixtures", "layernorm", "--dims", "4096,4096", "--out", "case"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let staged = s.join(&format!(".case.new{}", child.id()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !staged.exists() {
        assert!(child.try_wait().unwrap().is_none(), "fixtures ended before its staging folder was seen");
        assert!(std::time::Instant::now() < deadline, "no staging folder after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status}");
    let left: Vec<PathBuf> = snapshot(s.path()).into_keys().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

// Siblings: the same flaws through other flags.

#[test]
fn out_is_stdout_itself() {
    let s = Scratch::new("out-stdout-file");
    std::os::unix::fs::symlink("/dev/stdout", s.join("stdout")).unwrap();
    let report = s.join("report.txt");
    let mut cmd = mage_cmd(s.path(), &["run", "layernorm", "--dims", "4,128", "--emulate", "--out", "stdout"]);
    cmd.stdout(std::fs::File::create(&report).unwrap());
    let out = within(cmd, 120);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The report, then the output after it: neither replaced nor written over.
    let bytes = std::fs::read(&report).unwrap();
    assert!(bytes.len() > 4 * 128 * 4 && bytes.starts_with(b"layernorm on the emulator"), "{} bytes", bytes.len());
    assert_eq!(std::fs::read_link(s.join("stdout")).unwrap(), Path::new("/dev/stdout"));
}

#[test]
fn flag_whose_partner_is_missing() {
    let s = Scratch::new("flag-partner");
    refused(
        s.path(),
        &["run", "layernorm", "--dims", "4,128", "--emulate", "--force"],
        "--force applies to --out (it replaces an existing file), and no --out is named$",
    );
    refused(
        s.path(),
        &["sweep", "layernorm", "--emulate", "--results", "results", "--force"],
        "--force applies to --namespace (it replaces the namespace's sweep-<op>.json), and no --namespace is named$",
    );
    refused(
        s.path(),
        &["fixtures", "layernorm", "--dims", "4,64", "--out", "case", "--allow-nonfinite"],
        "--allow-nonfinite applies to --constant (generated inputs are always finite), and no --constant is named$",
    );
}

#[test]
fn evolve_compare_that_is_a_fifo() {
    let s = Scratch::new("evolve-compare-fifo");
    std::fs::create_dir_all(s.join("results/x")).unwrap();
    mkfifo(&s.join("comparison.json"));
    let before = [snapshot(s.path())];
    let out = within(mage_cmd(s.path(), &["evolve", "--report", "--namespace", "x", "--compare", "comparison.json"]), 60);
    assert_refused(&before, &[s.path()], out, "--compare comparison.json is a FIFO, not a regular file$");
}

#[test]
fn an_error_with_stderr_on_a_full_disk_still_exits_1() {
    let s = Scratch::new("stderr-full");
    let out = Command::new(BIN)
        .current_dir(s.path())
        .args(["run", "nosuch", "--emulate"])
        .stderr(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(REFUSED));
    let out = Command::new(BIN)
        .current_dir(s.path())
        .args(["run", "--dimz", "4"])
        .stderr(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(USAGE));
}

#[test]
fn an_ignored_hangup_stays_ignored() {
    // As under `nohup`: SIGHUP ignored before the binary starts.
    let s = Scratch::new("nohup");
    let script = format!("trap '' HUP; exec '{BIN}' fixtures layernorm --dims 4096,4096 --out case");
    let mut child = Command::new("sh").current_dir(s.path()).args(["-c", &script]).spawn().unwrap();
    let staged = s.join(&format!(".case.new{}", child.id()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !staged.exists() && child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "no staging folder after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(s.join("case/input.json").is_file());
}

#[test]
fn compare_without_a_gpu() {
    if has_gpu() {
        return;
    }
    let s = Scratch::new("compare-no-gpu");
    let tmp = s.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let before = [snapshot(s.path())];
    let mut cmd = mage_cmd(s.path(), &["compare", "--namespace", "x"]);
    cmd.env("TMPDIR", &tmp);
    let out = within(cmd, 120);
    let e = assert_refused(&before, &[s.path()], out, "no CUDA driver or device: ");
    assert!(e.ends_with("; compare needs a GPU; see `cargo xtask doctor`, line `CUDA driver`"), "{e}");
}

#[test]
fn nsight_out_that_cannot_be_written() {
    let s = Scratch::new("nsight-read-only");
    let Some(_ro) = ReadOnly::new(s.join("reports")) else {
        eprintln!("no read-only directory can be made here; nothing to check");
        return;
    };
    refused(s.path(), &["nsight", "layernorm", "--out", "reports"], "--out reports: no file can be created there: ");
}

#[test]
fn evidence_that_is_a_fifo() {
    let s = Scratch::new("evidence-fifo");
    std::fs::create_dir_all(s.join("results/x")).unwrap();
    mkfifo(&s.join("results/x/comparison.json"));
    mkfifo(&s.join("results/x/evolve-layernorm-4096x768.jsonl"));
    let before = [snapshot(s.path())];
    let out = within(mage_cmd(s.path(), &["plot", "x"]), 60);
    assert_refused(&before, &[s.path()], out, "results/x/comparison.json is a FIFO, not a regular file$");
    let out = within(mage_cmd(s.path(), &["evolve", "--report", "--namespace", "x"]), 60);
    assert_refused(&before, &[s.path()], out, "results/x/evolve-layernorm-4096x768.jsonl is a FIFO, not a regular file$");
}
