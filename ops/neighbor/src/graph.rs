//! The graphs: the generators' degree distributions and graphs
//! ([`degrees`], [`rowptr_of`], [`generate_with_skew`], [`GENERATORS`]),
//! the largest row of a row pointer ([`max_degree`], which the dispatcher
//! reads) and the CSR checks every launch relies on ([`check_csr`]).

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
