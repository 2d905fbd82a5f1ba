"""Kernel files → their text: only regular files, the size checked before reading, UTF-8.

Input: a path. Output: the file's text, or a :class:`~teeny_tx.errors.TeenyError` /
:class:`~teeny_tx.errors.CompileError` that says what is wrong with it. The rules:

1. Only a regular file is read: a directory, a FIFO, a device (``/dev/zero``) or a socket is
   refused before it is opened for reading, so nothing blocks or reads without end.
2. The size is checked before the text is read (``MAX_SOURCE_BYTES``, as for kernel text).
3. The text is UTF-8. A UTF-8 byte-order mark at the start is dropped (gcc, clang and nvcc
   skip it); a UTF-16/32 BOM, or bytes that are not UTF-8 (a Latin-1 file), are refused with the
   line and column of the first bad byte.
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

from ..errors import CompileError, Location, TeenyError
from .checks import MAX_SOURCE_BYTES

_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_SAVE_AS = "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8 in.c > out.c`)"


def read_kernel_file(path: str | os.PathLike, filename: str) -> str:
    """The text of the kernel file ``path`` (``filename`` is what errors call it)."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise TeenyError(f"cannot read kernel file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise TeenyError(f"cannot read kernel file {path}: it is {kind}")
    if info.st_size > MAX_SOURCE_BYTES:
        raise TeenyError(
            f"cannot read kernel file {path}: it is {info.st_size} bytes; the limit is "
            f"{MAX_SOURCE_BYTES} (split it into several files)"
        )
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise TeenyError(f"cannot read kernel file {path}: {exc.strerror}") from None
    return decode_kernel_bytes(data, filename)


def decode_kernel_bytes(data: bytes, filename: str) -> str:
    """Rule 3: UTF-8, a leading UTF-8 BOM dropped; anything else a located error."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    for bom, name in _OTHER_BOMS:
        if data.startswith(bom):
            raise CompileError(
                f"{filename} is {name}-encoded (it starts with a {name} byte-order mark); "
                "kernel files are UTF-8",
                Location(filename, 1, 1, ""),
                _SAVE_AS,
            )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start]
        line_no = head.count(b"\n") + 1
        start = head.rfind(b"\n") + 1
        end = data.find(b"\n", exc.start)
        raw = data[start : end if end >= 0 else len(data)]
        col = len(data[start : exc.start].decode("utf-8", "replace")) + 1
        raise CompileError(
            f"{filename} is not UTF-8: byte 0x{data[exc.start]:02x} at line {line_no}, "
            f"column {col}",
            Location(filename, line_no, col, raw.decode("utf-8", "replace").rstrip("\r")),
            _SAVE_AS,
        ) from None
