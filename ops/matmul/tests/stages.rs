//! Every matmul stage, and `current`, on the emulator against the f64
//! reference under the stage's tolerance (the op's `|out - ref| <= 1e-6 +
//! γ_(k+1) S(k)`, see `mage_matmul::tolerance`; the TF32 stages' own, see
//! `mage_matmul::tf32_tolerance`), on shapes with every kind of tile tail.
//! The TF32 stages are also held to the exact products of their
//! TF32-rounded inputs, with only the summation's error allowed.

use mage_common::device::wgmma::tf32_rna;
use mage_common::numeric::{bits_differing, compare};
use mage_common::op::{HostBuf, Op, Stage, check_current, check_stage, emulate};
use mage_matmul::{
    FMA_STAGES, OP, STAGES, current, mage_001, mage_006, mage_007, mage_008, mage_009, mage_010, mage_012, tf32_sum_tolerance,
    tf32_tolerance, tolerance,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

fn inputs(d: &[u32], seed: u64) -> Vec<HostBuf> {
    OP.generate(d, seed)
}

/// Whether the registry puts `stage` outside the FP32 contract: its
/// products are TF32's.
fn is_tf32(stage: &Stage) -> bool {
    OP.outside_contract(stage.name).is_some()
}

/// The inputs rounded to TF32 as the TF32 stages round them.
fn tf32_rounded(inputs: &[HostBuf]) -> Vec<HostBuf> {
    inputs.iter().map(|b| HostBuf::F32(b.as_f32().iter().map(|x| tf32_rna(*x)).collect())).collect()
}

/// Runs `stage` on the emulator and compares it with the reference under
/// its tolerance; a TF32 stage also with the exact sums of its rounded
/// products under the summation's tolerance alone.
fn check_inputs(stage: &Stage, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
    let out = emulate(&OP, stage, dims, inputs)?;
    let mut checks = vec![("the reference", (OP.reference)(dims, inputs), OP.tolerance_for(stage.name, dims, inputs))];
    if is_tf32(stage) {
        let rounded = (OP.reference)(dims, &tf32_rounded(inputs));
        checks.push(("the TF32-rounded products", rounded, tf32_sum_tolerance(dims, inputs)));
    }
    for (against, reference, tol) in checks {
        let cmp = compare(&out, &reference, tol);
        if !cmp.passed() {
            return Err(format!("{} at {} against {against}: {}", stage.name, Op::dims_label(dims), OP.summarize(&cmp, dims)));
        }
    }
    Ok(())
}

/// Checks `stage` at `d`. Every stage supports every shape, so one that
/// refuses a shape fails here instead of passing unchecked.
fn check(stage: &Stage, d: [u32; 3], seed: u64) -> Result<(), String> {
    if !(stage.supports)(&d) {
        return Err(format!("{} does not support {}", stage.name, Op::dims_label(&d)));
    }
    check_inputs(stage, &d, &inputs(&d, seed))
}

/// Sizes with and without tails of every tile (4, 16, 32, 64), and 1.
fn dim() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(vec![1u32, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97, 128, 130, 193]), 1u32..=200]
}

