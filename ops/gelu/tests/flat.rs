//! gelu's and gelu_erf's mage-003 (`flat_quads`) on the emulator, beyond
//! what the registry-wide tests in `stages.rs` and `erf.rs` check: every
//! tail of the flat run (`rows·width mod 4` of 0 to 3, widths of 1 to 3,
//! quads straddling rows), the same bits as the stage whose arithmetic it
//! shares, a grid smaller than the run (each thread stepping over many
//! quads, the column carried across the wrap), and the scalar path taken
//! where x or y is not 16-byte aligned.

use mage_common::emu::{Region, launch_kernel};
use mage_common::fixtures::Rng;
use mage_common::kernel::{ArgValue, Dim3, LaunchConfig};
use mage_common::op::{HostBuf, Launch, Op, Plan, Stage, check_stage, emulate, emulate_plan};
use mage_gelu::flat_quads::{Activation, THREADS, blocks};
use mage_gelu::{ERF, OP, erf, mage_002, mage_003};

fn inputs(rows: u32, width: u32, seed: u64) -> Vec<HostBuf> {
    let mut r = Rng::new(seed);
    vec![HostBuf::F32(r.normal_vec((rows * width) as usize, 0.0, 2.0)), HostBuf::F32(r.normal_vec(width as usize, 0.0, 0.25))]
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

/// `A::y(x + bias)` on the host, element by element: what the emulator
/// must reproduce bit for bit (it computes `ex2.approx` and `rsqrt.approx`
/// the same way on both sides).
fn on_host<A: Activation>(dims: &[u32], inputs: &[HostBuf]) -> Vec<f32> {
    let (x, bias) = (inputs[0].as_f32(), inputs[1].as_f32());
    x.iter().enumerate().map(|(i, x)| A::y(x + bias[i % dims[1] as usize])).collect()
}

/// Shapes whose flat runs end in every tail, with widths below a quad,
/// odd widths, a width of one block's quads and more than one block.
const SHAPES: [(u32, u32); 14] =
    [(1, 1), (1, 2), (1, 3), (3, 1), (2, 3), (5, 7), (3, 257), (4, 257), (7, 1001), (2, 1002), (9, 1023), (1, 4097), (13, 129), (1, 5)];

fn every_shape(op: &Op, stage: &Stage, host: fn(&[u32], &[HostBuf]) -> Vec<f32>) {
    for (rows, width) in SHAPES {
        let dims = [rows, width];
        let x = inputs(rows, width, 31 * rows as u64 + width as u64);
        check_stage(op, stage, &dims, &x).unwrap_or_else(|e| panic!("{e}"));
        let out = emulate(op, stage, &dims, &x).unwrap();
        assert_eq!(bits(&out), bits(&host(&dims, &x)), "{} {} at {rows}x{width}", op.name, stage.name);
    }
}

#[test]
fn gelu_mage_003_is_its_arithmetic_on_every_tail() {
    every_shape(&OP, &mage_003::STAGE, on_host::<mage_003::Logistic>);
}

#[test]
fn gelu_erf_mage_003_is_its_arithmetic_on_every_tail() {
    every_shape(&ERF, &erf::mage_003::STAGE, on_host::<erf::mage_003::Exact>);
}

/// Where mage-002 runs (width a multiple of 4), mage-003 is its bits; the
/// exact form's mage-003 is mage-001's bits at any width.
#[test]
fn the_same_bits_as_the_stage_whose_arithmetic_it_shares() {
    for (rows, width) in [(3u32, 4u32), (5, 768), (17, 260)] {
        let x = inputs(rows, width, rows as u64 + 7 * width as u64);
        let a = emulate(&OP, &mage_002::STAGE, &[rows, width], &x).unwrap();
        let b = emulate(&OP, &mage_003::STAGE, &[rows, width], &x).unwrap();
        assert_eq!(bits(&a), bits(&b), "gelu at {rows}x{width}");
    }
    for (rows, width) in [(3u32, 257u32), (5, 768), (6, 1001), (1, 3)] {
        let x = inputs(rows, width, rows as u64 + 11 * width as u64);
        let a = emulate(&ERF, &erf::mage_001::STAGE, &[rows, width], &x).unwrap();
        let b = emulate(&ERF, &erf::mage_003::STAGE, &[rows, width], &x).unwrap();
        assert_eq!(bits(&a), bits(&b), "gelu_erf at {rows}x{width}");
    }
}

/// Grids of 1, 2 and 3 blocks over runs of many times their threads: each
/// thread steps over quads, its column carried by `4·threads mod width`
/// across the wrap; against the host's bits.
#[test]
fn a_grid_smaller_than_the_run_steps_over_it() {
    for (rows, width, grid) in [(37u32, 1001u32, 3u32), (64, 257, 1), (9, 1537, 2), (50, 3, 1), (21, 1024, 2)] {
        let dims = [rows, width];
        let x = inputs(rows, width, grid as u64 + width as u64);
        for (op, stage, host) in [
            (&OP, &mage_003::STAGE, on_host::<mage_003::Logistic> as fn(&[u32], &[HostBuf]) -> Vec<f32>),
            (&ERF, &erf::mage_003::STAGE, on_host::<erf::mage_003::Exact>),
        ] {
            let mut plan = op.plan_for(stage, &dims).unwrap();
            plan.launches[0].grid = Dim3::x(grid);
            let out = emulate_plan(op, &plan, &dims, &x).unwrap();
            assert_eq!(bits(&out), bits(&host(&dims, &x)), "{} at {rows}x{width} on {grid} blocks", op.name);
        }
    }
}

/// A thread a quad: 978 blocks at 1000x1001 (one wave at eight blocks an
/// SM on 132 SMs), at least one block.
#[test]
fn the_grid_is_a_thread_a_quad() {
    assert_eq!(blocks(1000, 1001), 978);
    assert_eq!(blocks(1, 1), 1);
    assert_eq!(blocks(4096, 768), 3072);
    assert_eq!(blocks(3, 257), 1);
    assert_eq!(blocks(16384, 4096), 65536);
    let plan: Plan = (mage_003::STAGE.plan)(&[1000, 1001]);
    let Launch { grid, block, .. } = &plan.launches[0];
    assert_eq!((grid.x, block.x), (978, THREADS));
}

/// x and y one float past a 16-byte boundary: the scalar path, every
/// element, against the host's bits (the bias is read by scalars anyway).
#[test]
fn misaligned_tensors_take_the_scalar_path() {
    for (rows, width) in [(3u32, 257u32), (4, 1001), (2, 8)] {
        let n = (rows * width) as usize;
        let x = inputs(rows, width, 5 + width as u64);
        for (op, kernel, host) in [
            (&OP, &mage_003::gelu_flat::KERNEL, on_host::<mage_003::Logistic> as fn(&[u32], &[HostBuf]) -> Vec<f32>),
            (&ERF, &erf::mage_003::gelu_erf_flat::KERNEL, on_host::<erf::mage_003::Exact>),
        ] {
            // Room for a 16-byte boundary and one float past it.
            let mut xs = vec![0f32; n + 8];
            let mut ys = vec![f32::NAN; n + 8];
            let skip = |p: *const f32| (4 - (p as usize / 4) % 4) % 4 + 1;
            let (sx, sy) = (skip(xs.as_ptr()), skip(ys.as_ptr()));
            xs[sx..sx + n].copy_from_slice(x[0].as_f32());
            let bias = x[1].as_f32();
            let (xp, yp) = (xs[sx..].as_ptr(), ys[sy..].as_mut_ptr());
            assert!(xp as usize % 16 == 4 && yp as usize % 16 == 4);
            let regions = vec![
                Region { name: "x".into(), start: xp as usize, bytes: n * 4, writable: false },
                Region { name: "bias".into(), start: bias.as_ptr() as usize, bytes: width as usize * 4, writable: false },
                Region { name: "y".into(), start: yp as usize, bytes: n * 4, writable: true },
            ];
            let config = LaunchConfig { grid: Dim3::x(blocks(rows, width)), block: Dim3::x(THREADS), shared_bytes: 0, cluster: Dim3::ONE };
            let args = [
                ArgValue::Ptr(xp as u64),
                ArgValue::Ptr(bias.as_ptr() as u64),
                ArgValue::Ptr(yp as u64),
                ArgValue::U32(rows),
                ArgValue::U32(width),
            ];
            launch_kernel(kernel, &config, &args, &regions).unwrap_or_else(|e| panic!("{}: {e}", op.name));
            assert_eq!(bits(&ys[sy..sy + n]), bits(&host(&[rows, width], &x)), "{} at {rows}x{width}", op.name);
        }
    }
}
