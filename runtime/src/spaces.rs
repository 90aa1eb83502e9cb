//! The parameter spaces of the ops that have one (see
//! [`mage_common::space`]): what `evolve` searches and audits.

use mage_common::space::Space;

/// Every op's space, in the order tables list ops.
pub fn all() -> Vec<&'static Space> {
    vec![&mage_matmul::space::SPACE, &mage_layernorm::space::SPACE]
}

/// The space of op `name`.
pub fn find(name: &str) -> Result<&'static Space, String> {
    all().into_iter().find(|s| s.op.name == name).ok_or_else(|| {
        let names: Vec<_> = all().iter().map(|s| s.op.name).collect();
        format!("`{name}` has no parameter space; these ops do: {}", names.join(", "))
    })
}
