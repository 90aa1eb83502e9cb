//! The f64 reference of a call, on every core where its rows split.

use super::{Elem, Extent, HostBuf, Op};
use crate::numeric::Reference;

impl Op {
    /// The threads [`Op::reference_on_all_cores`] splits the rows of `dims`
    /// over: 1 unless the output and first input are split into independent
    /// rows by dim 0 and the other inputs do not depend on it. Each thread
    /// past the first holds a copy of the other inputs, so the threads are
    /// fewer where those copies would pass 1 GiB in all.
    fn reference_threads(&self, dims: &[u32]) -> usize {
        let on_dim0 = |e: &Extent| matches!(e, Extent::Dim(0) | Extent::DimPlus1(0));
        let by_rows = self.outputs.len() == 1
            && self.outputs[0].shape.first() == Some(&Extent::Dim(0))
            && self.inputs[0].elem == Elem::F32
            && self.inputs[0].shape.first() == Some(&Extent::Dim(0))
            && self.inputs[1..].iter().all(|i| !i.shape.iter().any(on_dim0));
        if !by_rows {
            return 1;
        }
        let others: usize = self.input_lens(dims)[1..].iter().map(|n| n * 4).sum();
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(dims[0] as usize).min(1 + (1 << 30) / others.max(1)).max(1)
    }

    /// Host bytes [`Op::reference_on_all_cores`] copies the inputs into.
    pub fn reference_copy_bytes(&self, dims: &[u32]) -> u64 {
        let threads = self.reference_threads(dims) as u64;
        if threads < 2 {
            return 0;
        }
        let lens = self.input_lens(dims);
        let others: u64 = lens[1..].iter().map(|&n| n as u64 * 4).sum();
        lens[0] as u64 * 4 + (threads - 1) * others
    }

    /// The f64 reference on every core (fewer where the copies of the inputs
    /// would pass 1 GiB), each thread computing a block of rows; the op's
    /// reference as it is where the rows cannot be split.
    pub fn reference_on_all_cores(&self, dims: &[u32], inputs: &[HostBuf]) -> Reference {
        let threads = self.reference_threads(dims);
        if threads < 2 {
            return (self.reference)(dims, inputs);
        }
        let rows = dims[0] as usize;
        let (in_row, out_row) = (self.input_lens(dims)[0] / rows, self.output_len(dims) / rows);
        let per = rows.div_ceil(threads);
        let x = inputs[0].as_f32();
        std::thread::scope(|s| {
            let parts: Vec<_> = (0..rows)
                .step_by(per)
                .map(|r0| {
                    let n = per.min(rows - r0);
                    s.spawn(move || {
                        let mut d = dims.to_vec();
                        d[0] = n as u32;
                        let mut part = vec![HostBuf::F32(x[r0 * in_row..(r0 + n) * in_row].to_vec())];
                        part.extend(inputs[1..].iter().cloned());
                        let out = (self.reference)(&d, &part);
                        assert_eq!(out.len(), n * out_row);
                        out
                    })
                })
                .collect();
            let mut all = Reference::default();
            for p in parts {
                all.extend(p.join().expect("a reference thread panicked"));
            }
            all
        })
    }
}
