//! Tidy checks: the tree keeps the rules ARCHITECTURE.md states. Each rule
//! is a function over file contents, run on the checkout and, beside it,
//! on a planted violation that it must report.

use std::path::{Path, PathBuf};

const OPS: [&str; 5] = ["matmul", "layernorm", "gelu", "triangle", "neighbor"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The code of a Rust file, without `//` comments (doc comments included).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.split("//").next().unwrap_or(""))).filter(|(_, l)| !l.trim().is_empty())
}

/// Stage modules (`mage_NNN.rs`) that name another stage in code.
fn stage_imports(file: &str, text: &str) -> Vec<String> {
    let own = file.trim_end_matches(".rs");
    let mut found = vec![];
    for (n, line) in code_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("mage_0") {
            let name: String = rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let is_stage = name.len() == 8 && name[5..].chars().all(|c| c.is_ascii_digit());
            if is_stage && name != own {
                found.push(format!("{file}:{n} names {name}"));
            }
            rest = &rest[at + 6..];
        }
    }
    found
}

/// Op crates among the `[dependencies]` of a Cargo.toml.
fn op_dependencies(toml: &str) -> Vec<String> {
    let mut section = "";
    let mut found = vec![];
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" {
            for op in OPS {
                if line.starts_with(&format!("mage-{op} "))
                    || line.starts_with(&format!("mage-{op}="))
                    || line.starts_with(&format!("mage-{op}."))
                {
                    found.push(format!("mage-{op}"));
                }
            }
        }
    }
    found
}

/// The files of `python/mage_compare` that describe the alternatives (and
/// so may name ops): their names, the references they are checked against,
/// their kernels.
const DESCRIBE_ALTERNATIVES: [&str; 4] = ["ops.py", "impls.py", "reference.py", "triton_kernels.py"];

/// Quoted op names in a Python file of the harness.
fn names_ops(file: &str, text: &str) -> Vec<String> {
    let mut found = vec![];
    for (n, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        for op in OPS {
            if code.contains(&format!("\"{op}\"")) || code.contains(&format!("'{op}'")) {
                found.push(format!("{file}:{} names `{op}`", n + 1));
            }
        }
    }
    found
}

/// The test names the last column of `docs/bad-inputs.md`'s tables gives.
fn bad_input_tests(doc: &str) -> Vec<String> {
    let mut names = vec![];
    for line in doc.lines().filter(|l| l.starts_with('|') && !l.starts_with("|---")) {
        let cells: Vec<&str> = line.trim_end_matches('|').split('|').collect();
        let last = cells.last().copied().unwrap_or("");
        let mut rest = last;
        while let Some(a) = rest.find('`') {
            let Some(b) = rest[a + 1..].find('`') else { break };
            let name = &rest[a + 1..a + 1 + b];
            if name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') && name.contains('_') {
                names.push(name.to_string());
            }
            rest = &rest[a + 2 + b..];
        }
    }
    names
}

/// Names in `wanted` that no `fn NAME(` in `sources` defines.
fn missing_tests(wanted: &[String], sources: &str) -> Vec<String> {
    wanted.iter().filter(|n| !sources.contains(&format!("fn {n}("))).cloned().collect()
}

/// Rows of the operations table (`docs/operations.md`) whose `current picks` cell is not
/// the op's dispatcher summary: (op, cell, summary).
fn stale_picks(readme: &str, summary: impl Fn(&str) -> Option<&'static str>) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|l| !l.starts_with("| op | default shape |"));
    let header = lines.next();
    assert!(header.is_some(), "docs/operations.md has no operations table");
    let mut found = vec![];
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let op = cells[0].split_whitespace().next().unwrap_or("");
        let cell = cells.last().copied().unwrap_or("");
        match summary(op) {
            Some(s) if s == cell => {}
            Some(s) => found.push(format!("{op}: docs/operations.md says `{cell}`, the dispatcher `{s}`")),
            None => found.push(format!("{op}: not an op")),
        }
    }
    found
}

