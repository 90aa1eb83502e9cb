"""What an op is, from the Rust registry (the Python module `mage`).

The Python implementations compute the same function as the Rust stages;
the constants of its definition (LayerNorm's `eps`, GELU's coefficients)
are read here from the registry, never written down a second time.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def op_info(op: str) -> dict:
    import mage

    return mage.op_info(op)


def poison() -> int:
    """The output poison bit pattern (a quiet NaN) the Rust runner fills with."""
    import mage

    return mage.POISON


def constants(op: str) -> dict[str, float]:
    """`{"eps": 1e-05}` for layernorm; `{}` for an op without constants."""
    return dict(op_info(op)["constants"])


def constant(op: str, name: str) -> float:
    c = constants(op)
    if name not in c:
        raise KeyError(f"the registry of {op} has no constant `{name}` (it has {', '.join(sorted(c)) or 'none'})")
    return c[name]
