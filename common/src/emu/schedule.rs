//! The scheduler: the threads of a cluster's blocks (of one block, where
//! the launch has no cluster) as coroutines on one OS thread, run until
//! each reaches a barrier, a shuffle, a warpgroup instruction, a cluster
//! wait or its end; clusters spread over the machine's cores.

use super::async_proxy::{AsyncProxy, WARPGROUP_THREADS};
use super::cluster::{Cluster, ClusterShadow};
use super::memory::Shadow;
use super::{Block, CURRENT, EmuError, Region, SHARED_POISON, Shuffle, State, unlinear};
use crate::kernel::{ArgValue, Dim3, Kernel, LaunchConfig, MAX_CLUSTER_BLOCKS};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Coroutine stack size: kernels are shallow, panics need some room.
const STACK_BYTES: usize = 256 * 1024;

thread_local! {
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

fn take_stack() -> DefaultStack {
    STACKS.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| DefaultStack::new(STACK_BYTES).expect("allocating an emulator stack"))
}

fn give_stack(stack: DefaultStack) {
    STACKS.with(|s| s.borrow_mut().push(stack));
}

/// Where a thread missing from a collective is, once every thread is suspended.
fn elsewhere(s: State) -> &'static str {
    match s {
        State::Done => "has exited",
        State::AtClusterWait => "is waiting at a cluster barrier",
        _ => "is waiting at a barrier",
    }
}

impl<'a> Block<'a> {
    /// Block `block_idx` of the launch, rank `rank` of its cluster, before
    /// any thread has run.
    fn new(config: &LaunchConfig, regions: &'a [Region], block_idx: Dim3, rank: u32) -> Self {
        let n = config.block.count() as usize;
        let words = config.shared_bytes.div_ceil(4) as usize;
        let clustered = config.cluster.count() > 1;
        Block {
            config: *config,
            block_idx,
            regions,
            shared: UnsafeCell::new(vec![SHARED_POISON; words]),
            shadow: UnsafeCell::new(vec![Shadow::default(); words]),
            epoch: Cell::new(1),
            current: Cell::new(0),
            yielders: UnsafeCell::new(vec![std::ptr::null(); n]),
            shuffle_in: UnsafeCell::new(vec![(0, Shuffle::Idx(0)); n]),
            shuffle_out: UnsafeCell::new(vec![0; n]),
            warpgroup_in: UnsafeCell::new((0..n).map(|_| None).collect()),
            warpgroup_out: UnsafeCell::new(vec![vec![]; n]),
            proxy: UnsafeCell::new(AsyncProxy::for_block(words, n)),
            rank,
            live: Cell::new(n as u32),
            arrivals: UnsafeCell::new(vec![0; n]),
            cluster_shadow: UnsafeCell::new(if clustered { vec![ClusterShadow::default(); words] } else { vec![] }),
        }
    }
}

