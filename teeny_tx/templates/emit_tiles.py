"""Reductions, scans and layout changes through one shared-memory scratch buffer.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``emit`` (macros of ``tiles.cu.j2``), and temporaries registered for the expressions that use
them. Functions of the :class:`~teeny_tx.templates.context.EmitContext`, registered in its
tables.
"""

from __future__ import annotations

from ..lower.interface import scan_lines
from ..lower.ir import Op
from ..lower.names import ELEMENT, REGISTER
from ..lower.passes.layout import Layout
from . import expr as cx
from .context import EmitContext, temporary
from .cuda_types import ctype


def _row_major(coords: list[str], shape: tuple[int, ...]) -> str:
    """The row-major offset of ``coords`` in ``shape``."""
    text = cx.atom(coords[0])
    for c, size in zip(coords[1:], shape[1:], strict=True):
        scaled = text if size == 1 else cx.binary("*", text, cx.atom(str(size)))
        text = cx.binary("+", scaled, cx.atom(c))
    return text.text


def tuple_type(e: Op) -> str:
    """The device header's tuple of the element types of a multi-operand op's operands."""
    return f"tx::Tuple{len(e.args)}<{', '.join(ctype(a.type.dtype) for a in e.args)}>"


def _tuple_operands(ctx: EmitContext, e: Op, layout: Layout) -> tuple[str, str, str]:
    """(tuple type, its tile of the operands packed in ``layout``, the combiner lambda)."""
    t = tuple_type(e)
    names = [ctx.materialise(a, layout) for a in e.args]
    packed = ctx.names.fresh("tuples")
    items = [f"{n}[{REGISTER}]" for n in names]
    ctx.emit("pack_tuples", t, packed, ctx.L(layout), items)
    with ctx.registers_of(layout):
        items = [ctx.ex(c) for c in e.attr("combine")]
    return t, packed, ctx.render_macro("tuple_combiner", t, items)


def _shared_tuple(ctx: EmitContext, e: Op) -> bool:
    """Whether another item of ``e``'s tuple computed it in this block: then ``e`` reads its
    own field of that result (the builder declares a tuple's items one after another)."""
    computed = ctx.tuples.get((e.attr("group"), ctx.current_block))
    if computed is None:
        return False
    name, layout = computed
    ctx.temps[id(e)] = (name, layout, f".v{e.attr('index')}")
    return True


def _tuple_reduce(ctx: EmitContext, e: Op) -> None:
    inner: Layout = e.args[0].layout
    out: Layout = e.layout
    t, packed, combine = _tuple_operands(ctx, e, inner)
    name = ctx.names.fresh("red")
    dim = inner.dims[e.attr("axis")]
    ctx.emit("reduce", t, name, ctx.L(inner), ctx.L(out), dim, packed, combine, ctx.scratch(e))
    ctx.tuples[(e.attr("group"), ctx.current_block)] = (name, out)
    ctx.temps[id(e)] = (name, out, f".v{e.attr('index')}")


def _tuple_scan(ctx: EmitContext, e: Op) -> None:
    layout: Layout = e.layout
    dim = layout.dims[e.attr("axis")]
    lines = scan_lines(layout, dim)
    t, packed, combine = _tuple_operands(ctx, e, layout)
    name = ctx.names.fresh("scan")
    smem = ctx.scratch(e)
    ctx.emit("scan", t, name, ctx.L(layout), ctx.L(lines), dim, packed, combine, smem)
    ctx.tuples[(e.attr("group"), ctx.current_block)] = (name, layout)
    ctx.temps[id(e)] = (name, layout, f".v{e.attr('index')}")


@temporary("reduce")
def emit_reduce(ctx: EmitContext, e: Op, dst: str | None = None) -> None:
    """``tx::reduce`` over one dimension into a temporary in the reduced layout (of tuples for
    a multi-operand reduction: each item reads its field)."""
    if e.attr("index") is not None:
        if not _shared_tuple(ctx, e):
            _tuple_reduce(ctx, e)
        return
    source = e.args[0]
    inner: Layout = source.layout
    out: Layout = e.layout
    axis = e.attr("axis")
    dim = inner.dims[axis]
    kind = e.attr("kind")
    dtype = source.type.dtype
    if kind in ("argmax", "argmin"):
        dst = None  # the reduction yields pairs; the index is read out of them
    name = dst or ctx.names.fresh("red")
    if kind in ("argmax", "argmin"):
        pair = f"tx::ValueIndex<{ctype(dtype)}>"
        values = ctx.names.fresh("pairs")
        src = ctx.materialise(source, inner)
        ctx.emit("value_index_pairs", pair, values, ctx.L(inner), src, dim)
        combine = ctx.render_macro("arg_combiner", pair, ">" if kind == "argmax" else "<")
        elem, src = pair, values
        suffix = ".index"
    else:
        src = ctx.materialise(source, inner)
        with ctx.registers_of(out):
            body = ctx.ex(e.attr("combine"))
        t = ctype(dtype)
        combine = ctx.render_macro("combiner", t, body)
        elem, suffix = t, ""
    smem = ctx.scratch(e)
    ctx.emit("reduce", elem, name, ctx.L(inner), ctx.L(out), dim, src, combine, smem)
    ctx.temps[id(e)] = (name, out, suffix)


