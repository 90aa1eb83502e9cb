//! The control of a measuring session: a device copy of a buffer larger
//! than L2, as a kernel so that CUPTI kernel records time it (they do not
//! record memcpys). A search measures it at the start and the end of each
//! generation; a drift beyond its limit means the GPU changed under the
//! measurement (clocks, another tenant), and the generation is void.

use crate::device::*;

crate::kernel! {
    /// `y = x`, one 128-bit quad per thread; `quads` quads.
    pub unsafe fn control_copy(x: *const f32, y: *mut f32, quads: u32) {
        let q = block_idx_x() * block_dim_x() + thread_idx_x();
        if q < quads {
            unsafe { st4(y, 4 * q, ld_nc4(x, 4 * q)) }
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::control_copy;
    use crate::kernel::Dim3;
    use crate::numeric::Tolerance;
    use crate::op::Extent::Dim;
    use crate::op::{Arg, DEFAULT_GENERATOR, Dispatcher, Elem, Generator, HostBuf, Input, Launch, Op, Output, Plan, Stage};

    /// Floats copied: 256 MiB, five times the H200's L2, so every call
    /// streams device memory.
    pub const CONTROL_FLOATS: u32 = 64 << 20;

    const THREADS: u32 = 256;

    fn plan(d: &[u32]) -> Plan {
        let quads = d[0] / 4;
        Launch {
            kernel: &control_copy::KERNEL,
            grid: Dim3::x(quads.div_ceil(THREADS)),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
            cluster: Dim3::ONE,
            args: vec![Arg::Input(0), Arg::Output(0), Arg::U32(quads)],
        }
        .into()
    }

    static COPY: Stage = Stage {
        name: "copy",
        summary: "one 128-bit quad per thread",
        kernels: &[&control_copy::KERNEL],
        supports: |d| d[0].is_multiple_of(4),
        plan,
    };

    /// The copy as an op, so the GPU runner binds and times it like any
    /// other; its PTX is mage-common's. Not listed among the ops.
    pub static CONTROL: Op = Op {
        name: "control",
        package: "mage-common",
        dim_names: &["n"],
        min_dims: &[4],
        default_dims: &[CONTROL_FLOATS],
        sweep: &[],
        inputs: &[Input { file: "a", role: "x", elem: Elem::F32, shape: &[Dim(0)] }],
        outputs: &[Output { file: "y", role: "y", shape: &[Dim(0)] }],
        constants: &[],
        check_inputs: |d, _| if d[0].is_multiple_of(4) { Ok(()) } else { Err("the control copies whole quads".into()) },
        check_range: |_, _| Ok(()),
        content_reads: &[],
        generators: &[Generator {
            name: DEFAULT_GENERATOR,
            summary: "a ramp",
            generate: |d, _| vec![HostBuf::F32((0..d[0]).map(|i| i as f32).collect())],
        }],
        reference: |_, inputs| crate::numeric::Reference::plain(inputs[0].as_f32().iter().map(|&v| v as f64).collect()),
        tolerance: |_, _| Tolerance::new(0.0, 0.0),
        cost: |d| (8 * d[0] as u64, 0),
        stages: &[&COPY],
        outside_contract: &[],
        current: Dispatcher { summary: "the copy", reads: &[], choose: |_, _| &COPY },
    };

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_control_copies_every_quad() {
            let d = [4 * 300];
            let inputs = CONTROL.generate(&d, 0);
            crate::op::check_stage(&CONTROL, &COPY, &d, &inputs).unwrap();
            assert_eq!(plan(&d).launches[0].grid.x, 2);
        }
    }
}
