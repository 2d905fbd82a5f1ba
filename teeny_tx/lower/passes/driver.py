"""The passes after typing, in order: what the emitter renders is decided here.

Input: a typed ``ir.Kernel`` from the builder (what the interpreter runs) and whether the target
has Hopper's warpgroup MMA. Output: :class:`Decided`: the kernel with layouts, conversions
placed, loops pipelined; its layouts by C++ type in first-use order; the name allocator that
the emitter goes on with.

1. ``simplify``: integer identities (``x * 1``, ``x + 0``) removed.
2. ``layout``: a layout on every tile, ``convert_layout`` where producer and consumer differ.
3. ``convert``: each conversion of a variable declared once, loop-invariant ones before the loop.
4. ``vectorize``: the vector width of every tile load and store (axis info).
5. ``LOOP_PASSES``: loops become decided nodes; ``pipeline``: loads feeding ``dot`` in a loop
   become cp.async stages.
6. ``dot_plan``: where each dot's operands come from (a stage, or registers via the scratch).
7. ``interface``: the parameter list (tensor maps included), the shared-memory layout, the
   block, the launch bounds and includes (:class:`~teeny_tx.lower.interface.Interface`),
   checked against the target's limits before any CUDA is rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import ir
from ..interface import Interface, build_interface, check_resources
from ..names import Names
from .axisinfo import AxisInfo
from .convert import place_conversions
from .dot_plan import plan_dots
from .layout import Layout, assign_layouts
from .pipeline import plan_pipelines
from .simplify import simplify
from .vectorize import vectorize

if TYPE_CHECKING:
    from ...target import Target

# Passes that lower loops into decided nodes, in order: (kernel, axis info, names) -> kernel.
# A loop planner of its own goes before plan_pipelines, which only takes the ir.Loop nodes still
# left (and warp-specialises them where the launch asks: warp_spec.py).
LOOP_PASSES: list[Callable[[ir.Kernel, AxisInfo, Names], ir.Kernel]] = [plan_pipelines]


@dataclass
class Decided:
    kernel: ir.Kernel
    layouts: dict[tuple, Layout]
    names: Names
    interface: Interface


def decide(kernel: ir.Kernel, wgmma: bool | None = None, target: Target | None = None) -> Decided:
    """Run the passes above over ``kernel`` for ``target`` (default ``kernel.target``): the
    passes read limits and features from it; ``wgmma``: dots that fit it use Hopper's wgmma
    (None: where the target has it). The interface is checked against the target's limits: a
    :class:`~teeny_tx.errors.ResourceError` at the kernel line that asks too much."""
    target = target if target is not None else kernel.target
    wgmma = target.wgmma if wgmma is None else wgmma
    kernel, layouts = assign_layouts(simplify(kernel), wgmma=wgmma)
    names = Names.of_kernel(kernel)
    kernel = place_conversions(kernel, names)
    kernel = vectorize(kernel, AxisInfo(kernel))
    for loop_pass in LOOP_PASSES:
        kernel = loop_pass(kernel, AxisInfo(kernel), names)
    kernel = plan_dots(kernel, names)
    interface = build_interface(kernel)
    check_resources(interface, target)
    return Decided(kernel, layouts, names, interface)
