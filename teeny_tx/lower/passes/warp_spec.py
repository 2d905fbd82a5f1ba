"""Warp specialisation of a TMA-pipelined loop: a producer warpgroup issues its copies.

Input: a kernel after ``lower/passes/pipeline.py`` (its pipelined loops planned). Output: the same
kernel where, if it asks (a constexpr parameter :data:`CONSTEXPR` launched as 1) and the rules
below allow, the one pipelined loop carries an :class:`ir.WarpSpec` and the kernel launches a
producer warpgroup (4 warps) after its ``num_warps``; where it asks and a rule refuses, the
loop keeps its form and the kernel records why (``warp_spec_refused``, rendered as a comment).

The schedule (CUTLASS's and FlashAttention-3's warp-specialised mainloop, for any kernel's
loop): the kernel initialises the stages' mbarriers and meets once at ``__syncthreads``; then
the producer warpgroup gives registers back (``setmaxnreg.dec``) and one of its threads runs
the loop's iterations with the copies only (wait ``empty[s]``, arm ``full[s]`` with the
stage's bytes, issue the boxes), computing nothing but the scalars those copies and the loop
bounds read: :attr:`ir.WarpSpec.slice`, the declarations they depend on. The compute warps
take the registers (``setmaxnreg.inc``) and run every statement of the kernel; in the loop
they wait ``full[s]``, run the body and arrive on ``empty[s]``. From the split on they
synchronise at named barrier 1 over their own threads (the scratch buffer's helpers through
``tx::Threads<N>``, prelude/teeny_tx.cuh), never at ``__syncthreads``, which the producer
would have to join.

Rules (each refusal names one):

1. ``num_warps`` is a multiple of 4 (``setmaxnreg`` acts on whole warpgroups; the producer is
   the warpgroup after them).
2. The kernel has exactly one pipelined loop, at the top level of its body (not inside an
   ``if`` or another loop: every compute thread reaches it exactly once, as the producer does).
3. Its stages change hands through mbarriers and every load is a TMA copy (``pipeline.py``).
4. No ``return`` anywhere (a compute warp that left early would never release a stage the
   producer waits for) and no ``debug_barrier`` (a block-wide barrier).
5. The loop bounds and the copies' coordinates read only parameters, constexprs, the loop
   variable and scalars declared once at the top level before the loop, never assigned, whose
   values are expressions of the same (no loads, no tiles).

``WARP_SPECIALIZE = 2`` also orders the compute warpgroups' products (FlashAttention-3's
ping-pong): each dot of the loop is a turn at the tensor cores, taken on the warpgroup's own
named barrier and passed on with ``bar.arrive`` on the other's after the product, so one
warpgroup's softmax runs while the other multiplies. It takes exactly two compute warpgroups
(``num_warps = 8``) and dots at the top level of the loop body (both warpgroups then take the
same number of turns; warpgroup 1 gives warpgroup 0 the first and warpgroup 0 takes the last
pass after the loop, so every barrier's arrivals balance); otherwise the loop is warp-specialised
without it, and the CUDA says why. The ping-pong is experimental and refused unless
``$TEENY_TX_WS_PINGPONG`` is ``1``: on the H200 (2026-12-01) it was no faster than the producer
alone, and compute-sanitizer's racecheck reported 10 shared-memory hazards in the run that
included it (``bench/sanitize_attention.py --ws``, commit 19fb645; the producer alone: none),
not yet explained.
"""

from __future__ import annotations

import dataclasses

from ...target import HOPPER, Target
from .. import ir
from ..ir import Expr, Op, walk_exprs, walk_stmts
from .convert import needs_statement, var_names

CONSTEXPR = "WARP_SPECIALIZE"  # the constexpr parameter a kernel declares to offer the choice
PRODUCER_WARPS = 4  # one warpgroup
PRODUCER_REGISTERS = 24  # per producer thread after setmaxnreg.dec (FlashAttention-3's)
MAX_CONSUMER_REGISTERS = 240
NAMED_BARRIER = 1  # the compute warps' barrier (0 is __syncthreads')
TURN_BARRIERS = 2  # ping-pong: warpgroup w's turn at the tensor cores is named barrier 2 + w


