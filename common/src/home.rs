//! Where things are: the workspace this crate was built in, and where the
//! running binary lives (a checkout, a bundle, or neither), which decides
//! where its defaults point and which command its messages name.

use std::path::{Path, PathBuf};

/// The workspace root (where `Cargo.toml` with `[workspace]` lives).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("common/ sits in the workspace").to_path_buf()
}

/// Where the running binary lives, which decides where its defaults point
/// and which command its messages name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// Built in this checkout (`cargo xtask ...`): the workspace root.
    Checkout(PathBuf),
    /// A folder `cargo xtask bundle` wrote (`./mage ...`, `fixtures/` beside it).
    Bundle(PathBuf),
    /// A binary on its own, away from both.
    Loose,
}

/// Where the running binary lives: a bundle if `fixtures/` sits beside it,
/// else the checkout it was built in if it lies under that checkout's
/// `target/` (or `CARGO_TARGET_DIR`), else loose.
pub fn home() -> Home {
    let Some(exe) = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok()) else { return Home::Loose };
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let root = workspace_root();
    let targets = [Some(root.join("target")), std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from)];
    let in_target = targets.iter().flatten().filter_map(|t| t.canonicalize().ok()).any(|t| exe.starts_with(t));
    if in_target && root.join("Cargo.toml").is_file() {
        Home::Checkout(root)
    } else if dir.join("fixtures").is_dir() {
        Home::Bundle(dir)
    } else {
        Home::Loose
    }
}

/// The command a user types to run this binary: `cargo xtask` in a
/// checkout, otherwise the name it was started by (`./mage`).
pub fn command_name() -> String {
    match home() {
        Home::Checkout(_) => "cargo xtask".into(),
        _ => std::env::args_os().next().map_or("mage".into(), |a| a.to_string_lossy().into_owned()),
    }
}
