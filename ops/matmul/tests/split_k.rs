//! `matmul_tn` mage-004 (split-K) on the emulator: slices with every kind
//! of tail against the f64 reference, the output every element written
//! over its poison, the same bits as the slices' partials (mage-003's
//! product over each slice alone) added in the kernel's order, the same
//! bits on every run; and its slice rule on the host at the shapes it is
//! for.

use mage_common::numeric::bits_differing;
use mage_common::op::{HostBuf, OUTPUT_POISON, Plan, check_plan, emulate_plan};
use mage_matmul::TN;
use mage_matmul::tn::mage_004::{self, MIN_SLICE_K, SLICE_QUANTUM, estimate_ns, plan_with_slice_k, slice_k, slices, tiles, total_groups};

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
        let groups = total_groups(s as u32) as usize;
        let per = s.div_ceil(groups);
        let want: Vec<f32> = (0..m * n)
            .map(|e| {
                let segment = |g: usize| partials[g * per..((g + 1) * per).min(s)].iter().map(|p| p[e]).reduce(|x, y| x + y).unwrap();
                (0..groups).filter(|g| g * per < s).map(segment).reduce(|x, y| x + y).unwrap()
            })
            .collect();
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
