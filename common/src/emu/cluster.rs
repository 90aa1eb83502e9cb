//! Thread-block clusters: the cluster barrier (`barrier.cluster.arrive` and
//! `.wait`) and loads from a peer block's shared memory through the
//! cluster's window (`mapa.shared::cluster`, `ld.shared::cluster`).
//!
//! The blocks of a cluster run on one OS thread ([`super::schedule`]); a
//! wait goes ahead once every thread of every block of the cluster has
//! arrived for its phase or exited. A completed phase orders shared memory
//! as a block barrier does, in every block of the cluster. What is checked:
//!
//! * a wait with no arrive before it, and a second arrive before the wait;
//! * a peer load from a rank outside the cluster, out of the peer's shared
//!   bounds or misaligned;
//! * a peer load from a block whose threads have all exited (its shared
//!   memory is gone: a cluster barrier must keep it alive until its peers
//!   have read it);
//! * a race through the window: a peer load of a word its owner stored
//!   since the last completed cluster phase, or an owner's store to a word
//!   a peer loaded since then.
//!
//! Peers only load here: a peer's shared memory is never stored to.

use super::{Block, State, block, unlinear};
use std::cell::Cell;

/// What the cluster did to one shared word of a block since the last
/// completed cluster phase, for the race check through the window.
#[derive(Clone, Copy, Default)]
pub(super) struct ClusterShadow {
    epoch: u32,
    /// Thread + 1 of the owner's last writer, 0 for none.
    writer: u32,
    /// Cluster thread + 1 (`rank · threads + thread`) of a peer that
    /// loaded it, 0 for none.
    peer_reader: u32,
}

/// The blocks of one cluster, in rank order, and the barrier they share.
pub(super) struct Cluster<'a> {
    pub(super) blocks: Vec<Block<'a>>,
    /// Bumped when a cluster barrier phase completes.
    epoch: Cell<u32>,
    /// Cluster barrier phases completed.
    completed: Cell<u32>,
}

thread_local! {
    static CLUSTER: Cell<*const Cluster<'static>> = const { Cell::new(std::ptr::null()) };
}

fn cluster() -> &'static Cluster<'static> {
    let p = CLUSTER.with(|c| c.get());
    assert!(!p.is_null(), "a cluster function was called outside an emulated kernel launch");
    // SAFETY: set for the duration of `run_cluster` on this OS thread only.
    unsafe { &*p }
}

impl<'a> Cluster<'a> {
    pub(super) fn new(blocks: Vec<Block<'a>>) -> Self {
        Cluster { blocks, epoch: Cell::new(1), completed: Cell::new(0) }
    }

    /// Makes this the cluster device functions see on this OS thread, until
    /// the guard drops.
    pub(super) fn enter(&self) -> impl Drop {
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                CLUSTER.with(|c| c.set(std::ptr::null()));
            }
        }
        CLUSTER.with(|c| c.set(self as *const Cluster as *const Cluster<'static>));
        Reset
    }

    /// Completes the cluster barrier's phases every thread of the cluster
    /// has arrived for (or exited), and makes runnable the threads waiting
    /// for them: true where any was. A completed phase is a barrier for
    /// every block's shared memory too.
    pub(super) fn release_waiters(&self, states: &mut [Vec<State>]) -> bool {
        let mut lowest = None::<u32>;
        for (b, state) in self.blocks.iter().zip(states.iter()) {
            // SAFETY: no coroutine runs while the scheduler asks.
            let arrivals = unsafe { &*b.arrivals.get() };
            for (a, s) in arrivals.iter().zip(state) {
                if *s != State::Done {
                    lowest = Some(lowest.map_or(*a, |l| l.min(*a)));
                }
            }
        }
        let Some(lowest) = lowest else { return false };
        if lowest <= self.completed.get() {
            return false;
        }
        self.completed.set(lowest);
        self.epoch.set(self.epoch.get() + 1);
        let mut released = false;
        for (b, state) in self.blocks.iter().zip(states.iter_mut()) {
            b.epoch.set(b.epoch.get() + 1);
            // SAFETY: as above.
            let arrivals = unsafe { &*b.arrivals.get() };
            for (a, s) in arrivals.iter().zip(state.iter_mut()) {
                if *s == State::AtClusterWait && *a <= lowest {
                    *s = State::Runnable;
                    released = true;
                }
            }
        }
        released
    }

    /// Threads waiting at `barrier.cluster.wait`, of all blocks.
    pub(super) fn waiting(states: &[Vec<State>]) -> usize {
        states.iter().flatten().filter(|s| **s == State::AtClusterWait).count()
    }
}

// ------------------------------------------------------ device-side entry

/// `barrier.cluster.arrive`: this thread's arrival for the next phase.
pub(crate) fn cluster_arrive() {
    let b = block();
    let t = b.thread() as usize;
    // SAFETY: single OS thread; the reference ends with the statement.
    let arrivals = unsafe { &mut *b.arrivals.get() };
    if arrivals[t] > cluster().completed.get() {
        panic!("{} arrives at barrier.cluster.arrive twice with no barrier.cluster.wait between", b.who());
    }
    arrivals[t] += 1;
}

