//! The zero-filling `cp.async` copies mage-006 relies on
//! (`cp_async_ca_4_zfill`, `cp_async_ca_16_zfill`), on the emulator: the
//! first `src_bytes` bytes are copied, the rest of the destination is zero,
//! and the source address must be valid even when nothing is copied.

use mage_common::device::*;
use mage_common::emu::{Region, launch_kernel};
use mage_common::kernel::ArgValue;
use mage_common::kernel::{Dim3, LaunchConfig};

mage_common::kernel! {
    /// Thread t copies `4 (t % 5)` bytes of quad t of `x` (16-byte copy) and
    /// element t of `x` if t is even (4-byte copy); `y` gets shared memory back.
    pub unsafe fn zfill_probe(x: *const f32, y: *mut f32, clamp: u32) {
        let t = thread_idx_x();
        let n = block_dim_x();
        unsafe {
            cp_async_ca_16_zfill(t * 16, x, if clamp == 1 && t.is_multiple_of(5) { 0 } else { 4 * t }, 4 * (t % 5));
            cp_async_ca_4_zfill((4 * n + t) * 4, x, t, if t.is_multiple_of(2) { 4 } else { 0 });
        }
        cp_async_commit();
        cp_async_wait_group::<0>();
        sync_threads();
        for j in 0..5 {
            unsafe { st(y, 5 * t + j, smem_ld((j * n + t) * 4)) }
        }
    }
}

fn run(threads: u32, x: &[f32], clamp: u32) -> Result<Vec<f32>, String> {
    let y = vec![f32::NAN; 5 * threads as usize];
    let regions = [
        Region { name: "x".into(), start: x.as_ptr() as usize, bytes: x.len() * 4, writable: false },
        Region { name: "y".into(), start: y.as_ptr() as usize, bytes: y.len() * 4, writable: true },
    ];
    let config = LaunchConfig { grid: Dim3::x(1), block: Dim3::x(threads), shared_bytes: 5 * threads * 4, cluster: Dim3::ONE };
    let args = [ArgValue::Ptr(x.as_ptr() as u64), ArgValue::Ptr(y.as_ptr() as u64), ArgValue::U32(clamp)];
    launch_kernel(&zfill_probe::KERNEL, &config, &args, &regions).map_err(|e| e.to_string())?;
    Ok(y)
}

#[test]
fn zero_fill_copies_the_first_src_bytes_and_zeroes_the_rest() {
    let threads = 10u32;
    let x: Vec<f32> = (0..4 * threads).map(|i| i as f32 + 0.5).collect();
    let y = run(threads, &x, 0).unwrap();
    // y[5 t + j] is shared word j n + t; word 4 t + e holds element e of
    // thread t's quad, word 4 n + t its 4-byte copy.
    let n = threads as usize;
    let word = |w: usize| y[5 * (w % n) + w / n];
    for t in 0..n {
        for e in 0..4 {
            let want = if e < t % 5 { x[4 * t + e] } else { 0.0 };
            assert_eq!(word(4 * t + e).to_bits(), want.to_bits(), "16-byte copy of thread {t}, element {e}");
        }
        let want = if t % 2 == 0 { x[t] } else { 0.0 };
        assert_eq!(word(4 * n + t).to_bits(), want.to_bits(), "4-byte copy of thread {t}");
    }
}

#[test]
fn a_copy_of_nothing_still_needs_a_valid_source() {
    // Every copy in bounds.
    let x: Vec<f32> = (0..36).map(|i| i as f32).collect();
    assert!(run(9, &x, 0).is_ok());
    let x: Vec<f32> = (0..20).map(|i| i as f32).collect();
    // Thread 5 copies 0 bytes from quad 5, past the end of x's 5 quads.
    let err = run(6, &x, 0).unwrap_err();
    assert!(err.contains("out of bounds"), "{err}");
    // Clamped to index 0, it is fine.
    assert!(run(6, &x, 1).is_ok());
}
