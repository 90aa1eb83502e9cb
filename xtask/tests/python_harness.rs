//! The Python side of `compare` (python/mage_compare): its unit tests run
//! here with no GPU (verdicts, statistics, manifest and case checks, the
//! JSON writer, launch argument packing).

#[test]
fn python_unit_tests() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = std::process::Command::new("python3")
        .current_dir(root)
        .args(["-m", "unittest", "discover", "-s", "python/tests", "-t", "python"])
        .output()
        .expect("python3 is needed for the tests (see `cargo xtask doctor`)");
    let text = String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(out.status.success(), "python unit tests failed:\n{text}");
    assert!(text.contains("\nOK"), "no OK from unittest:\n{text}");
}
