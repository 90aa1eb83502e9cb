//! Everything Mage's operations share.
//!
//! * [`device`]: the vocabulary kernels are written in (thread indices,
//!   barriers, warp shuffles, shared memory, 128-bit global access,
//!   `cp.async`, approximate transcendental functions). On `nvptx64` each
//!   function is one or two PTX instructions; on the host it talks to the
//!   SIMT emulator, so the same kernel source runs in `cargo test`.
//! * [`kernel!`]: declares a kernel once, yielding the PTX entry point and,
//!   on the host, a [`Kernel`] the emulator and the GPU runner can launch.
//! * host only: [`emu`] (the emulator), [`op`] (what an op crate registers),
//!   [`numeric`] (f64 references, tolerances and the numerical contract),
//!   [`fixtures`] (deterministic inputs and case directories), [`cleanup`]
//!   (temporaries removed on an interrupt), [`home`] (the workspace, and
//!   where the running binary lives).
//!
//! Building PTX, ptxas and the Python extension are host-only machinery
//! and live in `mage-toolchain`, not here.
//!
//! This crate never depends on an op crate.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch, core_intrinsics, abi_ptx))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

#[cfg(any(feature = "probes", not(target_arch = "nvptx64")))]
pub mod control;
pub mod device;
pub mod kernel;
#[cfg(any(feature = "probes", not(target_arch = "nvptx64")))]
pub mod probes;
pub mod stats;

pub use kernel::Kernel;

#[cfg(not(target_arch = "nvptx64"))]
pub mod cleanup;
#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;
#[cfg(not(target_arch = "nvptx64"))]
pub mod fixtures;
#[cfg(not(target_arch = "nvptx64"))]
pub mod home;
#[cfg(not(target_arch = "nvptx64"))]
pub mod numeric;
#[cfg(not(target_arch = "nvptx64"))]
pub mod op;
#[cfg(not(target_arch = "nvptx64"))]
pub mod scale;
#[cfg(not(target_arch = "nvptx64"))]
pub mod space;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; there is nothing to unwind to.
    unsafe { core::arch::asm!("trap;", options(noreturn)) }
}
