//! The emulator's `red.global.add.f32` (neighbor's try-split stage adds
//! the parts of heavy rows with it):
//! every add lands exactly once when threads of many blocks add to the
//! same words at once, subnormal inputs and results flush to
//! sign-preserving zero as PTX defines on global memory, and an add into
//! an input buffer is refused like a store.

use mage_common::device::atomic::red_add;
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
    let config = LaunchConfig { grid: Dim3::x((v.len() as u32).div_ceil(128)), block: Dim3::x(128), shared_bytes: 0 };
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
