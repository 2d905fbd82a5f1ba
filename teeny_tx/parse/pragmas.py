"""``#pragma autotune`` lines → the autotuning declaration of the kernel they precede.

Input: the pycparser ``Pragma`` nodes found directly before a kernel definition, with the
kernel file's lines. Output: an :class:`AutotuneDecl`: the key's names and each config's
settings, every one with its :class:`~teeny_tx.errors.Location`. Only the syntax is checked
here; whether a name is a parameter of the kernel is checked against its signature by
``teeny_tx.autotune`` when the file is compiled::

    #pragma autotune key(M, N, K)
    #pragma autotune config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3)
    #pragma autotune config(BM=64, BN=64, BK=32)
    kernel matmul(...)

``key(...)`` may appear once; ``config(...)`` once per config, in the order they are tried.
A key entry ``pow2(n_rows)`` counts the value's bucket (the next power of two), not the value:
one choice serves every row count of the bucket.
Values are numbers (``128``, ``0x80``, ``-1``, ``0.5``) or ``true``/``false``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pycparser import c_ast

from ..errors import CompileError, Location

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<name>[A-Za-z_]\w*)
      | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fFuUlL]*)
      | (?P<punct>[(),=])
      | (?P<other>\S)
    )""",
    re.VERBOSE,
)
_DIRECTIVE = re.compile(r"\s*#\s*pragma\b\s*")
_SYNTAX = "`#pragma autotune key(M, N)` or `#pragma autotune config(BM=64, num_warps=4)`"


@dataclass(frozen=True)
class Setting:
    """One ``name`` of a key, or one ``name=value`` of a config (``value`` in a key: None, or
    the name of the bucket that counts the parameter's value, ``pow2`` of ``pow2(n_rows)``)."""

    name: str
    value: Any
    loc: Location


@dataclass(frozen=True)
class ConfigDecl:
    settings: tuple[Setting, ...]
    loc: Location


@dataclass(frozen=True)
class AutotuneDecl:
    """The ``#pragma autotune`` lines of one kernel."""

    kernel: str
    key: tuple[Setting, ...]
    configs: tuple[ConfigDecl, ...]
    loc: Location  # the first pragma line


@dataclass(frozen=True)
class _Token:
    kind: str  # name | number | punct | other | end
    text: str
    col: int  # 1-based column in the line


class _Line:
    """The tokens of one pragma line, and errors that point into it."""

    def __init__(self, filename: str, line: int, source: str, stripped: str):
        self.filename, self.line, self.source = filename, line, source
        start = _DIRECTIVE.match(stripped)
        pos = start.end() if start else 0
        self.tokens: list[_Token] = []
        for m in _TOKEN.finditer(stripped, pos):
            kind = m.lastgroup or "other"
            self.tokens.append(_Token(kind, m.group(kind), m.start(kind) + 1))
        end = len(stripped.rstrip()) + 1
        self.tokens.append(_Token("end", "end of line", end))
        self.pos = 0

    def loc(self, col: int) -> Location:
        return Location(self.filename, self.line, col, self.source)

    def error(self, token: _Token, message: str, hint: str | None = None) -> CompileError:
        return CompileError(message, self.loc(token.col), hint)

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def next(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def expect(self, text: str, after: str) -> _Token:
        token = self.next()
        if token.text != text or token.kind != "punct":
            raise self.error(
                token, f"expected '{text}' {after}, got '{token.text}'", f"write {_SYNTAX}"
            )
        return token

    def name(self, what: str) -> _Token:
        token = self.next()
        if token.kind != "name":
            raise self.error(token, f"expected {what}, got '{token.text}'", f"write {_SYNTAX}")
        return token

    def value(self, name: str) -> Any:
        token = self.next()
        if token.kind == "name" and token.text in ("true", "false"):
            return token.text == "true"
        if token.kind == "number":
            return _number(token.text)
        raise self.error(
            token,
            f"the value of '{name}' must be a number, got '{token.text}'",
            "config values are literals: 128, 0.5, true",
        )


def _number(text: str) -> int | float:
    digits = text.rstrip("uUlL")
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", digits):
        return int(digits, 16)
    if re.fullmatch(r"[-+]?\d+", digits):
        return int(digits)
    return float(text.rstrip("fFuUlL"))


def parse_autotune(
    kernel: str, pragmas: list[c_ast.Pragma], filename: str, lines: list[str], stripped: list[str]
) -> AutotuneDecl:
    """The declaration that ``pragmas`` (consecutive, before ``kernel``) make."""
    key: tuple[Setting, ...] | None = None
    configs: list[ConfigDecl] = []
    first: Location | None = None
    for node in pragmas:
        n = int(node.coord.line)
        line = _Line(filename, n, lines[n - 1], stripped[n - 1])
        head = line.next()
        if head.kind != "name" or head.text != "autotune":
            raise line.error(
                head,
                f"unknown pragma '{head.text}'",
                f"the language's one pragma is {_SYNTAX}, directly before a kernel",
            )
        first = first or line.loc(head.col)
        clause = line.next()
        if clause.kind != "name" or clause.text not in ("key", "config"):
            raise line.error(clause, f"unknown autotune clause '{clause.text}'", f"write {_SYNTAX}")
        line.expect("(", f"after '{clause.text}'")
        if clause.text == "key":
            if key is not None:
                raise line.error(clause, "the autotune key is declared twice", "declare it once")
            key = _key(line)
        else:
            configs.append(ConfigDecl(_config(line), line.loc(clause.col)))
        token = line.next()
        if token.kind != "end":
            raise line.error(token, f"unexpected '{token.text}' after the autotune clause")
    assert first is not None
    return AutotuneDecl(kernel, key or (), tuple(configs), first)


def _key(line: _Line) -> tuple[Setting, ...]:
    names: list[Setting] = []
    while True:
        token = line.name("a parameter name")
        bucket = None
        if line.peek().text == "(":  # bucket(name)
            line.next()
            bucket, token = token.text, line.name("a parameter name")
            line.expect(")", f"to close {bucket}(...)")
        if any(s.name == token.text for s in names):
            raise line.error(token, f"'{token.text}' appears twice in the autotune key")
        names.append(Setting(token.text, bucket, line.loc(token.col)))
        if line.peek().text != ",":
            break
        line.next()
    line.expect(")", "to close the key")
    return tuple(names)


def _config(line: _Line) -> tuple[Setting, ...]:
    settings: list[Setting] = []
    if line.peek().text == ")":
        line.next()
        return ()
    while True:
        token = line.name("a constexpr name")
        if any(s.name == token.text for s in settings):
            raise line.error(token, f"'{token.text}' is set twice in this config")
        line.expect("=", f"after '{token.text}'")
        settings.append(Setting(token.text, line.value(token.text), line.loc(token.col)))
        if line.peek().text != ",":
            break
        line.next()
    line.expect(")", "to close the config")
    return tuple(settings)