/// The Mage crates among the dependencies of a Cargo.toml: (section, crate),
/// where the section is `normal`, `dev` or `build` (target-specific tables
/// count as their kind).
fn mage_dependencies(toml: &str) -> Vec<(&'static str, String)> {
    let mut kind = None;
    let mut found = vec![];
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            kind = if line.ends_with("dev-dependencies]") {
                Some("dev")
            } else if line.ends_with("build-dependencies]") {
                Some("build")
            } else if line.ends_with("dependencies]") {
                Some("normal")
            } else {
                None
            };
        } else if let (Some(k), true) = (kind, line.starts_with("mage-")) {
            let name: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            found.push((k, name));
        }
    }
    found
}

/// What ARCHITECTURE.md's layering allows each crate (by its directory) to
/// depend on, normal and build dependencies (`dev` adds the toolchain for
/// tests, and for xtask the op crates).
fn allowed(dir: &str, kind: &str, dep: &str) -> bool {
    let op = dep.strip_prefix("mage-").is_some_and(|d| OPS.contains(&d));
    match (dir, kind) {
        ("common", _) => false,
        ("toolchain", "normal") => dep == "mage-common",
        (d, "normal") if d.starts_with("ops/") => dep == "mage-common",
        (d, "dev") if d.starts_with("ops/") || d == "toolchain" => dep == "mage-toolchain",
        ("runtime", "normal") => dep == "mage-common" || op,
        ("runtime", "build") => dep == "mage-toolchain",
        ("python/ext", "normal") => dep == "mage-common" || dep == "mage-runtime",
        ("xtask", "normal") => ["mage-common", "mage-runtime", "mage-toolchain"].contains(&dep),
        ("xtask", "dev") => op,
        _ => false,
    }
}

/// Dependencies of the crate in `dir` that the layering rules out.
fn layering_breaks(dir: &str, toml: &str) -> Vec<String> {
    mage_dependencies(toml)
        .into_iter()
        .filter(|(k, d)| !allowed(dir, k, d))
        .map(|(k, d)| format!("{dir} has {d} as a {k} dependency"))
        .collect()
}

/// Lines of a `common/src` file that start a process: build machinery,
/// which lives in `mage-toolchain` (common also compiles for the GPU).
fn starts_processes(file: &str, text: &str) -> Vec<String> {
    code_lines(text)
        .filter(|(_, l)| l.contains("process::Command") || l.contains("Command::new("))
        .map(|(n, _)| format!("{file}:{n}"))
        .collect()
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p, ext));
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn no_stage_imports_another_stage() {
    let mut found = vec![];
    for op in OPS {
        for p in files(&root().join("ops").join(op).join("src"), "rs") {
            let name = p.file_name().unwrap().to_str().unwrap();
            if name.starts_with("mage_0") {
                found.extend(stage_imports(&format!("{op}/{name}"), &read(&p)));
            }
        }
    }
    assert!(found.is_empty(), "stages import other stages:\n{}", found.join("\n"));
    // A planted violation.
    assert_eq!(
        stage_imports("mage_008.rs", "use crate::mage_006::row_held;\n// mage_001 in a comment\n"),
        ["mage_008.rs:1 names mage_006"]
    );
}

#[test]
fn every_crate_depends_only_on_what_the_layering_allows() {
    let mut dirs = vec!["common".to_string(), "toolchain".into(), "runtime".into(), "python/ext".into(), "xtask".into()];
    dirs.extend(OPS.iter().map(|o| format!("ops/{o}")));
    let mut found = vec![];
    for dir in &dirs {
        found.extend(layering_breaks(dir, &read(&root().join(dir).join("Cargo.toml"))));
    }
    assert!(found.is_empty(), "dependencies against ARCHITECTURE.md's layering:\n{}", found.join("\n"));
    let planted = "[dependencies]\nmage-common.workspace = true\nmage-matmul = { path = \"../matmul\" }\n[target.'cfg(not(target_arch = \"nvptx64\"))'.dev-dependencies]\nmage-toolchain.workspace = true\n";
    assert_eq!(layering_breaks("ops/gelu", planted), ["ops/gelu has mage-matmul as a normal dependency"]);
    assert_eq!(layering_breaks("common", "[dependencies]\nmage-toolchain.workspace = true\n").len(), 1);
}

