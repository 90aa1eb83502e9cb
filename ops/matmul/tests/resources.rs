//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v`, 13.0.88, for the `.target` of the crate's PTX: sm_90a): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

/// The snapshot, and every launch at the sweep shapes and the default
/// fits an SM by these requests (threads times registers, and dynamic
/// shared memory; see `check_launches_fit_an_sm`).
#[test]
fn ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_matmul::OP).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_matmul::OP, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The same for `matmul_nt`'s stages.
#[test]
fn ptxas_resource_requests_nt() {
    let requests = mage_toolchain::resource_requests(&mage_matmul::NT).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_matmul::NT, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The same for `matmul_tn`'s stages.
#[test]
fn ptxas_resource_requests_tn() {
    let requests = mage_toolchain::resource_requests(&mage_matmul::TN).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_matmul::TN, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The crate's PTX targets sm_90a (its `[package.metadata.mage] arch`), and
/// ptxas keeps the TF32 stages' multiplies asynchronous: none of its notes
/// on wgmma (C75xx: multiplies serialized, a warpgroup wait or arrive
/// injected), which it writes when the accumulators are touched between a
/// multiply and its wait (and, in mage-009, when a partial sum written in
/// one trip of the K loop is read in the next). mage-009's, mage-010's,
/// mage-011's and mage-014's entries, and the 3xTF32 entries of
/// `matmul_nt` (mage-002's to mage-004's) and `matmul_tn` (mage-002's to
/// mage-006's), use no stack
/// and spill nothing.
#[test]
fn ptxas_keeps_the_wgmma_asynchronous() {
    let ptx = mage_toolchain::build_ptx("mage-matmul").unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert_eq!(mage_toolchain::ptx_target(&text), Some("sm_90a"));
    let ptxas = mage_toolchain::ptxas().unwrap_or_else(|e| panic!("{e}"));
    let cubin = std::env::temp_dir().join(format!("mage-matmul-wgmma-{}.cubin", std::process::id()));
    let out = std::process::Command::new(ptxas).args(["-v", "-arch=sm_90a", "-o"]).arg(&cubin).arg(&ptx).output().unwrap();
    let _ = std::fs::remove_file(&cubin);
    let report = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    let notes: Vec<&str> = report.lines().filter(|l| l.contains("(C75") || l.contains("injected") || l.contains("serializ")).collect();
    assert!(notes.is_empty(), "{}", notes.join("\n"));
    assert!(text.contains("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"));
    // mage-009: A from registers (`{a0, a1, a2, a3}`), 64 and 128 rows.
    for n in [64, 128] {
        assert!(text.contains(&format!("wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 {{")), "no m64n{n}k8");
    }
    assert!(text.contains("}, {%r"), "no multiply with A from registers");
    let three: Vec<_> = mage_toolchain::parse_ptxas(&report).into_iter().filter(|r| r.entry.contains("3xtf32")).collect();
    assert_eq!(
        three.len(),
        30,
        "mage-009's, mage-010's, mage-011's and mage-014's entries, matmul_nt's (mage-002 to mage-004) and matmul_tn's (mage-002 to mage-006)"
    );
    for r in three {
        assert_eq!((r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes), (0, 0, 0), "{}", r.entry);
    }
}
