"""Your kernels as a PyTorch operator: :func:`op` turns a forward launch (and a backward one)
into a ``torch.library`` custom op that autograd, ``torch.compile(fullgraph=True)`` and CUDA
graphs treat like a native one.

Input: ``forward(launch, *inputs)``, a Python function with type hints (``torch.Tensor``,
``float``, ``int``, ``bool``, ``str``; the schema is read from them) that allocates its outputs
with torch (``torch.empty_like``, ``x.new_empty``) and queues kernels through ``launch``; and
optionally ``backward(launch, *inputs, *outputs, *grads)`` returning one gradient per input
named in ``grads_for``. Output: a callable op, ``torch.ops.<namespace>.<name>``.

``launch(kernel, grid, *args, num_warps=4, num_stages=2, strided=False, **constexprs)``
(``strided=True`` when the kernel indexes a non-contiguous tensor argument with strides it is
passed, as for any launch; without it such a view is a ``LaunchError``):

- CUDA tensors: ``kernel[grid](...)`` on torch's current stream;
- CPU tensors: ``kernel.interpret[grid](...)`` on NumPy views of the tensors (the kernel's
  stores land in the tensors), unless ``cpu=False`` was given, which raises instead;
- while torch traces shapes (fake tensors, ``torch.compile``, ``opcheck``): nothing, so the
  same forward is the op's fake implementation: its allocations are the output shapes.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import torch

from ..errors import TeenyError
from ..kernel import Kernel
from .inductor_fallbacks import fake, track
from .torch_ops import capture_error, current_stream, dense, on_device, to_numpy


class Launch:
    """The ``launch`` an op's forward and backward receive (see the module docstring)."""

    def __init__(self, name: str, fake: bool = False, cpu: bool = True):
        self.name, self.fake, self.cpu = name, fake, cpu

    def __call__(
        self,
        kernel: Kernel,
        grid: Any,
        *args: Any,
        num_warps: int = 4,
        num_stages: int = 2,
        strided: bool = False,
        **constexprs: Any,
    ) -> None:
        if self.fake:
            return
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            raise TeenyError(f"{self.name}: launch() needs at least one tensor argument")
        options = {
            "num_warps": num_warps,
            "num_stages": num_stages,
            "strided": strided,
            **constexprs,
        }
        if tensors[0].is_cuda:
            device = tensors[0].device
            stream = current_stream(device)
            try:
                with on_device(device.index):
                    kernel[grid](*args, stream=stream, **options)
            except Exception as err:
                if torch.cuda.is_current_stream_capturing():
                    raise capture_error(self.name, err) from err
                raise
            return
        if not self.cpu:
            raise TeenyError(
                f"{self.name} has no CPU implementation (op(..., cpu=False)); pass CUDA tensors"
            )
        arrays = [to_numpy(a) if isinstance(a, torch.Tensor) else a for a in args]
        kernel.interpret[grid](*arrays, **options)


