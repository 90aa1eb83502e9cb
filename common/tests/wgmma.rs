//! The emulator's model of `wgmma.mma_async` (TF32): one warpgroup
//! multiplies a 64 x 8 A (from shared memory or from registers) by an
//! 8 x 8 B from shared memory. The right layout gives the exact TF32
//! products; a wrong descriptor gives wrong sums or an error, a swizzled
//! operand not aligned to its pattern in the shared window is an error,
//! and each missing fence, barrier or wait is an error with a message.

use mage_common::device::wgmma::*;
use mage_common::device::*;
use mage_common::emu::{Region, launch_kernel};
use mage_common::kernel;
use mage_common::kernel::{ArgValue, Dim3, LaunchConfig};
use mage_common::numeric::bits_differing;

/// What the probe kernel does differently from the correct sequence.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
enum Variant {
    Correct,
    /// A stored in 128-byte swizzled rows, with a descriptor that says so.
    Swizzled,
    /// The swizzled store, read with a descriptor that says no swizzle.
    SwizzledReadPlain,
    /// A's leading and stride byte offsets exchanged.
    SwappedStrides,
    /// A's stride byte offset past the allocation.
    WildStride,
    /// Inputs stored as they are, not rounded to TF32.
    Unconverted,
    /// `accumulate` true over accumulators that start at 1.
    Accumulate,
    NoProxyFence,
    NoBarrier,
    NoWgmmaFence,
    /// Thread 5 passes another A descriptor.
    NonUniformDescriptor,
    /// The last warp skips the multiply.
    Divergent,
    /// The first warp issues another shape.
    MixedShapes,
    /// Thread 0 overwrites an operand before waiting.
    OverwriteBeforeWait,
    /// Thread 127 overwrites an operand after every thread waited, with no barrier.
    OverwriteWithoutBarrier,
    NoWait,
    /// The swizzled store and descriptor 128 bytes past a 1024-byte boundary of the window.
    SwizzledUnaligned,
    /// A from each thread's registers, B from shared memory.
    RegisterA,
}

/// A from the first byte whose window address is a multiple of 1024
/// (plain: 2 chunk columns of 64 rows x 16 bytes; swizzled: 64 rows of 128
/// bytes; 128 bytes later in one variant), B 8320 bytes after that
/// boundary: 2 chunk columns of 8 rows x 16 bytes.
const B_AFTER_A: u32 = 8192 + 128;
/// Room for the alignment (at most 1008 bytes), A and B.
const SHARED: u32 = 1024 + B_AFTER_A + 256;

