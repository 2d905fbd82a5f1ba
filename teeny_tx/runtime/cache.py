"""Compile requests → cubin bytes, remembered in memory and on disk.

Input: what :func:`teeny_tx.runtime.nvrtc.compile_to_cubin` takes (source, kernel name, target,
options, in-memory headers). Output: the cubin, from this process's memo, from the disk cache,
or from NVRTC (then written to disk atomically).

The key covers everything that changes the binary: the source (which holds the prelude-derived
header), headers, options, target, NVRTC version and the CUDA include directory. Several
processes may compile the same kernel at once: each writes its own temporary file and renames
it into place, so a reader sees a whole entry or none.

Nothing on disk is trusted without proof:

- The cache directory is private: created ``0700``; one that another user owns or can write
  (group or world writable, ``/tmp`` itself) is refused, with a warning, and the process caches
  in the user's private fallback instead (``<tmp>/teeny_tx-cache-<uid>``, shared by such
  processes; ``TEENY_TX_CACHE_DIR`` names the directory to use).
- The directory holds a random secret (``secret``, ``0600``). An entry's file name is an HMAC of
  the key under it, so names cannot be computed from kernel text alone, and each entry stores
  beside the cubin (in the same file, so one rename publishes both) an HMAC of the key and the
  cubin: a flipped byte, another specialisation's cubin, or a file planted without the secret
  fails the check and is rebuilt, with a warning, never loaded.
- An unwritable directory only costs the recompile.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from teeny_tx.errors import RegisterSpillWarning
from teeny_tx.runtime import nvrtc
from teeny_tx.runtime.elf import elf_extent
from teeny_tx.runtime.files import atomic_write, remove_quietly
from teeny_tx.runtime.nvrtc import DEFAULT_OPTIONS

from .. import switches

# Bump when the key's recipe or the file layout changes, so old files are never read.
CACHE_FORMAT = 2
ENTRY_MAGIC = b"teeny_tx cubin 2\n"  # then the 32-byte HMAC of key + cubin, then the cubin
_DIGEST = 32

_memo: dict[tuple, bytes] = {}
_warned_dirs: set[Path] = set()
_fallbacks: dict[Path, Path] = {}  # refused directory -> this process's private one


def cache_dir() -> Path:
    """The private cache directory: ``$TEENY_TX_CACHE_DIR``, else ``$XDG_CACHE_HOME/teeny_tx``,
    else ``~/.cache/teeny_tx``, created ``0700``. One that another user owns or can write is
    refused with a warning, and a private temporary directory (one per process) stands in."""
    forced = switches.read("CACHE_DIR")
    if forced:
        path = Path(forced).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "teeny_tx"
    if path in _fallbacks:
        return _fallbacks[path]
    _make_private(path)
    problem = _unsafe(path)
    if problem is None:
        return path
    fallback = _private_fallback()
    _fallbacks[path] = fallback
    warnings.warn(
        f"teeny_tx refuses the kernel cache directory {path}: {problem}; this process caches "
        f"in {fallback} instead. Make the directory yours and private (chmod 700) or set "
        "TEENY_TX_CACHE_DIR to one that is.",
        RuntimeWarning,
        stacklevel=2,
    )
    return fallback


def _private_fallback() -> Path:
    """Where a process caches when its directory is refused: one private directory per user
    in the temporary directory (``teeny_tx-cache-<uid>``), reused by every such process; if
    that one is not safe (not ours, not private, a link), a fresh one removed at exit."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    shared = Path(tempfile.gettempdir()) / f"teeny_tx-cache-{uid}"
    with contextlib.suppress(OSError):
        shared.mkdir(mode=0o700)  # (FileExistsError: made by an earlier process)
    with contextlib.suppress(OSError):
        if not shared.is_symlink() and _unsafe(shared) is None:
            return shared
    fresh = Path(tempfile.mkdtemp(prefix="teeny_tx-cache-"))  # 0700, ours
    atexit.register(shutil.rmtree, fresh, ignore_errors=True)
    return fresh