@temporary("scan")
def emit_scan(ctx: EmitContext, e: Op, dst: str | None = None) -> None:
    """``tx::scan`` along one dimension into a temporary in the same layout (of tuples for a
    multi-operand scan)."""
    if e.attr("index") is not None:
        if not _shared_tuple(ctx, e):
            _tuple_scan(ctx, e)
        return
    source = e.args[0]
    layout: Layout = e.layout
    dim = layout.dims[e.attr("axis")]
    lines = scan_lines(layout, dim)
    if lines.key not in ctx.layout_names:
        raise AssertionError("scan line layout must be registered by the layout pass")
    src = ctx.materialise(source, layout)
    t = ctype(e.type.dtype)
    with ctx.registers_of(layout):
        body = ctx.ex(e.attr("combine"))
    name = dst or ctx.names.fresh("scan")
    smem = ctx.scratch(e)
    combine = ctx.render_macro("combiner", t, body)
    ctx.emit("scan", t, name, ctx.L(layout), ctx.L(lines), dim, src, combine, smem)
    ctx.temps[id(e)] = (name, layout, "")


@temporary("convert_layout", "permute", "reshape", "flip", "split")
def emit_relayout(ctx: EmitContext, e: Op, dst_name: str | None = None) -> None:
    """convert_layout, permute, reshape: through shared memory, each destination register
    reading the source element it needs."""
    source = e.args[0]
    src_layout: Layout = source.layout
    dst: Layout = e.layout
    src = ctx.materialise(source, src_layout)
    name = dst_name or ctx.names.fresh(
        {
            "convert_layout": "converted",
            "permute": "permuted",
            "flip": "flipped",
            "split": "half",
        }.get(e.op, "reshaped")
    )
    coords = [f"{ctx.L(dst)}::coord({ELEMENT}, {d})" for d in dst.dims]
    if e.op == "flip":
        axis = e.attr("axis")
        mirrored = list(coords)
        mirrored[axis] = f"({e.type.shape[axis] - 1} - {coords[axis]})"
        flat = _row_major(mirrored, e.type.shape)
    elif e.op == "permute":
        perm = e.attr("dims")
        source_coords = [""] * len(perm)
        for k, axis in enumerate(perm):
            source_coords[axis] = coords[k]
        flat = _row_major(source_coords, source.type.shape)
    elif e.op == "split":
        flat = _row_major([*coords, str(e.attr("index"))], source.type.shape)
    else:  # convert_layout, reshape: the same row-major index
        flat = _row_major(coords, e.type.shape)
    smem = ctx.scratch(e)
    t = ctype(e.type.dtype)
    ctx.emit("relayout", t, name, ctx.L(src_layout), ctx.L(dst), src, smem, flat)
    ctx.temps[id(e)] = (name, dst, "")


@temporary("cat", "join")
def emit_gather2(ctx: EmitContext, e: Op, dst_name: str | None = None) -> None:
    """cat, join: both sources written into the result's row-major order in shared memory."""
    a, b = e.args
    dst: Layout = e.layout
    names = [ctx.materialise(x, x.layout) for x in (a, b)]
    lambdas = []
    for k, x in enumerate((a, b)):
        coords = [f"{ctx.L(x.layout)}::coord({ELEMENT}, {d})" for d in x.layout.dims]
        if e.op == "join":
            coords.append(str(k))
        elif k == 1:
            axis = e.attr("axis")
            coords[axis] = f"({x.type.shape[axis]} + {coords[axis]})"
        lambdas.append(_row_major(coords, e.type.shape))
    smem = ctx.scratch(e)
    name = dst_name or ctx.names.fresh("joined" if e.op == "join" else "catted")
    t = ctype(e.type.dtype)
    ctx.emit(
        "gather2",
        t,
        name,
        ctx.L(a.layout),
        ctx.L(b.layout),
        ctx.L(dst),
        names[0],
        names[1],
        smem,
        lambdas[0],
        lambdas[1],
    )
    ctx.temps[id(e)] = (name, dst, "")
