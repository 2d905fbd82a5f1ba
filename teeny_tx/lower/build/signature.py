"""A kernel's parameter list, read from its declaration before any specialisation.

Input: a pycparser ``FuncDef`` of a kernel. Output: :class:`ParamSpec` per parameter: a pointer
(with its element dtype, or None for ``any``), a runtime scalar, or a ``const`` scalar, which is
a compile-time constant (Triton's ``tl.constexpr``). The launcher binds arguments against this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pycparser import c_ast

from ...dtypes import ACC, C_NAMES, DTYPES, DType
from ...errors import CompileError, Location
from ...parse import Unit


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str  # "pointer" | "scalar" | "constexpr"
    dtype: DType | None  # None: `any *`, taken from the argument
    const: bool
    loc: Location

    @property
    def scalar(self) -> DType:
        """The dtype of a scalar or constexpr parameter (only an ``any *`` pointer has none)."""
        assert self.dtype is not None, f"{self.describe()} has no dtype of its own"
        return self.dtype

    def describe(self) -> str:
        if self.kind == "pointer":
            return f"{'const ' if self.const else ''}{self.dtype or 'any'} *{self.name}"
        return f"{'const ' if self.kind == 'constexpr' else ''}{self.dtype} {self.name}"


def type_name(node: c_ast.Node) -> tuple[str, list[str]]:
    """The single type name of a TypeDecl and its qualifiers."""
    names = getattr(node.type, "names", None)
    if not isinstance(node, c_ast.TypeDecl) or not names:
        raise ValueError
    return " ".join(names), list(node.quals)


def kernel_signature(unit: Unit, fn: c_ast.FuncDef) -> tuple[ParamSpec, ...]:
    params = fn.decl.type.args.params if fn.decl.type.args else []
    out = []
    for p in params:
        if isinstance(p, c_ast.Typename):  # `kernel f(void)`
            continue
        loc = unit.loc(p.coord)
        if isinstance(p.type, c_ast.PtrDecl):
            inner = p.type.type
            try:
                name, quals = type_name(inner)
            except ValueError:
                raise CompileError(
                    f"parameter '{p.name}' must be a pointer to an element type", loc
                ) from None
            dtype = None if name == "any" else element_dtype(name, loc)
            out.append(ParamSpec(p.name, "pointer", dtype, "const" in quals, loc))
            continue
        try:
            name, quals = type_name(p.type)
        except ValueError:
            raise CompileError(
                f"parameter '{p.name}' has an unsupported type",
                loc,
                "kernel parameters are pointers (`const f32 *x`), scalars (`i32 n`) "
                "or constants (`const i32 BLOCK`)",
            ) from None
        dtype = element_dtype(name, loc)
        out.append(
            ParamSpec(p.name, "constexpr" if "const" in quals else "scalar", dtype, False, loc)
        )
    names = [p.name for p in out]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise CompileError(f"parameter '{n}' is declared twice", out[i].loc)
    return tuple(out)


def element_dtype(name: str, loc: Location) -> DType:
    """The element type a declaration names, or a CompileError with the name to use instead."""
    if name in DTYPES:
        return DTYPES[name]
    if name == ACC:  # (the builder resolves it in the body; parameters decide it)
        raise CompileError(
            f"a kernel parameter cannot be declared {ACC}",
            loc,
            f"{ACC} is decided by the pointer arguments; declare pointers `any *p` and scalars "
            "with an element type (f32 eps converts to f64 where it meets f64)",
        )
    hint = C_NAMES.get(name)
    raise CompileError(
        f"unknown element type '{name}'",
        loc,
        f"use {hint}" if hint else f"element types are {', '.join(DTYPES)}",
    )


@dataclass(frozen=True)
class Spec:
    """What one specialisation fixes: the key's contents, as the launcher computed them."""

    constexprs: tuple[tuple[str, Any], ...] = ()
    pointer_dtypes: tuple[tuple[str, DType], ...] = ()
    align: tuple[tuple[str, int], ...] = ()
    div16: tuple[str, ...] = ()
    ones: tuple[str, ...] = ()  # integer parameters whose argument is 1: bound as the constant
    num_warps: int = 4
    num_stages: int = 2
    index64: bool = False
    debug: bool = False  # compile device_print and device_assert in
