//! `cargo xtask`: every Mage task.
//!
//! The same binary, built in release by `cargo xtask bundle`, is what runs
//! on a GPU machine: it carries the PTX of every op (see `build.rs`) and
//! needs only the CUDA driver there.

/// `println!` that returns an error (with `?`) where stdout cannot be
/// written, instead of panicking: see [`stdout`].
macro_rules! say {
    ($($t:tt)*) => {
        crate::stdout::line(&format!($($t)*))?
    };
}

mod compare;
mod doctor;
mod e2e;
mod evolve;

mod lock;
mod memory;
mod ops;
mod outputs;
mod plot;
mod probes;
mod profile;
mod report;
mod runner;
mod signals;
mod stdout;
mod tables;
mod wheel;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Mage: write, test and measure GPU kernels in Rust")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// The operation (`layernorm`, ...).
    pub op: String,
    /// Dims, comma separated (`4096,768`); the op's default if omitted.
    #[arg(long)]
    pub dims: Option<String>,
    /// A stage (`mage-006`); `current` if omitted.
    #[arg(long)]
    pub stage: Option<String>,
    /// Read inputs (and dims) from a fixture case directory.
    #[arg(long)]
    pub case: Option<PathBuf>,
    /// Seed for generated inputs (default 20260910); not with --case.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The op's generator for the inputs (neighbor: `uniform`, `power-law`);
    /// its first if omitted.
    #[arg(long = "gen")]
    pub generator: Option<String>,
    /// Run on the CPU emulator: correctness only, no timings.
    #[arg(long)]
    pub emulate: bool,
    /// Write the output as little-endian f32 to this file, once it passed
    /// every check.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long)]
    pub force: bool,
    /// Run inputs holding NaN or infinities (refused otherwise), and check
    /// that the output has NaN and infinities where the reference has them.
    #[arg(long)]
    pub allow_nonfinite: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check on the GPU only: launch the plan once, no timing loops
    /// (what nsight and sanitize run).
    #[arg(long)]
    pub no_timing: bool,
}

