//! Shapes: each buffer's shape from an op's dims, dims from the shapes
//! of a call's inputs, and the dims text of the command line.

use super::{Extent, Op};

/// Elements of a buffer of this shape.
pub(super) fn elements(shape: &[Extent], dims: &[u32]) -> usize {
    shape.iter().map(|e| e.of(dims)).product()
}

impl Op {
    /// Element counts of each input.
    pub fn input_lens(&self, dims: &[u32]) -> Vec<usize> {
        self.inputs.iter().map(|i| elements(i.shape, dims)).collect()
    }

    /// Each input's shape, outermost first.
    pub fn input_shapes(&self, dims: &[u32]) -> Vec<Vec<usize>> {
        self.inputs.iter().map(|i| i.shape.iter().map(|e| e.of(dims)).collect()).collect()
    }

    /// The output's shape, outermost first; for an op with several
    /// outputs, their concatenation as one flat axis.
    pub fn output_shape(&self, dims: &[u32]) -> Vec<usize> {
        match self.outputs {
            [one] => one.shape.iter().map(|e| e.of(dims)).collect(),
            _ => vec![self.output_len(dims)],
        }
    }

    /// Each output's shape, outermost first.
    pub fn output_shapes(&self, dims: &[u32]) -> Vec<Vec<usize>> {
        self.outputs.iter().map(|o| o.shape.iter().map(|e| e.of(dims)).collect()).collect()
    }

    /// Where each output starts in the concatenation of all of them
    /// (elements), and one past the last.
    pub fn output_offsets(&self, dims: &[u32]) -> Vec<usize> {
        let mut at = vec![0];
        for o in self.outputs {
            at.push(at.last().unwrap() + elements(o.shape, dims));
        }
        at
    }

    /// Elements of every output together.
    pub fn output_len(&self, dims: &[u32]) -> usize {
        self.outputs.iter().map(|o| elements(o.shape, dims)).sum()
    }

    /// Element `flat` of the outputs' concatenation, as `[3, 7]` (one
    /// output) or `dgamma [7]` (several).
    pub fn locate_output(&self, dims: &[u32], flat: usize) -> String {
        let offsets = self.output_offsets(dims);
        let shapes = self.output_shapes(dims);
        if self.outputs.is_empty() {
            return format!("[{flat}]");
        }
        let i = offsets.partition_point(|&o| o <= flat).saturating_sub(1).min(self.outputs.len() - 1);
        let index = crate::numeric::unravel(flat - offsets[i], &shapes[i]);
        if self.outputs.len() == 1 { format!("{index:?}") } else { format!("{} {index:?}", self.outputs[i].role) }
    }

    /// [`Comparison::summary`](crate::numeric::Comparison::summary) with
    /// each element located in its own output.
    pub fn summarize(&self, cmp: &crate::numeric::Comparison, dims: &[u32]) -> String {
        cmp.summary_with(|flat| self.locate_output(dims, flat))
    }

    /// The dims of a call whose inputs have these shapes (outermost first),
    /// checked for consistency and then as by [`Op::check_dims`].
    pub fn dims_from_shapes(&self, shapes: &[Vec<usize>]) -> Result<Vec<u32>, String> {
        if shapes.len() != self.inputs.len() {
            return Err(format!("{} takes {} inputs ({}), got {}", self.name, self.inputs.len(), self.roles(), shapes.len()));
        }
        let mut dims: Vec<Option<u64>> = vec![None; self.dim_names.len()];
        for (input, shape) in self.inputs.iter().zip(shapes) {
            if shape.len() != input.shape.len() {
                return Err(format!(
                    "{} ({}) has {} axes {:?}; {} takes it with {} ({})",
                    input.role,
                    input.file,
                    shape.len(),
                    shape,
                    self.name,
                    input.shape.len(),
                    self.shape_text(input.shape)
                ));
            }
            for (extent, &len) in input.shape.iter().zip(shape) {
                let (i, value) = match *extent {
                    Extent::Dim(i) => (i, len as u64),
                    Extent::DimPlus1(i) if len >= 1 => (i, len as u64 - 1),
                    Extent::DimPlus1(_) => return Err(format!("{} is empty; it must hold at least one value", input.role)),
                };
                match dims[i] {
                    Some(d) if d != value => {
                        return Err(format!(
                            "{} is {shape:?}, which makes `{}` {value}; an earlier input made it {d}",
                            input.role, self.dim_names[i]
                        ));
                    }
                    _ => dims[i] = Some(value),
                }
            }
        }
        let dims = dims
            .iter()
            .zip(self.dim_names)
            .map(|(d, name)| {
                let d = d.ok_or_else(|| format!("no input of {} gives dim `{name}`", self.name))?;
                u32::try_from(d).map_err(|_| format!("{} dim `{name}` is {d}, more than 2^32 - 1", self.name))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        self.check_dims(&dims)?;
        Ok(dims)
    }

    fn roles(&self) -> String {
        self.inputs.iter().map(|i| i.role).collect::<Vec<_>>().join(", ")
    }

    /// `[rows, width]`.
    fn shape_text(&self, shape: &[Extent]) -> String {
        let axes: Vec<String> = shape
            .iter()
            .map(|e| match *e {
                Extent::Dim(i) => self.dim_names[i].to_string(),
                Extent::DimPlus1(i) => format!("{} + 1", self.dim_names[i]),
            })
            .collect();
        format!("[{}]", axes.join(", "))
    }

    /// `4096x768` style.
    pub fn dims_label(dims: &[u32]) -> String {
        dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
    }

    /// The dims of `--dims TEXT`, or the op's default without it.
    pub fn dims_or_default(&self, text: Option<&str>) -> Result<Vec<u32>, String> {
        text.map_or(Ok(self.default_dims.to_vec()), |t| self.parse_dims(t))
    }

    /// Parses `4096,768` (or `4096x768`) and checks the count, that no dim
    /// is zero and that every buffer's element count fits a u32 index.
    pub fn parse_dims(&self, text: &str) -> Result<Vec<u32>, String> {
        let dims = text
            .split([',', 'x'])
            .map(|d| d.trim().parse::<u32>().map_err(|_| format!("`{d}` in --dims {text} is not a whole number below 2^32")))
            .collect::<Result<Vec<_>, _>>()?;
        self.check_dims(&dims)?;
        Ok(dims)
    }

    pub fn check_dims(&self, dims: &[u32]) -> Result<(), String> {
        if dims.len() != self.dim_names.len() {
            return Err(format!("{} takes {} dims ({}), got {}", self.name, self.dim_names.len(), self.dim_names.join(","), dims.len()));
        }
        for ((name, d), min) in self.dim_names.iter().zip(dims).zip(self.min_dims) {
            if d < min {
                return Err(format!("{} dim `{name}` is {d}; it must be at least {min}", self.name));
            }
        }
        let shapes = self.inputs.iter().map(|i| (format!("input {} ({}.bin)", i.role, i.file), i.shape)).chain(
            self.outputs
                .iter()
                .map(|o| (if self.outputs.len() == 1 { "the output".to_string() } else { format!("output {}", o.role) }, o.shape)),
        );
        for (what, shape) in shapes {
            // In u128: a product of u32 dims cannot wrap there.
            let n: u128 = shape.iter().map(|e| e.of(dims) as u128).product();
            if n > (1u128 << 30) {
                return Err(format!("dims {} overflow: {what} would hold {n} elements (at most 2^30)", Op::dims_label(dims)));
            }
        }
        Ok(())
    }
}
