"""Chapter 6 of the book: every triton.language operation and how teeny_tx spells it.

Input: ``teeny_tx/lower/ops/triton_language.tsv`` (the names of Triton's API reference, by
section, each with its status here; read by ``teeny_tx.lower.ops.spellings``) and the op
table, read through its public name ``teeny_tx.lower.ops.table.OPS`` (with the prelude's
helper functions, ``teeny_tx.docs.prelude_helpers``). Output: :func:`chapter`, the Markdown
committed as ``docs/triton.md``; ``python -m tools.triton_table > docs/triton.md``
regenerates it. :func:`disagreements` lists every row the op table contradicts;
``tests/test_book.py`` fails on any.
"""

from __future__ import annotations

import sys

from teeny_tx.docs import prelude_helpers
from teeny_tx.lower.ops.spellings import DATA, LIBDEVICE, STATUSES, Row, rows
from teeny_tx.lower.ops.table import OPS

__all__ = ["DATA", "GENERATOR", "LIBDEVICE", "STATUSES", "Row", "chapter", "disagreements", "rows"]

GENERATOR = "python -m tools.triton_table > docs/triton.md"


def helper_names() -> set[str]:
    """The functions the prelude defines with a body (``gelu_tanh``, ``group_pid_m``...)."""
    return {signature.split("(")[0].split()[-1] for signature, _, _ in prelude_helpers()}


def disagreements(table: list[Row] | None = None) -> list[str]:
    """Every way the data file and the language disagree; empty when they agree."""
    table = rows() if table is None else table
    helpers = helper_names()
    language = {name for name, op in OPS.items() if op.prelude} | helpers
    out = []
    seen: set[str] = set()
    for row in table:
        where = f"{DATA.name}:{row.line}: {row.name}"
        if row.name in seen:
            out.append(f"{where}: listed twice")
        seen.add(row.name)
        if row.status not in STATUSES:
            out.append(f"{where}: status {row.status!r} is not one of {STATUSES}")
        elif row.status == "same":
            if row.name not in OPS or not OPS[row.name].prelude:
                out.append(f"{where}: marked `same` but the language has no operation of that name")
            if row.ops or row.spelling:
                out.append(f"{where}: a `same` row names no other ops and no spelling")
        else:
            if row.name in language:
                out.append(
                    f"{where}: marked `{row.status}` but the language has `{row.name}`: "
                    "mark it `same`"
                )
            unknown = [op for op in row.ops if op not in OPS and op not in helpers]
            if unknown:
                out.append(f"{where}: names {unknown}, not in the op table nor prelude helpers")
            if row.status == "differs" and not (row.ops and row.spelling):
                out.append(f"{where}: a `differs` row gives the ops it uses and a spelling")
            if row.status == "syntax" and (row.ops or not row.spelling):
                out.append(f"{where}: a `syntax` row gives a spelling and no ops")
            if row.status == "absent" and (row.ops or row.spelling or not row.note):
                out.append(f"{where}: an `absent` row gives a reason (note) and nothing else")
    return out


def only_here(table: list[Row] | None = None) -> list[str]:
    """Operations of the language that no Triton row names, in op-table order."""
    table = rows() if table is None else table
    named = {row.name for row in table} | {op for row in table for op in row.ops}
    return [name for name, op in OPS.items() if op.prelude and name not in named]


def _doc(name: str) -> str:
    usage, sep, description = OPS[name].doc.partition(": ")
    return description if sep else OPS[name].doc


def chapter() -> str:
    """Chapter 6 as Markdown."""
    table = rows()
    problems = disagreements(table)
    if problems:
        raise ValueError("the Triton table disagrees with the op table:\n" + "\n".join(problems))
    counts = {status: sum(r.status == status for r in table) for status in STATUSES}
    lines = [
        "# 6. Every operation, from Triton",
        "",
        "<!-- Generated from teeny_tx/lower/ops/triton_language.tsv and the op table by",
        f"     `{GENERATOR}`; do not edit. tests/test_book.py checks it is current. -->",
        "",
        "Every operation of `triton.language`, in the sections of Triton's API reference, and",
        "the math functions of its `libdevice` module (`triton.language.extra.libdevice`), and",
        "how to write each here. **same**: an operation of that name, called with positional",
        "arguments (C has no keywords); **differs**: written otherwise, with the operations",
        "named; **syntax**: a construct of C rather than an operation; **absent**: not in the",
        "language, and why. The table is generated from the op table",
        "(`teeny_tx/lower/ops/table.py`), and a test fails when a row and the op table disagree:",
        "an operation marked absent that the language has, or marked the same that it lacks.",
        "libdevice's directed-rounding arithmetic (`add_rz`, `div_rd`, `fma_ru`...) and its",
        "conversions (`float2int_rn`...) have no rows: arithmetic here rounds to nearest, and C",
        "casts convert by the rules of `lower/ops/casts.py`.",
        "",
        f"Of {len(table)} names: {counts['same']} the same, {counts['differs']} spelled "
        f"differently, {counts['syntax']} C syntax, {counts['absent']} absent.",
    ]
    section = None
    for row in table:
        if row.section != section:
            section = row.section
            lines += ["", f"## {section}", "", "| Triton | here | note |", "|---|---|---|"]
        if row.status == "same":
            here = f"`{row.name}`: {_doc(row.name)}"
        elif row.status == "absent":
            here = "absent"
        else:
            here = row.spelling
        note = row.note.replace("|", "\\|")
        lines.append(f"| `{row.qualified}` | {here.replace('|', chr(92) + '|')} | {note} |")
    extra = only_here(table)
    if extra:
        lines += [
            "",
            "## Only here",
            "",
            "Operations of the language that Triton's reference does not list under that name:",
            "",
        ]
        lines += [f"- `{name}`: {_doc(name)}" for name in extra]
    lines += [
        "",
        "C operators (`+`, `<<`, `&&`, `?:` ...) work on tiles as on scalars; their rules are in",
        "the [language guide](language.md) and the [operation reference](reference.md).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.stdout.write(chapter())


if __name__ == "__main__":
    main()
