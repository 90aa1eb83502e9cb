//! Shadow memory: every global and shared access checked for bounds,
//! alignment and stores into inputs, and shared words watched for races
//! between two barriers.

use super::async_proxy::generic_store_to_async_proxy;
use super::cluster::owner_store;
use super::{Block, block, unlinear};
use std::sync::atomic::{AtomicU32, Ordering};

/// What happens to one shared word between two barriers, for the race check.
#[derive(Clone, Copy, Default)]
pub(super) struct Shadow {
    pub(super) epoch: u32,
    /// Thread + 1 of the writer, 0 for none.
    pub(super) writer: u32,
    /// Thread + 1 of the reader, 0 for none, `MANY` for two or more.
    pub(super) reader: u32,
}
const MANY: u32 = u32::MAX;

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
            owner_store(b, w);
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
