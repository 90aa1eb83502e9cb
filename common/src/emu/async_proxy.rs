//! The async proxy: warpgroup instructions (`wgmma.mma_async` and its
//! fence, commit and wait) and the shared memory they read, with the checks
//! the hardware leaves undefined.

use super::{Block, State, block, unlinear};
use std::collections::VecDeque;

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
pub(super) struct AsyncProxy {
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

impl AsyncProxy {
    /// The state of a block with `words` shared words and `threads` threads.
    pub(super) fn for_block(words: usize, threads: usize) -> Self {
        AsyncProxy { unfenced: vec![0; words], threads: vec![ThreadAsync::default(); threads], ..AsyncProxy::default() }
    }
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

/// A thread's store to shared word `w`: it may not overwrite what a wgmma
/// still reads, and it needs a `fence.proxy.async` before a wgmma reads it.
pub(super) fn generic_store_to_async_proxy(b: &Block, w: u32, me: u32) {
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
    pub(super) fn issue_warpgroup_op(&self, g: usize, threads: std::ops::Range<usize>) {
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
    pub(super) fn exits_waiting(&self, t: usize) -> Option<&'static str> {
        // SAFETY: no coroutine runs while the scheduler asks.
        let proxy = unsafe { &*self.proxy.get() };
        let me = &proxy.threads[t];
        (me.completed_below < me.issued_end).then(|| proxy.ops[me.issued_end as usize - 1].instruction)
    }
}

// ------------------------------------------------------------- scheduler
