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
//!   barrier (see [`warpgroup_async_op`]).
//!
//! Shared memory is filled with a NaN pattern at block start, so a read of a
//! word nothing wrote poisons the result. `cp.async` copies at once.
//! Independent blocks are spread over the machine's cores.

use crate::kernel::{ArgValue, Dim3, Kernel, LaunchConfig};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
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
    AtWarpgroup,
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
    warpgroup_in: UnsafeCell<Vec<Option<(WarpgroupLane, WarpgroupOp)>>>,
    warpgroup_out: UnsafeCell<Vec<Vec<f32>>>,
    proxy: UnsafeCell<AsyncProxy>,
}

/// Threads in a warpgroup: four warps, the first a multiple of four.
pub const WARPGROUP_THREADS: u32 = 128;

/// What one thread brings to a warpgroup-wide asynchronous instruction and
/// takes back.
pub(crate) struct WarpgroupLane {
    /// The instruction, for messages and to check that all 128 threads reach the same one.
    pub instruction: &'static str,
    /// Operands the instruction needs the same in every thread (matrix descriptors, flags).
    pub uniform: Vec<u64>,
    /// This thread's registers: the accumulator fragment in, the result out.
    pub registers: Vec<f32>,
    /// This thread's fragment of an operand read from registers (A of a
    /// `wgmma` with A in registers); empty where there is none.
    pub fragment: Vec<f32>,
}

/// Computes a warpgroup instruction's result from its 128 lanes (thread
/// order in the warpgroup), reading shared memory through [`async_shared_load`].
pub(crate) type WarpgroupOp = fn(&mut [WarpgroupLane]);

/// The wgmma bookkeeping of one block: asynchronous operations in flight,
/// what they read, and which generic-proxy stores are not yet fenced.
#[derive(Default)]
struct AsyncProxy {
    ops: Vec<AsyncOp>,
    /// Per shared word: the ops that read it and may still be in flight.
    readers: Vec<Vec<u32>>,
    /// Per shared word: thread + 1 of a store not yet followed by
    /// `fence.proxy.async` in that thread, 0 for none.
    unfenced: Vec<u32>,
    threads: Vec<ThreadAsync>,
    /// The op being issued (during a warpgroup collective).
    issuing: Option<u32>,
}

struct AsyncOp {
    warpgroup: u32,
    instruction: &'static str,
    /// Threads that have waited for it.
    waits: u32,
    /// The barrier epoch in which its last thread waited for it.
    done_epoch: Option<u32>,
}

#[derive(Clone, Default)]
struct ThreadAsync {
    /// A `wgmma.fence` since the thread started or last waited.
    fenced: bool,
    /// One past the last op this thread took part in.
    issued_end: u32,
    /// Per committed group not yet waited for: one past its last op.
    groups: VecDeque<u32>,
    /// Ops of this thread's warpgroup below this are complete for it.
    completed_below: u32,
    /// Words this thread stored since its last `fence.proxy.async`.
    unfenced_words: Vec<u32>,
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
            generic_store_to_async_proxy(b, w, me);
        } else {
            s.reader = if s.reader == 0 || s.reader == me { me } else { MANY };
        }
    }
}