def requested(kernel: ir.Kernel) -> int:
    """What the launch asks for (the kernel's :data:`CONSTEXPR`): 0 nothing, 1 a producer
    warpgroup, 2 also the compute warpgroups' ping-pong."""
    return int(dict(kernel.constexprs).get(CONSTEXPR, 0))


def _pingpong(kernel: ir.Kernel, p: ir.PipelinedLoop) -> str | None:
    """Why the compute warpgroups of ``p`` cannot take turns at its dots, or None."""
    if not kernel.switches.ws_pingpong:
        return (
            "the ping-pong is experimental ($TEENY_TX_WS_PINGPONG=1 enables it): no faster on the "
            "H200, and racecheck reported hazards not yet explained (lower/passes/warp_spec.py)"
        )
    if kernel.num_warps != 8:
        return f"ping-pong takes two compute warpgroups (num_warps=8), not {kernel.num_warps // 4}"
    dots = [e for e in walk_exprs(p.loop.body) if isinstance(e, Op) and e.op == "dot"]
    if not dots:
        return "the loop has no dot"
    nested = [t for t in p.loop.body if isinstance(t, (ir.If, ir.Loop, ir.PipelinedLoop))]
    if any(isinstance(e, Op) and e.op == "dot" for e in walk_exprs(nested)):
        return "a dot of the loop is inside an if or a loop (the warpgroups' turns would differ)"
    return None


