"""Compile requests → cubin bytes, remembered in memory and on disk.

Input: what :func:`teeny_tx.runtime.nvrtc.compile_to_cubin` takes (source, kernel name, target,
options, in-memory headers). Output: the cubin, from this process's memo, from
``<cache_dir>/<key[:2]>/<key>.cubin``, or from NVRTC (then written to disk atomically).

The key covers everything that changes the binary: the source (which holds the prelude-derived
header), headers, options, target, NVRTC version and the CUDA include directory. Several
processes may compile the same kernel at once: each writes its own temporary file and renames
it into place, so a reader sees a whole cubin or none. A damaged file is a miss; a cache
directory that cannot be written only costs the recompile.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from teeny_tx.errors import RegisterSpillWarning
from teeny_tx.runtime import nvrtc
from teeny_tx.runtime.elf import elf_extent
from teeny_tx.runtime.files import atomic_write
from teeny_tx.runtime.nvrtc import DEFAULT_OPTIONS

# Bump when the key's recipe or the file layout changes, so old files are never read.
CACHE_FORMAT = 1

_memo: dict[tuple, bytes] = {}
_warned_dirs: set[Path] = set()


def cache_dir() -> Path:
    """``$TEENY_TX_CACHE_DIR``, else ``$XDG_CACHE_HOME/teeny_tx``, else ``~/.cache/teeny_tx``."""
    forced = os.environ.get("TEENY_TX_CACHE_DIR")
    if forced:
        path = Path(forced).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "teeny_tx"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_key(
    source: str,
    name: str,
    arch: str,
    options: Sequence[str] = DEFAULT_OPTIONS,
    headers: Mapping[str, str] = {},
) -> str:
    """sha256 hex of everything that decides the cubin."""
    recipe = [
        CACHE_FORMAT,
        list(nvrtc.nvrtc_version()),
        nvrtc.cuda_include_dir(),
        arch,
        name,
        list(options),
        sorted(headers.items()),
        source,
    ]
    return hashlib.sha256(json.dumps(recipe).encode()).hexdigest()


def load_or_compile(
    source: str,
    *,
    name: str,
    arch: str,
    options: Sequence[str] = DEFAULT_OPTIONS,
    headers: Mapping[str, str] = {},
) -> bytes:
    """The cubin for this request: memo, then disk, then NVRTC. Raises NvrtcError."""
    memo_key = (source, name, arch, tuple(options), tuple(sorted(headers.items())))
    cubin = _memo.get(memo_key)
    if cubin is not None:
        return cubin
    key = cache_key(source, name, arch, options, headers)
    path = _cache_path(key)
    cubin = _read(path) if path is not None else None
    if cubin is None:
        result = nvrtc.compile_with_log(
            source, name=name, arch=arch, options=options, headers=headers
        )
        cubin = result.cubin
        spilled = nvrtc.spilled_bytes(result.log)
        if spilled:
            warnings.warn(
                RegisterSpillWarning(
                    f"kernel '{name}' spills {spilled} bytes per thread from registers to local "
                    f"memory ({arch}): its tiles hold more elements per thread than the registers "
                    "do; raise num_warps or use smaller tiles",
                    spilled=spilled,
                ),
                stacklevel=3,
            )
        if path is not None:
            _write(path, cubin)
    _memo[memo_key] = cubin
    return cubin


def clear_memo() -> None:
    """Forget this process's cubins (the on-disk cache stays)."""
    _memo.clear()


def _cache_path(key: str) -> Path | None:
    try:
        directory = cache_dir()
    except OSError as err:
        _warn_once(Path(os.environ.get("TEENY_TX_CACHE_DIR") or "~/.cache/teeny_tx"), err)
        return None
    return directory / key[:2] / f"{key}.cubin"


def _read(path: Path) -> bytes | None:
    """The cached cubin, or None when it is missing, unreadable, truncated or not an ELF."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if elf_extent(data) == len(data) else None


def _write(path: Path, cubin: bytes) -> None:
    """Write ``cubin`` atomically: a temporary file in the same directory, then a rename."""
    try:
        atomic_write(path, cubin)
    except OSError as err:
        _warn_once(path.parent.parent, err)


def _warn_once(directory: Path, err: OSError) -> None:
    if directory in _warned_dirs:
        return
    _warned_dirs.add(directory)
    warnings.warn(
        f"teeny_tx cannot write its kernel cache in {directory} ({err}); kernels will be "
        "recompiled in each process. Set TEENY_TX_CACHE_DIR to a writable directory.",
        RuntimeWarning,
        stacklevel=3,
    )
