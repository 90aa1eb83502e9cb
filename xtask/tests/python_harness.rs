//! The Python side: `python/mage_compare`'s unit tests (verdicts on kernel
//! time, statistics, the manifest, the profile split, the JSON writer) and
//! the extension module `mage` (its registry, case reading and argument
//! checks), built here and required, all with no GPU.

#[test]
fn python_unit_tests() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let ext_dir = mage_toolchain::build_python_extension(false).unwrap_or_else(|e| panic!("{e}"));
    let path = std::env::join_paths([root.join("python"), ext_dir]).unwrap();
    let out = std::process::Command::new("python3")
        .current_dir(root)
        .args(["-m", "unittest", "discover", "-s", "python/tests", "-t", "python"])
        .env("PYTHONPATH", path)
        .env("MAGE_REQUIRE_EXTENSION", "1")
        .output()
        .expect("python3 is needed for the tests (see `cargo xtask doctor`)");
    let text = String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(out.status.success(), "python unit tests failed:\n{text}");
    assert!(text.contains("\nOK"), "no OK from unittest:\n{text}");
}
