"""Files teeny_tx writes (the cubin cache, the autotuner's choices): whole or not at all.

Input: a path and its bytes. Output: the file, replaced atomically, so that processes
compiling or tuning the same kernel at once never read a half-written file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename
    (``os.replace``: atomic on POSIX and Windows). Creates the directory; raises OSError, with
    no temporary file left behind, when it cannot write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise
    remove_stale_temps(path.parent)


STALE_SECONDS = 3600  # a temporary file this old was left by a writer that was killed


def remove_stale_temps(directory: Path) -> None:
    """Remove the temporary files of :func:`atomic_write` in ``directory`` that a killed
    writer left behind (older than :data:`STALE_SECONDS`; a live writer's is seconds old)."""
    cutoff = time.time() - STALE_SECONDS
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(".") and name.endswith(".tmp") and entry.is_file():
                with contextlib.suppress(OSError):
                    if entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)


def remove_quietly(path: str | Path) -> None:
    """Remove ``path`` if it can be removed (a temporary file left by a failed write)."""
    with contextlib.suppress(OSError):
        os.unlink(path)
