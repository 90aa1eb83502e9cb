//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

#[test]
fn ptxas_resource_requests() {
    let requests = mage_common::tools::resource_requests(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(requests);
}
