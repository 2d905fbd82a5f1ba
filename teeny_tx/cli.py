"""The ``teeny-tx`` command line.

Input: argv. Output: generated CUDA on stdout or in a file (``compile``), a verified run of the
bundled kernels (``demo``), golden-file checks or re-blessing (``golden``), the operation
reference (``docs``). Errors in kernels print their located message and exit with status 1;
usage errors exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .errors import TeenyError
from .parse.literals import define_value
from .progress import Progress
from .target import KNOWN_ARCHS

# A scalar without -D compiles as a launch with an arbitrary value would: an integer that is
# neither 1 nor a multiple of 16 (the values launches specialise on), so the code printed is the
# general one and its header lists no assumption about the scalar.
_GENERAL_SCALAR = {"i": 3, "u": 3, "f": 1.5, "b": False}

# The targets the compiler knows (its shared-memory table, and sm_90a for wgmma).


def _usage(message: str) -> int:
    """A usage error: one line on stderr, exit status 2 (as argparse's own)."""
    print(f"teeny-tx: {message}", file=sys.stderr)
    return 2


def _seed(text: str) -> int:
    """--seed: a non-negative integer (NumPy's generators take no negative seed)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"the seed must be >= 0, got {value}")
    return value


def _arch(text: str) -> str:
    """--arch: one of the known targets (argparse turns the ValueError into a usage error)."""
    if text not in KNOWN_ARCHS:
        raise argparse.ArgumentTypeError(
            f"unknown target {text!r}; known targets: {', '.join(KNOWN_ARCHS)}"
        )
    return text


def cmd_compile(args: argparse.Namespace) -> int:
    from . import compile as tx_compile

    if args.file.endswith(".py"):  # a Python front-end file: its translation, as a module
        from .frontend.cli import translate_file

        module = tx_compile(translate_file(args.file, args.kernel, args.define), name=args.file)
    else:
        module = tx_compile(Path(args.file), name=args.file, target=args.arch or None)
    defines = {}
    for d in args.define or []:
        name, sep, value = d.partition("=")
        if not sep or not name:
            return _usage(f"-D takes NAME=VALUE, got '{d}'")
        defines[name] = define_value(value)
    if args.kernel and args.kernel not in module.kernels:
        return _usage(
            f"-k {args.kernel}: {args.file} has no such kernel "
            f"(kernels: {', '.join(module.kernels)})"
        )
    names = [args.kernel] if args.kernel else list(module.kernels)
    kernels = [getattr(module, name) for name in names]
    known = {p.name for k in kernels for p in k.params}
    unknown = sorted(set(defines) - known) if not args.file.endswith(".py") else []
    if unknown:
        return _usage(
            f"-D {', '.join(unknown)}: no such parameter of "
            f"{', '.join(names)} (parameters: {', '.join(sorted(known)) or 'none'})"
        )
    chunks = []
    for kernel in kernels:
        positional: list[Any] = []
        for p in kernel.binder.runtime:
            if p.kind == "pointer":
                positional.append(str(defines.get(p.name, p.dtype.name if p.dtype else "f32")))
            else:
                value = defines.get(p.name)  # (a .py file's -D n=i32 typed the scalar)
                general = value is None or isinstance(value, str)
                positional.append(_GENERAL_SCALAR[p.dtype.kind] if general else value)
        constexprs = {n: defines[n] for n in kernel.binder.constexpr_names if n in defines}
        options = {"num_warps": args.num_warps, "num_stages": args.num_stages}
        chunks.append(kernel.cuda_source(*positional, **options, **constexprs))
    text = "\n".join(chunks)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as exc:
            return _usage(f"-o {args.output}: cannot write: {exc.strerror or exc}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from .frontend.cli import translate_file

    sys.stdout.write(translate_file(args.file, args.kernel, args.define))
    return 0


def checkout_cases(command: str) -> Any:
    """``tests/cases.py`` of the teeny_tx source checkout this runs in (the current directory
    or one above it, or the tree of an editable install), imported; exit with a clear message
    where there is none: the golden files and test tables are not installed with the package."""
    import importlib.util

    here = Path.cwd().resolve()
    for root in (*(here, *here.parents), Path(__file__).resolve().parents[1]):
        cases = root / "tests" / "cases.py"
        if cases.is_file() and (root / "golden").is_dir() and (root / "kernels").is_dir():
            name = "teeny_tx_checkout_cases"
            if name in sys.modules:
                return sys.modules[name]
            spec = importlib.util.spec_from_file_location(name, cases)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
    raise SystemExit(
        f"teeny-tx {command}: run it in a teeny_tx source checkout. The golden files (golden/) "
        "and the tables that render them (tests/cases.py) are part of the repository, not of "
        f"the installed package, and neither {here} nor a directory above it holds them."
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(seed=args.seed, interpret=args.interpret)


def cmd_golden(args: argparse.Namespace) -> int:
    cases = checkout_cases("golden")
    # the only writer of golden/: tests compare, and bless into a temporary directory
    if args.bless:
        changed = cases.bless()
        for path in changed:
            print(f"re-blessed {path}")
        print(f"{len(changed)} golden files changed")
        return 0
    renderers = cases.renderers()
    stale = []
    with Progress(len(renderers), "teeny-tx golden") as meter:
        for name, render in renderers:
            path = cases.GOLDEN_DIR / name
            if not path.exists() or path.read_text() != render():
                stale.append(path)
            meter.step(name)
    for path in stale:
        print(f"stale: {path} (run `teeny-tx golden --bless` if the change is intended)")
    print(f"{len(renderers) - len(stale)} of {len(renderers)} golden files match")
    return 1 if stale else 0


def cmd_docs(args: argparse.Namespace) -> int:
    from .docs import reference_markdown

    sys.stdout.write(reference_markdown())
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from .profile_cli import run

    return run(args)


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
    t = sub.add_parser(
        "translate", help="print the C-syntax kernel file of the @jit kernels of a Python file"
    )
    t.add_argument("file")
    t.add_argument("-k", "--kernel", help="only this kernel of the file")
    t.add_argument(
        "-D",
        dest="define",
        action="append",
        metavar="NAME=VALUE",
        help="a parameter's dtype (x=f16: a pointer; n=i32, eps=f32: a scalar) or a "
        "constexpr's value, deciding its static branches",
    )
    t.set_defaults(run=cmd_translate)
    d = sub.add_parser(
        "demo",
        help="compile the bundled kernels and teeny_tx.nn, run them (GPU, else NumPy), verify",
    )
    d.add_argument(
        "--interpret", action="store_true", help="use the NumPy interpreter even with a GPU"
    )
    d.add_argument("--seed", type=_seed, default=0)
    d.set_defaults(run=cmd_demo)
    g = sub.add_parser(
        "golden", help="check the golden CUDA files (or --bless them); in a source checkout only"
    )
    g.add_argument("--bless", action="store_true", help="rewrite golden/ from the current compiler")
    g.set_defaults(run=cmd_golden)
    from .profile_cli import add_parser as add_profile

    add_profile(sub, _arch).set_defaults(run=cmd_profile)
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
