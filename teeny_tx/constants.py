"""The language's named integer constants: memory orders, scopes and dot precisions.

Input: nothing (declarations). Output: one table per family, each entry a :class:`Named`
(the name a kernel writes, which is also the ``tx::`` enumerator of the device header; its
value; a one-line doc), and :data:`CONSTANTS`, every entry by name, which the builder resolves
identifiers against. ``prelude/language.h`` declares each name (``extern const i32``) and
``prelude/teeny_tx.cuh`` enumerates the memory orders and scopes with these values:
tests/test_facts.py checks that they agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Named:
    """One named constant of the language: ``name`` in kernel text, ``value`` as an i32."""

    name: str
    value: int
    doc: str
    python: str = ""  # how the Python API spells it, where it has one (dot precisions)


# Memory orders of the atomics (Triton's sem=): fences around the access at its scope.
MEMORY_ORDERS: tuple[Named, ...] = (
    Named("RELAXED", 0, "no ordering beyond the atomicity of the access"),
    Named("ACQUIRE", 1, "later accesses stay after it"),
    Named("RELEASE", 2, "earlier accesses stay before it"),
    Named("ACQ_REL", 3, "both (the default, as in Triton)"),
)
DEFAULT_ORDER = "ACQ_REL"

# Scopes of the atomics' fences (Triton's scope=).
SCOPES: tuple[Named, ...] = (
    Named("SCOPE_CTA", 10, "the threads of one program (block)"),
    Named("SCOPE_GPU", 11, "the whole device (the default)"),
    Named("SCOPE_SYS", 12, "the device, the host and peer devices"),
)
DEFAULT_SCOPE = "SCOPE_GPU"

# Input precisions of dot() on f32 operands (Triton's input_precision=).
PRECISIONS: tuple[Named, ...] = (
    Named("IEEE", 20, "f32 FMAs, no tensor cores (the default)", "ieee"),
    Named("TF32", 21, "inputs rounded to TF32 (10-bit mantissa), one tensor-core product", "tf32"),
    Named("TF32X3", 22, "three TF32 products (big + small parts), near f32 accuracy", "tf32x3"),
)
DEFAULT_PRECISION = "IEEE"

CONSTANTS: dict[str, Named] = {c.name: c for c in (*MEMORY_ORDERS, *SCOPES, *PRECISIONS)}


def values(table: tuple[Named, ...]) -> dict[str, int]:
    """{name: value} of one table."""
    return {c.name: c.value for c in table}


def name_of(table: tuple[Named, ...], value: int) -> str:
    """The name of ``value`` in ``table`` (a KeyError where it has none)."""
    for c in table:
        if c.value == value:
            return c.name
    raise KeyError(value)


def names(table: tuple[Named, ...], sep: str = ", ", last: str = " or ") -> str:
    """The names of a table as prose: ``RELAXED, ACQUIRE, RELEASE or ACQ_REL``."""
    *head, tail = (c.name for c in table)
    return f"{sep.join(head)}{last}{tail}" if head else tail
