//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v`, 13.0.88, for the `.target` of the crate's PTX: sm_90a): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

#[test]
fn ptxas_resource_requests() {
    let requests = mage_common::tools::resource_requests(&mage_matmul::OP).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(requests);
}
