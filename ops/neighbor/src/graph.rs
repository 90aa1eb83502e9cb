//! The graphs: the generators' degree distributions and graphs
//! ([`degrees`], [`rowptr_of`], [`generate_with_skew`], [`GENERATORS`]),
//! the largest row of a row pointer ([`max_degree`], which the dispatcher
//! reads), the CSR checks every launch relies on ([`check_csr`]), and the
//! transpose the gradient reads ([`transpose_csr`], checked by
//! [`check_transpose`]).

use mage_common::fixtures::{Rng, normal_input};
use mage_common::op::{Generator, HostBuf};

/// The in-degree of each row (its edge count), for a degree
/// distribution of exponent `skew / 1000` (0: uniform).
pub fn degrees(n: u32, edges: u32, skew: u32, seed: u64) -> Vec<u32> {
    let mut rng = Rng::stream(seed, 2);
    let mut deg = vec![0u32; n as usize];
    if skew == 0 {
        for _ in 0..edges {
            deg[rng.below(n as u64) as usize] += 1;
        }
        return deg;
    }
    let s = skew as f64 / 1000.0;
    let mut total = 0.0;
    let cdf: Vec<f64> = (1..=n)
        .map(|r| {
            total += (r as f64).powf(-s);
            total
        })
        .collect();
    let mut row_of_rank: Vec<u32> = (0..n).collect();
    for i in (1..n as usize).rev() {
        row_of_rank.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for _ in 0..edges {
        let u = rng.uniform() * total;
        let rank = cdf.partition_point(|c| *c <= u).min(n as usize - 1);
        deg[row_of_rank[rank] as usize] += 1;
    }
    deg
}

/// The row pointer of a graph with these in-degrees.
pub fn rowptr_of(degrees: &[u32]) -> Vec<u32> {
    let mut rowptr = Vec::with_capacity(degrees.len() + 1);
    rowptr.push(0);
    let mut acc = 0;
    for d in degrees {
        acc += d;
        rowptr.push(acc);
    }
    rowptr
}

/// The largest in-degree (row length) of a CSR row pointer.
pub fn max_degree(rowptr: &[u32]) -> u32 {
    rowptr.windows(2).map(|p| p[1].saturating_sub(p[0])).max().unwrap_or(0)
}

/// The exponent (times 1000) of the `power-law` generator.
pub const POWER_LAW_SKEW: u32 = 1200;

/// A graph for `[n, width, edges]` with degrees of exponent `skew / 1000`.
pub fn generate_with_skew(dims: &[u32], seed: u64, skew: u32) -> Vec<HostBuf> {
    let (n, width, edges) = (dims[0], dims[1], dims[2]);
    let rowptr = rowptr_of(&degrees(n, edges, skew, seed));
    let mut rng = Rng::stream(seed, 3);
    let indices: Vec<u32> = (0..edges).map(|_| rng.below(n as u64) as u32).collect();
    vec![
        HostBuf::F32(normal_input(seed, 0, n as usize * width as usize)),
        HostBuf::F32(normal_input(seed, 1, edges as usize)),
        HostBuf::U32(rowptr),
        HostBuf::U32(indices),
    ]
}

pub static GENERATORS: [Generator; 2] = [
    Generator {
        name: "uniform",
        summary: "destinations uniform over the rows, sources uniform, x and w normal(0, 0.25)",
        generate: |d, seed| generate_with_skew(d, seed, 0),
    },
    Generator {
        name: "power-law",
        summary: "destination of rank r with probability ∝ r^-1.2, sources uniform, x and w normal(0, 0.25)",
        generate: |d, seed| generate_with_skew(d, seed, POWER_LAW_SKEW),
    },
];

/// The CSR checks every launch relies on: rowptr starts at 0, never
/// decreases and ends at `edges`; every index is below `n`. It reads
/// only rowptr and indices (inputs 2 and 3, the op's `content_reads`):
/// x and w may be empty, as where the Python module copies only these
/// two from the device. (Their lengths are checked by
/// [`Op::check_inputs`](mage_common::op::Op::check_inputs) or
/// [`Op::check_contents`](mage_common::op::Op::check_contents) before this runs.)
pub fn check_csr(dims: &[u32], inputs: &[HostBuf]) -> Result<(), String> {
    let (n, edges) = (dims[0], dims[2]);
    let (rowptr, indices) = (inputs[2].as_u32(), inputs[3].as_u32());
    if rowptr[0] != 0 {
        return Err(format!("rowptr.bin: rowptr[0] is {}; a CSR row pointer must start at 0", rowptr[0]));
    }
    if let Some(i) = rowptr.windows(2).position(|p| p[1] < p[0]) {
        return Err(format!(
            "rowptr.bin: rowptr decreases at row {i}: rowptr[{i}] = {} > rowptr[{}] = {}",
            rowptr[i],
            i + 1,
            rowptr[i + 1]
        ));
    }
    if rowptr[n as usize] != edges {
        return Err(format!("rowptr.bin: rowptr[{n}] is {}; it must equal the edge count {edges}", rowptr[n as usize]));
    }
    if let Some(e) = indices.iter().position(|&j| j >= n) {
        return Err(format!("indices.bin: indices[{e}] is {}; every index must be below n = {n}", indices[e]));
    }
    Ok(())
}

/// The transpose of a CSR graph, by source: `t_rowptr [n + 1]`, the
/// offsets of each node's out-edges (the edges `e` with `indices[e] =
/// s`); `t_rows [edges]`, the row holding each of them (`rowptr[r] <= e <
/// rowptr[r + 1]`); and `t_edges [edges]`, their edge numbers, each
/// node's in increasing order. A property of the graph alone: built once
/// per graph, in `O(n + edges)`, by a counting sort over the edges in
/// order (which is what makes each node's list increasing).
pub struct Transpose {
    pub t_rowptr: Vec<u32>,
    pub t_rows: Vec<u32>,
    pub t_edges: Vec<u32>,
}

/// See [`Transpose`]. `rowptr` and `indices` must pass [`check_csr`].
pub fn transpose_csr(n: u32, rowptr: &[u32], indices: &[u32]) -> Transpose {
    let mut count = vec![0u32; n as usize];
    for &s in indices {
        count[s as usize] += 1;
    }
    let t_rowptr = rowptr_of(&count);
    let mut next: Vec<u32> = t_rowptr[..n as usize].to_vec();
    let (mut t_rows, mut t_edges) = (vec![0u32; indices.len()], vec![0u32; indices.len()]);
    for r in 0..n as usize {
        for e in rowptr[r]..rowptr[r + 1] {
            let slot = &mut next[indices[e as usize] as usize];
            t_rows[*slot as usize] = r as u32;
            t_edges[*slot as usize] = e;
            *slot += 1;
        }
    }
    Transpose { t_rowptr, t_rows, t_edges }
}

/// That `t_rowptr`, `t_rows` and `t_edges` are the [`Transpose`] of the
/// graph `rowptr`, `indices` (which must pass [`check_csr`]), in `O(n +
/// edges)`: t_rowptr starts at 0, never decreases and ends at `edges`;
/// each node's entries are edges of which it is the source, in strictly
/// increasing order, each with its row. So every edge is listed once
/// (it can only be in its source's list, and only once there), and a
/// kernel that walks the lists reads in bounds and sums each node's
/// out-edges in increasing order.
pub fn check_transpose(n: u32, rowptr: &[u32], indices: &[u32], t_rowptr: &[u32], t_rows: &[u32], t_edges: &[u32]) -> Result<(), String> {
    let edges = indices.len() as u32;
    if t_rowptr[0] != 0 {
        return Err(format!("t_rowptr.bin: t_rowptr[0] is {}; a transposed row pointer must start at 0", t_rowptr[0]));
    }
    if let Some(s) = t_rowptr.windows(2).position(|p| p[1] < p[0]) {
        return Err(format!(
            "t_rowptr.bin: t_rowptr decreases at node {s}: t_rowptr[{s}] = {} > t_rowptr[{}] = {}",
            t_rowptr[s],
            s + 1,
            t_rowptr[s + 1]
        ));
    }
    if t_rowptr[n as usize] != edges {
        return Err(format!("t_rowptr.bin: t_rowptr[{n}] is {}; it must equal the edge count {edges}", t_rowptr[n as usize]));
    }
    let mut row = vec![0u32; edges as usize];
    for r in 0..n as usize {
        row[rowptr[r] as usize..rowptr[r + 1] as usize].fill(r as u32);
    }
    for s in 0..n {
        let (start, end) = (t_rowptr[s as usize], t_rowptr[s as usize + 1]);
        for i in start as usize..end as usize {
            let e = t_edges[i];
            if e >= edges || indices[e as usize] != s {
                return Err(format!(
                    "t_edges.bin: t_edges[{i}] is {e}; node {s}'s entries must be edges with indices[e] = {s}{}",
                    if e >= edges {
                        format!(" (there are {edges} edges)")
                    } else {
                        format!(", and indices[{e}] is {}", indices[e as usize])
                    }
                ));
            }
            if i > start as usize && t_edges[i - 1] >= e {
                return Err(format!(
                    "t_edges.bin: t_edges[{}] = {} then t_edges[{i}] = {e}; node {s}'s edges must be in increasing order",
                    i - 1,
                    t_edges[i - 1]
                ));
            }
            if t_rows[i] != row[e as usize] {
                return Err(format!("t_rows.bin: t_rows[{i}] is {}; edge {e} is in row {}", t_rows[i], row[e as usize]));
            }
        }
    }
    Ok(())
}
