"""C expressions with the parentheses C's precedence needs, and no others.

Input: the texts of operands, each with its precedence, and an op's CUDA spelling from the op
table (``lower/ops/table.py``: a C operator, or a format over ``{0}``, ``{1}``... and ``{T}``).
Output: :class:`Text`, the expression and its own precedence, so the consumer parenthesises it
only where it must. Operands of ``&``, ``|``, ``^``, ``&&``, ``||`` and shifts that are other
binary operations, and comparisons of comparisons, keep parentheses for the reader
(``(x < n) & (y < m)``), as compilers' own ``-Wparentheses`` asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRIMARY = 16  # names, literals, calls, subscripts
UNARY = 15  # casts, -x, !x, ~x, *p
TERNARY = 3  # c ? a : b
LOWEST = 0  # anything: a statement, a function argument

BINARY = {
    "*": 13,
    "/": 13,
    "%": 13,
    "+": 12,
    "-": 12,
    "<<": 11,
    ">>": 11,
    "<": 10,
    "<=": 10,
    ">": 10,
    ">=": 10,
    "==": 9,
    "!=": 9,
    "&": 8,
    "^": 7,
    "|": 6,
    "&&": 5,
    "||": 4,
}
_CLARIFY = {"&", "^", "|", "&&", "||", "<<", ">>"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_CALL = re.compile(r"^[\w:]+(<[^()]*>)?\(")


@dataclass(frozen=True)
class Text:
    text: str
    prec: int = PRIMARY
    op: str | None = None  # the binary operator at its top, if any

    def at(self, need: int) -> str:
        """The text as an operand that needs precedence ``need`` or tighter."""
        return self.text if self.prec >= need else f"({self.text})"


def atom(text: str) -> Text:
    return Text(text, UNARY if text.startswith("-") else PRIMARY)


def binary(symbol: str, a: Text, b: Text) -> Text:
    p = BINARY[symbol]

    def side(x: Text, need: int) -> str:
        if x.op is not None and (
            symbol in _CLARIFY and x.op != symbol or symbol in _COMPARE and x.op in _COMPARE
        ):
            return f"({x.text})"
        return x.at(need)

    return Text(f"{side(a, p)} {symbol} {side(b, p + 1)}", p, symbol)


def unary(symbol: str, a: Text) -> Text:
    inner = a.at(UNARY)
    if symbol in ("-", "+") and inner.startswith(symbol):
        inner = f"({inner})"  # - -x, not --x: C's decrement (+ likewise)
    return Text(f"{symbol}{inner}", UNARY)


def cast(ctype: str, a: Text) -> Text:
    return Text(f"({ctype}){a.at(UNARY)}", UNARY)


def _outer_parens(fmt: str) -> bool:
    """Whether ``fmt`` is one parenthesised whole: ``(...)``."""
    if not (fmt.startswith("(") and fmt.endswith(")")):
        return False
    depth = 0
    for k, ch in enumerate(fmt):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k < len(fmt) - 1:
            return False
    return True


def _is_call(fmt: str) -> bool:
    m = _CALL.match(fmt)
    return m is not None and _outer_parens(fmt[m.end() - 1 :])


def op_text(fmt: str, symbol: str | None, args: list[Text], ctype: str) -> Text:
    """An op table entry's spelling applied to its operands."""
    narrow = fmt.startswith("({T})(")  # C promotes narrow integers: cast the result back
    if symbol in BINARY and len(args) == 2 and f"{{0}} {symbol} {{1}}" in fmt:
        inner = binary(symbol, *args)
        return Text(f"({ctype})({inner.text})", UNARY) if narrow else inner
    if symbol is not None and len(args) == 1 and f"{symbol}{{0}}" in fmt:
        inner = unary(symbol, args[0])
        return Text(f"({ctype})({inner.text})", UNARY) if narrow else inner
    call = _is_call(fmt)
    if not call and _outer_parens(fmt):
        fmt = fmt[1:-1]
    out, pos = [], 0
    for m in re.finditer(r"\{(\d+|T)\}", fmt):
        out.append(fmt[pos : m.start()])
        if m.group(1) == "T":
            out.append(ctype)
        else:
            before, after = fmt[: m.start()].rstrip(" "), fmt[m.end() :].lstrip(" ")
            argument = before.endswith(("(", ",")) and after.startswith((")", ","))
            out.append(args[int(m.group(1))].at(LOWEST if argument else PRIMARY))
        pos = m.end()
    out.append(fmt[pos:])
    return Text("".join(out), PRIMARY if call else LOWEST)
