"""C literal text → Python values, or a located error for the forms the language refuses.

Input: the text pycparser gives a ``Constant`` node (``0x1p3``, ``'a'``, ``"%d\\n"``, ``42u``)
and its :class:`~teeny_tx.errors.Location`. Output: a Python ``int``, ``float`` or ``str``.

L1. Integers: decimal, octal (``017``), hex (``0x1F``) and binary (``0b101``), with ``u``/``l``
    suffixes; a value that needs more than 64 bits is refused.
L2. Floats: decimal (``1.5e3f``) and hexadecimal (``0x1.8p3``), exactly as C reads them.
L3. Character constants are one character (``'a'``, ``'\\n'``, ``'\\x41'``, ``'\\101'``) and
    give its code; multi-character (``'ab'``) and wide or Unicode constants (``L'a'``,
    ``u'a'``, ``U'a'``, ``u8'a'``) are refused.
L4. Strings (messages of ``static_assert``, ``device_print``, ``device_assert``) take C's
    escapes; an unknown escape (``"\\q"``) or a wide string is refused.
"""

from __future__ import annotations

import re

from ..errors import CompileError, Location

_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
_PIECE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_PIECES = re.compile(r'(?:"(?:[^"\\\n]|\\.)*"\s*)+')
_INT = re.compile(
    r"(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)([uU](?:ll|LL|[lL])?|(?:ll|LL|[lL])[uU]?)?"
)


def integer(text: str, loc: Location) -> tuple[int, bool]:
    """L1: the value of an integer literal and whether it is unsigned (a ``u`` suffix)."""
    m = _INT.fullmatch(text)
    if m is None:
        raise CompileError(f"malformed integer literal '{text}'", loc, "e.g. 42, 0x2A, 052, 42u")
    digits = m[1]
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif digits[:2] in ("0b", "0B"):
        value = int(digits[2:], 2)
    elif digits.startswith("0"):
        value = int(digits, 8)
    else:
        value = int(digits)
    if value >= 1 << 64:
        raise CompileError(
            f"integer literal '{text}' does not fit in 64 bits", loc, "the widest type is u64"
        )
    return value, "u" in (m[2] or "").lower()


def floating(text: str, loc: Location) -> float:
    """L2: the value of a float literal, decimal or hexadecimal."""
    body = text[:-1] if text[-1:] in "fFlL" else text
    try:
        if body[:2] in ("0x", "0X"):
            return float.fromhex(body)
        return float(body)
    except ValueError:
        raise CompileError(
            f"malformed float literal '{text}'", loc, "e.g. 1.5f, 2e-3, 0x1p3"
        ) from None


def character(text: str, loc: Location) -> int:
    """L3: the code of a one-character constant."""
    if not text.startswith("'"):
        raise CompileError(
            f"wide and Unicode character constants ({text}) are not supported",
            loc,
            f"write the code as an integer, e.g. {_code_hint(text)}",
        )
    chars = _unescape(text[1:-1], loc, "character constant")
    if len(chars) != 1:
        raise CompileError(
            f"a character constant holds one character, got {text}",
            loc,
            "write one character, e.g. 'a', or the code as an integer",
        )
    return ord(chars)


def string(text: str, loc: Location) -> str:
    """L4: the text of a string literal, escapes decoded."""
    if not text.startswith('"'):
        raise CompileError(
            "wide and Unicode strings are not supported", loc, 'write a plain "string"'
        )
    # adjacent literals are one string ("a" "b"); pycparser leaves some joins undone
    # ("?" "?=" stays as written), so each piece is decoded here, escapes per piece as in C
    pieces = _PIECE.findall(text)
    if pieces and _PIECES.fullmatch(text):
        return "".join(_unescape(p, loc, "string") for p in pieces)
    return _unescape(text[1:-1], loc, "string")


def _unescape(body: str, loc: Location, what: str) -> str:
    def one(m: re.Match) -> str:
        e = m.group(1)
        if e[0] in "xuU" and len(e) == 1:
            raise CompileError(
                f"escape '\\{e}' without its hexadecimal digits in a {what}",
                loc,
                "write \\xHH (one or more digits), \\uHHHH or \\UHHHHHHHH, or \\\\ for a backslash",
            )
        if e[0] == "x":
            code = int(e[1:], 16)
        elif e[0] in "01234567":
            code = int(e, 8)
        elif e[0] in "uU":
            code = int(e[1:], 16)
        elif e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e]
        else:
            raise CompileError(
                f"unknown escape sequence '\\{e}' in a {what}",
                loc,
                "C's escapes are \\n \\t \\r \\0 \\\\ \\' \\\" \\xHH \\ooo "
                "(write \\\\ for a backslash)",
            )
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise CompileError(f"escape '\\{e}' is not a character code", loc)
        return chr(code)

    return _ESCAPE.sub(one, body)


def _code_hint(text: str) -> str:
    inner = text[text.index("'") + 1 : -1] if "'" in text else ""
    return str(ord(inner)) if len(inner) == 1 else "97"


def define_value(text: str) -> int | float | str:
    """A ``-D NAME=VALUE`` value of the command line: an int, else a float, else the text (a
    dtype name such as ``f16``)."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text
