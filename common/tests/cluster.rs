//! Thread-block clusters on the emulator: the cluster barrier waits for
//! every thread of every block of the cluster, a block reads its peers'
//! shared memory through the window, and what the hardware leaves
//! undefined there (a read the barrier does not order, a read of a block
//! that has exited) is an error.

use mage_common::device::cluster::*;
use mage_common::device::*;
use mage_common::emu::{Region, launch_kernel};
use mage_common::kernel;
use mage_common::kernel::{ArgValue, Dim3, LaunchConfig};

/// Threads per block of these kernels.
const THREADS: u32 = 64;
/// Blocks per cluster, along y.
const RANKS: u32 = 4;

/// Runs `k` on a grid of 2 x [`RANKS`] blocks of [`THREADS`], clusters of
/// `cluster` blocks along y, into `out` (one float per thread).
fn run(k: &mage_common::Kernel, cluster: u32, out: &mut [f32]) -> Result<(), String> {
    let cfg = LaunchConfig {
        grid: Dim3::new(2, RANKS, 1),
        block: Dim3::x(THREADS),
        shared_bytes: THREADS * 16,
        cluster: Dim3::new(1, cluster, 1),
    };
    let regions = [Region { name: "out".into(), start: out.as_ptr() as usize, bytes: out.len() * 4, writable: true }];
    launch_kernel(k, &cfg, &[ArgValue::Ptr(out.as_mut_ptr() as u64)], &regions).map_err(|e| e.to_string())
}

/// The index of this thread's float in the output.
fn slot() -> u32 {
    (block_idx_y() * grid_dim_x() + block_idx_x()) * block_dim_x() + thread_idx_x()
}

/// What thread `t` of the block of rank `rank` in cluster `x` stores.
fn stored(x: u32, rank: u32, t: u32) -> f32 {
    (1000 * x + 100 * rank + t) as f32
}

kernel! {
    /// Each thread stores a quad in its block's shared memory; after the
    /// cluster barrier it reads the same quad of the next rank's block
    /// (16-byte loads through the window); a second barrier keeps every
    /// block alive until its peers have read.
    unsafe fn next_rank(out: *mut f32) {
        let (t, rank, ranks) = (thread_idx_x(), cluster_ctarank(), cluster_nctarank());
        smem_st4(16 * t, F32x4::splat(stored(block_idx_x(), rank, t)));
        cluster_arrive();
        cluster_wait();
        let v = ld_peer_shared4(map_peer_shared(16 * t, (rank + 1) % ranks));
        cluster_sync();
        unsafe { st(out, slot(), v.x + v.w - v.y) };
    }
}

#[test]
fn a_block_reads_the_next_ranks_shared_memory_after_the_cluster_barrier() {
    let mut out = vec![f32::NAN; (2 * RANKS * THREADS) as usize];
    run(&next_rank::KERNEL, RANKS, &mut out).unwrap();
    for (i, v) in out.iter().enumerate() {
        let (block, t) = (i as u32 / THREADS, i as u32 % THREADS);
        let (x, y) = (block % 2, block / 2);
        // Rank y's block of cluster x: cluster dims (1, 4, 1), so rank = y.
        assert_eq!(*v, stored(x, (y + 1) % RANKS, t), "thread {t} of block ({x}, {y})");
    }
}

kernel! {
    /// The rank of each block and the size of its cluster, as seen by thread 0.
    unsafe fn ranks(out: *mut f32) {
        unsafe { st(out, slot(), (10 * cluster_ctarank() + cluster_nctarank()) as f32) };
    }
}

#[test]
fn ranks_count_along_the_cluster_and_one_block_is_a_cluster_of_one() {
    for cluster in [1, 2, RANKS] {
        let mut out = vec![f32::NAN; (2 * RANKS * THREADS) as usize];
        run(&ranks::KERNEL, cluster, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            let y = i as u32 / THREADS / 2;
            assert_eq!(*v, (10 * (y % cluster) + cluster) as f32, "cluster of {cluster}, element {i}");
        }
    }
}

kernel! {
    /// Thread 0 of each block waits for the cluster; the others arrive
    /// and store at once: only a barrier that waits for every block's
    /// stores lets thread 0 see its peer's.
    unsafe fn late_stores(out: *mut f32) {
        let (t, rank) = (thread_idx_x(), cluster_ctarank());
        cluster_arrive();
        if t == 0 {
            cluster_wait();
            let v = ld_peer_shared(map_peer_shared(4, (rank + 1) % cluster_nctarank()));
            unsafe { st(out, slot(), v) };
            cluster_arrive();
        } else {
            // Not ordered before thread 0's read by the first phase: only
            // thread 1's store to word 1 matters, and the phase after it.
            if t == 1 {
                cluster_wait();
                smem_st(4, stored(block_idx_x(), rank, t));
                cluster_arrive();
            } else {
                cluster_wait();
                cluster_arrive();
            }
        }
        cluster_wait();
    }
}

