//! The ops, in the order tables list them, and their embedded PTX.

use mage_common::op::Op;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/ptx.rs"));
}

/// Every op, in the order tables list them: the forward ops, then their
/// gradients, then the transposed products the gradients of a product
/// are made of (`matmul_nt`, `matmul_tn`).
pub fn all() -> Vec<&'static Op> {
    vec![
        &mage_matmul::OP,
        &mage_gelu::OP,
        &mage_gelu::ERF,
        &mage_layernorm::OP,
        &mage_triangle::OP,
        &mage_neighbor::OP,
        &mage_layernorm::BACKWARD,
        &mage_gelu::BACKWARD,
        &mage_gelu::ERF_BACKWARD,
        &mage_triangle::BACKWARD,
        &mage_neighbor::BACKWARD,
        &mage_matmul::NT,
        &mage_matmul::TN,
    ]
}

/// The distinct packages of every op, in the order of [`all`].
pub fn packages() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = vec![];
    for op in all() {
        if !out.contains(&op.package) {
            out.push(op.package);
        }
    }
    out
}

pub fn find(name: &str) -> Result<&'static Op, String> {
    all().into_iter().find(|o| o.name == name).ok_or_else(|| {
        let names: Vec<_> = all().iter().map(|o| o.name).collect();
        format!("unknown op `{name}`; the ops are {}", names.join(", "))
    })
}

/// The PTX built into this binary for `package` (`mage-layernorm`, or
/// `mage-common` for the contract probes).
pub fn ptx(package: &str) -> Result<&'static str, String> {
    match embedded::EMBEDDED.iter().find(|(p, _)| *p == package) {
        Some((_, Ok(ptx))) => Ok(ptx),
        Some((_, Err(e))) => Err(format!(
            "this binary was built without the PTX of {package} (see `doctor`, line `nvptx build`): {}",
            e.lines().next().unwrap_or_default()
        )),
        None => Err(format!("no PTX of {package} is built into this binary")),
    }
}
