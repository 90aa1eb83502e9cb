//! What each kernel entry asks of the GPU, from the pinned ptxas
//! (`ptxas -v -arch=sm_90`, 13.0.88): registers, barriers, static and
//! dynamic shared bytes, stack frame, spills. A pull request that changes a
//! kernel shows its cost here.

/// The snapshot, and every launch at the sweep shapes and the default
/// fits an SM by these requests (threads times registers, and dynamic
/// shared memory; see `check_launches_fit_an_sm`).
#[test]
fn ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_layernorm::OP).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_layernorm::OP, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// The same for `layernorm_backward`'s stages.
#[test]
fn backward_ptxas_resource_requests() {
    let requests = mage_toolchain::resource_requests(&mage_layernorm::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    let n = mage_toolchain::check_launches_fit_an_sm(&mage_layernorm::BACKWARD, &requests).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    insta::assert_yaml_snapshot!(requests);
}

/// Every entry of the stages with an entry table keeps to the registers its
/// stage counts on (their docs predict from the occupancy they allow).
#[test]
fn entries_keep_to_their_register_budgets() {
    use mage_layernorm::{mage_009, mage_010};
    let requests = mage_toolchain::resource_requests(&mage_layernorm::OP).unwrap_or_else(|e| panic!("{e}"));
    for entries in [mage_009::ENTRIES, mage_010::ENTRIES] {
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

/// The same for the entries of `layernorm_backward`'s held-row stages,
/// and the blocks an SM each counts on follow from those registers.
#[test]
fn backward_entries_keep_to_their_register_budgets() {
    use mage_layernorm::backward::mage_003;
    let requests = mage_toolchain::resource_requests(&mage_layernorm::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    for entries in [mage_003::ENTRIES] {
        for e in entries {
            let r = requests.iter().find(|r| r.resources.entry == e.kernel.name).expect("every entry is in the PTX");
            assert!(
                r.resources.registers <= e.registers,
                "{} takes {} registers; its stage counts on at most {}",
                e.kernel.name,
                r.resources.registers,
                e.registers
            );
            assert_eq!(r.resources.stack_frame_bytes, 0, "{} keeps its quads in local memory", e.kernel.name);
            assert_eq!(65536 / (e.registers.div_ceil(8) * 8 * e.block()), e.blocks_per_sm, "{}", e.kernel.name);
        }
    }
}

/// mage-005's entries: both kernels of each within the registers its
/// blocks an SM count on, no local memory, and those blocks following from
/// the registers (allotted 8 at a time) and the shared memory (228 KiB an
/// SM on the H200, 1 KiB of it reserved a block; 227 KiB at most a block).
#[test]
fn ring_entries_keep_to_their_register_and_shared_budgets() {
    use mage_layernorm::backward::mage_005::{ENTRIES, shared_bytes};
    let requests = mage_toolchain::resource_requests(&mage_layernorm::BACKWARD).unwrap_or_else(|e| panic!("{e}"));
    for e in ENTRIES {
        for k in [e.kernel, e.scalar] {
            let r = requests.iter().find(|r| r.resources.entry == k.name).expect("every entry is in the PTX");
            assert!(
                r.resources.registers <= e.registers,
                "{} takes {} registers; its stage counts on at most {}",
                k.name,
                r.resources.registers,
                e.registers
            );
            assert_eq!(r.resources.stack_frame_bytes, 0, "{} keeps its quads in local memory", k.name);
            assert_eq!(r.resources.spill_store_bytes + r.resources.spill_load_bytes, 0, "{} spills", k.name);
        }
        let shared = shared_bytes(e.threads);
        assert!(shared <= mage_toolchain::MAX_BLOCK_SHARED_BYTES, "{}: {shared} B", e.kernel.name);
        let by_registers = 65536 / (e.registers.div_ceil(8) * 8 * e.threads);
        let by_shared = 228 * 1024 / (shared + 1024);
        assert_eq!(by_registers.min(by_shared).min(2048 / e.threads), e.blocks_per_sm, "{}", e.kernel.name);
    }
}
