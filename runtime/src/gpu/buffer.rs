//! Device buffers: an op's inputs, poisoned outputs and scratch.

pub use super::context::L2_FLUSH_BYTES;
use super::cu;
use super::device::Gpu;
use cudarc::driver::{CudaSlice, DevicePtr, sys};
use mage_common::op::{Elem, HostBuf, OUTPUT_POISON, Op};

/// A device buffer of 4-byte elements (f32 or u32 bits).
pub struct DeviceBuf {
    /// At least one element, so that empty buffers still have an address.
    mem: CudaSlice<u32>,
    pub(crate) len: usize,
    pub(crate) elem: Elem,
}

impl DeviceBuf {
    pub fn ptr(&self) -> u64 {
        // Event tracking is off, so the returned guard records nothing.
        self.mem.device_ptr(self.mem.stream()).0
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An op's inputs on the device, uploaded once by [`Gpu::upload`].
pub struct DeviceInputs {
    pub(crate) bufs: Vec<DeviceBuf>,
}

impl DeviceInputs {
    /// The device address of each input, in order.
    pub fn ptrs(&self) -> Vec<u64> {
        self.bufs.iter().map(DeviceBuf::ptr).collect()
    }

    /// Checks that these buffers are the op's inputs for `dims`, so that no
    /// kernel reads past one.
    pub fn check(&self, op: &Op, dims: &[u32]) -> Result<(), String> {
        if self.bufs.len() != op.inputs.len() {
            return Err(format!("{} takes {} inputs, {} were uploaded", op.name, op.inputs.len(), self.bufs.len()));
        }
        for ((spec, buf), want) in op.inputs.iter().zip(&self.bufs).zip(op.input_lens(dims)) {
            if buf.elem != spec.elem || buf.len != want {
                return Err(format!(
                    "the uploaded {} ({}) holds {} {:?} values; dims {} need {want} {:?}",
                    spec.file,
                    spec.role,
                    buf.len,
                    buf.elem,
                    Op::dims_label(dims),
                    spec.elem
                ));
            }
        }
        Ok(())
    }
}

impl Gpu {
    /// Copies an op's inputs to the device.
    pub fn upload(&self, inputs: &[HostBuf]) -> Result<DeviceInputs, String> {
        self.bind()?;
        let mut bufs = Vec::with_capacity(inputs.len());
        for input in inputs {
            let mut buf = self.alloc(input.elem(), input.len())?;
            let words: &[u32] = match input {
                HostBuf::U32(v) => v,
                // SAFETY: f32 and u32 have the same size and alignment, and
                // every bit pattern is a valid u32.
                HostBuf::F32(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len()) },
            };
            self.stream.memcpy_htod(words, &mut buf.mem).map_err(cu("copying an input to the device"))?;
            bufs.push(buf);
        }
        self.sync("uploading inputs")?;
        Ok(DeviceInputs { bufs })
    }

    /// Writes a 256 MiB buffer so that L2 holds none of a call's data
    /// (the context's eviction buffer). Asynchronous: it runs on the stream
    /// ahead of whatever follows. It is a memset, not a kernel, so kernel
    /// records never count it.
    pub fn l2_flush(&self) -> Result<(), String> {
        self.context.evict_l2(self.stream.cu_stream())
    }

    /// An uninitialised buffer of `len` elements.
    pub(crate) fn alloc(&self, elem: Elem, len: usize) -> Result<DeviceBuf, String> {
        // SAFETY: the contents are written (copy or memset) before any read.
        let mem =
            unsafe { self.stream.alloc::<u32>(len.max(1)) }.map_err(|e| format!("allocating {len} elements on the device: {:?}", e.0))?;
        Ok(DeviceBuf { mem, len, elem })
    }

    /// An f32 buffer filled with [`OUTPUT_POISON`].
    pub(crate) fn alloc_poisoned(&self, len: usize) -> Result<DeviceBuf, String> {
        let buf = self.alloc(Elem::F32, len)?;
        self.poison(&buf)?;
        Ok(buf)
    }

    /// Fills a buffer with [`OUTPUT_POISON`] (asynchronously).
    pub(crate) fn poison(&self, buf: &DeviceBuf) -> Result<(), String> {
        // SAFETY: the buffer holds at least `len` words.
        unsafe { sys::cuMemsetD32Async(buf.ptr(), OUTPUT_POISON, buf.len, self.stream.cu_stream()) }
            .result()
            .map_err(cu("poisoning a buffer"))
    }

    pub(crate) fn download(&self, buf: &DeviceBuf) -> Result<Vec<f32>, String> {
        let mut host = vec![0u32; buf.len];
        self.stream.memcpy_dtoh(&buf.mem.slice(..buf.len), &mut host).map_err(cu("copying the output back"))?;
        self.sync("copying the output back")?;
        Ok(host.into_iter().map(f32::from_bits).collect())
    }
}
