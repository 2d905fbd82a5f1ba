"""The ``teeny-tx`` command line.

Input: argv. Output: generated CUDA on stdout or in a file (``compile``), a verified run of the
bundled kernels (``demo``), golden-file checks or re-blessing (``golden``), the operation
reference (``docs``). Errors in kernels print their located message and exit with status 1;
usage errors exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from .errors import TeenyError


def _value(text: str):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


# A scalar without -D compiles as a launch with an arbitrary value would: an integer that is
# neither 1 nor a multiple of 16 (the values launches specialise on), so the code printed is the
# general one and its header lists no assumption about the scalar.
_GENERAL_SCALAR = {"i": 3, "u": 3, "f": 1.5, "b": False}

# The targets the compiler knows (its shared-memory table, and sm_90a for wgmma).
KNOWN_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")


def _arch(text: str) -> str:
    """--arch: one of the known targets (argparse turns the ValueError into a usage error)."""
    if text not in KNOWN_ARCHS:
        raise argparse.ArgumentTypeError(
            f"unknown target {text!r}; known targets: {', '.join(KNOWN_ARCHS)}"
        )
    return text


def cmd_compile(args: argparse.Namespace) -> int:
    from . import compile as tx_compile

    if args.arch:
        os.environ["TEENY_TX_ARCH"] = args.arch
    module = tx_compile(Path(args.file), name=args.file)
    defines = {}
    for d in args.define or []:
        name, sep, value = d.partition("=")
        if not sep:
            raise SystemExit(f"teeny-tx: -D takes NAME=VALUE, got '{d}'")
        defines[name] = _value(value)
    names = [args.kernel] if args.kernel else list(module.kernels)
    kernels = [getattr(module, name) for name in names]
    known = {p.name for k in kernels for p in k.params}
    unknown = sorted(set(defines) - known)
    if unknown:
        print(
            f"teeny-tx: -D {', '.join(unknown)}: no such parameter of "
            f"{', '.join(names)} (parameters: {', '.join(sorted(known)) or 'none'})",
            file=sys.stderr,
        )
        return 2
    chunks = []
    for kernel in kernels:
        positional = []
        for p in kernel.binder.runtime:
            if p.kind == "pointer":
                positional.append(str(defines.get(p.name, p.dtype.name if p.dtype else "f32")))
            else:
                positional.append(defines.get(p.name, _GENERAL_SCALAR[p.dtype.kind]))
        constexprs = {n: defines[n] for n in kernel.binder.constexpr_names if n in defines}
        options = {"num_warps": args.num_warps, "num_stages": args.num_stages}
        chunks.append(kernel.cuda_source(*positional, **options, **constexprs))
    text = "\n".join(chunks)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .library import CASES, ROW_CASES
    from .runtime.launch import has_gpu

    gpu = has_gpu() and not args.interpret
    where = "GPU" if gpu else "NumPy interpreter (no GPU found)"
    print(f"teeny-tx demo: compiling the bundled kernels and running them on the {where}")
    rng = np.random.default_rng(args.seed)
    sizes = (1, 1001, 2**20 + 3)
    failures = 0
    for case in CASES:
        for dtype in case.dtypes:
            start = time.perf_counter()
            errors = []
            try:
                for n in sizes:
                    errors.append(_run_case(case, dtype, n, rng, gpu))
                status = f"ok   max|err| {max(errors):.2e}"
            except (AssertionError, TeenyError) as exc:
                failures += 1
                status = f"FAIL {exc}"
            print(
                f"  {case.name:<12} {dtype:<5} n={','.join(map(str, sizes))}  {status}  "
                f"({time.perf_counter() - start:.2f} s)"
            )
    for case in ROW_CASES:
        shapes = ROW_SHAPES + (LONG_ROWS if case.long_rows else ())
        for dtype in case.dtypes:
            start = time.perf_counter()
            try:
                worst = max(_run_row_case(case, dtype, r, c, rng, gpu) for r, c in shapes)
                status = f"ok   max|err|/scale {worst:.2e}"
            except (AssertionError, TeenyError) as exc:
                failures += 1
                status = f"FAIL {exc}"
            size = ",".join(f"{r}x{c}" for r, c in shapes)
            took = time.perf_counter() - start
            print(f"  {case.name:<22} {dtype:<5} {size}  {status}  ({took:.2f} s)")
    for dtype, precision in (("f16", None), ("bf16", None), ("f32", "tf32"), ("f32", None)):
        start = time.perf_counter()
        try:
            worst = _run_matmul_case(dtype, precision, rng, gpu)
            status = f"ok   max|err|/scale {worst:.2e}"
        except (AssertionError, TeenyError) as exc:
            failures += 1
            status = f"FAIL {exc}"
        took = time.perf_counter() - start
        name = f"matmul+bias+gelu {precision or ''}".strip()
        shape = "x".join(map(str, MATMUL_SHAPE[gpu]))
        print(f"  {name:<22} {dtype:<5} {shape}  {status}  ({took:.2f} s)")
    if not gpu:
        from .kernel import HEADERS
        from .library import GOLDEN
        from .runtime import nvrtc

        for g in GOLDEN[:3]:
            nvrtc.compile_to_cubin(g.render(), name=g.kernel, arch=g.arch, headers=HEADERS)
        print("  generated CUDA compiles for sm_90 with NVRTC (no GPU needed)")
    print("all bundled kernels verified" if not failures else f"{failures} case(s) FAILED")
    return 1 if failures else 0


def _run_case(case, dtype: str, n: int, rng, gpu: bool) -> float:
    from . import cdiv

    xs, scalars = case.make(n, dtype, rng)
    grid = (cdiv(n, 1024),)
    if gpu:
        import cupy as cp

        from .dtypes import DTYPES

        dx = [cp.asarray(x) for x in xs]
        out = cp.full(n, np.nan, dtype=DTYPES[dtype].np)
        case.launch(grid, case.args(out, dx, scalars, n))
        host = cp.asnumpy(out)
    else:
        host = np.full(n, np.nan, dtype=xs[0].dtype)
        case.launch(grid, case.args(host, xs, scalars, n), interpret=True)
    return case.check(host, xs, scalars, dtype)


# M, N, K of the teeny_tx.linalg demo, on the interpreter (False) and on the GPU (True).
MATMUL_SHAPE = {False: (70, 33, 64), True: (1001, 517, 333)}


def _run_matmul_case(dtype: str, precision: str | None, rng, gpu: bool) -> float:
    """linalg.matmul with bias and GELU against float64; the error over the largest |ref|,
    within the tolerance of the output dtype (TF32: its 10-bit inputs)."""
    from math import erf

    from . import linalg
    from .dtypes import DTYPES

    m, n, k = MATMUL_SHAPE[gpu]
    a = rng.standard_normal((m, k)).astype(np.float32).astype(DTYPES[dtype].np)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(DTYPES[dtype].np)
    bias = rng.standard_normal(n).astype(np.float32)
    z = a.astype(np.float64) @ b.astype(np.float64) + bias
    ref = 0.5 * z * (1.0 + np.vectorize(erf)(z / np.sqrt(2.0)))
    # matmul_config's tiles: the autotuner would compile and time all of the kernel's configs
    config = linalg.matmul_config(m, n, k, dtype, precision=precision or "ieee")
    kwargs = dict(bias=bias, activation="gelu", out_dtype="f32", precision=precision, config=config)
    if gpu:
        import cupy as cp

        got = cp.asnumpy(
            linalg.matmul(cp.asarray(a), cp.asarray(b), **{**kwargs, "bias": cp.asarray(bias)})
        )
    else:
        got = linalg.matmul(a, b, **kwargs, interpret=True)
    worst = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    assert worst < (2e-3 if precision == "tf32" else 1e-5), f"error {worst:.2e}"
    return worst


# [rows, cols] of the teeny_tx.nn demo; rows longer than one tile where a function loops.
ROW_SHAPES = ((1, 1), (7, 1001), (64, 4097))
LONG_ROWS = ((3, 65537),)


def _run_row_case(case, dtype: str, rows: int, cols: int, rng, gpu: bool) -> float:
    args = case.make(rng, rows, cols, dtype)
    if gpu:
        import cupy as cp

        outs = [cp.asnumpy(out) for out in case.run([cp.asarray(a) for a in args])]
    else:
        outs = case.run(args, interpret=True)
    return case.check(outs, args, rows, cols)


def cmd_golden(args: argparse.Namespace) -> int:
    from .library import GOLDEN, bless

    if args.bless:
        changed = bless()
        for path in changed:
            print(f"re-blessed {path}")
        print(f"{len(changed)} of {len(GOLDEN)} golden files changed")
        return 0
    stale = [g for g in GOLDEN if not g.path.exists() or g.path.read_text() != g.render()]
    for g in stale:
        print(f"stale: {g.path} (run `teeny-tx golden --bless` if the change is intended)")
    print(f"{len(GOLDEN) - len(stale)} of {len(GOLDEN)} golden files match")
    return 1 if stale else 0


def cmd_docs(args: argparse.Namespace) -> int:
    from .docs import reference_markdown

    sys.stdout.write(reference_markdown())
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="teeny-tx", description="teeny_tx: block kernels in C syntax, compiled to CUDA"
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="print (or write) the CUDA C++ of a kernel file")
    c.add_argument("file")
    c.add_argument(
        "-D",
        dest="define",
        action="append",
        metavar="NAME=VALUE",
        help="a constexpr value, a pointer parameter's dtype (x=f16) or a scalar's value (an "
        "integer scalar without one compiles as neither 1 nor a multiple of 16: the general code)",
    )
    c.add_argument("-k", "--kernel", help="only this kernel of the file")
    c.add_argument("--num-warps", type=int, default=4)
    c.add_argument(
        "--num-stages", type=int, default=2, help="software-pipelining depth of loops feeding dot"
    )
    c.add_argument(
        "--arch",
        type=_arch,
        help=f"target: {', '.join(KNOWN_ARCHS)} (sm_90: mma.sync, sm_90a: wgmma); "
        "default: $TEENY_TX_ARCH",
    )
    c.add_argument("-o", "--output", help="write here instead of stdout")
    c.set_defaults(run=cmd_compile)
    d = sub.add_parser(
        "demo",
        help="compile the bundled kernels and teeny_tx.nn, run them (GPU, else NumPy), verify",
    )
    d.add_argument(
        "--interpret", action="store_true", help="use the NumPy interpreter even with a GPU"
    )
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(run=cmd_demo)
    g = sub.add_parser("golden", help="check the golden CUDA files (or --bless them)")
    g.add_argument("--bless", action="store_true", help="rewrite golden/ from the current compiler")
    g.set_defaults(run=cmd_golden)
    r = sub.add_parser("docs", help="print the operation reference (docs/reference.md)")
    r.set_defaults(run=cmd_docs)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except TeenyError as exc:
        print(str(exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
