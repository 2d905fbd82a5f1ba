"""Reductions, scans and layout changes through one shared-memory scratch buffer.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``out`` (and temporaries registered for the expressions that use them). A mixin of
:class:`~teeny_tx.templates.emitter.Emitter`.
"""

from __future__ import annotations

from ..lower.ir import Op
from ..lower.layout import Layout
from .cuda_types import ctype, element_bytes


def _warps_along(layout: Layout, dim: int) -> int:
    """Warps holding distinct parts of ``layout`` along ``dim`` (the device header's rule)."""
    b = layout.blocked
    held = max(1, layout.shape[dim] // b.spt[dim])
    return min(b.wpc[dim], max(1, held // b.tpw[dim]))


def _row_major(coords: list[str], shape: tuple[int, ...]) -> str:
    text = coords[0]
    for c, size in zip(coords[1:], shape[1:], strict=True):
        text = f"({text}) * {size} + {c}"
    return text


class TileEmitter:
    def emit_reduce(self, e: Op) -> None:
        """``tx::reduce`` over one dimension into a temporary in the reduced layout."""
        source = e.args[0]
        inner: Layout = source.layout
        out: Layout = e.layout
        axis = e.attr("axis")
        dim = inner.dims[axis]
        kind = e.attr("kind")
        dtype = source.type.dtype
        name = self.fresh("red")
        if kind in ("argmax", "argmin"):
            pair = f"tx::ValueIndex<{ctype(dtype)}>"
            values = self.fresh("pairs")
            src = self.materialise(source, inner)
            self.out(f"{pair} {values}[{self.L(inner)}::REGS];")
            self.out(
                self.tile_loop(
                    inner, lambda: f"{values}[i] = {{{src}[i], {self.L(inner)}::coord(i, {dim})}};"
                )
            )
            better = ">" if kind == "argmax" else "<"
            combine = (
                f"[]({pair} a, {pair} b) {{ return (b.value {better} a.value || "
                f"(b.value == a.value && b.index < a.index)) ? b : a; }}"
            )
            elem, size, src = pair, 2 * max(dtype.itemsize, 4), values
            suffix = ".index"
        else:
            src = self.materialise(source, inner)
            with self.registers_of(out):
                body = self.ex(e.attr("combine"))
            t = ctype(dtype)
            combine = f"[]({t} a, {t} b) {{ return {body}; }}"
            elem, size, suffix = t, dtype.itemsize, ""
        warps = _warps_along(inner, dim)
        smem = self.scratch(warps * out.size * size) if warps > 1 else "nullptr"
        self.out(f"{elem} {name}[{self.L(out)}::REGS];")
        self.out(
            f"tx::reduce<{self.L(inner)}, {self.L(out)}, {dim}>({name}, {src}, {combine}, {smem});"
        )
        self.temps[id(e)] = (name, out, suffix)

    def emit_scan(self, e: Op) -> None:
        """``tx::scan`` along one dimension into a temporary in the same layout."""
        source = e.args[0]
        layout: Layout = e.layout
        dim = layout.dims[e.attr("axis")]
        shape = list(layout.shape)
        shape[dim] = 1
        lines = Layout(layout.blocked, tuple(shape), layout.dims)
        self.layouts.setdefault(lines.key, lines)
        if lines.key not in self.layout_names:
            raise AssertionError("scan line layout must be registered by the layout pass")
        src = self.materialise(source, layout)
        t = ctype(e.type.dtype)
        with self.registers_of(layout):
            body = self.ex(e.attr("combine"))
        name = self.fresh("scan")
        warps = _warps_along(layout, dim)
        smem = self.scratch(warps * lines.size * e.type.dtype.itemsize) if warps > 1 else "nullptr"
        self.out(f"{t} {name}[{self.L(layout)}::REGS];")
        self.out(
            f"tx::scan<{self.L(layout)}, {self.L(lines)}, {dim}>({name}, {src}, "
            f"[]({t} a, {t} b) {{ return {body}; }}, {smem});"
        )
        self.temps[id(e)] = (name, layout, "")

    def emit_relayout(self, e: Op) -> None:
        """convert_layout, permute, reshape: through shared memory, each destination register
        reading the source element it needs."""
        source = e.args[0]
        src_layout: Layout = source.layout
        dst: Layout = e.layout
        src = self.materialise(source, src_layout)
        name = self.fresh(
            {
                "convert_layout": "converted",
                "permute": "permuted",
                "flip": "flipped",
                "split": "half",
            }.get(e.op, "reshaped")
        )
        coords = [f"{self.L(dst)}::coord(r, {d})" for d in dst.dims]
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
        smem = self.scratch(src_layout.size * element_bytes(e.type.dtype))
        t = ctype(e.type.dtype)
        self.out(f"{t} {name}[{self.L(dst)}::REGS];")
        self.out(
            f"tx::relayout<{self.L(src_layout)}, {self.L(dst)}>({name}, {src}, {smem}, "
            f"[](int r) {{ return {flat}; }});"
        )
        self.temps[id(e)] = (name, dst, "")

    def emit_gather2(self, e: Op) -> None:
        """cat, join: both sources written into the result's row-major order in shared memory."""
        a, b = e.args
        dst: Layout = e.layout
        names = [self.materialise(x, x.layout) for x in (a, b)]
        lambdas = []
        for k, x in enumerate((a, b)):
            coords = [f"{self.L(x.layout)}::coord(r, {d})" for d in x.layout.dims]
            if e.op == "join":
                coords.append(str(k))
            elif k == 1:
                axis = e.attr("axis")
                coords[axis] = f"({x.type.shape[axis]} + {coords[axis]})"
            lambdas.append(f"[](int r) {{ return {_row_major(coords, e.type.shape)}; }}")
        smem = self.scratch(dst.size * element_bytes(e.type.dtype))
        name = self.fresh("joined" if e.op == "join" else "catted")
        t = ctype(e.type.dtype)
        self.out(f"{t} {name}[{self.L(dst)}::REGS];")
        self.out(
            f"tx::gather2<{self.L(a.layout)}, {self.L(b.layout)}, {self.L(dst)}>({name}, "
            f"{names[0]}, {names[1]}, {smem}, {lambdas[0]}, {lambdas[1]});"
        )
        self.temps[id(e)] = (name, dst, "")
