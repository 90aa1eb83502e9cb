//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

#[test]
fn ptxas_resource_requests() {
    let requests = mage_common::tools::resource_requests(&mage_layernorm::OP).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(requests);
}

/// Every entry of the stages with an entry table keeps to the registers its
/// stage counts on (try-ln-pipe sizes its grid by them; the others' docs
/// predict from the occupancy they allow).
#[test]
fn entries_keep_to_their_register_budgets() {
    use mage_layernorm::{try_ln_held4, try_ln_pair, try_ln_pipe, try_ln_stream};
    let requests = mage_common::tools::resource_requests(&mage_layernorm::OP).unwrap_or_else(|e| panic!("{e}"));
    for entries in [try_ln_held4::ENTRIES, try_ln_stream::ENTRIES, try_ln_pair::ENTRIES, try_ln_pipe::ENTRIES] {
        for e in entries {
            let r = requests.iter().find(|r| r.resources.entry == e.kernel.name).expect("every entry is in the PTX");
            assert!(
                r.resources.registers <= e.registers,
                "{} takes {} registers; its stage counts on at most {}",
                e.kernel.name,
                r.resources.registers,
                e.registers
            );
        }
    }
}
