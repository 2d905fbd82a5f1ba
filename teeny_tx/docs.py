"""The operation reference, generated from the op table and the prelude.

Input: ``lower.ops.table.OPS`` (each entry's one-line doc) and the embedded prelude's declarations
(``language.h``, then every other ``.h`` of the prelude, as the parser reads them: each
operation's prototype, and the ``/* ---- family ---- */`` section it sits in). Output:
:func:`reference_markdown`, the Markdown committed as ``docs/reference.md``;
``python -m teeny_tx.docs > docs/reference.md`` regenerates it.

Families: the prelude's sections, in prelude order, for operations with a prototype; then C
operators (entries with a ``symbol``); then conversions and implicit operations (the rest);
then the helper functions the prelude defines with a body (``prelude/activations.h``...), each
with the comment above it. The text is a pure function of the table and the prelude: the same
inputs render the same bytes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from ._prelude import FILES
from .lower.ops.registry import OpDef
from .lower.ops.table import OPS
from .parse import parse, strip_comments
from .parse.source import PRELUDE_NAME, prelude_text

GENERATOR = "python -m teeny_tx.docs > docs/reference.md"

_SECTION = re.compile(r"^/\*\s*-{3,}\s*(?P<title>.*?)\s*-{3,}\s*\*/")
_PROTOTYPE = re.compile(r"^(?P<text>[A-Za-z_][\w\s\*]*?\b(?P<name>[A-Za-z_]\w*)\s*\([^;]*\)\s*;)")

OPERATORS = "operators"
CONVERSIONS = "conversions"

_INTROS = {
    OPERATORS: "C operators on scalars and tiles; each symbol maps to the op-table entry named "
    "in parentheses. Binary operators promote and broadcast their operands (typing rules T1-T5, "
    "T7 in `docs/language.md`).",
    CONVERSIONS: "Written as a C cast or a declaration, or inserted by the compiler; none is "
    "called by name.",
}
_HELPERS_INTRO = (
    "Functions written in the language, defined in the prelude's `prelude/*.h` with a body: "
    "inlined at each call like a kernel file's helpers (a kernel file cannot define one of the "
    "same name)."
)


@dataclass(frozen=True)
class Family:
    title: str
    note: str | None  # the parenthesised remark of a prelude section header, if any
    ops: tuple[str, ...]


def prelude_prototypes(prelude: str | None = None) -> dict[str, tuple[str, str]]:
    """Operation name → (prototype text as written, prelude section header), in prelude order.

    Each prototype must sit on one line; :func:`check_prototypes` catches one that does not.
    """
    prelude = prelude_text() if prelude is None else prelude
    found: dict[str, tuple[str, str]] = {}
    section = ""
    for raw, line in zip(prelude.splitlines(), strip_comments(prelude).splitlines(), strict=True):
        header = _SECTION.match(raw.strip())
        if header:
            section = header["title"]
            continue
        m = _PROTOTYPE.match(line.strip())
        if m and not line.lstrip().startswith(("typedef", "extern")):
            if m["name"] in found:
                raise ValueError(f"prelude declares '{m['name']}' twice")
            found[m["name"]] = (" ".join(m["text"].split()), section)
    return found


def check_prototypes(found: dict[str, tuple[str, str]]) -> None:
    """The text scan agrees with pycparser's prototypes, and with the table's prelude ops."""
    parsed = set(parse("kernel k(void) {}", "<docs>").prototypes)
    if set(found) != parsed:
        raise ValueError(
            "prelude prototypes read as text and by pycparser differ: "
            f"{sorted(set(found) ^ parsed)} (keep each prototype on one line)"
        )
    table = {name for name, op in OPS.items() if op.prelude}
    if table != parsed:
        raise ValueError(
            f"op table and prelude disagree: only in OPS {sorted(table - parsed)}, "
            f"only in the prelude {sorted(parsed - table)}"
        )


def families() -> list[Family]:
    """The reference's sections, in order, each with its operations in a stable order."""
    found = prelude_prototypes()
    check_prototypes(found)
    sections: dict[str, list[str]] = {}
    for name, (_, header) in found.items():
        if not header:
            raise ValueError(f"prototype of '{name}' is outside any /* ---- family ---- */ section")
        sections.setdefault(header, []).append(name)
    out = []
    for header, names in sections.items():
        title, _, rest = header.partition(" (")
        out.append(Family(title, rest.rstrip(")") or None, tuple(names)))
    operators = tuple(n for n, op in OPS.items() if not op.prelude and op.symbol)
    others = tuple(n for n, op in OPS.items() if not op.prelude and not op.symbol)
    out.append(Family(OPERATORS, None, operators))
    out.append(Family(CONVERSIONS, None, others))
    return out


