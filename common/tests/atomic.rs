//! The emulator's `red.global.add.f32` (neighbor's try-split stage adds
//! the parts of heavy rows with it):
//! every add lands exactly once when threads of many blocks add to the
//! same words at once, subnormal inputs and results flush to
//! sign-preserving zero as PTX defines on global memory, and an add into
//! an input buffer is refused like a store. And the u32 `atom.global.add`:
//! every add lands once, each thread gets a distinct old word (the slots
//! a counting pass hands out), adds wrap, and an input is refused.

use mage_common::device::atomic::{atom_add_u32, red_add};
use mage_common::device::*;
use mage_common::emu::{Region, launch_kernel};
use mage_common::kernel::{ArgValue, Dim3, LaunchConfig};

mage_common::kernel! {
    /// Thread `t < count` adds `v[t]` to `out[t % slots]`.
    pub unsafe fn add_each(v: *const f32, out: *mut f32, count: u32, slots: u32) {
        let t = block_idx_x() * block_dim_x() + thread_idx_x();
        if t < count {
            unsafe { red_add(out, t % slots, ld_nc(v, t)) };
        }
    }
}

/// Runs `add_each` over `v` into `out` (blocks of 128 threads).
fn add(v: &[f32], out: &mut [f32], out_writable: bool) -> Result<(), String> {
    let regions = [
        Region { name: "v".into(), start: v.as_ptr() as usize, bytes: v.len() * 4, writable: false },
        Region { name: "out".into(), start: out.as_ptr() as usize, bytes: out.len() * 4, writable: out_writable },
    ];
    let config = LaunchConfig { grid: Dim3::x((v.len() as u32).div_ceil(128)), block: Dim3::x(128), shared_bytes: 0, cluster: Dim3::ONE };
    let args = [
        ArgValue::Ptr(v.as_ptr() as u64),
        ArgValue::Ptr(out.as_mut_ptr() as u64),
        ArgValue::U32(v.len() as u32),
        ArgValue::U32(out.len() as u32),
    ];
    launch_kernel(&add_each::KERNEL, &config, &args, &regions).map_err(|e| e.to_string())
}

#[test]
fn every_add_lands_once() {
    // Small integers: every order of adding them gives the exact sum, so a
    // lost or doubled add shows as a wrong value.
    let v: Vec<f32> = (0..64 * 128).map(|t| (t % 7) as f32 - 3.0).collect();
    let slots = 3;
    let mut out = vec![0.5f32; slots];
    add(&v, &mut out, true).unwrap();
    for (s, got) in out.iter().enumerate() {
        let want: f32 = 0.5 + v.iter().skip(s).step_by(slots).sum::<f32>();
        assert_eq!(*got, want, "slot {s}");
    }
}

#[test]
fn subnormals_flush_to_sign_preserving_zero() {
    let min = f32::MIN_POSITIVE;
    // A subnormal input adds nothing; a subnormal sum becomes a zero of its sign.
    let cases = [(0.0f32, min / 4.0, 0.0f32), (1.5 * min, -min, 0.0), (-1.5 * min, min, -0.0), (min, min, 2.0 * min), (1.0, 0.25, 1.25)];
    for (start, v, want) in cases {
        let mut out = [start];
        add(&[v], &mut out, true).unwrap();
        assert_eq!(out[0].to_bits(), want.to_bits(), "{start:e} + {v:e} gave {:e}", out[0]);
    }
}

#[test]
fn an_add_into_an_input_is_refused() {
    let mut out = [0.0f32; 2];
    let err = add(&[1.0, 2.0], &mut out, false).unwrap_err();
    assert!(err.contains("global store into input buffer `out`"), "{err}");
    assert_eq!(out, [0.0, 0.0]);
}

mage_common::kernel! {
    /// Thread `t < count` adds `v` to `out[t % slots]` and writes the word it replaced to `old[t]`.
    pub unsafe fn count_each(out: *mut u32, old: *mut f32, v: u32, count: u32, slots: u32) {
        let t = block_idx_x() * block_dim_x() + thread_idx_x();
        if t < count {
            unsafe { st(old, t, f32::from_bits(atom_add_u32(out, t % slots, v))) };
        }
    }
}

/// Runs `count_each` for `count` threads (blocks of 128), returning each thread's old word.
fn count(out: &mut [u32], v: u32, count: u32, out_writable: bool) -> Result<Vec<u32>, String> {
    let mut old = vec![0f32; count as usize];
    let regions = [
        Region { name: "out".into(), start: out.as_ptr() as usize, bytes: out.len() * 4, writable: out_writable },
        Region { name: "old".into(), start: old.as_ptr() as usize, bytes: old.len() * 4, writable: true },
    ];
    let config = LaunchConfig { grid: Dim3::x(count.div_ceil(128)), block: Dim3::x(128), shared_bytes: 0, cluster: Dim3::ONE };
    let args = [
        ArgValue::Ptr(out.as_mut_ptr() as u64),
        ArgValue::Ptr(old.as_mut_ptr() as u64),
        ArgValue::U32(v),
        ArgValue::U32(count),
        ArgValue::U32(out.len() as u32),
    ];
    launch_kernel(&count_each::KERNEL, &config, &args, &regions).map_err(|e| e.to_string())?;
    Ok(old.iter().map(|o| o.to_bits()).collect())
}

#[test]
fn every_u32_add_lands_once_and_hands_out_distinct_slots() {
    let (threads, slots) = (40 * 128 + 7, 5u32);
    let mut out = vec![10u32; slots as usize];
    let old = count(&mut out, 1, threads, true).unwrap();
    for s in 0..slots {
        let mine: Vec<u32> = (s..threads).step_by(slots as usize).collect();
        assert_eq!(out[s as usize], 10 + mine.len() as u32, "slot {s}");
        let mut seen: Vec<u32> = mine.iter().map(|&t| old[t as usize]).collect();
        seen.sort();
        assert_eq!(seen, (10..10 + mine.len() as u32).collect::<Vec<_>>(), "slot {s}: the old words are not 10, 11, ...");
    }
}

#[test]
fn u32_adds_wrap() {
    let mut out = [u32::MAX - 1];
    let old = count(&mut out, 3, 1, true).unwrap();
    assert_eq!((out[0], old[0]), (1, u32::MAX - 1));
}

#[test]
fn a_u32_add_into_an_input_is_refused() {
    let mut out = [0u32; 2];
    let err = count(&mut out, 1, 2, false).unwrap_err();
    assert!(err.contains("global store into input buffer `out`"), "{err}");
    assert_eq!(out, [0, 0]);
}
