//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

#[test]
fn ptxas_resource_requests() {
    let requests = mage_common::tools::resource_requests(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(requests);
}

/// The candidates' docs count on eight 256-thread blocks per SM, as
/// mage-002 runs: at most 32 registers a thread.
#[test]
fn candidates_keep_to_32_registers() {
    let requests = mage_common::tools::resource_requests(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    let budget = 65536 / (8 * 256);
    for r in requests.iter().filter(|r| r.stage.starts_with("try-")) {
        assert!(r.resources.registers <= budget, "{}: {} registers, more than {budget}", r.resources.entry, r.resources.registers);
    }
}
