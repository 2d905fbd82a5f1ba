"""The book (mkdocs.yml, docs/): every code block runs and shows what it prints; chapter 6
agrees with the op table; the layout pictures and benchmark plots come from their tools; the
site builds with ``mkdocs build --strict`` (when the docs extra is installed)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from tools import book, draw_layout, triton_table

ROOT = book.ROOT
PAGES = book.pages()
# Pages whose blocks run a tool of the docs extra (pip install -e '.[docs]'), which CI installs.
NEEDS = {"performance.md": "matplotlib"}
sys.path.insert(0, str(ROOT / "bench"))
import plots  # noqa: E402 - bench/ is not a package


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return re.findall(r":\s*([\w/.-]+\.md)\s*$", text, re.MULTILINE)


# ---------------------------------------------------------------- every block runs


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(book.DOCS).as_posix())
def test_every_block_runs_and_shows_its_output(page):
    if page.name in NEEDS:
        pytest.importorskip(NEEDS[page.name])
    failures = book.check_page(page)
    assert not failures, "\n\n".join(failures)


def test_every_page_is_in_the_navigation_and_every_entry_exists():
    nav = _nav_pages()
    pages = {p.relative_to(book.DOCS).as_posix() for p in PAGES}
    assert len(nav) == len(set(nav)), "a page is listed twice in mkdocs.yml"
    assert not pages - set(nav), f"pages missing from mkdocs.yml's nav: {sorted(pages - set(nav))}"
    missing = set(nav) - pages
    assert not missing, f"nav entries with no page: {sorted(missing)}"


def test_every_example_kernel_compiles_and_is_shown():
    shown = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    for path in sorted((ROOT / "docs" / "examples").glob("*.c")):
        rel = path.relative_to(ROOT).as_posix()
        module = teeny_tx.compile(path, name=rel)
        assert module.kernels, rel
        assert rel in shown, f"{rel} is not shown (or quoted) by any page"


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


RUN_AND_OUTPUT = """
<!-- book: run -->
```python
print(6 * 7)
```

