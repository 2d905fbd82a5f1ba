"""Prelude, op table and docs agree: one prototype per op, a current reference, named rules."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from pycparser import c_ast

import teeny_tx
from teeny_tx.docs import GENERATOR, reference_markdown
from teeny_tx.lower.ops import typing as typing_rules
from teeny_tx.lower.ops.table import OPS
from teeny_tx.parse import parse
from teeny_tx.parse.source import PRELUDE_NAME

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _prelude_prototype_counts() -> Counter:
    unit = parse("kernel k(void) {}", "x.c")
    return Counter(
        node.name
        for node in unit.ast.ext
        if isinstance(node, c_ast.Decl)
        and isinstance(node.type, c_ast.FuncDecl)
        and node.coord is not None
        and node.coord.file == PRELUDE_NAME
    )


def test_prelude_and_op_table_agree_one_to_one():
    counts = _prelude_prototype_counts()
    table = {name for name, op in OPS.items() if op.prelude}
    twice = sorted(name for name, n in counts.items() if n > 1)
    assert not twice, f"declared more than once in prelude/language.h: {twice}"
    assert not table - set(counts), (
        f"ops with prelude=True but no prototype: {sorted(table - set(counts))}"
    )
    assert not set(counts) - table, (
        f"prototypes with no prelude op in OPS: {sorted(set(counts) - table)}"
    )


def test_reference_is_current():
    committed = (DOCS / "reference.md").read_text(encoding="utf-8")
    assert committed == reference_markdown(), f"docs/reference.md is stale: run `{GENERATOR}`"


def test_reference_names_every_op():
    text = reference_markdown()
    missing = [
        name
        for name, op in OPS.items()
        if (f" {name}(" if op.prelude else f"(`{name}`)" if op.symbol else f"`{name}`") not in text
    ]
    assert not missing, f"ops missing from the reference: {missing}"
    symbols = [
        op.symbol
        for op in OPS.values()
        if op.symbol and not re.search(rf"`[ab ]*{re.escape(op.symbol)}[ab ]*`", text)
    ]
    assert not symbols, f"operators missing from the reference: {symbols}"


def test_reference_is_deterministic():
    assert reference_markdown() == reference_markdown()


def test_language_guide_names_every_typing_rule():
    rules = re.findall(r"^(T\d+)\.", typing_rules.__doc__, re.MULTILINE)
    assert rules == [f"T{i}" for i in range(1, len(rules) + 1)] and len(rules) >= 7, rules
    guide = (DOCS / "language.md").read_text(encoding="utf-8")
    missing = [rule for rule in rules if not re.search(rf"\b{rule}\b", guide)]
    assert not missing, (
        f"typing rules of lower/ops/typing.py not described in docs/language.md: {missing}"
    )


def test_language_guide_quotes_real_generated_cuda():
    """The guide's excerpt of vector_add's CUDA is real output, trimmed with `...` lines."""
    root = DOCS.parent
    module = teeny_tx.compile(root / "kernels" / "vector_add.c", name="kernels/vector_add.c")
    real = module.vector_add.cuda_source("f32", "f32", "f32", 4096, BLOCK=1024).splitlines()
    guide = (DOCS / "language.md").read_text(encoding="utf-8")
    excerpt = guide.split("```cuda\n", 1)[1].split("```", 1)[0].splitlines()
    invented = [line for line in excerpt if line.strip() != "..." and line not in real]
    assert not invented, f"docs/language.md quotes CUDA the compiler no longer emits: {invented}"
