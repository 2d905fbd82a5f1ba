"""Integer semantics (rules I1-I4 of lower/ops/casts.py): one kernel of every integer operator over
the cross product of edge values, and the exact reference computed with Python integers.
Shared by tests/test_int_semantics.py (interpreter, emitted CUDA) and
tests/gpu/test_int_semantics_gpu.py (the GPU, bit for bit)."""

from __future__ import annotations

import numpy as np

INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
BINARY = (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/"), ("mod", "%"))
BINARY += (("shl", "<<"), ("shr", ">>"))
OUTPUTS = [name for name, _ in BINARY] + ["neg", "inc_gt"]
BLOCK = 256


def kernel_text(dtype: str) -> str:
    """``ops_<dtype>``: row k of ``out`` is output k of OUTPUTS; ``wide`` is ``a + b`` stored into
    i64 (a narrow sum wraps before it widens)."""
    lines = [f"    store(out + {k} * n + i, a {sym} b, m);" for k, (_, sym) in enumerate(BINARY)]
    k = len(BINARY)
    lines.append(f"    store(out + {k} * n + i, -a, m);")
    lines.append(f"    store(out + {k + 1} * n + i, ({dtype})((a + 1) > a), m);")
    lines.append("    store(wide + i, a + b, m);")
    body = "\n".join(lines)
    return (
        f"kernel ops_{dtype}({dtype} *out, i64 *wide, const {dtype} *x, const {dtype} *y, "
        "i32 n, const i32 BLOCK)\n{\n    tile i = arange(0, BLOCK);\n    tile m = i < n;\n"
        f"    tile a = load(x + i, m);\n    tile b = load(y + i, m);\n{body}\n}}\n"
    )


def bits_of(dtype: str) -> tuple[int, bool]:
    return int(dtype[1:]), dtype[0] == "i"


def wrap(v: int, dtype: str) -> int:
    bits, signed = bits_of(dtype)
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


def edge_values(dtype: str) -> list[int]:
    bits, signed = bits_of(dtype)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    values = {0, 1, 2, 3, 7, bits - 1, bits, bits + 1, hi, hi - 1, lo, lo + 1, wrap(-1, dtype)}
    values |= {wrap(-7, dtype), 33, 64}
    return sorted(wrap(v, dtype) for v in values)


def operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    values = edge_values(dtype)
    a = [p for p in values for _ in values]
    b = [q for _ in values for q in values]
    np_type = np.dtype(("int" if dtype[0] == "i" else "uint") + dtype[1:])
    return np.array(a, np_type), np.array(b, np_type)


def reference(name: str, a: int, b: int, dtype: str) -> int:
    """The rules, on Python integers."""
    bits, signed = bits_of(dtype)
    if name in ("add", "sub", "mul"):
        return wrap({"add": a + b, "sub": a - b, "mul": a * b}[name], dtype)
    if name in ("div", "mod"):
        if b == 0:
            return 0  # I3
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncates toward zero
        return wrap(q, dtype) if name == "div" else wrap(a - q * b, dtype)
    if name in ("shl", "shr"):
        s = b & ((1 << bits) - 1)  # I4: the amount read as unsigned
        if s >= bits:
            return 0 if name == "shl" or a >= 0 else -1
        return wrap(a << s, dtype) if name == "shl" else a >> s
    if name == "neg":
        return wrap(-a, dtype)
    assert name == "inc_gt"
    return int(wrap(a + 1, dtype) > a)


def expected(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows of OUTPUTS, the wide sum) for :func:`operands`."""
    a, b = operands(dtype)
    pairs = list(zip(a.tolist(), b.tolist(), strict=True))
    rows = np.array([[reference(o, p, q, dtype) for p, q in pairs] for o in OUTPUTS], a.dtype)
    wide = np.array([wrap(reference("add", p, q, dtype), "i64") for p, q in pairs], np.int64)
    return rows, wide