#[derive(clap::Args, Clone, Debug)]
pub struct SweepArgs {
    pub op: String,
    /// Extra shapes besides the op's sweep list (repeatable: `--dims 2048,1024`).
    #[arg(long)]
    pub dims: Vec<String>,
    /// The generator for the extra `--dims` shapes (its first if omitted).
    #[arg(long = "gen")]
    pub generator: Option<String>,
    /// Only these stages (repeatable); every stage if omitted.
    #[arg(long)]
    pub stage: Vec<String>,
    /// Run on the CPU emulator: correctness only, no timings.
    #[arg(long)]
    pub emulate: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the JSON results go (default: `results/` in the current
    /// directory, as `compare`, `evolve` and `plot` use; in a checkout's
    /// root, the checkout's).
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Keep the sweep as evidence of a namespace: results/<NAME>/sweep-<op>.json.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Replace the namespace's existing sweep-<op>.json.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::Args, Clone, Debug)]
pub struct FixturesArgs {
    pub op: String,
    #[arg(long)]
    pub dims: Option<String>,
    #[arg(long, default_value_t = mage_common::fixtures::DEFAULT_SEED)]
    pub seed: u64,
    /// The op's generator (neighbor: `uniform`, `power-law`); its first if omitted.
    #[arg(long = "gen")]
    pub generator: Option<String>,
    /// Fill the first input (x, a) with this value instead of normal(0, 0.25).
    #[arg(long, allow_negative_numbers = true)]
    pub constant: Option<f32>,
    /// Allow a --constant that is NaN or infinite.
    #[arg(long)]
    pub allow_nonfinite: bool,
    /// The case directory: new or empty (default `fixtures/<op>-<dims>` of
    /// the checkout, or of the bundle beside the binary).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace an existing case whole (its expected.bin too).
    #[arg(long)]
    pub force: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check, one line each, what building and running needs (builds
    /// nothing); exits 1 when a line says MISSING.
    Doctor,
    /// Build the PTX of every op (or the ones named) and print where it is.
    Ptx { packages: Vec<String> },
    /// Write a fixture case directory.
    Fixtures(FixturesArgs),
    /// Run one stage: check it against the f64 reference, then time it.
    Run(RunArgs),
    /// Run every stage over the op's sweep shapes; print a table, keep JSON.
    Sweep(SweepArgs),
    /// Build the release binary with its PTX into one folder for a GPU machine.
    Bundle {
        #[arg(long, default_value = "dist/mage")]
        out: PathBuf,
    },
    /// The Python package `mage` (the extension with every op's PTX, the
    /// PyTorch ops) as an abi3 wheel: `pip install dist/mage-*.whl`.
    Wheel {
        #[arg(long, default_value = "dist")]
        out: PathBuf,
    },
    /// On a GPU: measure the numerical contract and compare every stage
    /// with the emulator on small shapes; OPS limits the stages to those ops.
    GpuCheck {
        ops: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// PyTorch, torch.compile, cuSPARSE and Triton beside every stage, one
    /// session, same bytes; evidence under results/<namespace>/.
    Compare(compare::CompareArgs),
    /// Mage's ops inside PyTorch models (an MLP block, a GNN layer, a
    /// triangle update, a training run) against eager and torch.compile,
    /// with and without CUDA graphs; evidence under results/<namespace>/.
    E2e(e2e::E2eArgs),
    /// SVG figures from a namespace's committed evidence.
    Plot { namespace: String },
    /// Render every table of measured numbers in the README, CHANGELOG and
    /// doc comments from the committed evidence under results/.
    Tables {
        /// Change nothing; fail where a table differs from its evidence.
        #[arg(long)]
        check: bool,
    },
    /// Nsight Compute (`ncu --clock-control none`) around one launch of a
    /// stage: keeps the .ncu-rep, prints and stores a summary.
    Nsight {
        op: String,
        #[arg(long, default_value = "current")]
        stage: String,
        #[arg(long)]
        dims: Option<String>,
        /// The op's generator (neighbor: `uniform`, `power-law`).
        #[arg(long = "gen")]
        generator: Option<String>,
        /// Take a Nsight Systems capture instead (where `nsys` exists).
        #[arg(long)]
        systems: bool,
        #[arg(long, default_value = "results/nsight")]
        out: PathBuf,
    },
    /// Search an op's parameter space on the GPU, one knob a generation,
    /// keeping a candidate only on a paired kernel-time verdict; or audit
    /// the space (`--audit`), render ledgers (`--report`), list it (`--list`).
    Evolve(evolve::EvolveArgs),
    /// Every stage under compute-sanitizer (memcheck, racecheck, synccheck,
    /// initcheck) on a small and the default shape; fails on any report.
    Sanitize {
        op: String,
        #[arg(long)]
        stage: Option<String>,
    },
}

/// A command-line usage error as one line: clap's message and tip, without
/// its usage block.
fn usage_error_line(rendered: &str) -> String {
    let mut line = String::new();
    for part in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if part.starts_with("Usage:") || part.starts_with("For more information") {
            continue;
        }
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part);
    }
    format!("{line} (see --help)")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version, and help for a bare command, print as clap does.
        Err(e) if !e.use_stderr() || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{}", usage_error_line(&e.render().to_string()));
            return ExitCode::from(2);
        }
    };
    signals::clean_up_on_interrupt();
    let result = match cli.cmd {
        Cmd::Doctor => doctor::run(),
        Cmd::Ptx { packages } => needs_checkout("ptx").and_then(|()| ops::build_all(&packages)),
        Cmd::Fixtures(args) => runner::fixtures(&args),
        Cmd::Run(args) => runner::run(&args),
        Cmd::Sweep(args) => runner::sweep(&args),
        Cmd::Bundle { out } => needs_checkout("bundle").and_then(|()| ops::bundle(&out)),
        Cmd::Wheel { out } => needs_checkout("wheel").and_then(|()| wheel::wheel(&out).map(|_| ())),
        Cmd::GpuCheck { ops, json } => runner::gpu_check(&ops, json),
        Cmd::Compare(args) => compare::compare(&args),
        Cmd::E2e(args) => e2e::e2e(&args),
        Cmd::Plot { namespace } => plot::plot(&namespace),
        Cmd::Tables { check } => needs_checkout("tables").and_then(|()| tables::tables(check)),
        Cmd::Nsight { op, stage, dims, generator, systems, out } => {
            profile::nsight(&op, &stage, dims.as_deref(), generator.as_deref(), systems, &out)
        }
        Cmd::Sanitize { op, stage } => profile::sanitize(&op, stage.as_deref()),
        Cmd::Evolve(args) => evolve::evolve(&args),
    };
    signals::wait_if_interrupted();
    // A failed write to stdout another error hid, or one not returned.
    let result = result.and_then(|()| stdout::failed().map_or(Ok(()), Err));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e == stdout::CLOSED_PIPE => ExitCode::from(stdout::CLOSED_PIPE_STATUS),
        Err(e) => {
            // Where stderr cannot be written either, the exit code still says.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `ptx`, `bundle` and `tables` build from, or render into, the sources of
/// a checkout: run elsewhere (a bundle), they say so.
fn needs_checkout(command: &str) -> Result<(), String> {
    use mage_common::home::{Home, home};
    let here = match home() {
        Home::Checkout(_) => return Ok(()),
        Home::Bundle(dir) => format!("this is a bundle ({})", dir.display()),
        Home::Loose => "this binary is in no checkout".to_string(),
    };
    Err(format!("{command} works on the sources of a Mage checkout, and {here}; run `cargo xtask {command}` in a checkout"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_is_one_line_with_its_tip() {
        let rendered = "error: unexpected argument '--dimz' found\n\n  tip: a similar argument exists: '--dims'\n\nUsage: xtask run --dims <DIMS> <OP>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(rendered),
            "error: unexpected argument '--dimz' found; tip: a similar argument exists: '--dims' (see --help)"
        );
        let rendered = "error: the following required arguments were not provided:\n  <OP>\n\nUsage: xtask run <OP>\n";
        assert_eq!(usage_error_line(rendered), "error: the following required arguments were not provided: <OP> (see --help)");
    }
}