<!-- book: output -->
```text
{shown}
```
"""


def test_a_block_shows_what_it_printed(tmp_path):
    assert book.check_page(_page(tmp_path, RUN_AND_OUTPUT.format(shown="42"))) == []
    failures = book.check_page(_page(tmp_path, RUN_AND_OUTPUT.format(shown="41")))
    assert len(failures) == 1 and "printed:\n42" in failures[0]


def test_a_block_without_an_instruction_is_an_error(tmp_path):
    failures = book.check_page(_page(tmp_path, "text\n\n```python\nprint(1)\n```\n"))
    assert len(failures) == 1 and "without a `<!-- book:" in failures[0]
    failures = book.check_page(_page(tmp_path, "<!-- book: maybe -->\n```python\n1\n```\n"))
    assert "unknown block kind 'maybe'" in failures[0]


def test_an_excerpt_must_be_lines_of_the_output_in_order(tmp_path):
    code = "<!-- book: run -->\n```python\nfor i in range(5):\n    print(i)\n```\n\n"
    good = code + "<!-- book: output excerpt -->\n```text\n0\n...\n3\n4\n```\n"
    bad = code + "<!-- book: output excerpt -->\n```text\n3\n...\n1\n```\n"
    assert book.check_page(_page(tmp_path, good)) == []
    failures = book.check_page(_page(tmp_path, bad))
    assert len(failures) == 1 and "'1'" in failures[0]


def test_a_quoted_file_must_hold_the_quoted_lines(tmp_path):
    good = (
        "<!-- book: excerpt kernels/vector_add.c -->\n```c\n"
        "tile mask = offs < n;\n    tile x = load(a + offs, mask, 0.0f);\n```\n"
    )
    assert book.check_page(_page(tmp_path, good)) == []
    bad = good.replace("mask, 0.0f", "mask, 1.0f")
    assert "has no line" in book.check_page(_page(tmp_path, bad))[0]
    wrong_include = (
        '<!-- book: file kernels/vector_add.c -->\n```c\n--8<-- "kernels/axpby.c"\n```\n'
    )
    assert "holds exactly" in book.check_page(_page(tmp_path, wrong_include))[0]
    no_file = '<!-- book: file kernels/none.c -->\n```c\n--8<-- "kernels/none.c"\n```\n'
    assert "does not exist" in book.check_page(_page(tmp_path, no_file))[0]


def test_blocks_run_in_a_module_importable_while_the_page_runs(tmp_path):
    """torch.compile imports the module of each function it traces (tested by import here, as
    Dynamo does it: its failure, 'No module named __book__', was seen on torch 2.11)."""
    text = (
        "<!-- book: run -->\n```python\nimport importlib\nx = 42\n"
        "print(__name__, importlib.import_module(__name__).x)\n```\n\n"
        "<!-- book: output -->\n```text\n__book__ 42\n```\n"
    )
    assert book.check_page(_page(tmp_path, text)) == []
    assert book.BOOK_MODULE not in sys.modules


def test_gpu_blocks_run_only_in_the_gpu_check(tmp_path):
    text = '<!-- book: gpu -->\n```python\nraise RuntimeError("needs a GPU")\n```\n'
    assert book.check_page(_page(tmp_path, text)) == []
    assert "needs a GPU" in book.check_page(_page(tmp_path, text), gpu=True)[0]


def test_hidden_code_and_shell_blocks_are_checked(tmp_path):
    text = (
        "<!-- book: output of\nprint('hidden', 1 + 1)\n-->\n```text\nhidden 2\n```\n\n"
        "<!-- book: shell -->\n```sh\necho from bash\n```\n\n"
        "<!-- book: output -->\n```text\nfrom bash\n```\n"
    )
    assert book.check_page(_page(tmp_path, text)) == []
    failing = "<!-- book: shell -->\n```sh\nfalse\n```\n"
    assert "exit 1" in book.check_page(_page(tmp_path, failing))[0]


# ---------------------------------------------------------------- chapter 6


def test_chapter_6_agrees_with_the_op_table():
    problems = triton_table.disagreements()
    assert not problems, "\n".join(problems)


def test_chapter_6_is_current():
    committed = (book.DOCS / "triton.md").read_text(encoding="utf-8")
    assert committed == triton_table.chapter(), f"run `{triton_table.GENERATOR}`"


def test_chapter_6_names_every_triton_operation_once():
    rows = triton_table.rows()
    names = [row.name for row in rows]
    assert len(names) == len(set(names))
    text = (book.DOCS / "triton.md").read_text(encoding="utf-8")
    assert all(f"| `{row.qualified}` |" in text for row in rows)
    same = [row.name for row in rows if row.status == "same"]
    assert {"load", "store", "dot", "arange", "program_id", "sum", "atomic_add"} <= set(same)


def _with(rows, name, **change):
    return [dataclasses.replace(r, **change) if r.name == name else r for r in rows]


def test_chapter_6_fails_when_the_table_and_the_language_disagree():
    rows = triton_table.rows()
    absent = triton_table.disagreements(_with(rows, "load", status="absent", note="gone"))
    assert any("load" in p and "mark it `same`" in p for p in absent), absent
    same = triton_table.disagreements(_with(rows, "sort", status="same", note=""))
    assert any("sort" in p and "no operation of that name" in p for p in same), same
    renamed = triton_table.disagreements(_with(rows, "clamp", ops=("maximum", "clampf")))
    assert any("clampf" in p for p in renamed), renamed
    twice = triton_table.disagreements([*rows, rows[0]])
    assert any("listed twice" in p for p in twice), twice


# ---------------------------------------------------------------- chapter 3's pictures


def test_the_python_layout_twin_matches_blocked_coordinates():
    """vector_add's f32[1024] over 4 warps: 4 per thread, 32 lanes, 4 warps, twice."""
    layout = draw_layout.layout_of(draw_layout.PICTURES[0])
    held = draw_layout.owners(layout)
    assert len(held) == 1024
    for element in np.random.default_rng(0).integers(0, 1024, 64):
        e = int(element)
        assert held[(e,)] == [((e % 512) // 4, (e // 512) * 4 + e % 4)]


@pytest.mark.parametrize("picture", draw_layout.PICTURES, ids=lambda p: p.image)
def test_every_element_of_a_pictured_layout_has_an_owner(picture):
    layout = draw_layout.layout_of(picture)
    held = draw_layout.owners(layout)
    shape = layout.value_shape()
    assert len(held) == int(np.prod(shape))
    threads = 32 * picture.num_warps
    assert sum(len(v) for v in held.values()) == threads * layout.regs
    if not layout.replicated:
        assert all(len(v) == 1 for v in held.values())
    else:
        assert any(len(v) > 1 for v in held.values())


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_layout_pictures_are_drawn_deterministically(tmp_path):
    pytest.importorskip("matplotlib")
    picture = draw_layout.PICTURES[2]  # the smallest: text rendering dominates the time
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    draw_layout.draw(picture, first)
    draw_layout.draw(picture, second)
    assert first.read_bytes() == second.read_bytes()
    committed = (draw_layout.IMAGES / picture.image).read_bytes()
    assert _png_size(committed) == _png_size(first.read_bytes())


def test_every_layout_picture_is_committed_and_shown():
    chapter = (book.DOCS / "blocks.md").read_text(encoding="utf-8")
    for picture in draw_layout.PICTURES:
        assert (draw_layout.IMAGES / picture.image).is_file(), picture.image
        assert f"(images/{picture.image})" in chapter, picture.image


# ---------------------------------------------------------------- chapter 9's plots


def test_benchmark_tables_parse_back_to_their_numbers():
    rng = np.random.default_rng(5)
    values = rng.uniform(0.1, 5.0, (3, 2)).round(3)
    rows = "\n".join(f"| case {i} | {a:.3f} | {b:.3f} | 1.0 |" for i, (a, b) in enumerate(values))
    text = (
        "## Copy\n\ndate: 2026-01-02T03:04:05Z, device: NVIDIA X100\n\n"
        "| case | ours (TB/s) | peer (TB/s) | ours / peer |\n|---|---:|---:|---:|\n"
        f"{rows}\n\n## Matmul\n\nOne run on 2026-01-03T00:00:00Z on an NVIDIA X100.\n\n"
        "| case | ours (TFLOP/s) | cuBLAS (TFLOP/s) |\n|---|---:|---:|\n| a | 1.5 | n/a |\n"
    )
    copy, matmul = plots.parse(text)
    table = copy.tables[0]
    assert (table.date, table.device, table.unit) == ("2026-01-02T03:04:05Z", "NVIDIA X100", "TB/s")
    assert table.cases == ["case 0", "case 1", "case 2"]
    assert table.series == {"ours": list(values[:, 0]), "peer": list(values[:, 1])}
    mm = matmul.tables[0]
    assert (mm.date, mm.unit, mm.series) == (
        "2026-01-03T00:00:00Z",
        "TFLOP/s",
        {"ours": [1.5], "cuBLAS": [None]},
    )
    with pytest.raises(ValueError, match="no date and device"):
        plots.parse("## X\n\n| case | ours (TB/s) |\n|---|---|\n| a | 1 |\n")


def test_every_benchmark_plot_is_committed_and_shown(tmp_path):
    pytest.importorskip("matplotlib")
    chapter = (book.DOCS / "performance.md").read_text(encoding="utf-8")
    drawn = plots.main(["--out", str(tmp_path)])
    assert drawn, "BENCHMARKS.md holds no rate table"
    for path in drawn:
        committed = plots.IMAGES / path.name
        assert committed.is_file(), f"run `python bench/plots.py`: {path.name} is not committed"
        assert _png_size(committed.read_bytes()) == _png_size(path.read_bytes())
        assert f"(images/{path.name})" in chapter, f"docs/performance.md does not show {path.name}"
    sections = plots.parse(plots.BENCHMARKS.read_text(encoding="utf-8"))
    again = tmp_path / "again.png"
    plots.draw(sections[0], again, plots.copy_reference(sections))
    assert again.read_bytes() == drawn[0].read_bytes(), "plots are not deterministic"


# ---------------------------------------------------------------- the site


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    config = ROOT / "mkdocs.yml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "site" / "vector-add" / "index.html").read_text(encoding="utf-8")
    assert "elementwise, for any dtype" in page, "the snippet of kernels/vector_add.c is missing"