def _make_private(path: Path) -> None:
    """Create ``path`` (and missing parents) with mode 0700, whatever the umask."""
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
            d.chmod(0o700)  # mkdir's mode is masked by the umask


def _unsafe(path: Path) -> str | None:
    """Why another local user could change what is in ``path``, or None."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"other users can write it (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _secret(directory: Path) -> bytes:
    """The directory's random secret, made on first use: a 0600 file of this user, published
    whole (written under a temporary name, then hard-linked into place, which fails when another
    process got there first; then its secret is the one)."""
    path = directory / "secret"
    if not path.exists():
        fd, temp = tempfile.mkstemp(prefix=".secret.", dir=directory)  # 0600
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(secrets.token_bytes(32).hex().encode("ascii"))
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
        finally:
            remove_quietly(temp)
    info = path.lstat()
    if (
        not stat.S_ISREG(info.st_mode)
        or info.st_mode & 0o077
        or (hasattr(os, "getuid") and info.st_uid != os.getuid())
    ):
        raise PermissionError(f"{path} is not a private file of this user")
    data = path.read_bytes()
    try:
        return bytes.fromhex(data.decode("ascii"))
    except ValueError:
        raise PermissionError(f"{path} is not a teeny_tx cache secret") from None


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
    entry = _entry(key)
    cubin = _read(*entry) if entry is not None else None
    if cubin is None:
        result = nvrtc.compile_with_log(
            source, name=name, arch=arch, options=options, headers=headers, pch_dir=_pch_dir()
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
        if entry is not None:
            _write(*entry, cubin)
    _memo[memo_key] = cubin
    return cubin


def clear_memo() -> None:
    """Forget this process's cubins (the on-disk cache stays)."""
    _memo.clear()


def entry_path(key: str) -> Path | None:
    """Where the entry of ``key`` lives (None when there is no usable cache directory)."""
    entry = _entry(key)
    return entry[0] if entry is not None else None


def _entry(key: str) -> tuple[Path, bytes, bytes] | None:
    """(path, the directory's secret, the key's bytes) of an entry, or None without a cache."""
    try:
        directory = cache_dir()
        secret = _secret(directory)
    except OSError as err:
        _warn_once(Path(switches.read("CACHE_DIR") or "~/.cache/teeny_tx"), err)
        return None
    name = hmac.new(secret, b"name\0" + key.encode(), hashlib.sha256).hexdigest()
    return directory / name[:2] / f"{name}.cubin", secret, key.encode()


def _digest(secret: bytes, key: bytes, cubin: bytes) -> bytes:
    return hmac.new(secret, b"entry\0" + key + b"\0" + cubin, hashlib.sha256).digest()


def _read(path: Path, secret: bytes, key: bytes) -> bytes | None:
    """The verified cubin of an entry, or None when it is missing; a damaged, foreign or
    planted entry is None too, with a warning (it is rebuilt and replaced)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, digest = data[: len(ENTRY_MAGIC)], data[len(ENTRY_MAGIC) : len(ENTRY_MAGIC) + _DIGEST]
    cubin = data[len(ENTRY_MAGIC) + _DIGEST :]
    if (
        head == ENTRY_MAGIC
        and hmac.compare_digest(digest, _digest(secret, key, cubin))
        and elf_extent(cubin) == len(cubin)
    ):
        return cubin
    warnings.warn(
        f"teeny_tx kernel cache entry {path} failed verification (damaged, or not written by "
        "this cache for this kernel); it is not loaded and is rebuilt",
        RuntimeWarning,
        stacklevel=4,
    )
    return None


def _write(path: Path, secret: bytes, key: bytes, cubin: bytes) -> None:
    """Write the entry (magic, digest, cubin) atomically into a private directory."""
    try:
        _make_private(path.parent)
        atomic_write(path, ENTRY_MAGIC + _digest(secret, key, cubin) + cubin)
    except OSError as err:
        _warn_once(path.parent.parent, err)


def _pch_dir() -> Path | None:
    """NVRTC's precompiled headers live under the cache directory (None where it is unusable)."""
    try:
        return cache_dir() / "pch"
    except OSError:
        return None


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