#[test]
fn common_holds_no_build_machinery() {
    let dir = root().join("common/src");
    let mut found = vec![];
    for p in files(&dir, "rs") {
        let name = p.strip_prefix(&dir).unwrap().display().to_string();
        found.extend(starts_processes(&name, &read(&p)));
    }
    assert!(found.is_empty(), "common/src starts processes (build machinery belongs in mage-toolchain):\n{}", found.join("\n"));
    assert_eq!(
        starts_processes(
            "tools.rs",
            "// std::process::Command in a comment\nlet id = std::process::id();\nlet c = std::process::Command::new(\"cargo\");\n"
        ),
        ["tools.rs:3"]
    );
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = read(&root().join("README.md"));
    let tables = readme.matches("<!-- mage:table ").count();
    let e2e = readme.matches("<!-- mage:table e2e ").count();
    assert!(
        tables - e2e <= 1 && e2e <= 1,
        "the README renders {tables} tables: its headline table and the end-to-end step times; the others belong in docs/"
    );
    assert!(readme.len() < 12_000, "the README is {} bytes: long tables and prose belong in docs/", readme.len());
    for link in ["docs/operations.md", "docs/comparison.md", "docs/running.md", "CONTRIBUTING.md", "ARCHITECTURE.md"] {
        assert!(readme.contains(&format!("]({link})")), "the README does not link {link}");
        assert!(root().join(link).is_file(), "the README links {link}, which does not exist");
    }
}

#[test]
fn no_op_crate_is_a_normal_dependency_of_xtask() {
    let found = op_dependencies(&read(&root().join("xtask/Cargo.toml")));
    assert!(found.is_empty(), "xtask depends on {found:?}: op crates are dev-dependencies of its tests only");
    let planted = "[dependencies]\nmage-common.workspace = true\nmage-matmul = { path = \"../ops/matmul\" }\n[dev-dependencies]\nmage-gelu = { path = \"../ops/gelu\" }\n";
    assert_eq!(op_dependencies(planted), ["mage-matmul"]);
}

#[test]
fn the_harness_names_ops_only_where_it_describes_the_alternatives() {
    let dir = root().join("python/mage_compare");
    let mut found = vec![];
    for p in files(&dir, "py") {
        let name = p.file_name().unwrap().to_str().unwrap();
        if !DESCRIBE_ALTERNATIVES.contains(&name) {
            found.extend(names_ops(name, &read(&p)));
        }
    }
    assert!(found.is_empty(), "the harness names ops outside {DESCRIBE_ALTERNATIVES:?}:\n{}", found.join("\n"));
    assert_eq!(names_ops("gpu.py", "    if op == \"neighbor\":  # \"matmul\"\n"), ["gpu.py:1 names `neighbor`"]);
}

#[test]
fn every_row_of_the_bad_inputs_table_has_its_test() {
    let doc = read(&root().join("docs/bad-inputs.md"));
    let wanted = bad_input_tests(&doc);
    assert!(wanted.len() >= 100, "only {} test names read from docs/bad-inputs.md", wanted.len());
    // Each row's test: in bad_inputs.rs, or a unit test of the command's or the case code's module.
    let sources: String = [root().join("xtask"), root().join("common/src")].iter().flat_map(|d| files(d, "rs")).map(|p| read(&p)).collect();
    let missing = missing_tests(&wanted, &sources);
    assert!(missing.is_empty(), "rows of docs/bad-inputs.md name tests that do not exist: {missing:?}");
    let planted = "| 1 | a thing | `msg` | 1 | `no_such_test_anywhere` |\n";
    assert_eq!(missing_tests(&bad_input_tests(planted), &sources), ["no_such_test_anywhere"]);
}

#[test]
fn the_operations_tables_current_picks_are_the_dispatchers() {
    let ops = mage_runtime::ops::all();
    let summary = |name: &str| ops.iter().find(|o| o.name == name).map(|o| o.current.summary);
    let table = read(&root().join("docs/operations.md"));
    let missing: Vec<&str> = ops.iter().map(|o| o.name).filter(|n| !table.lines().any(|l| l.starts_with(&format!("| {n} ")))).collect();
    assert!(missing.is_empty(), "docs/operations.md has no row for {missing:?}");
    let found = stale_picks(&table, summary);
    assert!(found.is_empty(), "docs/operations.md's current picks disagree with the dispatchers:\n{}", found.join("\n"));
    let planted = "| op | default shape | stages (oldest first) | current picks |\n|---|---|---|---|\n| gelu `y` | 4x8 | 001 · 002 | mage-001 always |\n";
    assert_eq!(stale_picks(planted, summary).len(), 1);
}