#[test]
fn the_store_after_a_barrier_races_with_the_peers_read_in_that_phase() {
    let mut out = vec![0.0; (2 * RANKS * THREADS) as usize];
    let err = run(&late_stores::KERNEL, RANKS, &mut out).unwrap_err();
    assert!(err.contains("race through the cluster on bytes 4..8"), "{err}");
}

kernel! {
    /// Stores, meets the block only (not the cluster), reads a peer.
    unsafe fn block_barrier_only(out: *mut f32) {
        let (t, rank) = (thread_idx_x(), cluster_ctarank());
        smem_st(4 * t, stored(block_idx_x(), rank, t));
        sync_threads();
        let v = ld_peer_shared(map_peer_shared(4 * t, (rank + 1) % cluster_nctarank()));
        cluster_sync();
        unsafe { st(out, slot(), v) };
    }
}

#[test]
fn a_peer_read_with_no_cluster_barrier_before_it_is_a_race() {
    let mut out = vec![0.0; (2 * RANKS * THREADS) as usize];
    let err = run(&block_barrier_only::KERNEL, RANKS, &mut out).unwrap_err();
    assert!(err.contains("shared-memory race through the cluster"), "{err}");
    assert!(err.contains("block_barrier_only"), "{err}");
}

kernel! {
    /// As `next_rank` with no second barrier: a block may exit while its
    /// peer still reads its shared memory.
    unsafe fn no_second_barrier(out: *mut f32) {
        let (t, rank) = (thread_idx_x(), cluster_ctarank());
        smem_st(4 * t, stored(block_idx_x(), rank, t));
        cluster_sync();
        let v = ld_peer_shared(map_peer_shared(4 * t, (rank + 1) % cluster_nctarank()));
        unsafe { st(out, slot(), v) };
    }
}

#[test]
fn reading_a_peer_that_has_exited_is_reported() {
    let mut out = vec![0.0; (2 * RANKS * THREADS) as usize];
    let err = run(&no_second_barrier::KERNEL, RANKS, &mut out).unwrap_err();
    assert!(err.contains("whose threads have all exited"), "{err}");
}

kernel! {
    /// Reads one quad past the peer's shared allocation.
    unsafe fn peer_overrun(out: *mut f32) {
        cluster_sync();
        let v = ld_peer_shared4(map_peer_shared(16 * thread_idx_x() + 16, (cluster_ctarank() + 1) % cluster_nctarank()));
        cluster_sync();
        unsafe { st(out, slot(), v.x) };
    }
}

#[test]
fn a_peer_read_out_of_bounds_is_reported() {
    let mut out = vec![0.0; (2 * RANKS * THREADS) as usize];
    let err = run(&peer_overrun::KERNEL, RANKS, &mut out).unwrap_err();
    assert!(err.contains("ld.shared::cluster out of bounds: bytes 1024..1040"), "{err}");
}

kernel! {
    /// Waits with no arrive before it.
    unsafe fn wait_alone(out: *mut f32) {
        cluster_wait();
        unsafe { st(out, slot(), 1.0) };
    }
}

kernel! {
    /// Rank 0's threads wait at a block barrier only half of them reach;
    /// the other ranks wait for the cluster.
    unsafe fn rank_zero_stuck(out: *mut f32) {
        if cluster_ctarank() == 0 && thread_idx_x() < 32 {
            sync_threads();
        }
        cluster_sync();
        unsafe { st(out, slot(), 1.0) };
    }
}

#[test]
fn a_wait_without_arrive_and_a_barrier_never_met_are_reported() {
    let mut out = vec![0.0; (2 * RANKS * THREADS) as usize];
    let err = run(&wait_alone::KERNEL, RANKS, &mut out).unwrap_err();
    assert!(err.contains("with no barrier.cluster.arrive before it"), "{err}");
    let err = run(&rank_zero_stuck::KERNEL, RANKS, &mut out).unwrap_err();
    assert!(err.contains("deadlock in block (") && err.contains(", 0, 0): 32 of 64 threads wait at a barrier"), "{err}");
}

#[test]
fn a_grid_not_made_of_whole_clusters_is_an_error() {
    let mut out = vec![0.0; (2 * RANKS * THREADS) as usize];
    let err = run(&ranks::KERNEL, 3, &mut out).unwrap_err();
    assert!(err.contains("is not a whole number of clusters (1, 3, 1)"), "{err}");
    let cfg = LaunchConfig { grid: Dim3::x(16), block: Dim3::x(32), shared_bytes: 0, cluster: Dim3::x(16) };
    let err = launch_kernel(&ranks::KERNEL, &cfg, &[ArgValue::Ptr(out.as_mut_ptr() as u64)], &[]).unwrap_err();
    assert!(err.to_string().contains("cluster (16, 1, 1) has 16 blocks; 1 to 8"), "{err}");
}
