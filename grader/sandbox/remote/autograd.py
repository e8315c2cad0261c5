"""Remote autograd: a worker's result joins the judge's autograd graph as if computed here.

The outputs of a remote call that require grad are returned through `_RemoteCall`, a
`torch.autograd.Function` whose inputs are the judge's tensors that required grad. Its
backward sends the output gradients to the worker, which answers with the vector-Jacobian
product from the graph it kept under the call id. So `loss.backward()` in a test fills
`logp.grad`, and `old_logp.grad` stays None when the student froze it (the worker answers
None for an input the outputs do not depend on).

The rest of a call's observable effects are mirrored here too: the caller's device, a result
that does not require grad (detached), and in-place changes to the inputs.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from grader.sandbox.worker.codec import replace_tensors, tensors_in

Vjp = Callable[[list], list]  # output grads (Tensor | None) -> input grads (Tensor | None)


class ProtocolError(Exception):
    """A reply that breaks the protocol; the proxy stops that worker and raises StudentCrash."""


DOUBLE_BACKWARD = "double backward (create_graph=True) through the sandbox is not supported"


class RemoteLink:
    """The judge's handle on one call's graph in the worker; freed with the graph node."""

    def __init__(self, outputs: list[torch.Tensor], vjp: Vjp, double_backward: str) -> None:
        self.outputs: list[torch.Tensor] | None = outputs  # handed over once, in forward
        self.inputs: tuple[torch.Tensor, ...] = ()
        self.vjp = vjp
        self.double_backward = double_backward  # the error differentiating a grad raises


class _RemoteCall(torch.autograd.Function):
    """Outputs computed in the worker; backward asks the worker for their VJP."""

    @staticmethod
    def forward(ctx, link: RemoteLink, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.link = link
        ctx.set_materialize_grads(False)  # an unused output's grad travels as None
        outputs, link.outputs = link.outputs, None  # no cycle output -> node -> link -> output
        link.inputs = inputs  # not saved_tensors: later in-place changes must not trip it
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_outputs: torch.Tensor | None) -> tuple:
        with torch.no_grad():
            grads = ctx.link.vjp(list(grad_outputs))
        if torch.is_grad_enabled():  # create_graph=True: differentiating these must fail loudly
            refusal = ctx.link.double_backward
            grads = [
                g if g is None else _NoDoubleBackward.apply(refusal, g, *ctx.link.inputs)
                for g in grads
            ]
        return (None, *grads)


class _NoDoubleBackward(torch.autograd.Function):
    """A first-order gradient that raises a clear error when differentiated again."""

    @staticmethod
    def forward(ctx, refusal: str, grad: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
        ctx.refusal = refusal
        return grad.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, *grad_outputs: torch.Tensor) -> tuple:
        raise RuntimeError(ctx.refusal)


@dataclass
class EarlyVjp:
    """What the worker answered, unasked, with a call: the gradient of the sum of its
    outputs (all output gradients ones), or the StudentError computing it met."""

    grads: object  # the reply's gradients, checked by check_grads when used
    error: BaseException | None


def all_ones(grad_outputs: list) -> bool:
    """Whether a backward asks for the gradient of the outputs' sum: every output gradient
    present and exactly 1 everywhere (what `loss.backward()` and `y.sum().backward()` send)."""
    for grad in grad_outputs:
        if grad is None or grad.device.type == "meta" or not grad.dtype.is_floating_point:
            return False
        if not bool((grad == 1).all()):
            return False
    return True


def caller_device(tensors: list[torch.Tensor]) -> torch.device | None:
    """The accelerator the caller's inputs live on, if any (results travel back to it)."""
    for t in tensors:
        if t.device.type not in ("cpu", "meta"):
            return t.device
    return None


def mirror_mutations(mutated: object, originals: list[torch.Tensor]) -> None:
    """Apply the worker's in-place changes to the judge's own input tensors."""
    if not isinstance(mutated, list):
        raise ProtocolError("the worker sent a malformed reply (mutated inputs)")
    with torch.no_grad():
        for entry in mutated:
            if not (isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int):
                raise ProtocolError("the worker sent a malformed reply (mutated inputs)")
            index, value = entry
            if not (0 <= index < len(originals) and isinstance(value, torch.Tensor)):
                raise ProtocolError("the worker sent a malformed reply (mutated inputs)")
            target = originals[index]
            if target.shape == value.shape:
                target.copy_(value.to(target.device))
            else:  # resize_, t_, unsqueeze_ ...: take the new metadata too
                target.data = value.to(target.device, target.dtype)


def _move(result: object, device: torch.device | None) -> tuple[object, list[torch.Tensor]]:
    outputs = tensors_in(result)
    if device is None:
        return result, outputs
    moved = {id(t): t.to(device) for t in outputs if t.device.type == "cpu"}
    return replace_tensors(result, moved), [moved.get(id(t), t) for t in outputs]


def _differentiable(outputs: list[torch.Tensor], positions: object) -> list[torch.Tensor]:
    ok = isinstance(positions, list) and len(set(map(type, positions)) - {int}) == 0
    if not ok or len(set(positions)) != len(positions):
        raise ProtocolError("the worker sent a malformed reply (grad outputs)")
    if not all(0 <= k < len(outputs) for k in positions):
        raise ProtocolError("the worker sent a malformed reply (grad outputs)")
    chosen = [outputs[k] for k in positions]
    if not all(t.dtype.is_floating_point or t.dtype.is_complex for t in chosen):
        raise ProtocolError("the worker marked a non-float output as requiring grad")
    return chosen


def attach(
    result: object,
    positions: object,
    inputs: list[torch.Tensor],
    vjp: Vjp,
    release: Callable[[], None],
    double_backward: str = DOUBLE_BACKWARD,
) -> object:
    """Rebuild a call's result for the judge: caller's device, grads wired to `inputs`.

    `inputs` are the judge's tensors that required grad, in the order the worker kept them;
    `release` is called once the judge's graph node is gone (or at once, if none is made);
    `double_backward` is the error a differentiated gradient raises.
    """
    device = caller_device(inputs)
    result, outputs = _move(result, device)
    diff = _differentiable(outputs, positions)
    if not diff:
        return result
    if not inputs or not torch.is_grad_enabled():
        release()
        for t in diff:  # a graph that starts inside the student's code: a leaf here, too
            t.requires_grad_(True)
        return result
    link = RemoteLink(diff, vjp, double_backward)
    weakref.finalize(link, release)
    wired = _RemoteCall.apply(link, *inputs)
    return replace_tensors(result, {id(o): w for o, w in zip(diff, wired, strict=True)})


def check_grads(grads: object, inputs: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """The worker's VJP, validated against the inputs and moved to their devices."""
    if not isinstance(grads, list) or len(grads) != len(inputs):
        raise ProtocolError("the worker sent a malformed reply (gradients)")
    checked: list[torch.Tensor | None] = []
    for grad, inp in zip(grads, inputs, strict=True):
        if grad is not None and not (isinstance(grad, torch.Tensor) and grad.shape == inp.shape):
            raise ProtocolError("the worker sent a gradient of the wrong shape")
        checked.append(None if grad is None else grad.to(inp.device, inp.dtype))
    return checked
