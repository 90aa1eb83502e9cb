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
//!   store into an input.
//!
//! Shared memory is filled with a NaN pattern at block start, so a read of a
//! word nothing wrote poisons the result. `cp.async` copies at once.
//! Independent blocks are spread over the machine's cores.

use crate::kernel::{ArgValue, Dim3, Kernel, LaunchConfig};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The bit pattern every shared word holds at block start: a quiet NaN.
pub const SHARED_POISON: u32 = 0x7FC0_DEAD;

/// Coroutine stack size: kernels are shallow, panics need some room.
const STACK_BYTES: usize = 256 * 1024;

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
    Done,
}

/// What happens to one shared word between two barriers, for the race check.
#[derive(Clone, Copy, Default)]
struct Shadow {
    epoch: u32,
    /// Thread + 1 of the writer, 0 for none.
    writer: u32,
    /// Thread + 1 of the reader, 0 for none, `MANY` for two or more.
    reader: u32,
}
const MANY: u32 = u32::MAX;

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
}

thread_local! {
    static CURRENT: Cell<*const Block<'static>> = const { Cell::new(std::ptr::null()) };
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
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

fn check_global(b: &Block, addr: usize, size: usize, align: usize, store: bool) {
    let what = if store { "store to" } else { "load from" };
    if addr % align != 0 {
        panic!("misaligned {size}-byte global {what} address {addr:#x} by {}", b.who());
    }
    for r in b.regions {
        if addr >= r.start && addr + size <= r.start + r.bytes {
            if store && !r.writable {
                panic!("global store into input buffer `{}` (byte {}) by {}", r.name, addr - r.start, b.who());
            }
            return;
        }
    }
    let nearest = b
        .regions
        .iter()
        .map(|r| {
            let off = addr as i128 - r.start as i128;
            (off.unsigned_abs().min((addr as i128 - (r.start + r.bytes) as i128).unsigned_abs()), r, off)
        })
        .min_by_key(|(d, _, _)| *d);
    match nearest {
        Some((_, r, off)) => {
            panic!("global {what} out of bounds: {size} bytes at byte {off} of buffer `{}` ({} bytes) by {}", r.name, r.bytes, b.who())
        }
        None => panic!("global {what} {addr:#x} in a launch with no buffers by {}", b.who()),
    }
}

/// # Safety
/// `p` must be valid for reads once the bounds check passes.
pub(crate) unsafe fn global_load<T: Copy>(p: *const T) -> T {
    let b = block();
    check_global(b, p as usize, size_of::<T>(), align_of::<T>(), false);
    unsafe { p.read() }
}

/// # Safety
/// `p` must be valid for writes once the bounds check passes.
pub(crate) unsafe fn global_store<T: Copy>(p: *mut T, v: T) {
    let b = block();
    check_global(b, p as usize, size_of::<T>(), align_of::<T>(), true);
    unsafe { p.write(v) }
}

/// An atomic read-modify-write of the global word at `p`, checked as a
/// store; returns the old word.
///
/// # Safety
/// `p` must be valid for reads and writes once the check passes, and
/// touched by other threads of the launch only atomically.
pub(crate) unsafe fn global_atomic_update(p: *mut u32, f: impl Fn(u32) -> u32) -> u32 {
    check_global(block(), p as usize, 4, 4, true);
    // SAFETY: in bounds and aligned (checked); every access is atomic.
    let word = unsafe { AtomicU32::from_ptr(p) };
    word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(f(v))).unwrap_or_else(|v| v)
}

fn check_shared(b: &Block, offset: u32, size: u32, store: bool) {
    let what = if store { "store" } else { "load" };
    if offset % size != 0 {
        panic!("misaligned {size}-byte shared {what} at byte {offset} by {}", b.who());
    }
    if offset as u64 + size as u64 > b.config.shared_bytes as u64 {
        panic!(
            "shared {what} out of bounds: bytes {offset}..{} of a {}-byte block allocation, by {}",
            offset as u64 + size as u64,
            b.config.shared_bytes,
            b.who()
        );
    }
    // SAFETY: single OS thread; no other reference into the shadow is live.
    let shadow = unsafe { &mut *b.shadow.get() };
    let me = b.thread() + 1;
    let epoch = b.epoch.get();
    for w in offset / 4..(offset + size) / 4 {
        let s = &mut shadow[w as usize];
        if s.epoch != epoch {
            *s = Shadow { epoch, writer: 0, reader: 0 };
        }
        let other_writer = s.writer != 0 && s.writer != me;
        let other_reader = s.reader != 0 && s.reader != me;
        let conflict = if store { other_writer || other_reader } else { other_writer };
        if conflict {
            let (kind, them) = if other_writer { ("written", s.writer) } else { ("read", s.reader) };
            let them = if them == MANY {
                "two or more other threads".to_string()
            } else {
                format!("thread {}", unlinear(&b.config.block, (them - 1) as u64))
            };
            panic!(
                "shared-memory race on bytes {}..{} of block {}: {} {what}s a word that {them} {kind} since the last barrier",
                w * 4,
                w * 4 + 4,
                b.block_idx,
                format_args!("thread {}", b.thread_idx()),
            );
        }
        if store {
            s.writer = me;
        } else {
            s.reader = if s.reader == 0 || s.reader == me { me } else { MANY };
        }
    }
}

pub(crate) fn shared_load<T: Copy>(offset: u32) -> T {
    let b = block();
    check_shared(b, offset, size_of::<T>() as u32, false);
    // SAFETY: bounds checked; the vector is u32-aligned and T is at most 16 bytes of f32s.
    unsafe { ((*b.shared.get()).as_ptr() as *const u8).add(offset as usize).cast::<T>().read_unaligned() }
}

pub(crate) fn shared_store<T: Copy>(offset: u32, v: T) {
    let b = block();
    check_shared(b, offset, size_of::<T>() as u32, true);
    // SAFETY: as `shared_load`.
    unsafe { ((*b.shared.get()).as_mut_ptr() as *mut u8).add(offset as usize).cast::<T>().write_unaligned(v) }
}

// ------------------------------------------------------------- scheduler

fn take_stack() -> DefaultStack {
    STACKS.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| DefaultStack::new(STACK_BYTES).expect("allocating an emulator stack"))
}

fn give_stack(stack: DefaultStack) {
    STACKS.with(|s| s.borrow_mut().push(stack));
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
            }
        }
        let mut progressed = false;
        for w in 0..n.div_ceil(32) {
            let lanes = w * 32..(w * 32 + 32).min(n);
            if !lanes.clone().any(|l| state[l] == State::AtShuffle) {
                continue;
            }
            if let Some(l) = lanes.clone().find(|&l| state[l] != State::AtShuffle) {
                let why = match state[l] {
                    State::Done => "has exited",
                    _ => "is waiting at a barrier",
                };
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