/// Makes `block` the one device functions see on this OS thread.
fn enter(block: &Block) {
    CURRENT.with(|c| c.set(block as *const Block as *const Block<'static>));
}

/// Resumes every runnable thread of `block` until it suspends or exits.
fn run_threads(block: &Block, threads: &mut [Coroutine<(), State, (), DefaultStack>], state: &mut [State]) {
    enter(block);
    for t in 0..threads.len() {
        if state[t] == State::Runnable {
            block.current.set(t as u32);
            state[t] = match threads[t].resume(()) {
                CoroutineResult::Yield(s) => s,
                CoroutineResult::Return(()) => State::Done,
            };
            if state[t] == State::Done {
                block.live.set(block.live.get() - 1);
                if let Some(instruction) = block.exits_waiting(t) {
                    panic!(
                        "thread {} of block {} exits with `{instruction}` not waited for (wgmma.commit_group, wgmma.wait_group)",
                        unlinear(&block.config.block, t as u64),
                        block.block_idx
                    );
                }
            }
        }
    }
}

/// Exchanges the values of every warp of `block` whose 32 lanes wait at a
/// shuffle: true where one did.
fn exchange_shuffles(block: &Block, state: &mut [State]) -> bool {
    let (n, block_idx, config) = (state.len(), block.block_idx, &block.config);
    let mut progressed = false;
    for w in 0..n.div_ceil(32) {
        let lanes = w * 32..(w * 32 + 32).min(n);
        if !lanes.clone().any(|l| state[l] == State::AtShuffle) {
            continue;
        }
        if let Some(l) = lanes.clone().find(|&l| state[l] != State::AtShuffle) {
            let why = elsewhere(state[l]);
            panic!(
                "divergent warp shuffle in block {}: lanes of warp {w} wait at a shuffle while thread {} {why}",
                block_idx,
                unlinear(&config.block, l as u64)
            );
        }
        if lanes.len() < 32 {
            panic!("warp shuffle in partial warp {w} of block {block_idx} ({} lanes): all 32 lanes must exist", lanes.len());
        }
        // SAFETY: no coroutine runs while the scheduler exchanges values.
        let (inp, out) = unsafe { (&*block.shuffle_in.get(), &mut *block.shuffle_out.get()) };
        for l in 0..32u32 {
            let (own, op) = inp[w * 32 + l as usize];
            let src = match op {
                Shuffle::Down(d) => l.checked_add(d).filter(|&s| s < 32).unwrap_or(l),
                Shuffle::Xor(m) => (l ^ m) & 31,
                Shuffle::Idx(s) => s & 31,
            };
            out[w * 32 + l as usize] = if src == l { own } else { inp[w * 32 + src as usize].0 };
            state[w * 32 + l as usize] = State::Runnable;
        }
        progressed = true;
    }
    progressed
}

/// Issues the warpgroup instruction of every warpgroup of `block` whose
/// 128 threads have reached it (no thread waits at a shuffle now): true
/// where one did.
fn issue_warpgroups(block: &Block, state: &mut [State]) -> bool {
    let (n, block_idx, config) = (state.len(), block.block_idx, &block.config);
    enter(block);
    let mut progressed = false;
    let warpgroup = WARPGROUP_THREADS as usize;
    for g in 0..n.div_ceil(warpgroup) {
        let threads = g * warpgroup..(g * warpgroup + warpgroup).min(n);
        let Some(arrived) = threads.clone().find(|&t| state[t] == State::AtWarpgroup) else { continue };
        // SAFETY: no coroutine runs; the reference ends with the statement.
        let instruction = unsafe { &*block.warpgroup_in.get() }[arrived].as_ref().map_or("", |(l, _)| l.instruction);
        if let Some(t) = threads.clone().find(|&t| state[t] != State::AtWarpgroup) {
            let why = elsewhere(state[t]);
            panic!(
                "divergent `{instruction}` in block {block_idx}: threads of warpgroup {g} wait at it while thread {} {why}",
                unlinear(&config.block, t as u64)
            );
        }
        if threads.len() < warpgroup {
            panic!("`{instruction}` in partial warpgroup {g} of block {block_idx} ({} threads): all 128 must exist", threads.len());
        }
        block.issue_warpgroup_op(g, threads.clone());
        state[threads].fill(State::Runnable);
        progressed = true;
    }
    progressed
}

/// Runs the blocks of cluster `cluster_idx` (one block where the launch has
/// no cluster) to their end: their threads as coroutines on this OS thread.
fn run_cluster(config: &LaunchConfig, regions: &[Region], cluster_idx: Dim3, kernel: &(dyn Fn() + Sync)) {
    let n = config.block.count() as usize;
    let dims = config.cluster;
    let blocks = (0..dims.count())
        .map(|r| {
            let at = unlinear(&dims, r);
            let block_idx = Dim3 { x: cluster_idx.x * dims.x + at.x, y: cluster_idx.y * dims.y + at.y, z: cluster_idx.z * dims.z + at.z };
            Block::new(config, regions, block_idx, r as u32)
        })
        .collect();
    let cluster = Cluster::new(blocks);
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(std::ptr::null()));
        }
    }
    let _reset = Reset;
    let _cluster = cluster.enter();

    let mut threads: Vec<Vec<Coroutine<(), State, (), DefaultStack>>> = cluster
        .blocks
        .iter()
        .map(|block_ref| {
            (0..n)
                .map(|t| {
                    let body = move |y: &Yielder<(), State>, ()| {
                        // SAFETY: the yielder lives as long as this coroutine runs.
                        unsafe { (&mut *block_ref.yielders.get())[t] = y as *const _ };
                        kernel();
                    };
                    // SAFETY: every coroutine is driven to completion or dropped before
                    // `cluster` and `kernel` go out of scope at the end of this function.
                    unsafe { Coroutine::with_stack_unchecked(take_stack(), body) }
                })
                .collect()
        })
        .collect();
    let mut states = vec![vec![State::Runnable; n]; cluster.blocks.len()];

    loop {
        for ((block, threads), state) in cluster.blocks.iter().zip(&mut threads).zip(&mut states) {
            run_threads(block, threads, state);
        }
        let mut progressed = false;
        for (block, state) in cluster.blocks.iter().zip(&mut states) {
            progressed |= exchange_shuffles(block, state);
        }
        if progressed {
            continue;
        }
        for (block, state) in cluster.blocks.iter().zip(&mut states) {
            progressed |= issue_warpgroups(block, state);
        }
        if progressed {
            continue;
        }
        if states.iter().flatten().all(|s| *s == State::Done) {
            break;
        }
        for (block, state) in cluster.blocks.iter().zip(&mut states) {
            if state.iter().all(|s| *s == State::AtBarrier) {
                block.epoch.set(block.epoch.get() + 1);
                state.fill(State::Runnable);
                progressed = true;
            }
        }
        progressed |= cluster.release_waiters(&mut states);
        if progressed {
            continue;
        }
        let stuck = cluster.blocks.iter().zip(&states).find(|(_, state)| state.contains(&State::AtBarrier));
        if let Some((block, state)) = stuck {
            let at_barrier = state.iter().filter(|s| **s == State::AtBarrier).count();
            let first_done = state.iter().position(|s| *s == State::Done).map(|t| unlinear(&config.block, t as u64));
            panic!(
                "deadlock in block {}: {at_barrier} of {n} threads wait at a barrier that the others never reach{}",
                block.block_idx,
                first_done.map(|t| format!(" (thread {t} and others exited)")).unwrap_or_default()
            );
        }
        panic!(
            "deadlock in the cluster of block {}: {} of {} threads wait at barrier.cluster.wait for threads that never arrive",
            cluster.blocks[0].block_idx,
            Cluster::waiting(&states),
            n * cluster.blocks.len()
        );
    }
    for c in threads.into_iter().flatten() {
        give_stack(c.into_stack());
    }
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "kernel panicked".to_string()
    }
}

