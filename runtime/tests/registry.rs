//! What every op's registry promises, checked across all ops: `current`
//! picks, at every workload of the op's sweep list, a stage of the op that
//! supports the shape and is inside the op's contract; stage names are
//! unique and never `current`; every stage outside the contract exists;
//! an op's content check reads only the inputs its `content_reads` names.

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

/// The Python module copies only `content_reads` (and the dispatcher's
/// `reads`) to the host and runs the content check on those, the others
/// empty: there it must pass where it passes on all the inputs. Each input
/// it does not name is also replaced by an empty buffer of the other
/// element type, so that a check reading it (`as_f32`, `as_u32`) panics.
#[test]
fn the_content_check_reads_only_its_content_reads() {
    use mage_common::op::{Elem, HostBuf};
    for op in mage_runtime::ops::all() {
        let reads = op.content_reads;
        assert!(reads.windows(2).all(|p| p[0] < p[1]), "{}: content_reads {reads:?} are not sorted and distinct", op.name);
        assert!(reads.iter().all(|&i| i < op.inputs.len()), "{}: content_reads {reads:?} name an input it lacks", op.name);
        for w in op.sweep.iter().filter(|w| op.input_lens(w.dims).iter().sum::<usize>() <= 1 << 20) {
            let inputs = (op.generator(Some(w.generator)).unwrap().generate)(w.dims, 7);
            let label = op.workload_label(w.dims, w.generator);
            assert_eq!(op.check_inputs(w.dims, &inputs), Ok(()), "{} {label}", op.name);
            let only = |other: fn(Elem) -> Elem| -> Vec<HostBuf> {
                inputs
                    .iter()
                    .enumerate()
                    .map(|(i, b)| if reads.contains(&i) { b.clone() } else { HostBuf::empty(other(b.elem())) })
                    .collect()
            };
            assert_eq!(op.check_contents(w.dims, &only(|e| e)), Ok(()), "{} {label}", op.name);
            let flip = |e| if e == Elem::F32 { Elem::U32 } else { Elem::F32 };
            assert_eq!(op.check_contents(w.dims, &only(flip)), Ok(()), "{} {label}", op.name);
        }
    }
}
