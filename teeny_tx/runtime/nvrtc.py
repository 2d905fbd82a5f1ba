"""CUDA C++ text → cubin bytes, through NVRTC.

Input: generated CUDA source, the kernel's name, a target such as ``sm_90`` or ``sm_90a``, the
library's NVRTC options and optional in-memory headers. Output: the cubin (an ELF image) or an
:class:`~teeny_tx.errors.NvrtcError` whose log points at kernel lines through ``#line``.

NVRTC is called through ``cupy_backends`` with an explicit architecture, so compiling needs
no GPU and no driver. The options are ours, not CuPy's (CuPy adds ``-ftz=true`` when it compiles
source itself).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cupy_backends.cuda.libs import nvrtc as _nvrtc

from teeny_tx.errors import NvrtcError
from teeny_tx.runtime.elf import repair_cubin

from .. import switches

_log = logging.getLogger(__name__)

DEFAULT_OPTIONS: tuple[str, ...] = (
    # The C++ dialect the emitted code and the device header are written in.
    "-std=c++17",
    # Keep denormals (IEEE behaviour); CuPy's own compile path flushes them to zero.
    "-ftz=false",
    # Division rounds correctly (IEEE), matching the NumPy interpreter.
    "-prec-div=true",
    # Square root rounds correctly (IEEE), matching the NumPy interpreter.
    "-prec-sqrt=true",
    # a*b+c may contract to one FMA: faster and at least as accurate; a documented difference.
    "-fmad=true",
    # Let the optimiser vectorise more device code (wider loads/stores); no numeric effect.
    "--extra-device-vectorization",
    # ptxas reports registers and spills in the log: tiles that outgrow the registers are
    # reported (see spilled_bytes); the binary is the same.
    "--ptxas-options=-v",
)

_ARCH = re.compile(r"sm_\d+[af]?")
_HEADER_FILES = ("cuda_fp16.h", "cuda_bf16.h")


@dataclass(frozen=True)
class CompileResult:
    """A cubin and NVRTC's log (warnings; empty when NVRTC had nothing to say)."""

    cubin: bytes
    log: str


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use."""
    major, minor = _nvrtc.getVersion()
    return int(major), int(minor)


@functools.cache
def cuda_include_dir() -> str | None:
    """The first directory holding the CUDA headers (cuda_fp16.h), or None if there is none."""
    for candidate in _include_candidates():
        if all((candidate / name).is_file() for name in _HEADER_FILES):
            return str(candidate)
    return None


def _include_candidates() -> list[Path]:
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")]
    try:
        from cupy import _environment

        roots.append(_environment.get_cuda_path())
    except Exception:  # noqa: BLE001 - a probe: any failure means "not here"
        pass
    found = [Path(root) / "include" for root in roots if root]
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        found += sorted(Path(base).glob("cu*/include"), reverse=True)
    found.append(Path("/usr/local/cuda/include"))
    return found


def nvrtc_arguments(arch: str, options: Sequence[str]) -> list[str]:
    """The full NVRTC command line: our options, the target and the CUDA include path."""
    if not _ARCH.fullmatch(arch):
        raise NvrtcError(f"unsupported target {arch!r}: expected sm_XY or sm_XYa", arch=arch)
    arguments = [*options, f"--gpu-architecture={arch}"]
    include = cuda_include_dir()
    if include is not None:
        arguments.append(f"-I{include}")
    return arguments


def pch_arguments(directory: Path | None, arch: str = "") -> list[str]:
    """NVRTC's automatic precompiled headers: ``-pch`` with ``directory`` (the cubin cache
    gives one of its own; None: no precompiled headers).

    The first compile of a process (or of the machine, the directory persisting) saves the
    parsed prefix of includes — cuda_fp16.h, cuda_bf16.h and our device header — and later
    compiles load it. The cubin is the same, so the option is not part of the cache key.
    ``$TEENY_TX_PCH``: unset, on except for arch-specific targets (``sm_90a``); ``1`` on for
    every target; ``0`` off. An NVRTC that refuses the option is asked once.

    Measured on the H200 (NVRTC 13.0, BENCHMARKS.md "Compile time"): for sm_90 the header
    image takes 0.08 s to make and the row and elementwise kernels compile about 13% faster
    with it; for sm_90a the image takes 1.9 s, one matmul compiled 18x slower with it (1.49 s
    against 0.08 s, the same cubin) and the others about as fast — so arch-specific targets
    compile without it by default."""
    setting = switches.read("PCH")
    if directory is None or _pch_state["off"] or setting == "0":
        return []
    if setting != "1" and arch.endswith(("a", "f")):
        return []
    try:
        major, minor = nvrtc_version()
        directory = directory / f"nvrtc-{major}.{minor}"
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    return ["-pch", f"--pch-dir={directory}"]


_pch_state = {"off": False}


def compile_with_log(
    source: str,
    *,
    name: str,
    arch: str,
    options: Sequence[str] = DEFAULT_OPTIONS,
    headers: Mapping[str, str] = {},
    pch_dir: Path | None = None,
) -> CompileResult:
    """Compile ``source`` to a cubin for ``arch``; keep NVRTC's log. Raises NvrtcError.
    ``pch_dir``: where NVRTC keeps precompiled headers (:func:`pch_arguments`)."""
    arguments = nvrtc_arguments(arch, options)
    pch = pch_arguments(pch_dir, arch)
    try:
        log, cubin = _compile(source, name, arch, arguments + pch, headers)
    except NvrtcError:
        if not pch:
            raise
        log, cubin = _compile(source, name, arch, arguments, headers)  # raises a real error
        _pch_state["off"] = True  # compiles without -pch and not with it: this NVRTC lacks it
    if log.strip():
        _log.info("NVRTC warnings for kernel '%s' (%s):\n%s", name, arch, log.rstrip())
    return CompileResult(cubin, log)


def _compile(
    source: str, name: str, arch: str, arguments: list[str], headers: Mapping[str, str]
) -> tuple[str, bytes]:
    """(log, cubin) of one NVRTC program."""
    program = _nvrtc.createProgram(
        source,
        f"{name}.cu",
        [text.encode() for text in headers.values()],
        [header.encode() for header in headers],
    )
    try:
        try:
            _nvrtc.compileProgram(program, arguments)
        except _nvrtc.NVRTCError as err:
            raise NvrtcError(_failure_log(program, err), kernel=name, arch=arch) from None
        return _nvrtc.getProgramLog(program), repair_cubin(_nvrtc.getCUBIN(program))
    finally:
        _nvrtc.destroyProgram(program)


def compile_to_cubin(
    source: str,
    *,
    name: str,
    arch: str,
    options: Sequence[str] = DEFAULT_OPTIONS,
    headers: Mapping[str, str] = {},
) -> bytes:
    """Compile ``source`` to cubin bytes for ``arch``. Raises NvrtcError with NVRTC's log."""
    return compile_with_log(source, name=name, arch=arch, options=options, headers=headers).cubin


def _failure_log(program: int, err: Exception) -> str:
    log = _nvrtc.getProgramLog(program).rstrip() or str(err)
    if cuda_include_dir() is None:
        searched = ", ".join(str(path) for path in _include_candidates())
        log += f"\n(no CUDA include directory with cuda_fp16.h was found; searched: {searched})"
    return log


_SPILLS = re.compile(r"(\d+) bytes spill stores")


def spilled_bytes(log: str) -> int:
    """Bytes per thread ptxas spilled from registers to local memory (0 when none)."""
    return max((int(m) for m in _SPILLS.findall(log)), default=0)
