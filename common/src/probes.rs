//! Probe kernels for the numerical contract ([`crate::numeric`]): each
//! applies one instruction elementwise, so the GPU self-check can measure
//! it against the host's version on the same inputs.

use crate::device::*;

macro_rules! unary_probe {
    ($($(#[$m:meta])* $name:ident => $f:expr;)*) => {$(
        crate::kernel! {
            $(#[$m])*
            pub unsafe fn $name(x: *const f32, y: *mut f32, n: u32) {
                let i = block_idx_x() * block_dim_x() + thread_idx_x();
                if i < n {
                    unsafe { st(y, i, $f(ld_nc(x, i))) }
                }
            }
        }
    )*};
}

unary_probe! {
    /// y = rsqrt.approx(x)
    probe_rsqrt_approx => rsqrt_approx;
    /// y = tanh.approx(x)
    probe_tanh_approx => tanh_approx;
    /// y = ex2.approx(x)
    probe_ex2_approx => ex2_approx;
}

crate::kernel! {
    /// y = a * b + c written plainly: shows whether the GPU build contracts it.
    pub unsafe fn probe_mul_add(a: *const f32, b: *const f32, c: *const f32, y: *mut f32, n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            unsafe { st(y, i, ld_nc(a, i) * ld_nc(b, i) + ld_nc(c, i)) }
        }
    }
}
