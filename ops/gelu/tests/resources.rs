//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

#[test]
fn ptxas_resource_requests() {
    let requests = mage_common::tools::resource_requests(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(requests);
}

/// The persistent plans launch `RESIDENT_BLOCKS` 256-thread blocks per SM,
/// which needs at most 32 registers a thread; try-gelu-pair's doc counts
/// on the same occupancy.
#[test]
fn quad_kernels_keep_to_32_registers() {
    let requests = mage_common::tools::resource_requests(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    let budget = 65536 / (mage_gelu::RESIDENT_BLOCKS * mage_gelu::THREADS);
    for r in requests.iter().filter(|r| r.stage.starts_with("try-")) {
        assert!(r.resources.registers <= budget, "{}: {} registers, more than {budget}", r.resources.entry, r.resources.registers);
    }
}
