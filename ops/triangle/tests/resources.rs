//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

#[test]
fn ptxas_resource_requests() {
    let requests = mage_common::tools::resource_requests(&mage_triangle::OP).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(requests);
}

/// Registers of an SM of the H200 (and of every GPU since sm_50).
const SM_REGISTERS: u64 = 64 * 1024;
/// The most dynamic shared memory one block may opt in to on the H200.
const MAX_BLOCK_SHARED_BYTES: u32 = 227 * 1024;

/// Every launch of every stage at the sweep shapes (and the default) can
/// run: its block's threads times the entry's registers fit an SM, and its
/// dynamic shared memory is within the opt-in limit. A block that does not
/// fit fails at launch on the GPU, never on the emulator; a 512-thread
/// block needs at most 128 registers per thread.
#[test]
fn every_launch_fits_an_sm() {
    let requests = mage_common::tools::resource_requests(&mage_triangle::OP).unwrap_or_else(|e| panic!("{e}"));
    let shapes = mage_triangle::OP.sweep.iter().map(|w| w.dims).chain([mage_triangle::OP.default_dims]);
    for dims in shapes {
        for stage in mage_triangle::STAGES.iter().filter(|s| (s.supports)(dims)) {
            for launch in (stage.plan)(dims).launches {
                let entry = requests.iter().find(|r| r.resources.entry == launch.kernel.name).expect("ptxas reports every entry");
                // Registers are allotted per thread in multiples of 8.
                let registers = (entry.resources.registers as u64).div_ceil(8) * 8 * launch.block.count();
                assert!(
                    registers <= SM_REGISTERS,
                    "{} at {dims:?}: {} threads x {} registers",
                    stage.name,
                    launch.block.count(),
                    entry.resources.registers
                );
                assert!(
                    launch.shared_bytes <= MAX_BLOCK_SHARED_BYTES,
                    "{} at {dims:?}: {} B of shared memory",
                    stage.name,
                    launch.shared_bytes
                );
            }
        }
    }
}
