//! How long the emulator takes for one 256-thread block meeting at 20
//! barriers (stack allocation included on the first launch, pooled after).
//!
//!     cargo run --release -p mage-common --example emu_barrier_cost

use mage_common::device::*;
use mage_common::emu::{Region, launch_kernel};
use mage_common::kernel::ArgValue;
use mage_common::kernel::{Dim3, LaunchConfig};

mage_common::kernel! {
    unsafe fn twenty_barriers(out: *mut f32) {
        let t = thread_idx_x();
        let mut acc = t as f32;
        for i in 0..20u32 {
            smem_st(t * 4, acc);
            sync_threads();
            acc += smem_ld(((t + i + 1) % block_dim_x()) * 4);
            sync_threads();
        }
        unsafe { st(out, block_idx_x() * block_dim_x() + t, acc) };
    }
}

fn main() {
    for blocks in [1u32, 1, 64] {
        let mut out = vec![0f32; 256 * blocks as usize];
        let cfg = LaunchConfig { grid: Dim3::x(blocks), block: Dim3::x(256), shared_bytes: 1024, cluster: Dim3::ONE };
        let regions = [Region { name: "out".into(), start: out.as_ptr() as usize, bytes: out.len() * 4, writable: true }];
        let start = std::time::Instant::now();
        launch_kernel(&twenty_barriers::KERNEL, &cfg, &[ArgValue::Ptr(out.as_mut_ptr() as u64)], &regions).unwrap();
        let ms = start.elapsed().as_secs_f64() * 1e3;
        println!("{blocks:>3} block(s) of 256 threads, 40 barriers each: {ms:.2} ms ({:.2} ms per block)", ms / blocks as f64);
    }
}
