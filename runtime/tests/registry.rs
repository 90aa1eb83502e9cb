//! What every op's registry promises, checked across all ops: `current`
//! picks, at every workload of the op's sweep list, a stage of the op that
//! supports the shape and is inside the op's contract; stage names are
//! unique and never `current`; every stage outside the contract exists.

use mage_common::op::CURRENT;

#[test]
fn current_picks_a_supporting_stage_inside_the_contract_everywhere() {
    for op in mage_runtime::ops::all() {
        for w in op.sweep {
            let generator = op.generator(Some(w.generator)).unwrap();
            let inputs = (generator.generate)(w.dims, 7);
            let picked = op.pick(CURRENT, w.dims, &inputs).unwrap();
            let label = op.workload_label(w.dims, w.generator);
            assert!(picked.by_current, "{} {label}", op.name);
            assert!(op.stages.iter().any(|s| std::ptr::eq(*s, picked.stage)), "{} {label}: {} is not a stage", op.name, picked.stage.name);
            assert!((picked.stage.supports)(w.dims), "{} {label}: {} does not support it", op.name, picked.stage.name);
            assert!(op.outside_contract(picked.stage.name).is_none(), "{} {label}: {} is outside the contract", op.name, picked.stage.name);
        }
    }
}

#[test]
fn stage_names_are_unique_and_outside_contract_names_exist() {
    for op in mage_runtime::ops::all() {
        let names: Vec<&str> = op.stages.iter().map(|s| s.name).collect();
        for (i, n) in names.iter().enumerate() {
            assert_ne!(*n, CURRENT, "{}: a stage may not be called current", op.name);
            assert!(!names[..i].contains(n), "{}: stage {n} twice", op.name);
        }
        for o in op.outside_contract {
            assert!(names.contains(&o.stage), "{}: {} is outside the contract but no stage", op.name, o.stage);
        }
    }
}
