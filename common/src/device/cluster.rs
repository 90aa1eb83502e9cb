//! Thread-block clusters (sm_90): a block's rank in its cluster, the
//! cluster barrier, and loads from a peer block's shared memory through the
//! cluster's shared window (distributed shared memory).
//!
//! A peer's shared memory is addressed by [`PeerShared`], the window
//! address `mapa.shared::cluster` gives for a byte offset of that block's
//! dynamic shared memory. Its contents are ordered by the cluster barrier
//! only: the owner's stores are visible to a peer after the owner's
//! [`cluster_arrive`] (release) and the peer's [`cluster_wait`] (acquire),
//! and the owner must not exit (or overwrite them) before its peers have
//! read them, which takes a second barrier. The emulator checks both
//! ([`crate::emu`]).

#[cfg(not(target_arch = "nvptx64"))]
use crate::emu;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use super::F32x4;

/// `%cluster_ctarank`: this block's rank in its cluster (its linear index
/// there, x fastest), 0 without a cluster.
#[inline(always)]
pub fn cluster_ctarank() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reading a special register has no side effects.
        unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::cluster_ctarank()
}

/// `%cluster_nctarank`: the blocks of this cluster, 1 without a cluster.
#[inline(always)]
pub fn cluster_nctarank() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: as `cluster_ctarank`.
        unsafe { asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::cluster_nctarank()
}

/// `barrier.cluster.arrive.aligned`: this thread's arrival at the cluster
/// barrier; its memory accesses before it are released to the threads that
/// wait for the phase (`.release`, the form's default, spelled without the
/// qualifier so that the PTX of a crate built for plain sm_90, ISA 7.8,
/// assembles). Every thread of a warp executes it together, and executes
/// [`cluster_wait`] before arriving again.
#[inline(always)]
pub fn cluster_arrive() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a cluster-wide barrier; memory effects are what we want.
    unsafe {
        asm!("barrier.cluster.arrive.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::cluster_arrive()
}

/// `barrier.cluster.wait.aligned` (`.acquire`, the default): waits until
/// every thread of the cluster has arrived for this thread's last
/// [`cluster_arrive`] (or exited); what they did before arriving is
/// visible after it.
#[inline(always)]
pub fn cluster_wait() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `cluster_arrive`.
    unsafe {
        asm!("barrier.cluster.wait.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::cluster_wait()
}

/// [`cluster_arrive`] then [`cluster_wait`]: the whole cluster meets here.
#[inline(always)]
pub fn cluster_sync() {
    cluster_arrive();
    cluster_wait();
}

/// An address in the cluster's shared window: a byte of some block's
/// dynamic shared memory, read by [`ld_peer_shared`] and
/// [`ld_peer_shared4`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerShared(u32);

impl PeerShared {
    /// The address `bytes` further on, in the same block's shared memory.
    #[inline(always)]
    pub fn add(self, bytes: u32) -> PeerShared {
        PeerShared(self.0.wrapping_add(bytes))
    }
}

/// `mapa.shared::cluster.u32`: the window address of byte `offset` of the
/// dynamic shared memory of the block of rank `rank` in this cluster
/// (`rank < cluster_nctarank()`; this block's own rank maps too).
#[inline(always)]
pub fn map_peer_shared(offset: u32, rank: u32) -> PeerShared {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: address arithmetic only; nothing is accessed.
        unsafe {
            asm!("mapa.shared::cluster.u32 {r}, {a}, {k};", r = out(reg32) r, a = in(reg32) super::smem_addr(offset), k = in(reg32) rank,
                options(pure, nomem, nostack))
        };
        PeerShared(r)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    PeerShared(emu::map_peer_shared(offset, rank))
}

/// `ld.shared::cluster.f32`: the f32 at `at` (4-byte aligned).
#[inline(always)]
pub fn ld_peer_shared(at: PeerShared) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: the window address of a live block's shared memory (the caller's barrier).
        unsafe { asm!("ld.shared::cluster.f32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) at.0, options(readonly, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::peer_shared_load::<f32>(at.0)
}

/// `ld.shared::cluster.v4.f32`: the 16 bytes at `at` (16-byte aligned).
#[inline(always)]
pub fn ld_peer_shared4(at: PeerShared) -> F32x4 {
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y, z, w): (f32, f32, f32, f32);
        // SAFETY: as `ld_peer_shared`.
        unsafe {
            asm!("ld.shared::cluster.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
                x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                a = in(reg32) at.0, options(readonly, nostack))
        };
        F32x4 { x, y, z, w }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emu::peer_shared_load::<F32x4>(at.0)
}
