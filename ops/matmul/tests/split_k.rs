//! The split-K stages, `matmul_tn` mage-004 and mage-005, matmul
//! mage-011 and `matmul_nt` mage-003, on the emulator: slices with every
//! kind of tail against the f64 reference, the output every element
//! written over its poison, the same bits as the slices' partials (the
//! one-slice product over each slice alone) added in the kernel's order,
//! the same bits on every run, one slice the unsplit stage's bits,
//! `matmul_tn` mage-005 matmul mage-011's bits on A transposed back and
//! `matmul_nt` mage-003 mage-011's on B transposed back; and their slice
//! rules on the host at the shapes they are for.

use mage_common::numeric::bits_differing;
use mage_common::op::{HostBuf, OUTPUT_POISON, Plan, check_plan, emulate_plan};
use mage_matmul::tn::mage_004::{self, MIN_SLICE_K, SLICE_QUANTUM, estimate_ns, plan_with_slice_k, slice_k, slices, tiles, total_groups};
use mage_matmul::{NT, OP, TN, as_matmul_inputs, mage_009, mage_010, mage_011, nt, tn};

/// Shapes and slice lengths: tails in m and n (not multiples of 4, 64 or
/// 128), a last slice shorter than the others and not a multiple of 32,
/// slices of an odd tile count (the body pads them with a zero tile), 16-
/// and 4-byte entries, two tiles, more than `SEGMENT` slices (two and
/// four segments) and a count that leaves the last segment empty (33
/// slices in 8 segments of 5).
const CASES: [([u32; 3], u32); 9] = [
    ([17, 19, 200], 64),  // 4 slices, the last 8 long; scalar entry
    ([65, 130, 150], 32), // 5 slices of one tile (padded), the last 22; two row tiles, two column tiles
    ([64, 128, 256], 64), // exact tiles and slices; v4
    ([37, 29, 97], 96),   // 2 slices, three tiles each (padded), the last 1 long
    ([96, 132, 100], 32), // 4 slices, rows a multiple of 4 with partial tiles; v4
    ([3, 2, 250], 32),    // 8 slices, one segment of 8
    ([5, 7, 300], 32),    // 10 slices: two segments of 5
    ([4, 6, 1040], 32),   // 33 slices: eight segments of 5, the last empty; scalar product (n = 6), 16-byte totals (m·n = 24)
    ([8, 12, 580], 32),   // 19 slices: four segments of 5, the last 4; v4 entries and totals
];

fn inputs(d: &[u32], seed: u64) -> Vec<HostBuf> {
    TN.generate(d, seed)
}

/// The `elements` sums of the slices' `partials` in the totals kernels'
/// order: [`total_groups`] contiguous segments, each added in slice order,
/// then the segments' sums in segment order.
fn added_in_order(partials: &[Vec<f32>], elements: usize) -> Vec<f32> {
    let s = partials.len();
    let groups = total_groups(s as u32) as usize;
    let per = s.div_ceil(groups);
    (0..elements)
        .map(|e| {
            let segment = |g: usize| partials[g * per..((g + 1) * per).min(s)].iter().map(|p| p[e]).reduce(|x, y| x + y).unwrap();
            (0..groups).filter(|g| g * per < s).map(segment).reduce(|x, y| x + y).unwrap()
        })
        .collect()
}

fn run(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&TN, plan, d, inputs).unwrap_or_else(|e| panic!("mage-004 at {d:?}: {e}"))
}

