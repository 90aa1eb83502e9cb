//! The scheduler: a block's threads as coroutines on one OS thread, run
//! until each reaches a barrier, a shuffle, a warpgroup instruction or its
//! end; blocks spread over the machine's cores.

use super::async_proxy::{AsyncProxy, WARPGROUP_THREADS};
use super::memory::Shadow;
use super::{Block, CURRENT, EmuError, Region, SHARED_POISON, Shuffle, State, unlinear};
use crate::kernel::{ArgValue, Dim3, Kernel, LaunchConfig};
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
        _ => "is waiting at a barrier",
    }
}

fn run_block(config: &LaunchConfig, regions: &[Region], block_idx: Dim3, kernel: &(dyn Fn() + Sync)) {
    let n = config.block.count() as usize;
    let block = Block {
        config: *config,
        block_idx,
        regions,
        shared: UnsafeCell::new(vec![SHARED_POISON; config.shared_bytes.div_ceil(4) as usize]),
        shadow: UnsafeCell::new(vec![Shadow::default(); config.shared_bytes.div_ceil(4) as usize]),
        epoch: Cell::new(1),
        current: Cell::new(0),
        yielders: UnsafeCell::new(vec![std::ptr::null(); n]),
        shuffle_in: UnsafeCell::new(vec![(0, Shuffle::Idx(0)); n]),
        shuffle_out: UnsafeCell::new(vec![0; n]),
        warpgroup_in: UnsafeCell::new((0..n).map(|_| None).collect()),
        warpgroup_out: UnsafeCell::new(vec![vec![]; n]),
        proxy: UnsafeCell::new(AsyncProxy::for_block(config.shared_bytes.div_ceil(4) as usize, n)),
    };
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(std::ptr::null()));
        }
    }
    let _reset = Reset;
    CURRENT.with(|c| c.set(&block as *const Block as *const Block<'static>));

    let block_ref = &block;
    let mut threads: Vec<Coroutine<(), State, (), DefaultStack>> = (0..n)
        .map(|t| {
            let body = move |y: &Yielder<(), State>, ()| {
                // SAFETY: the yielder lives as long as this coroutine runs.
                unsafe { (&mut *block_ref.yielders.get())[t] = y as *const _ };
                kernel();
            };
            // SAFETY: every coroutine is driven to completion or dropped before
            // `block` and `kernel` go out of scope at the end of this function.
            unsafe { Coroutine::with_stack_unchecked(take_stack(), body) }
        })
        .collect();
    let mut state = vec![State::Runnable; n];

    loop {
        for t in 0..n {
            if state[t] == State::Runnable {
                block.current.set(t as u32);
                state[t] = match threads[t].resume(()) {
                    CoroutineResult::Yield(s) => s,
                    CoroutineResult::Return(()) => State::Done,
                };
                if let Some(instruction) = (state[t] == State::Done).then(|| block.exits_waiting(t)).flatten() {
                    panic!(
                        "thread {} of block {block_idx} exits with `{instruction}` not waited for (wgmma.commit_group, wgmma.wait_group)",
                        unlinear(&config.block, t as u64)
                    );
                }
            }
        }
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
        if progressed {
            continue;
        }
        // No thread waits at a shuffle now: a warpgroup instruction goes
        // ahead once all 128 threads of the warpgroup have reached it.
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
        if progressed {
            continue;
        }
        if state.iter().all(|s| *s == State::Done) {
            break;
        }
        if state.iter().all(|s| *s == State::AtBarrier) {
            block.epoch.set(block.epoch.get() + 1);
            state.fill(State::Runnable);
            continue;
        }
        let at_barrier = state.iter().filter(|s| **s == State::AtBarrier).count();
        let first_done = state.iter().position(|s| *s == State::Done).map(|t| unlinear(&config.block, t as u64));
        panic!(
            "deadlock in block {block_idx}: {at_barrier} of {n} threads wait at a barrier that the others never reach{}",
            first_done.map(|t| format!(" (thread {t} and others exited)")).unwrap_or_default()
        );
    }
    for c in threads {
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

/// Runs `kernel` as every thread of every block of `config`, blocks spread
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
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(blocks as usize);
    let next = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let error = Mutex::new(None::<String>);
    let work = || {
        while !failed.load(Ordering::Relaxed) {
            let b = next.fetch_add(1, Ordering::Relaxed) as u64;
            if b >= blocks {
                break;
            }
            let block_idx = unlinear(&config.grid, b);
            if let Err(e) = catch_unwind(AssertUnwindSafe(|| run_block(config, regions, block_idx, kernel))) {
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