proptest! {
    #![proptest_config(Config { cases: 40, ..Config::default() })]

    #[test]
    fn every_stage_matches_the_reference(m in dim(), n in dim(), k in dim(), seed in any::<u64>()) {
        for stage in STAGES {
            check(stage, [m, n, k], seed).map_err(TestCaseError::fail)?;
        }
        check_current(&OP, &[m, n, k], &inputs(&[m, n, k], seed)).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn named_shapes_on_every_stage() {
    let shapes = [
        [17, 19, 23],  // odd everywhere: scalar entries, tails in m, n and k
        [1, 1, 1],     // one element
        [70, 66, 5],   // K shorter than any tile
        [65, 68, 100], // K not a multiple of 16, 32 or 64; m and n tails; v4 for mage-006 only (k % 4 != 0)
        [129, 65, 64], // M and N tails with whole K tiles, n odd
        [64, 64, 64],  // exact tiles, v4 entries
        [96, 132, 36], // tails with rows a multiple of 4: v4 entries with partial tiles
        [1, 200, 3],   // a row vector
        [200, 1, 7],   // a column
        [3, 2, 250],   // long K: several pipeline steps of mage-006
    ];
    for stage in STAGES {
        for (i, d) in shapes.into_iter().enumerate() {
            check(stage, d, 1000 + i as u64).unwrap();
        }
    }
}

/// Every FMA stage sums each output in the same order with `fma`, and a
/// zero-filled term adds nothing, so all of them give the same bits: a
/// check with no tolerance at all.
#[test]
fn every_fma_stage_gives_the_same_bits() {
    for d in [[17, 19, 23], [33, 70, 65], [64, 128, 96], [5, 3, 129]] {
        let inputs = inputs(&d, 7);
        let first = emulate(&OP, FMA_STAGES[0], &d, &inputs).unwrap();
        for stage in &FMA_STAGES[1..] {
            let out = emulate(&OP, stage, &d, &inputs).unwrap();
            let differ = bits_differing(&first, &out);
            assert_eq!(differ, 0, "{} differs from {} in {differ} elements at {d:?}", stage.name, STAGES[0].name);
        }
    }
}

/// The two defects of the seeds' first pipeline (see `mage_006`), and the
/// shapes that catch them. mage-006 takes K in tiles of 32:
/// * k = 32, 17: one tile (odd). Everything happens in the final step; the
///   defect that read buffer `tiles % 2` = 1 there reads a buffer nothing
///   wrote (NaN poison). The offset-units defect goes unseen: buffer 1 is
///   never used.
/// * k = 64, 50: two tiles (even). Tile 1 goes to buffer 1 while tile 0 is
///   in buffer 0: a second buffer at the wrong offset overlaps the first
///   (a shared race, or wrong sums) or overruns the allocation; and the
///   final step reading `tiles % 2` = 0 multiplies tile 0 twice.
/// * k = 96, 70: three tiles (odd), the final tile back in buffer 0 after a
///   full round: `tiles % 2` = 1 multiplies tile 1 twice.
/// * k = 128: four tiles (even), two full rounds.
///
/// Both entries run: `_v4` (n a multiple of 4) and `_scalar`.
#[test]
fn mage_006_pipeline_with_odd_and_even_tile_counts() {
    for k in [17, 32, 50, 64, 70, 96, 128] {
        for (m, n) in [(64, 64), (37, 29)] {
            let d = [m, n, k];
            assert_eq!(mage_006::vector_entry(&d), n % 4 == 0);
            check_stage(&OP, &mage_006::STAGE, &d, &inputs(&d, k as u64)).unwrap();
        }
    }
}

/// mage-007's pipeline (K in tiles of 16, two buffers, one barrier per K
/// step: the copies of tile `t + 1` are issued after the barrier of step
/// `t`) and its 128x128 block tiles, on both entries:
/// * k = 1, 16: one K tile, read from buffer 0 in the only step;
/// * k = 17, 32: two, the second in buffer 1;
/// * k = 40, 48: three, the third back in buffer 0, refilled after the
///   barrier that ends the reads of tile 0 (issued before it, the emulator
///   reports a shared-memory race);
/// * k = 64, 100: four and seven, several full rounds.
///
/// Each with one block tile, exact (128x128) or with tails in m and n, and with
/// 2x3 and 3x2 block tiles whose edges fall inside the warp tiles.
#[test]
fn mage_007_pipeline_and_block_tiles() {
    for k in [1, 16, 17, 32, 40, 48, 64, 100] {
        for (m, n) in [(128, 128), (37, 29), (130, 260), (257, 131)] {
            let d = [m, n, k];
            assert_eq!(mage_007::plan(&d).launches[0].kernel.name.ends_with("_v4"), n % 4 == 0);
            check_stage(&OP, &mage_007::STAGE, &d, &inputs(&d, k as u64 + 100)).unwrap();
        }
    }
}

/// mage-008's pipeline (K in tiles of 32, two buffers: the multiplies of
/// tile `t` run while tile `t + 1` is stored into the other buffer, one
/// barrier per K step) and its 64x64 block tiles, on both entries:
/// * k = 1, 8, 32: one K tile, with one, one and four multiplies that
///   count (the zero-filled ones add nothing);
/// * k = 33, 64: two, the second in buffer 1;
/// * k = 65, 96: three, the third back in buffer 0, stored while tile 1's
///   multiplies run (stored before the barrier that ends tile 0's, the
///   emulator reports a race);
/// * k = 130: five, several full rounds.
///
/// Each with one block tile, exact (64x64) or with tails in m and n, and
/// with 2x3 and 3x2 block tiles whose edges fall inside the accumulator
/// fragments' column groups.
#[test]
fn mage_008_pipeline_and_block_tiles() {
    for k in [1, 8, 32, 33, 64, 65, 96, 130] {
        for (m, n) in [(64, 64), (37, 29), (65, 130), (129, 68)] {
            let d = [m, n, k];
            assert_eq!(mage_008::plan(&d).launches[0].kernel.name.ends_with("_v4"), n % 4 == 0 && k % 4 == 0);
            check_inputs(&mage_008::STAGE, &d, &inputs(&d, k as u64 + 200)).unwrap();
        }
    }
}

/// mage-012's block tiles (32 rows x 128 columns, a 4x4 tile per thread)
/// and its `k` loop, on both entries: k = 1 (its shape), 2, 3, 5, 31, 63
/// and 64; one block tile exact, tails inside a thread's rows and columns
/// (37x29: 1 and 1 past the last whole quad), several block tiles with
/// edges inside a warp's rows and a lane's columns, a row, a column. The
/// output is mage-001's to the bit (the same fma chain) and within the
/// tolerance.
#[test]
fn mage_012_block_tiles_and_k() {
    for k in [1, 2, 3, 5, 31, 63, 64] {
        for (m, n) in [(32, 128), (37, 29), (65, 260), (33, 131), (1, 200), (200, 1)] {
            let d = [m, n, k];
            let plan = mage_012::plan(&d);
            assert_eq!(plan.launches[0].kernel.name.ends_with("_v4"), n % 4 == 0, "{d:?}");
            assert_eq!(plan.launches[0].grid.x, m.div_ceil(32) * n.div_ceil(128), "{d:?}");
            let inputs = inputs(&d, k as u64 + 800);
            let out = emulate(&OP, &mage_012::STAGE, &d, &inputs).unwrap_or_else(|e| panic!("{d:?}: {e}"));
            let want = emulate(&OP, &mage_001::STAGE, &d, &inputs).unwrap();
            let differ = bits_differing(&out, &want);
            assert_eq!(differ, 0, "{d:?}: {differ} of {} elements differ from mage-001", out.len());
            check_inputs(&mage_012::STAGE, &d, &inputs).unwrap();
        }
    }
}

/// With integer inputs in -8..=8 every product and partial sum is exact in
/// FP32 and every input exact in TF32: every stage, TF32 included, gives
/// the reference's value with no error at all (what `./mage run ... --gen
/// integers` checks on the GPU).
#[test]
fn every_stage_is_exact_on_integers() {
    let integers = OP.generator(Some("integers")).unwrap();
    for d in [[64, 64, 8], [70, 66, 300], [17, 19, 23], [130, 129, 97]] {
        let inputs = (integers.generate)(&d, 11);
        assert!(inputs.iter().all(|b| b.as_f32().iter().all(|x| x.fract() == 0.0 && x.abs() <= 8.0)));
        let reference = (OP.reference)(&d, &inputs);
        for stage in STAGES {
            let out = emulate(&OP, stage, &d, &inputs).unwrap();
            let cmp = compare(&out, &reference, mage_common::numeric::Tolerance::new(0.0, 0.0));
            assert!(cmp.passed(), "{} at {d:?}: {}", stage.name, OP.summarize(&cmp, &d));
        }
    }
}

/// The registry's TF32 stage is the one outside the FP32 contract,
/// and the TF32 stage really rounds its inputs: on normal inputs it fails
/// the op's FP32 tolerance (so it needs its own), and passes its own.
#[test]
fn the_tf32_stages_are_outside_the_fp32_contract() {
    let tf32: Vec<_> = STAGES.iter().filter(|s| is_tf32(s)).map(|s| s.name).collect();
    assert_eq!(tf32, ["mage-008"]);
    assert!(FMA_STAGES.iter().all(|s| !is_tf32(s)) && !is_tf32(&mage_009::STAGE));
    let d = [64, 64, 64];
    let inputs = inputs(&d, 9);
    let reference = (OP.reference)(&d, &inputs);
    let out = emulate(&OP, &mage_008::STAGE, &d, &inputs).unwrap();
    let fp32 = compare(&out, &reference, tolerance(&d, &inputs));
    assert!(fp32.failures * 10 > fp32.elements, "only {} of {} outside FP32's tolerance", fp32.failures, fp32.elements);
    assert!(compare(&out, &reference, tf32_tolerance(&d, &inputs)).passed());
}

/// A host model of a stage: each output an FP32 fma chain over `p` in
/// order, of the inputs passed through `round`, term `p` taking B's row
/// `row(p)` (`p` itself, or a bug model). With TF32 rounding this is a
/// TF32 stage too: a product of two TF32 values is exact in FP32.
fn fma_chain(d: [u32; 3], inputs: &[HostBuf], round: fn(f32) -> f32, row: impl Fn(usize) -> usize) -> Vec<f32> {
    let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
    let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for p in 0..k {
                acc = round(a[i * k + p]).mul_add(round(b[row(p).min(k - 1) * n + j]), acc);
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// The tolerance is sound for what the kernels do, and tight enough to
/// catch an indexing bug: host models of an FP32 fma chain and of typical
/// bugs, compared with the f64 reference.
#[test]
fn the_tolerance_passes_fma_sums_and_fails_indexing_bugs() {
    // A bug model: the B tile of K tile `t` (of size `tile`) read one row late.
    let fma_chain = |d: [u32; 3], inputs: &[HostBuf], shift_tile: Option<(usize, usize)>| {
        fma_chain(
            d,
            inputs,
            |x| x,
            |p| match shift_tile {
                Some((tile, t)) if p / tile == t => p + 1,
                _ => p,
            },
        )
    };
    // Long contractions: the worst-case bound holds with room to spare.
    for d in [[4, 4, 16384], [8, 8, 4096], [32, 32, 200]] {
        let inputs = inputs(&d, 3);
        let reference = (OP.reference)(&d, &inputs);
        let cmp = compare(&fma_chain(d, &inputs, None), &reference, (OP.tolerance)(&d, &inputs));
        assert!(cmp.passed(), "{d:?}: {}", OP.summarize(&cmp, &d));
        assert!(cmp.worst_ratio < 0.1, "{d:?}: the largest error is {:.3} of its allowance", cmp.worst_ratio);
    }
    // A wrong tile offset for one K tile, in the first and in the last tile.
    for (d, tile, t) in [([64, 64, 200], 32, 0), ([64, 64, 200], 32, 6), ([17, 19, 23], 16, 1)] {
        let inputs = inputs(&d, 4);
        let reference = (OP.reference)(&d, &inputs);
        let cmp = compare(&fma_chain(d, &inputs, Some((tile, t))), &reference, (OP.tolerance)(&d, &inputs));
        assert!(cmp.failures * 2 > cmp.elements, "{d:?} tile {t}: only {} of {} elements fail", cmp.failures, cmp.elements);
    }
    // One term dropped: the last element of K.
    let d = [32, 32, 200];
    let inputs = inputs(&d, 5);
    let reference = (OP.reference)(&d, &inputs);
    let mut dropped = inputs.clone();
    if let HostBuf::F32(b) = &mut dropped[1] {
        b[199 * 32..].fill(0.0);
    }
    let cmp = compare(&fma_chain(d, &dropped, None), &reference, (OP.tolerance)(&d, &inputs));
    assert!(cmp.failures * 2 > cmp.elements, "a dropped term fails only {} of {} elements", cmp.failures, cmp.elements);
}

/// The TF32 tolerances are sound for TF32 products summed in FP32, and the
/// check against the rounded products still catches an indexing bug that
/// the looser check against the reference may let through at large k.
#[test]
fn the_tf32_tolerances_pass_tf32_sums_and_fail_indexing_bugs() {
    // Products of TF32-rounded inputs summed in FP32, B's row `shift` read one row late.
    let tf32_chain =
        |d: [u32; 3], inputs: &[HostBuf], shift: Option<usize>| fma_chain(d, inputs, tf32_rna, |p| p + (shift == Some(p)) as usize);
    for d in [[4, 4, 16384], [8, 8, 4096], [32, 32, 200], [16, 16, 3]] {
        let inputs = inputs(&d, 3);
        let out = tf32_chain(d, &inputs, None);
        assert!(compare(&out, &(OP.reference)(&d, &inputs), tf32_tolerance(&d, &inputs)).passed(), "{d:?}");
        let rounded = (OP.reference)(&d, &tf32_rounded(&inputs));
        assert!(compare(&out, &rounded, tf32_sum_tolerance(&d, &inputs)).passed(), "{d:?}");
    }
    // One term from the wrong row of B.
    let d = [32, 32, 200];
    let inputs = inputs(&d, 5);
    let rounded = (OP.reference)(&d, &tf32_rounded(&inputs));
    let cmp = compare(&tf32_chain(d, &inputs, Some(100)), &rounded, tf32_sum_tolerance(&d, &inputs));
    assert!(cmp.failures * 2 > cmp.elements, "a misplaced term fails only {} of {} elements", cmp.failures, cmp.elements);
}

#[test]
fn current_dispatches_by_shape() {
    for d in [[1024, 1024, 1], [2048, 2048, 1], [4096, 4096, 1]] {
        assert_eq!(current::choose(&d).name, "mage-012", "{d:?}");
    }
    for d in [[1024, 1024, 2], [512, 512, 63], [384, 384, 7]] {
        assert_eq!(current::choose(&d).name, "mage-006", "{d:?}");
    }
    for d in [[4096, 4096, 63], [2048, 2048, 2]] {
        assert_eq!(current::choose(&d).name, "mage-007", "{d:?}");
    }
    // mage-011's split in one launch where its clusters fit one wave.
    for d in [[1000, 1037, 999], [256, 256, 256], [768, 768, 768], [4096, 768, 3072]] {
        assert_eq!(current::choose(&d).name, "mage-014", "{d:?}");
    }
    // 32 clusters of 4 (512³); splits past mage-014's 8 slices (128x128x4096).
    for d in [[512, 512, 512], [128, 128, 4096]] {
        assert_eq!(current::choose(&d).name, "mage-011", "{d:?}");
    }
    for d in [[2047, 2047, 2047], [1000, 1000, 999], [1023, 1023, 1023], [384, 385, 64]] {
        assert_eq!(current::choose(&d).name, "mage-010", "{d:?}");
    }
    for d in [[2048, 2048, 2048], [4096, 4096, 4096], [4096, 4096, 1024], [1024, 1024, 1024], [512, 256, 64]] {
        assert_eq!(current::choose(&d).name, "mage-009", "{d:?}");
    }
    for d in [[256, 256, 64], [128, 128, 64], [1, 1, 1], [17, 19, 23], [255, 255, 1]] {
        assert_eq!(current::choose(&d).name, "mage-001", "{d:?}");
    }
    for m in [1, 63, 64, 500, 1024, 4096] {
        for n in [1, 64, 1000, 4096] {
            let d = [m, n, 777];
            assert!(!is_tf32(current::choose(&d)), "current picks a TF32 stage at {d:?}");
        }
    }
    let entry = |d: [u32; 3]| (current::choose(&d).plan)(&d).launches[0].kernel.name;
    assert_eq!(entry([1024, 1024, 1024]), "matmul_3xtf32_m64_v4");
    assert_eq!(entry([1024, 1020, 1]), "matmul_small_k_v4");
    assert_eq!(entry([1024, 1021, 1]), "matmul_small_k_scalar");
    assert_eq!(entry([1024, 1020, 63]), "matmul_cp_async_v4");
    assert_eq!(entry([1024, 1021, 63]), "matmul_cp_async_scalar");
    assert_eq!(entry([1000, 1036, 9]), "matmul_warptile8x8_v4");
    assert_eq!(entry([1000, 1037, 9]), "matmul_warptile8x8_scalar");
}

#[test]
fn every_block_fits_in_the_shared_memory_it_may_ask_for() {
    for stage in STAGES {
        for d in OP.sweep.iter().map(|w| w.dims).chain([&[1u32, 1, 1][..], &[17, 19, 23]]) {
            for l in (stage.plan)(d).launches {
                // Up to mage-008, the 48 KiB every launch gets; the 3xTF32 stages opt
                // in to more (the runtime raises the kernel's limit), within
                // the 227 KiB an H200 block may have.
                let limit = if ["mage-009", "mage-010", "mage-011", "mage-014"].contains(&stage.name) { 227 * 1024 } else { 48 * 1024 };
                assert!(l.shared_bytes <= limit, "{} asks for {} bytes at {d:?}", stage.name, l.shared_bytes);
                // One grid dimension, but mage-011's and mage-014's products' K slices.
                let split = ["matmul_3xtf32_splitk", "matmul_3xtf32_cluster"].iter().any(|p| l.kernel.name.starts_with(p));
                let slices = if split { l.grid.y } else { 1 };
                assert_eq!((l.grid.y, l.grid.z), (slices, 1), "{} at {d:?}", l.kernel.name);
                // Clusters only along those slices, at most the portable 8 blocks.
                let cluster = if l.kernel.name.starts_with("matmul_3xtf32_cluster") { slices } else { 1 };
                assert_eq!(l.cluster, mage_common::kernel::Dim3::new(1, cluster, 1), "{} at {d:?}", l.kernel.name);
                assert!(cluster <= 8, "{} at {d:?}: clusters of {cluster}", l.kernel.name);
            }
        }
    }
}

/// A host model of mage-009's arithmetic, to the bit (the emulator's
/// model of the tensor cores: each instruction sums the accumulator and
/// its 8 exact products in f64, in K order, and rounds once toward zero): per K tile
/// of 32, a partial sum from zero, per step of 8 K `part += Bᵀ_lo · A_hi`,
/// `part += Bᵀ_hi · A_lo`, `part += Bᵀ_hi · A_hi`; then `acc += part` in
/// FP32. `A_hi = trunc(a)` (the stored value, read as TF32), `A_lo =
/// tf32(a - trunc(a))`, `B_hi = tf32(b)`, `B_lo = tf32(b - tf32(b))`;
/// terms past `k` are zero.
fn three_tf32_model(d: [u32; 3], inputs: &[HostBuf]) -> Vec<f32> {
    use mage_common::device::wgmma::{round_toward_zero, tf32_trunc};
    let (m, n, k) = (d[0] as usize, d[1] as usize, d[2] as usize);
    let (a, b) = (inputs[0].as_f32(), inputs[1].as_f32());
    let split_a = |x: f32| (tf32_trunc(x) as f64, tf32_rna(x - tf32_trunc(x)) as f64);
    let split_b = |x: f32| (tf32_rna(x) as f64, tf32_rna(x - tf32_rna(x)) as f64);
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for t0 in (0..k).step_by(32) {
                let mut part = 0f32;
                for k0 in (t0..t0 + 32).step_by(8) {
                    let term = |p: usize| if p < k { (split_a(a[i * k + p]), split_b(b[p * n + j])) } else { ((0.0, 0.0), (0.0, 0.0)) };
                    for product in 0..3 {
                        let mut sum = if k0 == t0 && product == 0 { 0.0 } else { part as f64 };
                        for p in k0..k0 + 8 {
                            let ((ah, al), (bh, bl)) = term(p);
                            sum += match product {
                                0 => bl * ah,
                                1 => bh * al,
                                _ => bh * ah,
                            };
                        }
                        part = round_toward_zero(sum);
                    }
                }
                acc += part;
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// mage-009's pipeline (K in tiles of 32, four stages, the copies of tile
/// `t + 2` issued after the barrier of step `t` into the stage of tile
/// `t - 2`, whose multiplies every thread waited for) and its tiles, on
/// all four entries (64 and 128 rows, 16- and 4-byte copies):
/// * k = 1, 8, 32: one K tile (1 and 8: most of it zero-filled);
/// * k = 33, 64: two; 65, 96: three; 97, 128: four (every stage once);
/// * k = 129, 160: five, the fifth back in the first stage; 200: seven;
///
/// with one block tile, exact or with tails in m and n, and with several
/// whose edges fall inside the warpgroups' column slices and the
/// accumulators' column pairs. The output must equal the host model of its
/// arithmetic bit for bit, and lie within the op's tolerance.
#[test]
fn mage_009_pipeline_and_block_tiles() {
    for rows in [64, 128] {
        for k in [1, 8, 32, 33, 64, 65, 97, 129, 200] {
            for (m, n) in [(rows, 128), (37, 29), (130, 260), (65, 131)] {
                let d = [m, n, k];
                let plan = mage_009::plan_with_rows(&d, rows);
                let name = plan.launches[0].kernel.name;
                assert!(name.contains(&format!("_m{rows}_")) && name.ends_with("_v4") == (n % 4 == 0 && k % 4 == 0), "{name} at {d:?}");
                let inputs = inputs(&d, k as u64 + 300);
                let out = mage_common::op::emulate_plan(&OP, &plan, &d, &inputs).unwrap_or_else(|e| panic!("{name} at {d:?}: {e}"));
                let model = three_tf32_model(d, &inputs);
                let differ = bits_differing(&out, &model);
                assert_eq!(differ, 0, "{name} at {d:?}: {differ} of {} elements differ from the model", out.len());
                let cmp = compare(&out, &(OP.reference)(&d, &inputs), tolerance(&d, &inputs));
                assert!(cmp.passed(), "{name} at {d:?}: {}", OP.summarize(&cmp, &d));
            }
        }
    }
}

/// mage-009 on the emulator against the op's FP32 tolerance across k = 1
/// .. 8192 (64 x 128 outputs each, normal inputs): its largest error stays
/// below a quarter of the tolerance. Beside it, the error of the FP32 fma
/// chain every FMA stage computes, for the comparison the module doc of
/// `mage_009` draws (printed with `--nocapture`): at small k the split's
/// per-product error (up to 14 units of 2^-24 of each product, typically
/// a few) exceeds the single rounding FP32 makes per term; from a few
/// hundred terms on, the 3 roundings per 8 terms of the tensor cores'
/// sums beat FP32's one per term.
#[test]
fn mage_009_stays_inside_the_fp32_tolerance_across_k() {
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}",
        "k", "tolerance", "max 3xTF32", "max FP32", "rel 3xTF32", "rel FP32", "ratio"
    );
    for k in [1u32, 2, 3, 5, 8, 13, 32, 64, 100, 256, 1000, 2048, 4096, 8192] {
        let d = [64, 128, k];
        let inputs = inputs(&d, k as u64 + 400);
        let reference = (OP.reference)(&d, &inputs);
        let tol = tolerance(&d, &inputs);
        let out = emulate(&OP, &mage_009::STAGE, &d, &inputs).unwrap();
        let three = compare(&out, &reference, tol);
        let fp32 = compare(&fma_chain(d, &inputs, |x| x, |p| p), &reference, tol);
        println!(
            "{k:>5} {:>10.3e} {:>10.3e} {:>10.3e} {:>10.3e} {:>10.3e} {:>6.3}",
            tol.of_magnitude, three.max_abs_err, fp32.max_abs_err, three.rel_l2_err, fp32.rel_l2_err, three.worst_ratio
        );
        assert!(three.passed() && three.worst_ratio <= 0.25, "k = {k}: {}", OP.summarize(&three, &d));
    }
}

/// mage-009 at transformer hidden sizes (k = 768, 1024, 3072, 4096, both
/// entries) inside a quarter of the op's FP32 tolerance, and no less
/// accurate than the FP32 fma chain (relative L2 error) from k = 768 on.
#[test]
fn mage_009_at_hidden_sizes() {
    for d in [[96, 768, 768], [128, 256, 1024], [64, 130, 3072], [64, 256, 4096]] {
        let inputs = inputs(&d, d[2] as u64 + 500);
        let reference = (OP.reference)(&d, &inputs);
        let tol = tolerance(&d, &inputs);
        let out = emulate(&OP, &mage_009::STAGE, &d, &inputs).unwrap();
        let three = compare(&out, &reference, tol);
        let fp32 = compare(&fma_chain(d, &inputs, |x| x, |p| p), &reference, tol);
        assert!(three.passed() && three.worst_ratio <= 0.25, "{d:?}: {}", OP.summarize(&three, &d));
        assert!(
            three.rel_l2_err <= fp32.rel_l2_err,
            "{d:?}: relative L2 error {:.3e} against FP32's {:.3e}",
            three.rel_l2_err,
            fp32.rel_l2_err
        );
    }
}

/// mage-010 pads rows that are not a multiple of 4 floats and runs
/// mage-009's product on the padded matrices: the zeros add exact zero
/// products, so its output is mage-009's arithmetic to the bit (the host
/// model of it), at aligned shapes (one launch) and misaligned ones (the
/// product between three copies), on both tile heights.
#[test]
fn mage_010_is_mage_009_padded_to_the_bit() {
    for d in [[64, 128, 32], [37, 29, 33], [130, 131, 97], [65, 260, 200], [1, 1, 1], [300, 257, 64], [64, 128, 33]] {
        let plan = (mage_010::STAGE.plan)(&d);
        let aligned = d[1] % 4 == 0 && d[2] % 4 == 0;
        assert_eq!(plan.launches.len(), if aligned { 1 } else { 4 }, "{d:?}");
        let product = &plan.launches[if aligned { 0 } else { 2 }];
        assert!(product.kernel.name.starts_with("matmul_3xtf32_aligned_m"), "{d:?}: {}", product.kernel.name);
        let inputs = inputs(&d, d[2] as u64 + 700);
        let out = emulate(&OP, &mage_010::STAGE, &d, &inputs).unwrap_or_else(|e| panic!("{d:?}: {e}"));
        let differ = bits_differing(&out, &three_tf32_model(d, &inputs));
        assert_eq!(differ, 0, "{d:?}: {differ} of {} elements differ from mage-009's arithmetic", out.len());
    }
}