/// `barrier.cluster.wait`: waits until every thread of the cluster has
/// arrived for the phase of this thread's last arrive, or exited.
pub(crate) fn cluster_wait() {
    let b = block();
    // SAFETY: as `cluster_arrive`.
    let arrived = unsafe { &*b.arrivals.get() }[b.thread() as usize];
    if arrived <= cluster().completed.get() {
        panic!("{} waits at barrier.cluster.wait with no barrier.cluster.arrive before it", b.who());
    }
    b.suspend(State::AtClusterWait);
}

/// Bits of an emulated cluster-window address below the rank.
const RANK_SHIFT: u32 = 24;

/// `mapa.shared::cluster`: the window address of byte `offset` of the
/// shared memory of the block of rank `rank` in this cluster.
pub(crate) fn map_peer_shared(offset: u32, rank: u32) -> u32 {
    let b = block();
    let ranks = cluster().blocks.len() as u32;
    if rank >= ranks {
        panic!("mapa.shared::cluster to rank {rank} in a cluster of {ranks} blocks by {}", b.who());
    }
    assert!(offset < 1 << RANK_SHIFT, "shared offset {offset} out of the emulated cluster window, by {}", b.who());
    rank << RANK_SHIFT | offset
}

/// `ld.shared::cluster` of a `T` (4 to 16 bytes of f32s) at window address
/// `addr` ([`map_peer_shared`]'s), checked as the module doc says.
pub(crate) fn peer_shared_load<T: Copy>(addr: u32) -> T {
    let me = block();
    let cl = cluster();
    let (rank, offset) = (addr >> RANK_SHIFT, addr & ((1 << RANK_SHIFT) - 1));
    let size = size_of::<T>() as u32;
    let Some(owner) = cl.blocks.get(rank as usize) else {
        panic!("ld.shared::cluster from rank {rank} in a cluster of {} blocks by {}", cl.blocks.len(), me.who());
    };
    if rank == me.rank {
        return super::shared_load(offset);
    }
    if owner.live.get() == 0 {
        panic!(
            "ld.shared::cluster from block {} (rank {rank}), whose threads have all exited, by {}: a cluster barrier must keep a block's shared memory alive until its peers have read it",
            owner.block_idx,
            me.who()
        );
    }
    if offset % size != 0 {
        panic!("misaligned {size}-byte ld.shared::cluster at byte {offset} of rank {rank} by {}", me.who());
    }
    if offset as u64 + size as u64 > owner.config.shared_bytes as u64 {
        panic!(
            "ld.shared::cluster out of bounds: bytes {offset}..{} of rank {rank}'s {}-byte allocation, by {}",
            offset as u64 + size as u64,
            owner.config.shared_bytes,
            me.who()
        );
    }
    let threads = me.config.block.count() as u32;
    let reader = me.rank * threads + me.thread() + 1;
    // SAFETY: single OS thread; no other reference into the owner's shadow is live.
    let shadow = unsafe { &mut *owner.cluster_shadow.get() };
    let epoch = cl.epoch.get();
    for w in offset / 4..(offset + size) / 4 {
        let s = &mut shadow[w as usize];
        if s.epoch != epoch {
            *s = ClusterShadow { epoch, writer: 0, peer_reader: 0 };
        }
        if s.writer != 0 {
            panic!(
                "shared-memory race through the cluster on bytes {}..{} of block {} (rank {rank}): {} loads a word that its thread {} stored since the last cluster barrier",
                w * 4,
                w * 4 + 4,
                owner.block_idx,
                me.who(),
                unlinear(&owner.config.block, (s.writer - 1) as u64)
            );
        }
        s.peer_reader = reader;
    }
    // SAFETY: bounds checked; the vector is u32-aligned and T is at most 16 bytes of f32s.
    unsafe { ((*owner.shared.get()).as_ptr() as *const u8).add(offset as usize).cast::<T>().read_unaligned() }
}

/// The owner's store to its shared word `w`, for the race check through
/// the window: no peer may have loaded the word since the last completed
/// cluster phase. Nothing to do where the cluster is this block alone.
pub(super) fn owner_store(b: &Block, w: u32) {
    // SAFETY: single OS thread; no other reference into the shadow is live.
    let shadow = unsafe { &mut *b.cluster_shadow.get() };
    let Some(s) = shadow.get_mut(w as usize) else { return };
    let epoch = cluster().epoch.get();
    if s.epoch != epoch {
        *s = ClusterShadow { epoch, writer: 0, peer_reader: 0 };
    }
    if s.peer_reader != 0 {
        let threads = b.config.block.count() as u32;
        let (rank, t) = ((s.peer_reader - 1) / threads, (s.peer_reader - 1) % threads);
        panic!(
            "shared-memory race through the cluster on bytes {}..{} of block {}: {} stores to a word that thread {} of rank {rank} loaded since the last cluster barrier",
            w * 4,
            w * 4 + 4,
            b.block_idx,
            b.who(),
            unlinear(&b.config.block, t as u64)
        );
    }
    s.writer = b.thread() + 1;
}

/// `%cluster_ctarank`: this block's rank in its cluster.
pub(crate) fn cluster_ctarank() -> u32 {
    block().rank
}

/// `%cluster_nctarank`: the blocks of this cluster.
pub(crate) fn cluster_nctarank() -> u32 {
    cluster().blocks.len() as u32
}