def _signature(fn: Callable, what: str) -> tuple[list[inspect.Parameter], Any]:
    """The parameters after ``launch`` of ``fn``, annotations resolved, and its return type."""
    hints = typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise TeenyError(f"{what} must take launch as its first parameter")
    out = []
    for p in params[1:]:
        if p.name not in hints:
            raise TeenyError(
                f"{what}: parameter {p.name!r} needs a type hint (torch.Tensor, float, int, "
                "bool, str): the op's schema is read from them"
            )
        out.append(
            p.replace(annotation=hints[p.name], kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
    if "return" not in hints:
        raise TeenyError(f"{what} needs a return type hint (torch.Tensor or a tuple of them)")
    return out, hints["return"]


def _outputs(returns: Any) -> int:
    if returns is torch.Tensor:
        return 1
    args = typing.get_args(returns)
    if typing.get_origin(returns) is tuple and args and all(a is torch.Tensor for a in args):
        return len(args)
    raise TeenyError(f"an op returns torch.Tensor or tuple[torch.Tensor, ...], not {returns}")


def _with_signature(fn: Callable, params: list[inspect.Parameter], returns: Any) -> Callable:
    fn.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    return fn


def _is_tensor(p: inspect.Parameter) -> bool:
    return p.annotation is torch.Tensor or p.annotation == (torch.Tensor | None)


def op(
    name: str,
    forward: Callable[..., Any],
    backward: Callable[..., Any] | None = None,
    *,
    grads_for: tuple[str, ...] | None = None,
    cpu: bool = True,
) -> Callable[..., Any]:
    """A custom op ``name`` (``"namespace::op_name"``) whose implementation is ``forward``.

    ``backward(launch, *inputs, *outputs, *grads)`` returns the gradients of the inputs named
    in ``grads_for`` (default: every ``torch.Tensor`` input), in that order, as tensors; it
    becomes the op ``name + "_backward"``, so a compiled graph keeps it whole too. Gradients
    reaching ``backward`` are dense (an expanded ``ones_like`` is copied); an output with no
    gradient gets zeros. Returns the op (call it like ``forward`` without ``launch``)."""
    params, returns = _signature(forward, f"forward of {name}")
    n_out = _outputs(returns)

    def impl(*args):
        return forward(Launch(name, cpu=cpu), *args)

    opdef = track(
        torch.library.custom_op(name, _with_signature(impl, params, returns), mutates_args=())
    )
    fake(opdef)(lambda *args: forward(Launch(name, fake=True), *args))
    if backward is None:
        return opdef

    names = [p.name for p in params]
    wanted = grads_for if grads_for is not None else tuple(p.name for p in params if _is_tensor(p))
    unknown = [g for g in wanted if g not in names]
    if unknown:
        raise TeenyError(f"{name}: grads_for names {unknown}, which are not inputs of forward")
    positions = [names.index(g) for g in wanted]
    extra = [
        inspect.Parameter(
            f"{kind}_{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor
        )
        for kind in ("out", "grad")
        for i in range(n_out)
    ]
    # a tuple type of len(wanted) tensors, built at run time (the schema is read from it)
    grad_returns = (
        tuple[(torch.Tensor,) * len(wanted)]  # type: ignore[misc]
        if len(wanted) != 1
        else torch.Tensor
    )

    def checked(got: Any) -> Any:
        """``got`` if it is one tensor per name of ``wanted``, else a TeenyError saying so."""
        items = got if isinstance(got, tuple | list) else (got,)
        if len(items) != len(wanted) or not all(isinstance(g, torch.Tensor) for g in items):
            kinds = ", ".join(type(g).__name__ for g in items)
            raise TeenyError(
                f"the backward of {name} returned ({kinds}): it must return one tensor per "
                f"input named in grads_for, {len(wanted)} in all ({', '.join(wanted)}), in "
                "that order"
            )
        return tuple(items) if len(wanted) != 1 else items[0]

    def backward_impl(*args):
        return checked(backward(Launch(name + "_backward", cpu=cpu), *args))

    backward_op = track(
        torch.library.custom_op(
            name + "_backward",
            _with_signature(backward_impl, params + extra, grad_returns),
            mutates_args=(),
        )
    )
    fake(backward_op)(lambda *args: checked(backward(Launch(name + "_backward", fake=True), *args)))

    def setup_context(ctx, inputs, output):
        outs = output if isinstance(output, tuple) else (output,)
        tensor_at = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
        ctx.tensor_at = tensor_at
        ctx.others = [None if i in tensor_at else a for i, a in enumerate(inputs)]
        ctx.save_for_backward(*[inputs[i] for i in tensor_at], *outs)

    def grad(ctx, *grads):
        saved = ctx.saved_tensors
        inputs = list(ctx.others)
        for k, i in enumerate(ctx.tensor_at):
            inputs[i] = saved[k]
        outs = saved[len(ctx.tensor_at) :]
        grads_in = [
            torch.zeros_like(o) if g is None else dense(g) for g, o in zip(grads, outs, strict=True)
        ]
        got = backward_op(*inputs, *outs, *grads_in)
        got = got if isinstance(got, tuple) else (got,)
        result: list[Any] = [None] * len(inputs)
        for pos, g in zip(positions, got, strict=True):
            result[pos] = g
        return tuple(result)

    opdef.register_autograd(grad, setup_context=setup_context)
    return opdef
