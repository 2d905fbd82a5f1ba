"""Kernel files as they come: BOMs, other encodings, non-regular files (parse/files.py)."""

from __future__ import annotations

import codecs
import os

import pytest

import teeny_tx as tx
from teeny_tx.errors import CompileError, TeenyError

KERNEL = """kernel copy(const f32 *x, f32 *y, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(y + offs, load(x + offs, offs < n, 0.0f), offs < n);
}
"""


def test_a_utf8_bom_is_skipped_in_files_and_in_text(tmp_path) -> None:
    path = tmp_path / "bom.c"
    path.write_bytes(codecs.BOM_UTF8 + KERNEL.encode())
    with_bom = tx.compile(path).copy.cuda_source("f32", "f32", 1000, BLOCK=128, target="sm_90")
    plain = tx.compile(KERNEL, name=str(path)).copy.cuda_source(
        "f32", "f32", 1000, BLOCK=128, target="sm_90"
    )
    assert with_bom == plain
    assert (
        tx.compile("\ufeff" + KERNEL, name=str(path)).copy.cuda_source(
            "f32", "f32", 1000, BLOCK=128, target="sm_90"
        )
        == plain
    )


def test_latin1_is_a_located_error(tmp_path) -> None:
    path = tmp_path / "latin1.c"
    text = KERNEL.replace("kernel copy", "/* caf\u00e9 */\nkernel copy")
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CompileError) as err:
        tx.compile(path)
    msg = str(err.value)
    assert "not UTF-8" in msg and "0xe9" in msg and ":1:7" in msg and "UTF-8" in msg


@pytest.mark.parametrize("codec", ["utf-16", "utf-32"])
def test_utf16_and_utf32_are_refused_with_the_encoding_named(tmp_path, codec) -> None:
    path = tmp_path / f"{codec}.c"
    path.write_bytes(KERNEL.encode(codec))  # Python writes the BOM first
    with pytest.raises(CompileError, match=codec.upper()):
        tx.compile(path)


def test_devices_directories_and_fifos_are_refused_without_reading(tmp_path) -> None:
    with pytest.raises(TeenyError, match="not a regular file"):
        tx.compile(os.devnull if not os.path.exists("/dev/zero") else "/dev/zero")
    with pytest.raises(TeenyError, match="a directory"):
        tx.compile(tmp_path, name="dir.c")
    fifo = tmp_path / "pipe.c"
    os.mkfifo(fifo)
    with pytest.raises(TeenyError, match="not a regular file"):
        tx.compile(fifo)  # would block forever if opened


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path) -> None:
    path = tmp_path / "big.c"
    path.write_bytes(b"/*" + b" " * (1 << 20) + b"*/\n" + KERNEL.encode())
    with pytest.raises(TeenyError, match="the limit is"):
        tx.compile(path)
