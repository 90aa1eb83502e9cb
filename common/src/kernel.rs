//! [`kernel!`](crate::kernel!): one declaration, two builds.
//!
//! ```ignore
//! mage_common::kernel! {
//!     /// y[i] = 2 x[i]
//!     pub unsafe fn double(x: *const f32, y: *mut f32, n: u32) {
//!         let i = block_idx_x() * block_dim_x() + thread_idx_x();
//!         if i < n { st(y, i, 2.0 * ld_nc(x, i)) }
//!     }
//! }
//! ```
//!
//! On `nvptx64` this is the `extern "ptx-kernel"` entry `double`. On the host
//! it is the same function plus a module `double` holding
//! `double::KERNEL`, a [`Kernel`] that the emulator and the GPU runner launch
//! by name with a slice of [`ArgValue`]s.

/// The extent of a grid or a block, or an index into one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "nvptx64"), derive(serde::Serialize, serde::Deserialize))]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }
    pub const fn x(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
    /// `(1, 1, 1)`: a cluster of one block, every launch's without one.
    pub const ONE: Dim3 = Dim3 { x: 1, y: 1, z: 1 };
    pub fn count(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

impl core::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// Grid, block, dynamic shared memory and thread-block cluster of one
/// launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: Dim3,
    pub block: Dim3,
    pub shared_bytes: u32,
    /// Blocks per cluster in each dimension ([`Dim3::ONE`]: no cluster);
    /// the grid a multiple of it.
    pub cluster: Dim3,
}

/// The most blocks a cluster may have everywhere (the portable size).
pub const MAX_CLUSTER_BLOCKS: u64 = 8;

/// What a kernel parameter is, as the launchers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A device pointer (`*const f32`, `*mut f32`, `*const u32`, ...).
    Ptr,
    U32,
    F32,
}

#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub kind: ParamKind,
}

/// A resolved kernel argument: a host or device address, or a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    Ptr(u64),
    U32(u32),
    F32(f32),
}

/// A kernel parameter type.
pub trait KernelParam: Sized {
    const KIND: ParamKind;
    fn from_value(v: &ArgValue) -> Self;
}

macro_rules! pointer_params {
    ($($t:ty),*) => {$(
        impl KernelParam for $t {
            const KIND: ParamKind = ParamKind::Ptr;
            fn from_value(v: &ArgValue) -> Self {
                match v { ArgValue::Ptr(p) => *p as usize as $t, other => panic!("expected a pointer argument, got {other:?}") }
            }
        }
    )*};
}
pointer_params!(*const f32, *mut f32, *const u32, *mut u32);

impl KernelParam for u32 {
    const KIND: ParamKind = ParamKind::U32;
    fn from_value(v: &ArgValue) -> Self {
        match v {
            ArgValue::U32(x) => *x,
            other => panic!("expected a u32 argument, got {other:?}"),
        }
    }
}

impl KernelParam for f32 {
    const KIND: ParamKind = ParamKind::F32;
    fn from_value(v: &ArgValue) -> Self {
        match v {
            ArgValue::F32(x) => *x,
            other => panic!("expected an f32 argument, got {other:?}"),
        }
    }
}

/// A kernel as the host sees it: its PTX entry name, its parameters and,
/// for the emulator, the function itself.
pub struct Kernel {
    pub name: &'static str,
    pub params: &'static [Param],
    #[cfg(not(target_arch = "nvptx64"))]
    pub host: fn(&[ArgValue]),
}

impl core::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// Declares a kernel once: the PTX entry on `nvptx64`, the function plus a
/// launchable [`Kernel`] (`NAME::KERNEL`) on the host. Parameters are device
/// pointers, `u32` or `f32`.
#[macro_export]
macro_rules! kernel {
    ($(#[$attr:meta])* $vis:vis unsafe fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$attr])*
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        $vis unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body

        $(#[$attr])*
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(clippy::missing_safety_doc)]
        $vis unsafe fn $name($($arg: $ty),*) $body

        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = concat!("The launchable form of [`", stringify!($name), "`].")]
        $vis mod $name {
            pub static KERNEL: $crate::Kernel = $crate::Kernel {
                name: stringify!($name),
                params: &[$($crate::kernel::Param {
                    name: stringify!($arg),
                    kind: <$ty as $crate::kernel::KernelParam>::KIND,
                }),*],
                host: |args: &[$crate::kernel::ArgValue]| {
                    let mut args = args.iter();
                    let mut next = || args.next().expect(concat!("too few arguments for ", stringify!($name)));
                    // SAFETY: the launcher resolved every argument against the launch's buffers.
                    unsafe { super::$name($(<$ty as $crate::kernel::KernelParam>::from_value(next())),*) }
                },
            };
        }
    };
}
