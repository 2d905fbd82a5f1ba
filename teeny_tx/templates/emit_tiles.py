"""Reductions, scans and layout changes through one shared-memory scratch buffer.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``emit`` (macros of ``tiles.cu.j2``), and temporaries registered for the expressions that use
them. A mixin of
:class:`~teeny_tx.templates.emitter.Emitter`.
"""

from __future__ import annotations

from ..lower.interface import scan_lines
from ..lower.ir import Op
from ..lower.layout import Layout
from ..lower.names import ELEMENT
from . import expr as cx
from .cuda_types import ctype


def _row_major(coords: list[str], shape: tuple[int, ...]) -> str:
    """The row-major offset of ``coords`` in ``shape``."""
    text = cx.atom(coords[0])
    for c, size in zip(coords[1:], shape[1:], strict=True):
        scaled = text if size == 1 else cx.binary("*", text, cx.atom(str(size)))
        text = cx.binary("+", scaled, cx.atom(c))
    return text.text


class TileEmitter:
    def emit_reduce(self, e: Op, dst: str | None = None) -> None:
        """``tx::reduce`` over one dimension into a temporary in the reduced layout."""
        source = e.args[0]
        inner: Layout = source.layout
        out: Layout = e.layout
        axis = e.attr("axis")
        dim = inner.dims[axis]
        kind = e.attr("kind")
        dtype = source.type.dtype
        if kind in ("argmax", "argmin"):
            dst = None  # the reduction yields pairs; the index is read out of them
        name = dst or self.names.fresh("red")
        if kind in ("argmax", "argmin"):
            pair = f"tx::ValueIndex<{ctype(dtype)}>"
            values = self.names.fresh("pairs")
            src = self.materialise(source, inner)
            self.emit("value_index_pairs", pair, values, self.L(inner), src, dim)
            combine = self.render_macro("arg_combiner", pair, ">" if kind == "argmax" else "<")
            elem, src = pair, values
            suffix = ".index"
        else:
            src = self.materialise(source, inner)
            with self.registers_of(out):
                body = self.ex(e.attr("combine"))
            t = ctype(dtype)
            combine = self.render_macro("combiner", t, body)
            elem, suffix = t, ""
        smem = self.scratch(e)
        self.emit("reduce", elem, name, self.L(inner), self.L(out), dim, src, combine, smem)
        self.temps[id(e)] = (name, out, suffix)

    def emit_scan(self, e: Op, dst: str | None = None) -> None:
        """``tx::scan`` along one dimension into a temporary in the same layout."""
        source = e.args[0]
        layout: Layout = e.layout
        dim = layout.dims[e.attr("axis")]
        lines = scan_lines(layout, dim)
        if lines.key not in self.layout_names:
            raise AssertionError("scan line layout must be registered by the layout pass")
        src = self.materialise(source, layout)
        t = ctype(e.type.dtype)
        with self.registers_of(layout):
            body = self.ex(e.attr("combine"))
        name = dst or self.names.fresh("scan")
        smem = self.scratch(e)
        combine = self.render_macro("combiner", t, body)
        self.emit("scan", t, name, self.L(layout), self.L(lines), dim, src, combine, smem)
        self.temps[id(e)] = (name, layout, "")

    def emit_relayout(self, e: Op, dst_name: str | None = None) -> None:
        """convert_layout, permute, reshape: through shared memory, each destination register
        reading the source element it needs."""
        source = e.args[0]
        src_layout: Layout = source.layout
        dst: Layout = e.layout
        src = self.materialise(source, src_layout)
        name = dst_name or self.names.fresh(
            {
                "convert_layout": "converted",
                "permute": "permuted",
                "flip": "flipped",
                "split": "half",
            }.get(e.op, "reshaped")
        )
        coords = [f"{self.L(dst)}::coord({ELEMENT}, {d})" for d in dst.dims]
        if e.op == "flip":
            axis = e.attr("axis")
            mirrored = list(coords)
            mirrored[axis] = f"({e.type.shape[axis] - 1} - {coords[axis]})"
            flat = _row_major(mirrored, e.type.shape)
        elif e.op == "permute":
            perm = e.attr("dims")
            source_coords = [None] * len(perm)
            for k, axis in enumerate(perm):
                source_coords[axis] = coords[k]
            flat = _row_major(source_coords, source.type.shape)
        elif e.op == "split":
            flat = _row_major([*coords, str(e.attr("index"))], source.type.shape)
        else:  # convert_layout, reshape: the same row-major index
            flat = _row_major(coords, e.type.shape)
        smem = self.scratch(e)
        t = ctype(e.type.dtype)
        self.emit("relayout", t, name, self.L(src_layout), self.L(dst), src, smem, flat)
        self.temps[id(e)] = (name, dst, "")

    def emit_gather2(self, e: Op, dst_name: str | None = None) -> None:
        """cat, join: both sources written into the result's row-major order in shared memory."""
        a, b = e.args
        dst: Layout = e.layout
        names = [self.materialise(x, x.layout) for x in (a, b)]
        lambdas = []
        for k, x in enumerate((a, b)):
            coords = [f"{self.L(x.layout)}::coord({ELEMENT}, {d})" for d in x.layout.dims]
            if e.op == "join":
                coords.append(str(k))
            elif k == 1:
                axis = e.attr("axis")
                coords[axis] = f"({x.type.shape[axis]} + {coords[axis]})"
            lambdas.append(_row_major(coords, e.type.shape))
        smem = self.scratch(e)
        name = dst_name or self.names.fresh("joined" if e.op == "join" else "catted")
        t = ctype(e.type.dtype)
        self.emit(
            "gather2",
            t,
            name,
            self.L(a.layout),
            self.L(b.layout),
            self.L(dst),
            names[0],
            names[1],
            smem,
            lambdas[0],
            lambdas[1],
        )
        self.temps[id(e)] = (name, dst, "")
