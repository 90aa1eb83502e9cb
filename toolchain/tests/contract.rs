//! The parts of the numerical contract (`mage_common::numeric`) that the PTX
//! text shows without a GPU: a plainly written multiply-add stays two
//! correctly rounded instructions (`mul.rn`, `add.rn`), which ptxas may not
//! fuse, so the emulator's unfused host arithmetic gives the same bits; the
//! approximate instructions are the ones the contract bounds.

fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no entry {name}"));
    let end = ptx[start..].find("\n}").map_or(ptx.len(), |e| start + e);
    &ptx[start..end]
}

#[test]
fn the_ptx_keeps_the_contract() {
    let path = mage_toolchain::build_ptx("mage-common").unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::fs::read_to_string(path).unwrap();
    let mul_add = entry(&ptx, "probe_mul_add");
    assert!(mul_add.contains("mul.rn.f32") && mul_add.contains("add.rn.f32"), "{mul_add}");
    assert!(!mul_add.contains("fma."), "a plain a*b+c was contracted:\n{mul_add}");
    assert!(entry(&ptx, "probe_rsqrt_approx").contains("rsqrt.approx.f32"));
    assert!(entry(&ptx, "probe_tanh_approx").contains("tanh.approx.f32"));
    assert!(entry(&ptx, "probe_ex2_approx").contains("ex2.approx.ftz.f32"));
    assert!(ptx.contains(".target sm_90"), "built for the wrong architecture");
}