#[test]
fn split_k_with_tails_matches_the_reference_and_writes_every_element() {
    for (i, (d, len)) in CASES.into_iter().enumerate() {
        let plan = plan_with_slice_k(&d, len);
        assert_eq!(plan.launches.len(), 2, "{d:?} in slices of {len}");
        assert_eq!(plan.launches[0].grid.y, d[2].div_ceil(len));
        let inputs = inputs(&d, 500 + i as u64);
        // The output (and the scratch) start as poison: every element must be written.
        let out = run(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        check_plan(&TN, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// Each slice's partial is mage-003's product over the slice alone (the
/// one-slice plan on A's and B's rows `k0..k0 + len`), and the second
/// kernel adds them as `total_groups` says: segments of `⌈s / groups⌉`
/// slices in slice order, then the segments in order. The split output
/// is that sum, to the bit, and the same bits on a second run.
#[test]
fn split_k_is_the_slices_partials_added_in_order_to_the_bit() {
    for (i, (d, len)) in CASES.into_iter().enumerate().filter(|(i, _)| [0, 1, 3, 6, 8].contains(i)) {
        let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
        let inputs = inputs(&d, 900 + i as u64);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let s = d[2].div_ceil(len) as usize;
        let partials: Vec<Vec<f32>> = (0..s)
            .map(|j| {
                let (k0, k1) = (j * len as usize, ((j + 1) * len as usize).min(k));
                let sd = [d[0], d[1], (k1 - k0) as u32];
                let part = vec![HostBuf::F32(a[k0 * m..k1 * m].to_vec()), HostBuf::F32(b[k0 * n..k1 * n].to_vec())];
                let one = plan_with_slice_k(&sd, sd[2]);
                assert_eq!(one.launches.len(), 1);
                run(&one, &sd, &part)
            })
            .collect();
        let want = added_in_order(&partials, m * n);
        let plan = plan_with_slice_k(&d, len);
        let out = run(&plan, &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in slices of {len}: {differ} of {} elements differ from the partials' sum", out.len());
        let again = run(&plan, &d, &inputs);
        assert_eq!(bits_differing(&out, &again), 0, "{d:?}: a second run differs");
    }
}

/// One slice is mage-003: one launch straight into C, the same bits.
#[test]
fn one_slice_is_mage_003_to_the_bit() {
    for d in [[17, 19, 100], [64, 128, 96], [65, 66, 255]] {
        let plan = (mage_004::STAGE.plan)(&d);
        assert_eq!(plan.launches.len(), 1, "{d:?}");
        assert!(plan.scratch.is_empty());
        let inputs = inputs(&d, 77);
        let want = run(&(mage_matmul::tn::mage_003::STAGE.plan)(&d), &d, &inputs);
        assert_eq!(bits_differing(&run(&plan, &d, &inputs), &want), 0, "{d:?}");
    }
}

/// The rule's slice counts at the shapes it is for, and its limits: slices
/// a multiple of 64 and at least 128 long wherever there are two or more,
/// and then cheaper by the model than one slice; one slice (and one
/// launch) where the tiles fill the GPU or k is short.
#[test]
fn the_slice_rule_from_the_dims() {
    for (d, want_slices, want_len) in [
        ([64, 64, 4096], 32, 128),
        ([32, 64, 4096], 32, 128),
        ([128, 128, 65536], 64, 1024),
        ([64, 128, 65536], 128, 512),
        ([256, 256, 16384], 16, 1024),
        ([768, 768, 4096], 5, 832),
        ([1024, 1024, 1024], 1, 1024),
        ([1024, 1024, 1], 1, 1),
        ([4096, 4096, 4096], 1, 4096),
        ([17, 19, 255], 1, 255),
    ] {
        assert_eq!((slices(&d), slice_k(&d)), (want_slices, want_len), "{d:?}");
    }
    for m in [1, 32, 64, 100, 128, 256, 768, 1024, 4096] {
        for k in [1, 63, 64, 255, 256, 1000, 1024, 4096, 16384, 65536, 1 << 20] {
            let d = [m, m, k];
            let (s, len) = (slices(&d), slice_k(&d));
            assert!(s <= mage_004::MAX_SLICES, "{d:?}");
            if s == 1 {
                assert_eq!(len, k, "{d:?}");
            } else {
                assert!(len.is_multiple_of(SLICE_QUANTUM) && len >= MIN_SLICE_K && (s - 1) * len < k, "{d:?}: {s} of {len}");
                assert!(estimate_ns(&d, len) < estimate_ns(&d, k), "{d:?}: {s} slices of {} tiles", tiles(&d));
            }
            let plan = (mage_004::STAGE.plan)(&d);
            assert_eq!(plan.launches[0].grid.y, s);
            assert!(plan.launches.iter().all(|l| l.shared_bytes <= 227 * 1024 && l.grid.z == 1));
            if s > 1 {
                assert_eq!(plan.scratch, [s as usize * m as usize * m as usize]);
                assert_eq!(plan.launches[1].kernel.name, "matmul_tn_add_slices");
            }
        }
    }
    assert_eq!([1, 8, 9, 16, 17, 33, 64, 65, 256, 257, 1024].map(total_groups), [1, 1, 2, 2, 4, 8, 8, 16, 32, 32, 32]);
    // The error bound's premise (module doc): a partial passes at most `s - 1`
    // roundings in the second pass, as in one chain over the slices.
    for s in 1..=mage_004::MAX_SLICES {
        let g = total_groups(s);
        assert!(s.div_ceil(g) + g <= s + 1, "{s} slices in {g} segments");
    }
}

/// matmul mage-011's shapes, tile rows and slice lengths: 16-byte rows
/// (one launch of the product, then the totals), `n` not a multiple of 4
/// (the totals cut C's columns from the padded partials), `k` not a
/// multiple of 4 (A and B padded), both; tails in m and n at both tile
/// heights, several row and column tiles, a last slice shorter than the
/// others and not a multiple of 32 (a padded tile), slices of 64 (two K
/// tiles) and of 192 (six), more than `SEGMENT` slices (two segments) and
/// 33 slices (eight segments of 5, the last empty).
const MATMUL_CASES: [([u32; 3], u32, u32); 10] = [
    ([17, 20, 200], 64, 64),    // 4 slices, the last 8 long; v4 rows
    ([65, 130, 150], 64, 64),   // k and n padded; 3 slices, the last 24 (k4 152); two row and two column tiles
    ([64, 128, 256], 128, 64),  // exact tiles and slices, 128 rows
    ([37, 29, 97], 128, 64),    // 2 slices, the last 36 of k4 = 100; padded both
    ([96, 132, 100], 64, 64),   // 2 slices, rows a multiple of 4 with partial tiles
    ([130, 36, 401], 128, 192), // 3 slices of 192, the last 20 (k4 404); k padded, two row tiles of 128
    ([3, 2, 250], 64, 64),      // 4 slices, n = 2: the cut of every quad
    ([5, 7, 600], 64, 64),      // 10 slices: two segments of 5
    ([4, 6, 2100], 64, 64),     // 33 slices: eight segments of 5, the last empty; n padded
    ([8, 12, 1153], 64, 64),    // 19 slices: four segments of 5, the last 4; k padded
];

fn run_matmul(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&OP, plan, d, inputs).unwrap_or_else(|e| panic!("mage-011 at {d:?}: {e}"))
}

/// The launches of mage-011's plan: the padding where rows are not
/// 16-byte, the product with a grid dimension of slices, the totals.
#[test]
fn mage_011_with_tails_matches_the_reference_and_writes_every_element() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().enumerate() {
        let plan = mage_011::plan_with(&d, rows, len);
        let aligned = d[1] % 4 == 0 && d[2] % 4 == 0;
        let names: Vec<_> = plan.launches.iter().map(|l| l.kernel.name).collect();
        let product = format!("matmul_3xtf32_splitk_m{rows}");
        let want: Vec<&str> = if aligned {
            vec![&product, "matmul_add_slices"]
        } else {
            vec!["matmul_resize", "matmul_resize", &product, "matmul_add_slices"]
        };
        assert_eq!(names, want, "{d:?}");
        let k4 = d[2].next_multiple_of(4);
        assert_eq!(plan.launches[names.len() - 2].grid.y, k4.div_ceil(len), "{d:?}");
        let inputs = OP.generate(&d, 600 + i as u64);
        let out = run_matmul(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        check_plan(&OP, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// Each of mage-011's partials is its one-slice product over the slice
/// alone (A's columns and B's rows `k0..k0 + len`, padded as the whole is:
/// the zeros past `k` add exactly nothing), and the totals add them as
/// `total_groups` says. The split output is that sum, to the bit, and the
/// same bits on a second run.
#[test]
fn mage_011_is_the_slices_partials_added_in_order_to_the_bit() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().enumerate().filter(|(i, _)| [0, 1, 3, 5, 7, 9].contains(i)) {
        let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
        let inputs = OP.generate(&d, 950 + i as u64);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let s = d[2].next_multiple_of(4).div_ceil(len) as usize;
        let partials: Vec<Vec<f32>> = (0..s)
            .map(|j| {
                let (k0, k1) = (j * len as usize, ((j + 1) * len as usize).min(k));
                let sd = [d[0], d[1], (k1 - k0) as u32];
                let a_slice: Vec<f32> = (0..m).flat_map(|r| a[r * k + k0..r * k + k1].to_vec()).collect();
                let part = vec![HostBuf::F32(a_slice), HostBuf::F32(b[k0 * n..k1 * n].to_vec())];
                let one = mage_011::plan_with(&sd, rows, sd[2].next_multiple_of(4));
                assert!(one.launches.iter().all(|l| l.kernel.name != "matmul_add_slices"));
                run_matmul(&one, &sd, &part)
            })
            .collect();
        let want = added_in_order(&partials, m * n);
        let plan = mage_011::plan_with(&d, rows, len);
        let out = run_matmul(&plan, &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in slices of {len}: {differ} of {} elements differ from the partials' sum", out.len());
        let again = run_matmul(&plan, &d, &inputs);
        assert_eq!(bits_differing(&out, &again), 0, "{d:?}: a second run differs");
    }
}

/// One slice is mage-009's product: where rows are 16-byte, one launch
/// straight into C with mage-009's bits (its plan at the same tile rows);
/// where they are not, mage-010's padding around it, and mage-010's bits
/// (which are mage-009's, `tests/stages.rs`).
#[test]
fn mage_011_with_one_slice_is_mage_009_to_the_bit() {
    for rows in [64, 128] {
        for d in [[17, 20, 100], [64, 128, 96], [130, 260, 200], [65, 66, 255], [37, 29, 33], [1, 1, 1], [129, 68, 7]] {
            let plan = mage_011::plan_with(&d, rows, d[2].next_multiple_of(4));
            let aligned = d[1] % 4 == 0 && d[2] % 4 == 0;
            assert_eq!(
                plan.launches.len(),
                if aligned {
                    1
                } else if d[1] % 4 == 0 {
                    3
                } else {
                    4
                },
                "{d:?}"
            );
            assert_eq!(plan.scratch.is_empty(), aligned);
            let inputs = OP.generate(&d, 78);
            let want = run_matmul(&mage_009::plan_with_rows(&d, rows), &d, &inputs);
            assert_eq!(bits_differing(&run_matmul(&plan, &d, &inputs), &want), 0, "{d:?} at {rows} rows");
        }
    }
    for d in [[130, 131, 97], [300, 257, 64]] {
        let inputs = OP.generate(&d, 79);
        let (one, ten) = ((mage_011::STAGE.plan)(&d), (mage_010::STAGE.plan)(&d));
        assert_eq!(mage_011::slices(&d), 1, "{d:?}");
        assert_eq!(bits_differing(&run_matmul(&one, &d, &inputs), &run_matmul(&ten, &d, &inputs)), 0, "{d:?}");
    }
}

/// mage-011's rule at the shapes it is for and at those where it keeps
/// one slice, and its limits: slices a multiple of 64 wherever there are
/// two or more, and then cheaper by the model than one slice at mage-009's
/// rows; one slice for k <= 64; the plan's scratch, grid and shared bytes.
#[test]
fn the_mage_011_slice_rule_from_the_dims() {
    for (d, want_rows, want_slices, want_len) in [
        ([256, 256, 256], 64, 4, 64),
        ([512, 512, 512], 64, 4, 128),
        ([1000, 1037, 999], 128, 3, 384),
        ([768, 768, 768], 128, 3, 256),
        ([1024, 1024, 1024], 64, 1, 1024),
        ([1000, 1000, 999], 64, 1, 1000),
        ([1023, 1023, 1023], 64, 1, 1024),
        ([2048, 2048, 2048], 128, 1, 2048),
        ([4096, 4096, 1024], 128, 1, 1024),
        ([1024, 1024, 1], 64, 1, 4),
        ([512, 512, 64], 64, 1, 64),
        ([17, 19, 23], 64, 1, 24),
    ] {
        let (rows, len) = mage_011::split(&d);
        assert_eq!((rows, mage_011::slices(&d), len), (want_rows, want_slices, want_len), "{d:?}");
    }
    for m in [1, 32, 64, 100, 128, 256, 768, 1000, 1024, 4096] {
        for k in [1, 63, 64, 65, 127, 128, 255, 256, 999, 1024, 4096, 16384, 1 << 20] {
            let d = [m, m + 3, k];
            let [_, n4, k4] = mage_011::padded(&d);
            let ((rows, len), s) = (mage_011::split(&d), mage_011::slices(&d));
            assert!(s <= mage_011::MAX_SLICES && (rows == 64 || rows == 128), "{d:?}");
            if s == 1 {
                assert_eq!(len, k4, "{d:?}");
            } else {
                assert!(k > 64 && len.is_multiple_of(mage_011::SLICE_QUANTUM) && (s - 1) * len < k4, "{d:?}: {s} of {len}");
                let one = mage_matmul::tf32x3::tile_rows(&mage_011::padded(&d));
                assert!(mage_011::estimate_ns(&d, rows, len) < mage_011::estimate_ns(&d, one, k4), "{d:?}: {s} slices");
            }
            let plan = (mage_011::STAGE.plan)(&d);
            let product = plan.launches.iter().find(|l| l.kernel.name.starts_with("matmul_3xtf32_splitk")).unwrap();
            assert_eq!((product.grid.y, product.grid.z), (s, 1), "{d:?}");
            assert!(plan.launches.iter().all(|l| l.shared_bytes <= 227 * 1024));
            if s > 1 {
                assert_eq!(plan.launches.last().unwrap().kernel.name, "matmul_add_slices");
                assert_eq!(plan.scratch.last(), Some(&(s as usize * m as usize * n4 as usize)), "{d:?}");
            }
        }
    }
}

fn run_tn(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&TN, plan, d, inputs).unwrap_or_else(|e| panic!("matmul_tn mage-005 at {d:?}: {e}"))
}

/// `matmul_tn`'s inputs (A `[k, m]`, B `[k, n]`) as matmul takes them.
fn tn_as_matmul(d: &[u32], inputs: &[HostBuf]) -> Vec<HostBuf> {
    let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
    as_matmul_inputs(inputs, [k, m], true, [k, n], false)
}

/// The launches of `matmul_tn` mage-005's plan on mage-011's cases: the
/// transpose of A into its padded scratch, B's padding where rows are
/// not 16-byte, the product with a grid dimension of slices, the totals;
/// every element written over its poison, and the f64 reference.
#[test]
fn tn_mage_005_with_tails_matches_the_reference_and_writes_every_element() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().enumerate() {
        let plan = tn::mage_005::plan_with(&d, rows, len);
        let aligned = d[1] % 4 == 0 && d[2] % 4 == 0;
        let names: Vec<_> = plan.launches.iter().map(|l| l.kernel.name).collect();
        let product = format!("matmul_tn_3xtf32_splitk_m{rows}");
        let mut want = vec!["matmul_tn_transpose_padded"];
        if !aligned {
            want.push("matmul_resize");
        }
        want.extend([product.as_str(), "matmul_tn_add_padded_slices"]);
        assert_eq!(names, want, "{d:?}");
        let k4 = d[2].next_multiple_of(4);
        assert_eq!(plan.scratch[0], d[0] as usize * k4 as usize, "{d:?}: A's padded transpose");
        assert_eq!(plan.launches[names.len() - 2].grid.y, k4.div_ceil(len), "{d:?}");
        let inputs = TN.generate(&d, 650 + i as u64);
        let out = run_tn(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        check_plan(&TN, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// The transpose is exact and the zeros of its padding are mage-011's
/// padding; the rest is mage-011's plan on the same dims with the same
/// body: `matmul_tn` mage-005 is matmul mage-011 on A transposed back, to
/// the bit, at every tile height and slice length (mage-011's cases), and
/// with the rule's own choice at shapes where it splits and where it
/// does not.
#[test]
fn tn_mage_005_is_mage_011_on_a_transposed_back_to_the_bit() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().enumerate() {
        let inputs = TN.generate(&d, 700 + i as u64);
        let out = run_tn(&tn::mage_005::plan_with(&d, rows, len), &d, &inputs);
        let want = run_matmul(&mage_011::plan_with(&d, rows, len), &d, &tn_as_matmul(&d, &inputs));
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} at {rows} rows in slices of {len}: {differ} of {} elements differ from mage-011's", out.len());
    }
    for d in [[33, 70, 301], [17, 19, 23], [64, 128, 1024], [130, 36, 700], [1, 1, 1]] {
        assert_eq!(tn::mage_005::split(&d), mage_011::split(&d), "{d:?}");
        let inputs = TN.generate(&d, 701);
        let out = run_tn(&(tn::mage_005::STAGE.plan)(&d), &d, &inputs);
        let want = run_matmul(&(mage_011::STAGE.plan)(&d), &d, &tn_as_matmul(&d, &inputs));
        assert_eq!(bits_differing(&out, &want), 0, "{d:?}");
    }
}

/// Each of mage-005's partials is `matmul_tn` mage-002's product over
/// the slice alone (A's and B's rows `k0..k0 + len`, at the same tile
/// rows: the padding's zeros add exactly nothing, and mage-002's scalar
/// entries zero-fill the same terms), and the totals add them as
/// `total_groups` says. The split output is that sum, to the bit, and the
/// same bits on a second run.
#[test]
fn tn_mage_005_is_mage_002s_slices_added_in_order_to_the_bit() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().enumerate().filter(|(i, _)| [0, 1, 3, 5, 8].contains(i)) {
        let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
        let inputs = TN.generate(&d, 750 + i as u64);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let s = d[2].next_multiple_of(4).div_ceil(len) as usize;
        let partials: Vec<Vec<f32>> = (0..s)
            .map(|j| {
                let (k0, k1) = (j * len as usize, ((j + 1) * len as usize).min(k));
                let sd = [d[0], d[1], (k1 - k0) as u32];
                let part = vec![HostBuf::F32(a[k0 * m..k1 * m].to_vec()), HostBuf::F32(b[k0 * n..k1 * n].to_vec())];
                run_tn(&tn::mage_002::plan_with_rows(&sd, rows), &sd, &part)
            })
            .collect();
        let want = added_in_order(&partials, m * n);
        let plan = tn::mage_005::plan_with(&d, rows, len);
        let out = run_tn(&plan, &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in slices of {len}: {differ} of {} elements differ from mage-002's slices' sum", out.len());
        assert_eq!(bits_differing(&out, &run_tn(&plan, &d, &inputs)), 0, "{d:?}: a second run differs");
    }
}

/// One slice (k no longer than the slice, or the rule's choice) is
/// `matmul_tn` mage-002's product at the same tile rows: the same bits,
/// the transpose first and the product straight into C (or into C's
/// padded copy, cut back).
#[test]
fn tn_mage_005_with_one_slice_is_mage_002_to_the_bit() {
    for rows in [64, 128] {
        for d in [[17, 20, 100], [64, 128, 96], [130, 260, 200], [65, 66, 255], [37, 29, 33], [1, 1, 1], [129, 68, 7]] {
            let d: [u32; 3] = d;
            // A slice as long as k4, and one longer than it.
            for len in [d[2].next_multiple_of(4), d[2].next_multiple_of(64) + 64] {
                let plan = tn::mage_005::plan_with(&d, rows, len);
                assert!(plan.launches.iter().all(|l| l.grid.y == 1 && l.kernel.name != "matmul_tn_add_padded_slices"), "{d:?}");
                let cut = !d[1].is_multiple_of(4);
                assert_eq!(plan.launches.last().unwrap().kernel.name == "matmul_resize", cut, "{d:?}");
                let inputs = TN.generate(&d, 80);
                let want = run_tn(&tn::mage_002::plan_with_rows(&d, rows), &d, &inputs);
                assert_eq!(bits_differing(&run_tn(&plan, &d, &inputs), &want), 0, "{d:?} at {rows} rows, slices of {len}");
            }
        }
    }
    for d in [[1024, 1024, 1024], [300, 257, 64]] {
        assert_eq!(tn::mage_005::slices(&d), 1, "{d:?}");
    }
    let d = [300, 257, 64];
    let inputs = TN.generate(&d, 81);
    let want = run_tn(&(tn::mage_002::STAGE.plan)(&d), &d, &inputs);
    assert_eq!(bits_differing(&run_tn(&(tn::mage_005::STAGE.plan)(&d), &d, &inputs), &want), 0);
}

/// mage-005's rule is mage-011's at the shapes it is for: the MLP's weight
/// gradients at (768, 3072, 4096) and (3072, 768, 4096) in 8 slices of
/// 512 at 128 rows, 1000x1037x999 in 3 of 384, 512³ in 4 of 128 and 256³
/// in 4 of 64 (shorter than mage-004's shortest, 128) at 64 rows, one
/// slice at 1024³; the plan's scratch (A's padded transpose first, the
/// partials last), grids and shared bytes.
#[test]
fn the_tn_mage_005_slice_rule_from_the_dims() {
    for (d, want_rows, want_slices, want_len) in [
        ([768, 3072, 4096], 128, 8, 512),
        ([3072, 768, 4096], 128, 8, 512),
        ([1000, 1037, 999], 128, 3, 384),
        ([512, 512, 512], 64, 4, 128),
        ([256, 256, 256], 64, 4, 64),
        ([1024, 1024, 1024], 64, 1, 1024),
        ([33, 70, 301], 64, 5, 64),
    ] {
        let (rows, len) = tn::mage_005::split(&d);
        assert_eq!((rows, tn::mage_005::slices(&d), len), (want_rows, want_slices, want_len), "{d:?}");
    }
    assert_eq!(mage_004::slice_k(&[256, 256, 256]), 128);
    for (m, n) in [(1, 1), (64, 67), (100, 768), (768, 3072), (3072, 770)] {
        for k in [1, 63, 64, 65, 255, 999, 4096, 1 << 16] {
            let d = [m, n, k];
            let [_, n4, k4] = mage_011::padded(&d);
            assert_eq!(tn::mage_005::split(&d), mage_011::split(&d), "{d:?}");
            let s = tn::mage_005::slices(&d);
            let plan = (tn::mage_005::STAGE.plan)(&d);
            assert_eq!(plan.launches[0].kernel.name, "matmul_tn_transpose_padded");
            assert_eq!(plan.launches[0].grid.x, k.div_ceil(32) * m.div_ceil(32), "{d:?}");
            assert_eq!(plan.scratch[0], m as usize * k4 as usize, "{d:?}");
            let product = plan.launches.iter().find(|l| l.kernel.name.starts_with("matmul_tn_3xtf32_splitk_m")).unwrap();
            assert_eq!((product.grid.y, product.grid.z), (s, 1), "{d:?}");
            assert!(plan.launches.iter().all(|l| l.shared_bytes <= 227 * 1024));
            if s > 1 {
                assert_eq!(plan.launches.last().unwrap().kernel.name, "matmul_tn_add_padded_slices");
                assert_eq!(plan.scratch.last(), Some(&(s as usize * m as usize * n4 as usize)), "{d:?}");
            }
        }
    }
}

/// Random shapes, tile heights and slice lengths (tails of 4, 32, 64 and
/// 128 in m, n and k, k shorter or longer than a slice): mage-005 within
/// the op's tolerance of the f64 reference, and matmul mage-011's bits on
/// A transposed back.
mod tn_mage_005_property {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError};

    fn dim() -> impl Strategy<Value = u32> {
        prop_oneof![prop::sample::select(vec![1u32, 3, 4, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129]), 1u32..=140]
    }

    proptest! {
        #![proptest_config(Config { cases: 16, ..Config::default() })]

        #[test]
        fn tn_mage_005_matches_the_reference_and_mage_011(
            m in dim(), n in dim(), k in 1u32..=400, rows in prop::sample::select(vec![64u32, 128]),
            len in prop::sample::select(vec![64u32, 128, 192]), seed in any::<u64>(),
        ) {
            let d = [m, n, k];
            let plan = tn::mage_005::plan_with(&d, rows, len);
            let inputs = TN.generate(&d, seed);
            check_plan(&TN, &plan, &d, &inputs).map_err(TestCaseError::fail)?;
            let out = run_tn(&plan, &d, &inputs);
            let want = run_matmul(&mage_011::plan_with(&d, rows, len), &d, &tn_as_matmul(&d, &inputs));
            prop_assert_eq!(bits_differing(&out, &want), 0, "{:?} at {} rows in slices of {}", d, rows, len);
        }
    }
}

fn run_nt(plan: &Plan, d: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    emulate_plan(&NT, plan, d, inputs).unwrap_or_else(|e| panic!("matmul_nt mage-003 at {d:?}: {e}"))
}

/// `matmul_nt`'s inputs (A `[m, k]`, B `[n, k]`) as matmul takes them.
fn nt_as_matmul(d: &[u32], inputs: &[HostBuf]) -> Vec<HostBuf> {
    let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
    as_matmul_inputs(inputs, [m, k], false, [n, k], true)
}

/// `matmul_nt` mage-003's own cases beside mage-011's: `k` a multiple of 4
/// with `n` and `m·n` not (no padding at all, 4-byte totals), `k`
/// shorter than a slice (one slice, A and B padded, the product straight
/// into C), 128 rows over a ragged `n` and several slices.
const NT_CASES: [([u32; 3], u32, u32); 5] = [
    ([17, 19, 200], 64, 64),     // 4 slices, m·n = 323: scalar totals, nothing padded
    ([5, 7, 600], 128, 64),      // 10 slices: two segments of 5; m·n = 35
    ([33, 70, 23], 64, 64),      // k shorter than a slice: one slice, k padded to 24
    ([70, 66, 5], 128, 128),     // k = 5 padded to 8, one slice
    ([131, 259, 330], 128, 128), // 3 slices, the last 76 (k4 332); two row and three column tiles
];

/// The launches of `matmul_nt` mage-003's plan: A and B padded to `[m,
/// k4]` and `[n, k4]` where `k` is not a multiple of 4 (never for `n`),
/// the product with a grid dimension of slices, the totals over `m·n`
/// partials where there are two slices or more; every element written over
/// its poison, and the f64 reference.
#[test]
fn nt_mage_003_with_tails_matches_the_reference_and_writes_every_element() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().chain(NT_CASES).enumerate() {
        let plan = nt::mage_003::plan_with(&d, rows, len);
        let (m, n, k4) = (d[0] as usize, d[1] as usize, d[2].next_multiple_of(4));
        let s = k4.div_ceil(len);
        let names: Vec<_> = plan.launches.iter().map(|l| l.kernel.name).collect();
        let product = format!("matmul_nt_3xtf32_splitk_m{rows}");
        let mut want = vec![];
        let mut scratch = vec![];
        if d[2] % 4 != 0 {
            want.extend(["matmul_resize", "matmul_resize"]);
            scratch.extend([m * k4 as usize, n * k4 as usize]);
        }
        want.push(product.as_str());
        if s > 1 {
            want.push("matmul_nt_add_slices");
            scratch.push(s as usize * m * n);
        }
        assert_eq!(names, want, "{d:?} in slices of {len}");
        assert_eq!(plan.scratch, scratch, "{d:?} in slices of {len}");
        let at = plan.launches.iter().position(|l| l.kernel.name == product).unwrap();
        assert_eq!(plan.launches[at].grid.y, s, "{d:?}");
        let inputs = NT.generate(&d, 800 + i as u64);
        let out = run_nt(&plan, &d, &inputs);
        let unwritten = out.iter().filter(|x| x.to_bits() == OUTPUT_POISON).count();
        assert_eq!(unwritten, 0, "{d:?} in slices of {len}: {unwritten} elements left as poison");
        check_plan(&NT, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{d:?} in slices of {len}: {e}"));
    }
}

/// Each partial is matmul_nt mage-002's product over the slice, which is
/// mage-009's on B transposed back, and the totals add the partials in
/// mage-011's order: `matmul_nt` mage-003 is matmul mage-011 on B
/// transposed back, to the bit, at every tile height and slice length,
/// and with the rule's own choice where it splits and where it does not.
#[test]
fn nt_mage_003_is_mage_011_on_b_transposed_back_to_the_bit() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().chain(NT_CASES).enumerate() {
        let inputs = NT.generate(&d, 850 + i as u64);
        let out = run_nt(&nt::mage_003::plan_with(&d, rows, len), &d, &inputs);
        let want = run_matmul(&mage_011::plan_with(&d, rows, len), &d, &nt_as_matmul(&d, &inputs));
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} at {rows} rows in slices of {len}: {differ} of {} elements differ from mage-011's", out.len());
    }
    for d in [[33, 70, 301], [17, 19, 23], [64, 128, 1024], [130, 36, 700], [1, 1, 1]] {
        assert_eq!(nt::mage_003::split(&d), mage_011::split(&d), "{d:?}");
        let inputs = NT.generate(&d, 851);
        let out = run_nt(&(nt::mage_003::STAGE.plan)(&d), &d, &inputs);
        let want = run_matmul(&(mage_011::STAGE.plan)(&d), &d, &nt_as_matmul(&d, &inputs));
        assert_eq!(bits_differing(&out, &want), 0, "{d:?}");
    }
}

/// Each of mage-003's partials is `matmul_nt` mage-002's product over the
/// slice alone (A's and B's columns `k0..k0 + len`, at the same tile rows:
/// the padding's zeros add exactly nothing, and mage-002's scalar entries
/// zero-fill the same terms), and the totals add them as `total_groups`
/// says. The split output is that sum, to the bit, and the same bits on a
/// second run.
#[test]
fn nt_mage_003_is_mage_002s_slices_added_in_order_to_the_bit() {
    for (i, (d, rows, len)) in MATMUL_CASES.into_iter().chain(NT_CASES).enumerate().filter(|(i, _)| [1, 3, 5, 8, 10, 14].contains(i)) {
        let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
        let inputs = NT.generate(&d, 870 + i as u64);
        let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
        let s = d[2].next_multiple_of(4).div_ceil(len) as usize;
        let columns = |x: &[f32], rows: usize, k0: usize, k1: usize| -> Vec<f32> {
            (0..rows).flat_map(|r| x[r * k + k0..r * k + k1].to_vec()).collect()
        };
        let partials: Vec<Vec<f32>> = (0..s)
            .map(|j| {
                let (k0, k1) = (j * len as usize, ((j + 1) * len as usize).min(k));
                let sd = [d[0], d[1], (k1 - k0) as u32];
                let part = vec![HostBuf::F32(columns(a, m, k0, k1)), HostBuf::F32(columns(b, n, k0, k1))];
                run_nt(&nt::mage_002::plan_with_rows(&sd, rows), &sd, &part)
            })
            .collect();
        let want = added_in_order(&partials, m * n);
        let plan = nt::mage_003::plan_with(&d, rows, len);
        let out = run_nt(&plan, &d, &inputs);
        let differ = bits_differing(&out, &want);
        assert_eq!(differ, 0, "{d:?} in slices of {len}: {differ} of {} elements differ from mage-002's slices' sum", out.len());
        assert_eq!(bits_differing(&out, &run_nt(&plan, &d, &inputs)), 0, "{d:?}: a second run differs");
    }
}

/// One slice (k no longer than the slice, or the rule's choice) is
/// `matmul_nt` mage-002's product at the same tile rows: the same bits,
/// the product straight into C (after A's and B's padding where `k` is not
/// a multiple of 4; C is never padded).
#[test]
fn nt_mage_003_with_one_slice_is_mage_002_to_the_bit() {
    for rows in [64, 128] {
        for d in [[17, 20, 100], [64, 128, 96], [130, 260, 200], [65, 66, 255], [37, 29, 33], [1, 1, 1], [129, 68, 7]] {
            let d: [u32; 3] = d;
            // A slice as long as k4, and one longer than it.
            for len in [d[2].next_multiple_of(4), d[2].next_multiple_of(64) + 64] {
                let plan = nt::mage_003::plan_with(&d, rows, len);
                assert_eq!(plan.launches.len(), if d[2].is_multiple_of(4) { 1 } else { 3 }, "{d:?}");
                let last = plan.launches.last().unwrap();
                assert_eq!((last.kernel.name, last.grid.y), (format!("matmul_nt_3xtf32_splitk_m{rows}").as_str(), 1), "{d:?}");
                assert_eq!(last.args[2], mage_common::op::Arg::Output(0), "{d:?}");
                let inputs = NT.generate(&d, 880);
                let want = run_nt(&nt::mage_002::plan_with_rows(&d, rows), &d, &inputs);
                assert_eq!(bits_differing(&run_nt(&plan, &d, &inputs), &want), 0, "{d:?} at {rows} rows, slices of {len}");
            }
        }
    }
    for d in [[1024, 1024, 1024], [4096, 3072, 768], [300, 257, 64]] {
        assert_eq!(nt::mage_003::slices(&d), 1, "{d:?}");
    }
    let d = [300, 257, 64];
    let inputs = NT.generate(&d, 881);
    let want = run_nt(&(nt::mage_002::STAGE.plan)(&d), &d, &inputs);
    assert_eq!(bits_differing(&run_nt(&(nt::mage_003::STAGE.plan)(&d), &d, &inputs), &want), 0);
}

/// mage-003's rule is mage-011's: 256³ in 4 slices of 64 and 512³ in 4
/// of 128 at 64 rows, 1000x1037x999 in 3 of 384 at 128 rows, one slice at
/// 1024³ and at (4096, 3072, 768), 2 slices of 1536 at 128 rows at (4096,
/// 768, 3072); the plan's scratch (A's and B's padding first where `k`
/// needs it, the `m·n` partials last), grids and shared bytes.
#[test]
fn the_nt_mage_003_slice_rule_from_the_dims() {
    for (d, want_rows, want_slices, want_len) in [
        ([256, 256, 256], 64, 4, 64),
        ([512, 512, 512], 64, 4, 128),
        ([1000, 1037, 999], 128, 3, 384),
        ([1024, 1024, 1024], 64, 1, 1024),
        ([4096, 768, 3072], 128, 2, 1536),
        ([4096, 3072, 768], 128, 1, 768),
        ([33, 70, 301], 64, 5, 64),
    ] {
        let (rows, len) = nt::mage_003::split(&d);
        assert_eq!((rows, nt::mage_003::slices(&d), len), (want_rows, want_slices, want_len), "{d:?}");
    }
    for (m, n) in [(1, 1), (64, 67), (100, 768), (768, 3072), (3072, 770), (4096, 768)] {
        for k in [1u32, 63, 64, 65, 255, 999, 3072, 4096, 1 << 16] {
            let d = [m, n, k];
            let k4 = k.next_multiple_of(4);
            assert_eq!(nt::mage_003::split(&d), mage_011::split(&d), "{d:?}");
            let s = nt::mage_003::slices(&d);
            let plan = (nt::mage_003::STAGE.plan)(&d);
            let product = plan.launches.iter().find(|l| l.kernel.name.starts_with("matmul_nt_3xtf32_splitk_m")).unwrap();
            assert_eq!(
                (product.grid.x, product.grid.y, product.grid.z),
                (m.div_ceil(nt::mage_003::split(&d).0) * n.div_ceil(128), s, 1),
                "{d:?}"
            );
            assert!(plan.launches.iter().all(|l| l.shared_bytes <= 227 * 1024));
            if k % 4 != 0 {
                assert_eq!(plan.scratch[..2], [m as usize * k4 as usize, n as usize * k4 as usize], "{d:?}");
            }
            if s > 1 {
                assert_eq!(plan.launches.last().unwrap().kernel.name, "matmul_nt_add_slices");
                assert_eq!(plan.scratch.last(), Some(&(s as usize * m as usize * n as usize)), "{d:?}");
            } else {
                assert_eq!(plan.launches.last().unwrap().kernel.name, product.kernel.name, "{d:?}");
            }
        }
    }
}

/// Random shapes, tile heights and slice lengths (tails of 4, 32, 64 and
/// 128 in m, n and k, k shorter or longer than a slice): mage-003 within
/// the op's tolerance of the f64 reference, and matmul mage-011's bits on
/// B transposed back.
mod nt_mage_003_property {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError};

    fn dim() -> impl Strategy<Value = u32> {
        prop_oneof![prop::sample::select(vec![1u32, 3, 4, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129]), 1u32..=140]
    }

    proptest! {
        #![proptest_config(Config { cases: 16, ..Config::default() })]

        #[test]
        fn nt_mage_003_matches_the_reference_and_mage_011(
            m in dim(), n in dim(), k in 1u32..=400, rows in prop::sample::select(vec![64u32, 128]),
            len in prop::sample::select(vec![64u32, 128, 192]), seed in any::<u64>(),
        ) {
            let d = [m, n, k];
            let plan = nt::mage_003::plan_with(&d, rows, len);
            let inputs = NT.generate(&d, seed);
            check_plan(&NT, &plan, &d, &inputs).map_err(TestCaseError::fail)?;
            let out = run_nt(&plan, &d, &inputs);
            let want = run_matmul(&mage_011::plan_with(&d, rows, len), &d, &nt_as_matmul(&d, &inputs));
            prop_assert_eq!(bits_differing(&out, &want), 0, "{:?} at {} rows in slices of {}", d, rows, len);
        }
    }
}