/// Runs `kernel` as every thread of every block of `config`, clusters of
/// blocks (single blocks where `config.cluster` is [`Dim3::ONE`]) spread
/// over the machine's cores. The first error any block reports ends the
/// launch.
pub fn launch(config: &LaunchConfig, regions: &[Region], kernel: &(dyn Fn() + Sync)) -> Result<(), EmuError> {
    let blocks = config.grid.count();
    let threads = config.block.count();
    if blocks == 0 || threads == 0 {
        return Err(EmuError(format!("empty launch: grid {} block {}", config.grid, config.block)));
    }
    if threads > 1024 {
        return Err(EmuError(format!("block {} has {threads} threads; at most 1024", config.block)));
    }
    let (g, c) = (config.grid, config.cluster);
    if c.count() == 0 || c.count() > MAX_CLUSTER_BLOCKS {
        return Err(EmuError(format!("cluster {c} has {} blocks; 1 to {MAX_CLUSTER_BLOCKS}", c.count())));
    }
    if !(g.x.is_multiple_of(c.x) && g.y.is_multiple_of(c.y) && g.z.is_multiple_of(c.z)) {
        return Err(EmuError(format!("grid {g} is not a whole number of clusters {c}")));
    }
    let clusters = Dim3 { x: g.x / c.x, y: g.y / c.y, z: g.z / c.z };
    let count = clusters.count();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(count as usize);
    let next = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let error = Mutex::new(None::<String>);
    let work = || {
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed) as u64;
            if i >= count {
                break;
            }
            let cluster_idx = unlinear(&clusters, i);
            if let Err(e) = catch_unwind(AssertUnwindSafe(|| run_cluster(config, regions, cluster_idx, kernel))) {
                failed.store(true, Ordering::Relaxed);
                error.lock().unwrap().get_or_insert_with(|| panic_message(&*e));
            }
        }
    };
    if workers <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    match error.into_inner().unwrap() {
        Some(e) => Err(EmuError(e)),
        None => Ok(()),
    }
}

/// Launches a [`Kernel`] with resolved arguments on the emulator.
pub fn launch_kernel(kernel: &Kernel, config: &LaunchConfig, args: &[ArgValue], regions: &[Region]) -> Result<(), EmuError> {
    if args.len() != kernel.params.len() {
        return Err(EmuError(format!("{} takes {} arguments, got {}", kernel.name, kernel.params.len(), args.len())));
    }
    let host = kernel.host;
    launch(config, regions, &|| host(args)).map_err(|e| EmuError(format!("{}: {e}", kernel.name)))
}
