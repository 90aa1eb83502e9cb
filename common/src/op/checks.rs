//! Checks of a call's inputs before any kernel runs: counts, element
//! types and lengths, the op's own content checks, finiteness and range.

use super::{HostBuf, Op};
use crate::numeric::Reference;

impl Op {
    /// Checks that `inputs` fit `dims`: counts, element types, contents.
    pub fn check_inputs(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        self.check_dims(dims)?;
        let lens = self.input_lens(dims);
        if inputs.len() != self.inputs.len() {
            return Err(format!("{} takes {} inputs, got {}", self.name, self.inputs.len(), inputs.len()));
        }
        for ((spec, buf), want) in self.inputs.iter().zip(inputs).zip(&lens) {
            if buf.elem() != spec.elem || buf.len() != *want {
                return Err(format!(
                    "{}.bin ({}) holds {} {:?} values; dims {} need {want}",
                    spec.file,
                    spec.role,
                    buf.len(),
                    buf.elem(),
                    Op::dims_label(dims)
                ));
            }
        }
        (self.check_inputs)(dims, inputs)
    }

    /// The op's content check on only the inputs its `content_reads` names
    /// (the others may be empty): the dims are checked, then the count of
    /// inputs and each read input's element type and length, and only then
    /// its contents.
    pub fn check_contents(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        self.check_dims(dims)?;
        if inputs.len() != self.inputs.len() {
            return Err(format!("{} takes {} inputs, got {}", self.name, self.inputs.len(), inputs.len()));
        }
        let lens = self.input_lens(dims);
        for &i in self.content_reads {
            let (spec, buf) = (&self.inputs[i], &inputs[i]);
            if buf.elem() != spec.elem || buf.len() != lens[i] {
                return Err(format!(
                    "{}.bin ({}) holds {} {:?} values; dims {} need {}",
                    spec.file,
                    spec.role,
                    buf.len(),
                    buf.elem(),
                    Op::dims_label(dims),
                    lens[i]
                ));
            }
        }
        (self.check_inputs)(dims, inputs)
    }

    /// Refuses a NaN or an infinity in an f32 input: the error names the
    /// file, the first offending flat index and where that lies in the
    /// input's shape.
    pub fn check_finite(&self, dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
        for ((spec, buf), shape) in self.inputs.iter().zip(inputs).zip(self.input_shapes(dims)) {
            let HostBuf::F32(values) = buf else { continue };
            if let Some(i) = values.iter().position(|x| !x.is_finite()) {
                return Err(format!(
                    "{}.bin ({}) holds {} at index {i} ({:?} of shape {shape:?})",
                    spec.file,
                    spec.role,
                    values[i],
                    crate::numeric::unravel(i, &shape)
                ));
            }
        }
        Ok(())
    }

    /// Refuses finite inputs outside what the op computes in FP32: the
    /// op's own range check, then any output whose magnitude (or value)
    /// passes FP32's range ([`Reference::check_fp32_range`]). Called after
    /// [`Op::check_finite`], with the reference of these inputs: the error
    /// blames the input's range, not a stage.
    pub fn check_range(&self, dims: &[u32], inputs: &[HostBuf], reference: &Reference) -> Result<(), String> {
        (self.check_range)(dims, inputs)?;
        reference.check_fp32_range_with("the inputs are out of FP32's range", |i| self.locate_output(dims, i))
    }
}
