//! Every Mage op with its PTX built in, and the GPU runner.
//!
//! * [`ops`]: the registry of every op crate, and the PTX of each, built by
//!   `build.rs` and embedded, so a binary or Python extension built on this
//!   crate needs only a CUDA driver where it runs.
//! * [`gpu`]: loading that PTX through the CUDA driver and running a
//!   stage's [`Plan`](mage_common::op::Plan) on device buffers, by concern:
//!   the device and its clocks, modules, buffers, binding a plan to device
//!   addresses, timing with events, and CUPTI kernel records.
//! * [`spaces`]: the ops' parameter spaces, which `evolve` searches.
//!
//! `cargo xtask` (run, sweep, gpu-check, compare) and the Python extension
//! `mage` launch through the same [`gpu::BoundPlan`]: one launch path.

pub mod gpu;
pub mod ops;
pub mod spaces;

/// The commit this crate was built from (`git rev-parse --short HEAD`).
pub const BUILD_COMMIT: &str = env!("MAGE_GIT_COMMIT");
/// The rustc that built it.
pub const BUILD_RUSTC: &str = env!("MAGE_RUSTC_VERSION");
