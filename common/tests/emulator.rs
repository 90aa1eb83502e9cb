//! The emulator turns undefined behaviour into errors with messages, and
//! runs correct kernels to the same answer as the hardware would.

use mage_common::device::*;
use mage_common::emu::{Region, launch_kernel};
use mage_common::kernel;
use mage_common::kernel::ArgValue;
use mage_common::kernel::{Dim3, LaunchConfig};

fn run(k: &mage_common::Kernel, threads: u32, shared: u32, out: &mut [f32]) -> Result<(), String> {
    let cfg = LaunchConfig { grid: Dim3::x(2), block: Dim3::x(threads), shared_bytes: shared, cluster: Dim3::ONE };
    let regions = [Region { name: "out".into(), start: out.as_ptr() as usize, bytes: out.len() * 4, writable: true }];
    launch_kernel(k, &cfg, &[ArgValue::Ptr(out.as_mut_ptr() as u64)], &regions).map_err(|e| e.to_string())
}

kernel! {
    /// Each thread writes its word, then reads its neighbour's: needs a barrier between.
    unsafe fn neighbour_with_barrier(out: *mut f32) {
        let t = thread_idx_x();
        smem_st(t * 4, t as f32);
        sync_threads();
        let n = smem_ld(((t + 1) % block_dim_x()) * 4);
        unsafe { st(out, block_idx_x() * block_dim_x() + t, n) };
    }
}

kernel! {
    /// The same without the barrier: a planted shared-memory race.
    unsafe fn neighbour_without_barrier(out: *mut f32) {
        let t = thread_idx_x();
        smem_st(t * 4, t as f32);
        let n = smem_ld(((t + 1) % block_dim_x()) * 4);
        unsafe { st(out, block_idx_x() * block_dim_x() + t, n) };
    }
}

#[test]
fn a_barrier_orders_shared_memory() {
    let mut out = vec![f32::NAN; 128];
    run(&neighbour_with_barrier::KERNEL, 64, 256, &mut out).unwrap();
    for (i, v) in out.iter().enumerate() {
        assert_eq!(*v, ((i % 64 + 1) % 64) as f32);
    }
}

#[test]
fn a_planted_shared_memory_race_is_reported() {
    let mut out = vec![0.0; 128];
    let err = run(&neighbour_without_barrier::KERNEL, 64, 256, &mut out).unwrap_err();
    assert!(err.contains("shared-memory race"), "{err}");
    assert!(err.contains("neighbour_without_barrier"), "{err}");
}

kernel! {
    /// Only half the block reaches the barrier.
    unsafe fn half_barrier(out: *mut f32) {
        if thread_idx_x() < 16 {
            sync_threads();
        }
        unsafe { st(out, block_idx_x() * block_dim_x() + thread_idx_x(), 1.0) };
    }
}

#[test]
fn a_barrier_not_reached_by_every_thread_is_a_deadlock() {
    let mut out = vec![0.0; 128];
    let err = run(&half_barrier::KERNEL, 64, 0, &mut out).unwrap_err();
    assert!(err.contains("deadlock"), "{err}");
    assert!(err.contains("16 of 64 threads"), "{err}");
}

kernel! {
    /// Reads one word past the block's shared allocation.
    unsafe fn shared_overrun(out: *mut f32) {
        let v = smem_ld(thread_idx_x() * 4 + 4);
        unsafe { st(out, block_idx_x() * block_dim_x() + thread_idx_x(), v) };
    }
}

#[test]
fn a_shared_access_out_of_bounds_is_reported() {
    let mut out = vec![0.0; 64];
    let err = run(&shared_overrun::KERNEL, 32, 128, &mut out).unwrap_err();
    assert!(err.contains("shared load out of bounds: bytes 128..132 of a 128-byte"), "{err}");
}

kernel! {
    /// Reads shared memory nothing wrote.
    unsafe fn read_unwritten(out: *mut f32) {
        unsafe { st(out, block_idx_x() * block_dim_x() + thread_idx_x(), smem_ld(thread_idx_x() * 4)) };
    }
}

#[test]
fn unwritten_shared_memory_reads_as_nan() {
    let mut out = vec![0.0; 64];
    run(&read_unwritten::KERNEL, 32, 128, &mut out).unwrap();
    assert!(out.iter().all(|v| v.is_nan()));
}

kernel! {
    /// Writes one element past the output.
    unsafe fn global_overrun(out: *mut f32) {
        unsafe { st(out, block_idx_x() * block_dim_x() + thread_idx_x() + 1, 0.5) };
    }
}

#[test]
fn a_global_access_outside_every_buffer_is_reported() {
    let mut out = vec![0.0; 64];
    let err = run(&global_overrun::KERNEL, 32, 0, &mut out).unwrap_err();
    assert!(err.contains("global store to out of bounds: 4 bytes at byte 256 of buffer `out`"), "{err}");
}

kernel! {
    /// Butterfly sum of lane numbers; lanes 0..16 then also shuffle alone.
    unsafe fn warp_sums(out: *mut f32) {
        let s = warp_sum(lane_id() as f32);
        let down = shuffle_down(lane_id() as f32, 3);
        unsafe { st(out, block_idx_x() * block_dim_x() + thread_idx_x(), s * 100.0 + down) };
    }
}

#[test]
fn warp_shuffles_exchange_among_the_32_lanes() {
    let mut out = vec![0.0; 128];
    run(&warp_sums::KERNEL, 64, 0, &mut out).unwrap();
    for (i, v) in out.iter().enumerate() {
        let lane = (i % 32) as f32;
        let down = if lane + 3.0 < 32.0 { lane + 3.0 } else { lane };
        assert_eq!(*v, 496.0 * 100.0 + down, "thread {i}");
    }
}

kernel! {
    unsafe fn divergent_shuffle(out: *mut f32) {
        let mut v = lane_id() as f32;
        if lane_id() < 16 {
            v = shuffle_xor(v, 1);
        }
        unsafe { st(out, block_idx_x() * block_dim_x() + thread_idx_x(), v) };
    }
}

#[test]
fn a_shuffle_not_reached_by_every_lane_is_reported() {
    let mut out = vec![0.0; 64];
    let err = run(&divergent_shuffle::KERNEL, 32, 0, &mut out).unwrap_err();
    assert!(err.contains("divergent warp shuffle"), "{err}");
}

kernel! {
    unsafe fn panics(out: *mut f32) {
        let _ = out;
        if thread_idx_x() == 5 {
            panic!("boom at five");
        }
    }
}

#[test]
fn a_panicking_kernel_fails_the_launch_with_its_message() {
    let mut out = vec![0.0; 64];
    let err = run(&panics::KERNEL, 32, 0, &mut out).unwrap_err();
    assert!(err.contains("boom at five"), "{err}");
}
