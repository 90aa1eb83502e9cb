//! The SIMT emulator: runs a kernel's blocks on the CPU, every thread of a
//! block emulated.
//!
//! A block's threads are stackful coroutines on one OS thread, scheduled by
//! one scheduler: each thread runs until it reaches a barrier, a warp shuffle
//! or its end. Because one scheduler sees every thread, the emulator can be
//! exact about what the hardware leaves undefined, and turns it into an error
//! with a message instead of a hang or silent garbage:
//!
//! * a barrier not reached by every thread of the block (a deadlock);
//! * a warp shuffle not reached by every lane of the warp;
//! * a shared access outside the block's shared size, or misaligned;
//! * a shared-memory race: two threads touching the same 4-byte word between
//!   two barriers, at least one of them writing;
//! * a global access outside every buffer of the launch, misaligned, or a
//!   store into an input;
//! * a warpgroup instruction (`wgmma.mma_async`) not reached by all 128
//!   threads of the warpgroup, or with operands that differ between them;
//!   shared memory it reads that a thread stored without
//!   `fence.proxy.async` or without a barrier since, or overwrote before every
//!   thread of the warpgroup waited for it (`wgmma.wait_group`) and met at a
//!   barrier (see [`async_proxy`]).
//! * in a thread-block cluster, a cluster wait with no arrive before it; a
//!   load from a peer's shared memory of a word its owner stored since the
//!   last cluster barrier, an owner's store to a word a peer loaded since
//!   then, and a load from a peer outside its shared size, misaligned, or
//!   after every thread of that block exited (see [`cluster`]).
//!
//! Shared memory is filled with a NaN pattern at block start, so a read of a
//! word nothing wrote poisons the result. `cp.async` copies at once.
//! Independent blocks are spread over the machine's cores; the blocks of one
//! thread-block cluster (a launch's `cluster` dims) run together on one OS
//! thread, their threads one set of coroutines, so that a cluster barrier
//! waits for every thread of every block of the cluster and a block reads
//! its peers' shared memory ([`cluster`]: what it checks there).
//!
//! Where things are: this module holds the launch-wide types and the block
//! every device function reads; [`schedule`] runs clusters of blocks and
//! their threads; [`memory`] checks every global and shared access (bounds,
//! alignment, input buffers, races); [`async_proxy`] models `wgmma` and the
//! async proxy; [`cluster`] the cluster barrier and the peers' shared memory.

mod async_proxy;
mod cluster;
mod memory;
mod schedule;

pub use async_proxy::WARPGROUP_THREADS;
pub(crate) use async_proxy::{
    WarpgroupLane, WarpgroupOp, async_shared_load, fence_proxy_async_shared, warpgroup_async_op, wgmma_commit_group, wgmma_fence,
    wgmma_wait_group,
};
pub(crate) use cluster::{cluster_arrive, cluster_ctarank, cluster_nctarank, cluster_wait, map_peer_shared, peer_shared_load};
pub(crate) use memory::{global_atomic_update, global_load, global_store, shared_load, shared_store};
pub use schedule::{launch, launch_kernel};

use crate::kernel::{Dim3, LaunchConfig};
use async_proxy::AsyncProxy;
use cluster::ClusterShadow;
use corosensei::Yielder;
use memory::Shadow;
use std::cell::{Cell, UnsafeCell};
use std::fmt;

/// The bit pattern every shared word holds at block start: a quiet NaN.
pub const SHARED_POISON: u32 = 0x7FC0_DEAD;

/// The index of linear position `i` in a grid or block of this extent (x fastest).
fn unlinear(extent: &Dim3, i: u64) -> Dim3 {
    let x = (i % extent.x as u64) as u32;
    let y = ((i / extent.x as u64) % extent.y as u64) as u32;
    let z = (i / (extent.x as u64 * extent.y as u64)) as u32;
    Dim3 { x, y, z }
}

/// A buffer of the launch: global accesses must fall inside one.
#[derive(Clone, Debug)]
pub struct Region {
    pub name: String,
    pub start: usize,
    pub bytes: usize,
    pub writable: bool,
}

/// Why an emulated launch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuError(pub String);

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for EmuError {}

/// The three warp shuffles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shuffle {
    Down(u32),
    Xor(u32),
    Idx(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Runnable,
    AtBarrier,
    AtShuffle,
    AtWarpgroup,
    /// At `barrier.cluster.wait`, for the phase of its last arrive.
    AtClusterWait,
    Done,
}

/// The state of the block being run on this OS thread.
struct Block<'a> {
    config: LaunchConfig,
    block_idx: Dim3,
    regions: &'a [Region],
    shared: UnsafeCell<Vec<u32>>,
    shadow: UnsafeCell<Vec<Shadow>>,
    epoch: Cell<u32>,
    /// The thread now running (linear index in the block).
    current: Cell<u32>,
    yielders: UnsafeCell<Vec<*const Yielder<(), State>>>,
    shuffle_in: UnsafeCell<Vec<(u32, Shuffle)>>,
    shuffle_out: UnsafeCell<Vec<u32>>,
    warpgroup_in: UnsafeCell<Vec<Option<(WarpgroupLane, WarpgroupOp)>>>,
    warpgroup_out: UnsafeCell<Vec<Vec<f32>>>,
    proxy: UnsafeCell<AsyncProxy>,
    /// Its rank in its cluster (`%cluster_ctarank`).
    rank: u32,
    /// Threads not yet exited: a peer may read its shared memory only while
    /// one lives.
    live: Cell<u32>,
    /// Per thread: its `barrier.cluster.arrive`s so far.
    arrivals: UnsafeCell<Vec<u32>>,
    /// Per shared word, what the cluster did to it since the last cluster
    /// barrier; empty where the cluster is this block alone.
    cluster_shadow: UnsafeCell<Vec<ClusterShadow>>,
}

thread_local! {
    static CURRENT: Cell<*const Block<'static>> = const { Cell::new(std::ptr::null()) };
}

fn block() -> &'static Block<'static> {
    let p = CURRENT.with(|c| c.get());
    assert!(!p.is_null(), "a device function was called outside an emulated kernel launch");
    // SAFETY: set for the duration of `run_block` on this OS thread only.
    unsafe { &*p }
}

impl Block<'_> {
    fn thread(&self) -> u32 {
        self.current.get()
    }
    fn thread_idx(&self) -> Dim3 {
        unlinear(&self.config.block, self.thread() as u64)
    }
    fn who(&self) -> String {
        format!("thread {} of block {}", self.thread_idx(), self.block_idx)
    }
    fn suspend(&self, why: State) {
        // SAFETY: each coroutine stores its yielder before running kernel code.
        let y = unsafe { &*(&*self.yielders.get())[self.thread() as usize] };
        y.suspend(why);
    }
}

// ------------------------------------------------------ device-side entry

pub(crate) fn thread_idx() -> Dim3 {
    block().thread_idx()
}
pub(crate) fn block_idx() -> Dim3 {
    block().block_idx
}
pub(crate) fn block_dim() -> Dim3 {
    block().config.block
}
pub(crate) fn grid_dim() -> Dim3 {
    block().config.grid
}

pub(crate) fn barrier() {
    block().suspend(State::AtBarrier);
}

pub(crate) fn shuffle(v: f32, op: Shuffle) -> f32 {
    let b = block();
    let t = b.thread() as usize;
    // SAFETY: single OS thread; no reference into these vectors outlives the statement.
    unsafe { (&mut *b.shuffle_in.get())[t] = (v.to_bits(), op) };
    b.suspend(State::AtShuffle);
    f32::from_bits(unsafe { (&*b.shuffle_out.get())[t] })
}