kernel! {
    /// `d` (64 x 8, row-major) = `a` (64 x 8) · `b` (8 x 8), one warpgroup.
    unsafe fn mma_probe(a: *const f32, b: *const f32, d: *mut f32, variant: u32) {
        let t = thread_idx_x();
        let is = |v: Variant| variant == v as u32;
        let swizzled = is(Variant::Swizzled) || is(Variant::SwizzledReadPlain) || is(Variant::SwizzledUnaligned);
        let tf32 = |x: f32| if is(Variant::Unconverted) { x } else { tf32_rna(x) };
        let a_at = align_up_in_window(0, 1024) + if is(Variant::SwizzledUnaligned) { 128 } else { 0 };
        let b_at = align_up_in_window(0, 1024) + B_AFTER_A;
        // The first warpgroup stores the operands; a second one multiplies them too.
        for i in 0..4 * (t < 128) as u32 {
            let e = t + 128 * i;
            let (r, k) = (e / 8, e % 8);
            let at = if swizzled { r * 128 + ((k / 4) ^ (r % 8)) * 16 + k % 4 * 4 } else { k / 4 * 1024 + r * 16 + k % 4 * 4 };
            smem_st(a_at + at, tf32(unsafe { ld_nc(a, e) }));
        }
        if t < 64 {
            let (k, n) = (t / 8, t % 8);
            smem_st(b_at + k / 4 * 128 + n * 16 + k % 4 * 4, tf32(unsafe { ld_nc(b, t) }));
        }
        // A's fragment, for the multiply with A from registers.
        let fragment = [0, 1, 2, 3].map(|v| {
            let (r, k) = a_fragment_position(t % 128, v);
            tf32(unsafe { ld_nc(a, r * 8 + k) })
        });
        if !is(Variant::NoProxyFence) {
            fence_proxy_async_shared();
        }
        if !is(Variant::NoBarrier) {
            sync_threads();
        }
        let mut a_desc = match () {
            _ if is(Variant::Swizzled) || is(Variant::SwizzledUnaligned) => MatrixDescriptor::k_major(a_at, 16, 1024, Swizzle::Bytes128),
            _ if is(Variant::SwizzledReadPlain) => MatrixDescriptor::k_major(a_at, 16, 1024, Swizzle::None),
            _ if is(Variant::SwappedStrides) => MatrixDescriptor::k_major(a_at, 128, 1024, Swizzle::None),
            _ if is(Variant::WildStride) => MatrixDescriptor::k_major(a_at, 1024, 4096, Swizzle::None),
            _ => MatrixDescriptor::k_major(a_at, 1024, 128, Swizzle::None),
        };
        if is(Variant::NonUniformDescriptor) && t == 5 {
            a_desc += 1;
        }
        let b_desc = MatrixDescriptor::k_major(b_at, 128, 128, Swizzle::None);
        if !is(Variant::NoWgmmaFence) {
            wgmma_fence();
        }
        let accumulate = is(Variant::Accumulate);
        let mut acc = [if accumulate { 1.0 } else { f32::NAN }; 4];
        if is(Variant::MixedShapes) && t < 32 {
            let mut wide = [0.0; 32];
            wgmma_m64n64k8_f32_tf32(&mut wide, a_desc, b_desc, false);
        } else if is(Variant::RegisterA) {
            wgmma_m64n8k8_f32_tf32_rs(&mut acc, fragment, b_desc, accumulate);
        } else if !(is(Variant::Divergent) && t >= 96) {
            wgmma_m64n8k8_f32_tf32(&mut acc, a_desc, b_desc, accumulate);
        }
        if is(Variant::OverwriteBeforeWait) && t == 0 {
            smem_st(a_at, 0.0);
        }
        wgmma_commit_group();
        if !is(Variant::NoWait) {
            wgmma_wait_group::<0>();
        }
        fence_accumulators(&mut acc);
        if is(Variant::OverwriteWithoutBarrier) && t == 127 {
            smem_st(a_at, 0.0);
        }
        if !is(Variant::NoWait) {
            // After every wait and a barrier the operands may be overwritten.
            sync_threads();
            smem_st(a_at + t * 4, 0.0);
        }
        if t < 128 {
            for (i, v) in acc.iter().enumerate() {
                let (r, c) = accumulator_position(t, i as u32);
                unsafe { st(d, r * 8 + c, *v) };
            }
        }
    }
}

fn inputs() -> (Vec<f32>, Vec<f32>) {
    let mut rng = mage_common::fixtures::Rng::new(17);
    (rng.normal_vec(64 * 8, 0.0, 1.0), rng.normal_vec(8 * 8, 0.0, 1.0))
}

fn run(variant: Variant, threads: u32) -> Result<Vec<f32>, String> {
    let (a, b) = inputs();
    let d = vec![f32::NAN; 64 * 8];
    let region = |name: &str, v: &[f32], writable| Region { name: name.into(), start: v.as_ptr() as usize, bytes: v.len() * 4, writable };
    let regions = [region("a", &a, false), region("b", &b, false), region("d", &d, true)];
    let config = LaunchConfig { grid: Dim3::x(1), block: Dim3::x(threads), shared_bytes: SHARED, cluster: Dim3::ONE };
    let args = [
        ArgValue::Ptr(a.as_ptr() as u64),
        ArgValue::Ptr(b.as_ptr() as u64),
        ArgValue::Ptr(d.as_ptr() as u64),
        ArgValue::U32(variant as u32),
    ];
    launch_kernel(&mma_probe::KERNEL, &config, &args, &regions).map_err(|e| e.to_string())?;
    Ok(d)
}

