"""``teeny-tx profile``: the command line of :mod:`teeny_tx.profiling`.

Input: a kernel file (or the name of a bundled kernel file: ``softmax`` is kernels/softmax.c),
``-k`` the kernel, ``-D NAME=VALUE`` its constexprs, pointer dtypes (``x=bf16``) and scalar
values, ``--shape NAME=AxB`` the elements of each pointer argument, ``--grid``, and optionally
``--flops``, ``--bytes``, ``--plot PNG``. Output: the profile's report on stdout (time and
rates on a GPU; resources, spills and the roofline's ridge everywhere), the roofline PNG.
Arrays are made here: random normal values (NumPy's generator, seed 0), on the GPU as CuPy
arrays.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .dtypes import DTYPES
from .errors import TeenyError
from .parse.literals import define_value


def add_parser(sub: Any, arch: Callable[[str], str]) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "profile",
        help="time a kernel against the roofline and report its registers, spills, shared "
        "memory and occupancy (resources only without a GPU)",
    )
    p.add_argument("file", help="a kernel file, or a bundled one by name (softmax, matmul, ...)")
    p.add_argument("-k", "--kernel", help="the kernel (default: the file's only or first)")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=AxB",
        help="elements of a pointer argument (e.g. x=4096x4096)",
    )
    p.add_argument("--grid", default="1", help="programs per axis: N or N,M or N,M,L")
    p.add_argument("--num-warps", type=int, default=4)
    p.add_argument("--num-stages", type=int, default=2)
    p.add_argument("--flops", type=float, default=0, help="flops one launch computes")
    p.add_argument("--bytes", type=int, default=None, help="bytes one launch moves")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--arch", type=arch, help="target (default: the device's, else sm_90)")
    p.add_argument("--plot", help="write the roofline PNG here (matplotlib)")
    p.add_argument(
        "--ncu", action="store_true", help="where ncu is on PATH: add its main stall reasons"
    )
    return p


def _source(name: str) -> tuple[str | Path, str]:
    """(text or path, name) of a kernel file or a bundled kernel file's name."""
    path = Path(name)
    if path.is_file():
        return path, name
    from ._kernels import FILES

    bundled = name if name.endswith(".c") else f"{name}.c"
    if bundled in FILES:
        return FILES[bundled], f"kernels/{bundled}"
    raise TeenyError(
        f"teeny-tx profile: no kernel file {name!r} (bundled: "
        f"{', '.join(sorted(f[:-2] for f in FILES))})"
    )


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise TeenyError(f"teeny-tx profile: {flag} takes NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def _without_ncu(argv: list[str]) -> list[str]:
    """The command line again, for the run under ncu: no --ncu, no --plot (nor its file)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--plot":
            skip = True
        elif a != "--ncu" and not a.startswith("--plot="):
            out.append(a)
    return out


def run(args: argparse.Namespace) -> int:
    from . import compile as tx_compile
    from .profiling import ncu_stalls, plot_roofline, profile
    from .runtime.launch import has_gpu

    source, name = _source(args.file)
    module = tx_compile(source, name=name, target=args.arch or None)
    kernel = module.kernels.get(args.kernel) if args.kernel else next(iter(module.kernels.values()))
    if kernel is None:
        raise TeenyError(
            f"{name} has no kernel {args.kernel!r} (kernels: {', '.join(module.kernels)})"
        )
    defines = {k: define_value(v) for k, v in _pairs(args.define, "-D").items()}
    shapes = {}
    for k, v in _pairs(args.shape, "--shape").items():
        try:
            shapes[k] = tuple(int(n) for n in v.lower().split("x"))
        except ValueError:
            raise TeenyError(f"teeny-tx profile: --shape {k}={v}: expected N or NxM") from None
    gpu = has_gpu()
    rng = np.random.default_rng(0)
    positional: list[Any] = []
    moved = 0
    for p in kernel.binder.runtime:
        if p.kind == "pointer":
            dtype = DTYPES[str(defines.get(p.name, p.dtype.name if p.dtype else "f32"))]
            if p.name not in shapes:
                raise TeenyError(f"teeny-tx profile: --shape {p.name}=N[xM] is needed")
            count = math.prod(shapes[p.name])
            moved += count * dtype.bits // 8
            if gpu:
                import cupy as cp

                host = rng.standard_normal(count).astype(dtype.numpy)
                positional.append(cp.asarray(host))
            else:
                positional.append(dtype.name)
        else:
            if p.name not in defines:
                raise TeenyError(f"teeny-tx profile: -D {p.name}=VALUE is needed (a scalar)")
            positional.append(defines[p.name])
    constexprs = {n: defines[n] for n in kernel.binder.constexpr_names if n in defines}
    try:
        grid = tuple(int(g) for g in args.grid.split(","))
    except ValueError:
        raise TeenyError(
            f"teeny-tx profile: --grid {args.grid}: expected N, N,M or N,M,L"
        ) from None
    result = profile(
        kernel,
        grid,
        *positional,
        bytes=args.bytes if args.bytes is not None else moved,
        flops=int(args.flops),
        reps=args.reps,
        target=args.arch,
        num_warps=args.num_warps,
        num_stages=args.num_stages,
        **constexprs,
    )
    if args.ncu and gpu:
        again = [sys.executable, "-m", "teeny_tx.cli", *_without_ncu(sys.argv[1:]), "--reps", "1"]
        result.stalls = ncu_stalls(again, result.spec.entry)
        if result.stalls is None:
            result.notes.append("ncu is not on PATH (or failed): no stall reasons")
    sys.stdout.write(result.report())
    if args.plot:
        print(f"wrote {plot_roofline([result], args.plot)}")
    return 0
