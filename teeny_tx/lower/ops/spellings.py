"""Triton's names and how the language spells each: the table chapter 6 of the book is made of.

Input: ``triton_language.tsv`` beside this module (package data): every name of
``triton.language`` and of its ``libdevice`` module, by section of Triton's reference, each with
its status here (``same``: an operation of that name; ``differs``: written with the op-table
entries it names; ``syntax``: a construct of C; ``absent``: not in the language, and why).
Output: :func:`rows`, the rows in file order (``tools/triton_table.py`` renders and checks
them), and :func:`answer`, what an unknown operation of one of Triton's names is here, which
the builder gives as the hint of its error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DATA = Path(str(resources.files(__package__).joinpath("triton_language.tsv")))
STATUSES = ("same", "differs", "syntax", "absent")
LIBDEVICE = "libdevice"  # the section of triton.language.extra.libdevice's functions


@dataclass(frozen=True)
class Row:
    section: str
    name: str
    status: str
    ops: tuple[str, ...]
    spelling: str
    note: str
    line: int

    @property
    def qualified(self) -> str:
        """The name as Triton spells it: ``tl.load``, ``libdevice.erfinv``."""
        return f"{'libdevice' if self.section == LIBDEVICE else 'tl'}.{self.name}"


def rows(path: Path = DATA) -> list[Row]:
    """The data file's rows, in file order."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 6:
            raise ValueError(f"{path.name}:{number}: 6 tab-separated fields, got {len(fields)}")
        section, name, status, ops, spelling, note = (f.strip() for f in fields)
        names = tuple(op.strip() for op in ops.split(",") if op.strip())
        out.append(Row(section, name, status, names, spelling, note, number))
    return out


@functools.cache
def _by_name() -> dict[str, Row]:
    return {row.name: row for row in rows()}


def answer(name: str) -> str | None:
    """How Triton's ``name`` is written here, for a call of it the language does not know:
    the spelling of a renamed operation, the construct of C, or why it is absent; None for a
    name Triton does not have (or one the language has under that name)."""
    row = _by_name().get(name)
    if row is None or row.status == "same":
        return None
    note = f" ({row.note})" if row.note else ""
    if row.status == "differs":
        return f"Triton's {row.qualified} is written {row.spelling} here{note}"
    if row.status == "syntax":
        return f"Triton's {row.qualified} is C syntax here: {row.spelling}{note}"
    return f"{row.qualified} is not in the language: {row.note}"
