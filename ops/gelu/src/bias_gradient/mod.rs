//! The kernel bodies the two GELU gradient ops share: `gelu_backward` (tanh
//! form) and `gelu_erf_backward` (exact form) differ only in the gradient
//! of one element, `dy·gelu'(x + bias)`, and run the same kernels around
//! it, generic over an [`ElementGradient`]:
//!
//! * [`columns`]: each op's mage-001, a thread per element for dx and a
//!   thread per column for dbias, rows in order;
//! * [`tiles`]: each op's mage-002, a block per column tile and chunk of
//!   rows writing dx and its partial dbias row, then the chunks added in
//!   order.
//!
//! Each stage declares its own `kernel!` entries (their names are the
//! op's) calling these bodies with its op's element
//! ([`TanhGradient`](crate::backward::element_gradient::TanhGradient),
//! [`ErfGradient`](crate::erf_backward::element_gradient::ErfGradient)).
//! Frozen history: the entries compile to the PTX they had when each
//! stage held its own copy of the body, their ptxas resources pinned by
//! `tests/resources.rs` and their bits by the op's tests; a new stage that
//! changes a body takes a module of its own.

pub mod columns;
pub mod tiles;

/// The gradient of one element, `dy·gelu'(z)` with `z = x + bias` as the
/// kernel rounded it: the one thing the shared bodies leave to the op.
pub trait ElementGradient {
    /// `dy·gelu'(z)`, as the op's stages compute it on the GPU.
    fn grad(z: f32, dy: f32) -> f32;
}
