"""Pictures of the blocked layouts the compiler chooses, for chapter 3 of the book.

Input: a kernel file, a kernel, a variable and a specialisation (arguments as dtype names,
constexprs, ``num_warps``). The layout is read from the compiler itself: the kernel is
specialised (``Kernel.specialize``, which runs ``lower/passes/layout.py``) and the layout of the
variable's declaration in the annotated IR is taken. Output: :func:`owners`, which thread and
register hold every element (the Python twin of ``tx::Blocked::coord`` in
``prelude/teeny_tx.cuh``), and PNG pictures under ``docs/images/``:
``python tools/draw_layout.py`` redraws every picture of :data:`PICTURES`.

The pictures are a pure function of the layout: same layout, same bytes (no timestamps or
version strings in the PNG).
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import teeny_tx
from teeny_tx.lower import ir
from teeny_tx.lower.ir import walk_stmts
from teeny_tx.lower.passes.layout import Blocked, Layout

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"


@dataclass(frozen=True)
class Picture:
    """One picture: the layout of ``var`` in ``kernel`` of ``path`` at one specialisation."""

    image: str  # file name under docs/images/
    path: str
    kernel: str
    var: str
    args: tuple  # dtype names for pointers, numbers for scalars
    constexprs: tuple[tuple[str, int], ...]
    num_warps: int
    title: str
    rows: int = 0  # draw a 1-D tile as rows of this many elements (0: one row)


PICTURES = (
    Picture(
        "layout-vector-add.png",
        "kernels/vector_add.c",
        "vector_add",
        "x",
        ("f32", "f32", "f32", 4096),
        (("BLOCK", 1024),),
        4,
        "vector_add, tile x: f32[1024], num_warps=4",
        rows=128,
    ),
    Picture(
        "layout-softmax-rows.png",
        "docs/examples/softmax_rows.c",
        "softmax_rows",
        "x",
        ("f32", "f32", 37, 100, 100),
        (("BM", 8), ("BN", 128)),
        4,
        "softmax_rows, tile x: f32[8, 128], num_warps=4",
    ),
    Picture(
        "layout-small-tile.png",
        "docs/examples/softmax_rows.c",
        "softmax_rows",
        "x",
        ("f32", "f32", 37, 20, 20),
        (("BM", 4), ("BN", 32)),
        4,
        "softmax_rows, tile x: f32[4, 32], num_warps=4 (threads hold copies)",
    ),
)


def layout_of(picture: Picture) -> Layout:
    """The layout the compiler gives the picture's variable (its declaration's)."""
    module = teeny_tx.compile(ROOT / picture.path, name=picture.path)
    kernel = getattr(module, picture.kernel)
    spec = kernel.specialize(*picture.args, num_warps=picture.num_warps, **dict(picture.constexprs))
    for stmt in walk_stmts(spec.kernel.body):
        if isinstance(stmt, ir.Declare) and stmt.name == picture.var and stmt.layout is not None:
            return stmt.layout
    raise LookupError(f"{picture.kernel} declares no tile named {picture.var!r}")


def _split(index: int, sizes: tuple[int, ...], order: tuple[int, ...]) -> list[int]:
    """``index`` as coordinates along ``sizes``, dimension ``order[0]`` fastest."""
    coords = [0] * len(sizes)
    for d in order:
        coords[d] = index % sizes[d]
        index //= sizes[d]
    return coords


def owners(layout: Layout) -> dict[tuple[int, ...], list[tuple[int, int]]]:
    """Element coordinates (in the layout's padded shape) -> every (thread, register) holding
    it, in thread order: ``tx::Blocked::coord`` evaluated for every thread of the program."""
    b = layout.blocked
    if not isinstance(b, Blocked):
        raise TypeError("only blocked layouts are drawn")
    rank = b.rank
    regs = tuple(layout.regs_along(d) for d in range(rank))
    nthreads = 1
    for d in range(rank):
        nthreads *= b.tpw[d] * b.wpc[d]
    held: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for thread in range(nthreads):
        lane = _split(thread % 32, b.tpw, b.order)
        warp = _split(thread // 32, b.wpc, b.order)
        for r in range(layout.regs):
            rc = _split(r, regs, b.order)
            coords = []
            for d in range(rank):
                size, tile, spt = layout.shape[d], b.tile(d), b.spt[d]
                base = (warp[d] * b.tpw[d] + lane[d]) * spt
                if size >= tile:
                    coords.append((rc[d] // spt) * tile + base + rc[d] % spt)
                else:
                    coords.append(base % size + rc[d])
            held.setdefault(tuple(coords), []).append((thread, r))
    return held


def _grid(layout: Layout, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per element, drawn as a 2-D grid: the first owner's warp, lane, and how many threads
    hold the element."""
    shape = layout.value_shape()
    held = owners(layout)
    if len(shape) == 1:
        width = rows or shape[0]
        grid_shape = (shape[0] // width, width)
    else:
        grid_shape = shape
    warp = np.zeros(grid_shape, dtype=int)
    lane = np.zeros(grid_shape, dtype=int)
    copies = np.zeros(grid_shape, dtype=int)
    for index in itertools.product(*(range(s) for s in shape)):
        padded = [0] * layout.blocked.rank
        for axis, d in enumerate(layout.dims):
            padded[d] = index[axis]
        holders = held[tuple(padded)]
        thread = holders[0][0]
        cell = divmod(index[0], grid_shape[1]) if len(shape) == 1 else index
        warp[cell], lane[cell], copies[cell] = thread // 32, thread % 32, len(holders)
    return warp, lane, copies


def draw(picture: Picture, out: Path) -> None:
    """Draw one picture as PNG: a cell per element, coloured by warp, labelled by lane."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    layout = layout_of(picture)
    warp, lane, copies = _grid(layout, picture.rows)
    h, w = warp.shape
    colours = [
        "#4e79a7",
        "#f28e2b",
        "#59a14f",
        "#e15759",
        "#76b7b2",
        "#edc948",
        "#b07aa1",
        "#ff9da7",
    ]
    nwarps = int(warp.max()) + 1
    cell = 0.16 if w > 64 else 0.32
    fig, ax = plt.subplots(figsize=(max(6.0, w * cell + 1.5), h * cell * 1.6 + 1.6), dpi=100)
    ax.imshow(
        warp,
        cmap=ListedColormap(colours[:nwarps]),
        vmin=-0.5,
        vmax=nwarps - 0.5,
        aspect="auto",
        interpolation="nearest",
    )
    for (i, j), value in np.ndenumerate(lane):
        label = str(value) if copies[i, j] == 1 else f"{value}+"
        ax.text(j, i, label, ha="center", va="center", fontsize=5 if w > 64 else 7, color="white")
    for j in range(1, w):  # a thin line between the runs one thread holds
        if lane[0, j] != lane[0, j - 1]:
            ax.axvline(j - 0.5, color="white", linewidth=0.3)
    ax.set_xticks(range(0, w, max(1, w // 16)))
    ax.set_yticks(range(h))
    if len(layout.value_shape()) == 1:
        ax.set_ylabel(f"row r: elements {w}r to {w}r+{w - 1}")
        ax.set_xlabel("element within the row")
    else:
        ax.set_xlabel("column (axis 1)")
        ax.set_ylabel("row (axis 0)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[k]) for k in range(nwarps)]
    ax.legend(
        handles,
        [f"warp {k}" for k in range(nwarps)],
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        fontsize=8,
        frameon=False,
    )
    ax.set_title(
        f"{picture.title}\n{layout.describe()}\nnumber in a cell: the lane (thread "
        "of its warp) holding it; +: other threads hold copies",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(out, format="png", metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=IMAGES, help="directory for the PNGs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for picture in PICTURES:
        draw(picture, args.out / picture.image)
        print(args.out / picture.image)


if __name__ == "__main__":
    main()