/// A thread's store to shared word `w`: it may not overwrite what a wgmma
/// still reads, and it needs a `fence.proxy.async` before a wgmma reads it.
fn generic_store_to_async_proxy(b: &Block, w: u32, me: u32) {
    // SAFETY: single OS thread; no other reference into the proxy state is live.
    let proxy = unsafe { &mut *b.proxy.get() };
    let epoch = b.epoch.get();
    if let Some(readers) = proxy.readers.get_mut(w as usize) {
        for &serial in readers.iter() {
            let op = &proxy.ops[serial as usize];
            let why = match op.done_epoch {
                Some(e) if e < epoch => continue,
                Some(_) => "every thread of that warpgroup waited for it, but no barrier separates the waits from this store",
                None => {
                    "it is still in flight: every thread of that warpgroup must pass wgmma.wait_group for it, then meet at a barrier, before the store"
                }
            };
            panic!(
                "shared-memory race on bytes {}..{} of block {}: thread {} stores to a word that `{}` of warpgroup {} reads; {why}",
                w * 4,
                w * 4 + 4,
                b.block_idx,
                b.thread_idx(),
                op.instruction,
                op.warpgroup
            );
        }
        readers.clear();
    }
    if proxy.unfenced[w as usize] != me {
        proxy.unfenced[w as usize] = me;
        proxy.threads[me as usize - 1].unfenced_words.push(w);
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

// ------------------------------------------------- warpgroup instructions

/// The 128 threads of a warpgroup issue one asynchronous operation together
/// (`wgmma.mma_async`, `.sync.aligned`): each thread suspends here with its
/// lane; when all 128 have arrived, `op` computes every lane's result at
/// once, reading shared memory as the hardware's async proxy would. A
/// warpgroup some of whose threads wait at a barrier or have exited, or
/// whose threads bring different instructions or uniform operands, is an
/// error. Each thread needs a `wgmma.fence` ([`wgmma_fence`]) since it
/// started or last waited.
///
/// The result is computed at issue, not at completion, so the emulator
/// cannot see a thread reading its accumulators before waiting; what it
/// does check is shared memory: every word the op reads stays in flight
/// until all 128 threads have passed a `wgmma.wait_group` for it and the
/// block has met at a barrier since (the wait completes the op for the
/// waiting warp only), and a store to such a word before then is a race.
pub(crate) fn warpgroup_async_op(lane: WarpgroupLane, op: WarpgroupOp) -> Vec<f32> {
    let b = block();
    let t = b.thread() as usize;
    // SAFETY: single OS thread; no reference into these vectors outlives the statement.
    unsafe { (&mut *b.warpgroup_in.get())[t] = Some((lane, op)) };
    b.suspend(State::AtWarpgroup);
    std::mem::take(unsafe { &mut (&mut *b.warpgroup_out.get())[t] })
}

/// Loads the shared word at byte `offset` for the warpgroup operation being
/// issued, with the checks of the async proxy: the word must lie in the
/// allocation, and every store to it must have been followed by a
/// `fence.proxy.async` in the storing thread and by a barrier.
pub(crate) fn async_shared_load(offset: u32) -> u32 {
    let b = block();
    // SAFETY: called from a warpgroup op, while no coroutine runs.
    let proxy = unsafe { &mut *b.proxy.get() };
    let serial = proxy.issuing.expect("async_shared_load outside a warpgroup operation");
    let op = &proxy.ops[serial as usize];
    let who = || format!("`{}` of warpgroup {} in block {}", op.instruction, op.warpgroup, b.block_idx);
    if !offset.is_multiple_of(4) || offset as u64 + 4 > b.config.shared_bytes as u64 {
        panic!("{} reads shared bytes {offset}..{} of a {}-byte block allocation", who(), offset as u64 + 4, b.config.shared_bytes);
    }
    let w = (offset / 4) as usize;
    let thread = |plus_one: u32| unlinear(&b.config.block, (plus_one - 1) as u64);
    if proxy.unfenced[w] != 0 {
        panic!(
            "{} reads shared bytes {offset}..{} that thread {} stored with no fence.proxy.async.shared::cta after the store",
            who(),
            offset + 4,
            thread(proxy.unfenced[w])
        );
    }
    // SAFETY: as above.
    let shadow = unsafe { &*b.shadow.get() }[w];
    if shadow.epoch == b.epoch.get() && shadow.writer != 0 {
        panic!(
            "{} reads shared bytes {offset}..{} that thread {} stored since the last barrier: a barrier must order the store before the wgmma",
            who(),
            offset + 4,
            thread(shadow.writer)
        );
    }
    if proxy.readers[w].last() != Some(&serial) {
        proxy.readers[w].push(serial);
    }
    // SAFETY: as above.
    unsafe { (&*b.shared.get())[w] }
}

/// `wgmma.fence`: this thread's registers are ready for a `wgmma.mma_async`.
pub(crate) fn wgmma_fence() {
    let b = block();
    // SAFETY: single OS thread; no other reference into the proxy state is live.
    unsafe { &mut *b.proxy.get() }.threads[b.thread() as usize].fenced = true;
}

/// `wgmma.commit_group`: this thread's ops not yet committed form a group
/// (possibly empty).
pub(crate) fn wgmma_commit_group() {
    let b = block();
    // SAFETY: as in `wgmma_fence`.
    let me = &mut unsafe { &mut *b.proxy.get() }.threads[b.thread() as usize];
    me.groups.push_back(me.issued_end);
}

/// `wgmma.wait_group n`: completes this thread's committed groups but the
/// newest `n`. An op is done once all 128 threads of its warpgroup have
/// waited for it.
pub(crate) fn wgmma_wait_group(n: u32) {
    let b = block();
    // SAFETY: as in `wgmma_fence`.
    let proxy = unsafe { &mut *b.proxy.get() };
    let t = b.thread();
    let me = &mut proxy.threads[t as usize];
    me.fenced = false;
    let old = me.completed_below;
    while me.groups.len() > n as usize {
        me.completed_below = me.groups.pop_front().unwrap();
    }
    let (new, warpgroup) = (me.completed_below, t / WARPGROUP_THREADS);
    for op in proxy.ops[old as usize..new as usize].iter_mut().filter(|op| op.warpgroup == warpgroup) {
        op.waits += 1;
        if op.waits == WARPGROUP_THREADS {
            op.done_epoch = Some(b.epoch.get());
        }
    }
}

/// `fence.proxy.async.shared::cta`: this thread's shared stores so far are
/// visible to the async proxy (to wgmma, after a barrier).
pub(crate) fn fence_proxy_async_shared() {
    let b = block();
    // SAFETY: as in `wgmma_fence`.
    let proxy = unsafe { &mut *b.proxy.get() };
    let me = b.thread() + 1;
    for w in std::mem::take(&mut proxy.threads[me as usize - 1].unfenced_words) {
        if proxy.unfenced[w as usize] == me {
            proxy.unfenced[w as usize] = 0;
        }
    }
}

impl Block<'_> {
    /// Issues the warpgroup operation all threads of warpgroup `g` wait at.
    fn issue_warpgroup_op(&self, g: usize, threads: std::ops::Range<usize>) {
        // SAFETY: no coroutine runs while the scheduler issues the op.
        let (inp, out, proxy) = unsafe { (&mut *self.warpgroup_in.get(), &mut *self.warpgroup_out.get(), &mut *self.proxy.get()) };
        let mut lanes = Vec::with_capacity(threads.len());
        let mut op = None;
        for t in threads.clone() {
            let (lane, f) = inp[t].take().expect("a thread at a warpgroup instruction left no lane");
            op.get_or_insert(f);
            lanes.push(lane);
        }
        let first = threads.start;
        let who = |i: usize| unlinear(&self.config.block, (first + i) as u64);
        for (i, lane) in lanes.iter().enumerate() {
            if lane.instruction != lanes[0].instruction {
                panic!(
                    "threads of warpgroup {g} in block {} reach different warpgroup instructions: `{}` (thread {}) and `{}` (thread {})",
                    self.block_idx,
                    lanes[0].instruction,
                    who(0),
                    lane.instruction,
                    who(i)
                );
            }
            if let Some(j) = (0..lane.uniform.len()).find(|&j| lane.uniform[j] != lanes[0].uniform[j]) {
                panic!(
                    "`{}` needs operand {j} the same in all 128 threads of warpgroup {g} in block {}: thread {} has {:#x}, thread {} {:#x}",
                    lane.instruction,
                    self.block_idx,
                    who(0),
                    lanes[0].uniform[j],
                    who(i),
                    lane.uniform[j]
                );
            }
            if !proxy.threads[first + i].fenced {
                panic!(
                    "`{}` in thread {} of block {} with no wgmma.fence since the thread started or last waited (wgmma.wait_group)",
                    lane.instruction,
                    who(i),
                    self.block_idx
                );
            }
        }
        let serial = proxy.ops.len() as u32;
        proxy.ops.push(AsyncOp { warpgroup: g as u32, instruction: lanes[0].instruction, waits: 0, done_epoch: None });
        if proxy.readers.is_empty() {
            proxy.readers = vec![vec![]; proxy.unfenced.len()];
        }
        for t in threads.clone() {
            proxy.threads[t].issued_end = serial + 1;
        }
        proxy.issuing = Some(serial);
        (op.unwrap())(&mut lanes);
        // SAFETY: as above; the op has returned.
        unsafe { &mut *self.proxy.get() }.issuing = None;
        for (t, lane) in threads.zip(lanes) {
            out[t] = lane.registers;
        }
    }

    /// Whether thread `t` exits with wgmma operations it has not waited for.
    fn exits_waiting(&self, t: usize) -> Option<&'static str> {
        // SAFETY: no coroutine runs while the scheduler asks.
        let proxy = unsafe { &*self.proxy.get() };
        let me = &proxy.threads[t];
        (me.completed_below < me.issued_end).then(|| proxy.ops[me.issued_end as usize - 1].instruction)
    }
}

// ------------------------------------------------------------- scheduler

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
        proxy: UnsafeCell::new(AsyncProxy {
            unfenced: vec![0; config.shared_bytes.div_ceil(4) as usize],
            threads: vec![ThreadAsync::default(); n],
            ..AsyncProxy::default()
        }),
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