def _usage(op: OpDef) -> tuple[str | None, str]:
    """Split a doc written ``"usage: description"``; (None, doc) when it has no usage part."""
    usage, sep, description = op.doc.partition(": ")
    return (usage, description) if sep else (None, op.doc)


def op_line(op: OpDef, prototype: str | None) -> str:
    """One Markdown list item for one op."""
    usage, description = _usage(op)
    if prototype is not None:
        head = f"`{prototype}`"
        return f"- {head} — `{usage}`: {description}" if usage else f"- {head} — {description}"
    if usage:
        return f"- `{usage}` (`{op.name}`): {description}"
    return f"- `{op.name}`: {description}"


def prelude_helpers() -> list[tuple[str, str, str]]:
    """(signature as written, the comment just above it as one line, its prelude file) of each
    helper function the prelude defines with a body, in prelude order."""
    lines = prelude_text().split("\n")
    unit = parse("kernel k(void) {}", "<docs>")
    out = []
    for fn in unit.functions.values():
        if fn.decl.coord.file != PRELUDE_NAME:
            continue
        at = fn.decl.coord.line - 1
        first = at
        if lines[at - 1].rstrip().endswith("*/"):
            first = at - 1
            while not lines[first].lstrip().startswith("/*"):
                first -= 1
        words = []
        for raw in lines[first:at]:
            text = raw.strip().removeprefix("/*").removesuffix("*/").strip()
            words += text.removeprefix("* ").removeprefix("*").split()
        file = next(
            name
            for name, body in FILES.items()
            if name.endswith(".h") and lines[at] in body.split("\n")
        )
        out.append((" ".join(lines[at].split()), " ".join(words), f"prelude/{file}"))
    return out


def reference_markdown() -> str:
    """The operation reference as Markdown (``docs/reference.md``)."""
    found = prelude_prototypes()
    lines = [
        "# Operation reference",
        "",
        f"<!-- Generated from teeny_tx/lower/ops/table.py and prelude/*.h by `{GENERATOR}`;",
        "     do not edit. tests/test_docs.py checks it is current. -->",
        "",
        "Every operation of the language, one line each. Prototypes are quoted from",
        '`prelude/language.h` and the other `prelude/*.h`, where `tile` means "a tile or a scalar"',
        "and `...` marks optional arguments; the text after the prototype is the op table's doc",
        "(`teeny_tx/lower/ops/table.py`, and `ops/<family>.py` for a family of its own).",
        "The guide is `docs/language.md`.",
    ]
    for family in families():
        lines += ["", f"## {family.title[:1].upper()}{family.title[1:]}", ""]
        if family.note:
            lines += [f"{family.note[:1].upper()}{family.note[1:]}.", ""]
        if family.title in _INTROS:
            lines += [_INTROS[family.title], ""]
        for name in family.ops:
            proto = found[name][0] if name in found else None
            lines.append(op_line(OPS[name], proto))
    helpers = prelude_helpers()
    if helpers:
        lines += ["", "## Helpers", "", _HELPERS_INTRO, ""]
        lines += [f"- `{signature}` — {doc} (`{file}`)" for signature, doc, file in helpers]
    return "\n".join(lines) + "\n"


def main() -> None:
    """``python -m teeny_tx.docs``: docs/reference.md; ``... switches``: docs/switches.md."""
    if sys.argv[1:] == ["switches"]:
        from .switches import markdown

        sys.stdout.write(markdown())
    else:
        sys.stdout.write(reference_markdown())


if __name__ == "__main__":
    main()
