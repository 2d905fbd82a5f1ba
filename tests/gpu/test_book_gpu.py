"""The book's GPU blocks (``<!-- book: gpu -->``) run on the device, after each page's CPU
blocks, and show what they print (tools/book.py; tests/test_book.py runs the CPU blocks)."""

from __future__ import annotations

import pytest

from tools import book

GPU_PAGES = [p for p in book.pages() if any(b.kind == "gpu" for b in book.blocks(p))]


def test_the_book_has_gpu_blocks():
    assert GPU_PAGES, "no page of the book has a `<!-- book: gpu -->` block"


@pytest.mark.parametrize("page", GPU_PAGES, ids=lambda p: p.relative_to(book.DOCS).as_posix())
def test_every_gpu_block_runs_and_shows_its_output(page):
    failures = book.check_page(page, gpu=True)
    assert not failures, "\n\n".join(failures)
