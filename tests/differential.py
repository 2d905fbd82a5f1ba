"""A differential tester's programs (issue 29): random expressions from a small grammar over
one dtype, with edge values, as kernel text two ways: over loaded tiles (the interpreter
computes them with NumPy arrays, the GPU with the emitted CUDA) and over the same values as
literals (constant folding computes them, ``lower/ops/registry.make``). Used by
tests/test_differential.py (interpreter vs folding vs an exact reference, CPU) and
tests/gpu/test_differential_gpu.py (GPU vs interpreter, bitwise where the rules are exact)."""

from __future__ import annotations

import random
import zlib

import numpy as np

from .int_semantics_cases import edge_values, wrap

INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOAT_DTYPES = ("f32", "f64")
INT_BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "<<": "shl"}
INT_BINARY |= {">>": "shr", "&": "and", "|": "or", "^": "xor"}
FLOAT_BINARY = ("+", "-", "*", "/")
COMPARE = ("<", "<=", "==", "!=")
VARS = ("a", "b", "c")


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype({"f": "float", "i": "int", "u": "uint"}[dtype[0]] + dtype[1:])


def float_values(dtype: str) -> list[float]:
    info = np.finfo(np_dtype(dtype))
    tiny = float(info.smallest_subnormal)
    return [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, float(info.max), tiny, -tiny, float("inf"),
            float("-inf"), float("nan"), 1e-3]  # fmt: skip


def values(dtype: str) -> list:
    return float_values(dtype) if dtype[0] == "f" else edge_values(dtype)


def literal(value, dtype: str) -> str:
    """``value`` of ``dtype`` as kernel text whose folded value it is exactly."""
    if dtype[0] == "f":
        if value != value:
            return f"(({dtype})NAN)"
        if value in (float("inf"), float("-inf")):
            return f"(({dtype}){'-' if value < 0 else ''}INF)"
        sign = "-" if str(value).startswith("-") else ""
        return f"(({dtype})({sign}{abs(value).hex()}))"
    v = wrap(value, "i64")  # every value's bits as an i64, then converted (rule C3)
    text = "(-9223372036854775807 - 1)" if v == -(2**63) else f"({v})"
    return f"(({dtype}){text})"


def expression(rng: random.Random, dtype: str, depth: int) -> str:
    """A random expression over VARS and edge-value literals, ``depth`` levels at most."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.7:
            return rng.choice(VARS)
        return literal(rng.choice(values(dtype)), dtype)
    kind = rng.random()
    x = expression(rng, dtype, depth - 1)
    if kind < 0.12:
        return f"(-{x})"
    if kind < 0.2:
        y, z = expression(rng, dtype, depth - 1), expression(rng, dtype, depth - 1)
        return f"where({x} {rng.choice(COMPARE)} {y}, {x}, {z})"
    if kind < 0.27:
        y = expression(rng, dtype, depth - 1)
        return f"(({dtype})({x} {rng.choice(COMPARE)} {y}))"
    ops = list(INT_BINARY) if dtype[0] != "f" else list(FLOAT_BINARY)
    return f"({x} {rng.choice(ops)} {expression(rng, dtype, depth - 1)})"


def programs(dtype: str, count: int, seed: str) -> list[str]:
    rng = random.Random(zlib.crc32(f"{seed}:{dtype}".encode()))
    return [expression(rng, dtype, 3) for _ in range(count)]


def inputs(dtype: str, n: int, seed: str) -> dict[str, np.ndarray]:
    rng = random.Random(zlib.crc32(f"inputs:{seed}:{dtype}".encode()))
    pool = values(dtype)
    return {v: np.array([rng.choice(pool) for _ in range(n)], np_dtype(dtype)) for v in VARS}


def tile_kernel(dtype: str, exprs: list[str]) -> str:
    """Kernel ``diff``: row e of ``out`` is expression e over the loaded a, b, c."""
    stores = "".join(
        f"    store(out + {e} * n + i, ({dtype})({x}), m);\n" for e, x in enumerate(exprs)
    )
    return (
        f"kernel diff({dtype} *out, const {dtype} *xa, const {dtype} *xb, const {dtype} *xc, "
        "i32 n, const i32 BLOCK)\n{\n    tile i = arange(0, BLOCK);\n    tile m = i < n;\n"
        "    tile a = load(xa + i, m);\n    tile b = load(xb + i, m);\n"
        "    tile c = load(xc + i, m);\n"
        f"{stores}}}\n"
    )


def folded_kernel(dtype: str, exprs: list[str], env: dict[str, np.ndarray]) -> str:
    """Kernel ``folded``: out[e * n + k] is expression e with sample k's values as literals,
    so constant folding computes every one."""
    n = len(env["a"])
    lines = []
    for e, x in enumerate(exprs):
        for k in range(n):
            text = x
            for v in VARS:
                text = _replace_var(text, v, literal(env[v][k].item(), dtype))
            lines.append(f"    store(out + {e * n + k}, ({dtype})({text}));\n")
    return f"kernel folded({dtype} *out)\n{{\n{''.join(lines)}}}\n"


def _replace_var(text: str, name: str, value: str) -> str:
    import re

    return re.sub(rf"(?<![\w.]){name}(?![\w(])", value, text)


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where two results agree bit for bit (any NaN matches any NaN)."""
    if got.dtype.kind == "f":
        nan = np.isnan(got) & np.isnan(want)
        width = {4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
        return nan | (got.view(width) == want.view(width))
    return got == want
