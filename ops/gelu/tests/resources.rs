//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

/// The snapshot, and every launch at the sweep shapes and the default
/// fits an SM by these requests (threads times registers, and dynamic
/// shared memory; see `check_launches_fit_an_sm`).
#[test]
fn ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_gelu::OP).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_gelu::OP, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The same for `gelu_erf`'s stages.
#[test]
fn erf_ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_gelu::ERF).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_gelu::ERF, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The same for `gelu_backward`'s stages.
#[test]
fn backward_ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_gelu::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_gelu::BACKWARD, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The same for `gelu_erf_backward`'s stages.
#[test]
fn erf_backward_ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_gelu::ERF_BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_gelu::ERF_BACKWARD, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}