def entry_registers(num_warps: int, target: Target = HOPPER) -> int:
    """Each thread's registers at launch: ``__launch_bounds__(threads, 1)``'s cap for the
    compute warps and the producer's (the target's register file over the threads), a
    multiple of 8, at most the target's registers per thread."""
    threads = 32 * (num_warps + PRODUCER_WARPS)
    return min(target.max_registers_per_thread, target.registers_per_sm // threads) // 8 * 8


def consumer_registers(num_warps: int, target: Target = HOPPER) -> int:
    """What ``setmaxnreg.inc`` gives each compute thread. The block starts with the registers
    of its entry cap (``__launch_bounds__(threads, 1)``: the register file over its threads, a
    multiple of 8, at most 255) for every thread; the producer's ``setmaxnreg.dec`` returns
    its share to the block's pool, and the compute warps may take no more than the pool holds
    (else their ``setmaxnreg.inc`` would wait forever): a multiple of 8, at most 240."""
    threads = 32 * (num_warps + PRODUCER_WARPS)
    entry = entry_registers(num_warps, target)
    pool = threads * entry - 32 * PRODUCER_WARPS * PRODUCER_REGISTERS
    return max(entry, min(MAX_CONSUMER_REGISTERS, pool // (32 * num_warps) // 8 * 8))


def _producer_reads(p: ir.PipelinedLoop) -> list[Expr]:
    """The expressions the producer evaluates: the loop's start, bound and increment, and the
    copies' box coordinates."""
    s = p.loop
    init, step = s.init[0], s.step[0]
    assert isinstance(init, ir.Declare) and isinstance(step, ir.Assign) and s.cond is not None
    assert isinstance(step.value, Op), "a pipelined loop steps by an addition"
    reads = [x for x in (init.init, s.cond, step.value.args[1]) if x is not None]
    for x in p.loads:
        assert x.tma is not None, "rule 3 checked every load is a TMA copy"
        reads += [c for d in x.tma.dims for c in d.coord]
    return reads


def _slice(kernel: ir.Kernel, index: int, p: ir.PipelinedLoop) -> tuple[ir.Stmt, ...] | str:
    """The top-level declarations before the loop (statement ``index``) that the producer
    computes, in kernel order; or why it cannot (rule 5)."""
    params = {q.name for q in kernel.runtime_params}
    loop_var = p.loop.init[0]
    assert isinstance(loop_var, ir.Declare)
    assigned = {t.name for t in walk_stmts(kernel.body) if isinstance(t, ir.Assign)}
    declared: dict[str, int] = {}
    for t in walk_stmts(kernel.body):
        if isinstance(t, ir.Declare):
            declared[t.name] = declared.get(t.name, 0) + 1
    top = {
        t.name: (i, t)
        for i, t in enumerate(kernel.body[:index])
        if isinstance(t, ir.Declare) and t.init is not None
    }
    needed: dict[str, ir.Declare] = {}
    todo = [n for e in _producer_reads(p) for n in var_names(e)]
    while todo:
        name = todo.pop()
        if name in params or name == loop_var.name or name in needed:
            continue
        line = f"`{name}`"
        if name not in top:
            return f"the copies or the loop bounds read {line}, not declared before the loop"
        d = top[name][1]
        if d.type.is_tile or d.type.is_pointer:
            return f"the copies or the loop bounds read {line}, a {d.type} (not an integer)"
        if name in assigned or declared[name] > 1:
            return f"the copies or the loop bounds read {line}, which is assigned"
        assert d.init is not None
        if needs_statement(d.init):
            return f"the copies or the loop bounds read {line}, whose value reads memory"
        needed[name] = d
        todo += list(var_names(d.init))
    return tuple(d for d in kernel.body[:index] if isinstance(d, ir.Declare) and d.name in needed)


def _plan(kernel: ir.Kernel) -> tuple[int, ir.WarpSpec] | str:
    """(the loop's index in the body, its WarpSpec), or the reason it is refused."""
    if kernel.num_warps % 4:
        return f"num_warps={kernel.num_warps} is not whole warpgroups (a multiple of 4)"
    loops = [t for t in walk_stmts(kernel.body) if isinstance(t, ir.PipelinedLoop)]
    if len(loops) != 1:
        return f"the kernel has {len(loops)} pipelined loops; warp specialisation takes one"
    (p,) = loops
    index = next((i for i, t in enumerate(kernel.body) if t is p), None)
    if index is None:
        return f"the pipelined loop at line {p.loc.line} is nested in a loop or an if"
    if p.barriers is None or not all(x.tma is not None for x in p.loads):
        return (
            f"the pipelined loop at line {p.loc.line} does not load its stages by TMA through "
            "mbarriers (sm_90a, TMA switched on, every load a tensor map's box)"
        )
    if any(isinstance(t, ir.Return) for t in walk_stmts(kernel.body)):
        return "the kernel returns early (the producer would wait for stages never released)"
    if any(isinstance(e, Op) and e.op == "debug_barrier" for e in walk_exprs(kernel.body)):
        return "the kernel calls debug_barrier() (a barrier of every thread, the producer's too)"
    found = _slice(kernel, index, p)
    if isinstance(found, str):
        return found
    if not kernel.target.setmaxnreg:
        return f"{kernel.target.arch} has no setmaxnreg (the producer gives its registers back)"
    threads = 32 * kernel.num_warps
    refused = _pingpong(kernel, p) if requested(kernel) == 2 else None
    return index, ir.WarpSpec(
        slice=found,
        compute_threads=threads,
        producer_registers=PRODUCER_REGISTERS,
        consumer_registers=consumer_registers(kernel.num_warps, kernel.target),
        entry_registers=entry_registers(kernel.num_warps, kernel.target),
        barrier=NAMED_BARRIER,
        pingpong=requested(kernel) == 2 and refused is None,
        turns=TURN_BARRIERS,
        pingpong_refused=refused,
    )


def plan_warp_specialization(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with its pipelined loop warp-specialised where it asks and the rules allow
    (see the module); unchanged where it does not ask."""
    if not requested(kernel):
        return kernel
    plan = _plan(kernel)
    if isinstance(plan, str):
        return dataclasses.replace(kernel, warp_spec_refused=plan)
    index, spec = plan
    p = kernel.body[index]
    assert isinstance(p, ir.PipelinedLoop)
    body = list(kernel.body)
    body[index] = dataclasses.replace(p, warp_spec=spec)
    return dataclasses.replace(kernel, body=tuple(body), producer_warps=PRODUCER_WARPS)


def warp_specialized_loop(kernel: ir.Kernel) -> ir.PipelinedLoop | None:
    """The kernel's warp-specialised loop, if it has one (a statement of its top level)."""
    for t in kernel.body:
        if isinstance(t, ir.PipelinedLoop) and t.warp_spec is not None:
            return t
    return None