/// `start + Σ_k round(a[r, k]) round(b[k, c])`, products exact, summed in
/// f64, rounded toward zero (the tensor core's rounding in the model).
fn expected(round: impl Fn(f32) -> f32, start: f64) -> Vec<f32> {
    expected_rounding(round, start, round_toward_zero)
}

/// [`expected`] with the sum rounded by `sum_round`.
fn expected_rounding(round: impl Fn(f32) -> f32, start: f64, sum_round: fn(f64) -> f32) -> Vec<f32> {
    let (a, b) = inputs();
    let mut d = vec![0.0; 64 * 8];
    for r in 0..64 {
        for c in 0..8 {
            let mut s = start;
            for k in 0..8 {
                s += round(a[r * 8 + k]) as f64 * round(b[k * 8 + c]) as f64;
            }
            d[r * 8 + c] = sum_round(s);
        }
    }
    d
}

#[test]
fn the_right_layout_gives_the_exact_tf32_products() {
    let want = expected(tf32_rna, 0.0);
    assert_eq!(bits_differing(&run(Variant::Correct, 128).unwrap(), &want), 0);
    assert_eq!(bits_differing(&run(Variant::Swizzled, 128).unwrap(), &want), 0);
    assert_eq!(bits_differing(&run(Variant::RegisterA, 128).unwrap(), &want), 0);
    assert_eq!(bits_differing(&run(Variant::Accumulate, 128).unwrap(), &expected(tf32_rna, 1.0)), 0);
    // Two warpgroups, each multiplying the same operands.
    assert_eq!(bits_differing(&run(Variant::Correct, 256).unwrap(), &want), 0);
    // The sums are truncated, not rounded to nearest.
    let nearest = expected_rounding(tf32_rna, 0.0, |s| s as f32);
    assert!(bits_differing(&want, &nearest) > 100, "only {} of 512 sums differ", bits_differing(&want, &nearest));
}

#[test]
fn unconverted_inputs_lose_their_low_13_bits() {
    let got = run(Variant::Unconverted, 128).unwrap();
    assert_eq!(bits_differing(&got, &expected(|x| f32::from_bits(x.to_bits() & TF32_MASK), 0.0)), 0);
    assert!(bits_differing(&got, &expected(tf32_rna, 0.0)) > 256, "truncation and rounding should differ");
}

#[test]
fn a_wrong_descriptor_gives_wrong_sums_or_an_error() {
    let want = expected(tf32_rna, 0.0);
    for variant in [Variant::SwappedStrides, Variant::SwizzledReadPlain] {
        let got = run(variant, 128).unwrap();
        assert!(bits_differing(&got, &want) > 400, "{variant:?}: only {} of 512 differ", bits_differing(&got, &want));
    }
    let err = run(Variant::WildStride, 128).unwrap_err();
    assert!(err.contains("reads shared bytes") && err.contains(&format!("{SHARED}-byte block allocation")), "{err}");
}

#[test]
fn each_missing_step_is_an_error_with_a_message() {
    let cases = [
        (Variant::NoProxyFence, 128, "no fence.proxy.async.shared::cta after the store"),
        (Variant::NoBarrier, 128, "stored since the last barrier"),
        (Variant::NoWgmmaFence, 128, "no wgmma.fence"),
        (Variant::NonUniformDescriptor, 128, "needs operand 0 the same in all 128 threads"),
        (Variant::Divergent, 128, "threads of warpgroup 0 wait at it while thread (96, 0, 0) is waiting at a barrier"),
        (Variant::MixedShapes, 128, "reach different warpgroup instructions"),
        (Variant::OverwriteBeforeWait, 128, "it is still in flight"),
        (Variant::OverwriteWithoutBarrier, 128, "no barrier separates the waits from this store"),
        (Variant::NoWait, 128, "not waited for"),
        (Variant::SwizzledUnaligned, 128, "128 bytes into a 1024-byte pattern"),
        (Variant::Correct, 64, "partial warpgroup 0"),
    ];
    for (variant, threads, message) in cases {
        let err = run(variant, threads).unwrap_err();
        assert!(err.contains(message), "{variant:?}: {err}");
        assert!(err.contains("mma_probe"), "{variant:?}: {err}");
    }
}
