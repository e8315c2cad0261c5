"""One call of a student function, and the autograd graphs the judge may ask about later.

The judge sends its inputs with `requires_grad` as they were; here they become leaves of a
graph the worker keeps under the call id, so a later `backward` request can answer with
vector-Jacobian products w.r.t. exactly the inputs that required grad (None for one the
outputs do not depend on, which is how `old_logp.grad is None` reaches the judge).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from .codec import Frame, replace_tensors, tensors_in


@dataclass
class Graph:
    outputs: list[torch.Tensor]  # the call's outputs that require grad
    inputs: list[torch.Tensor]  # the leaves standing for the judge's inputs that require grad

    def vjp(self, grad_outputs: list) -> list[torch.Tensor | None]:
        """Gradients w.r.t. the inputs; None where an output's grad is None or unused. The
        graph is kept: the judge may backward twice (retain_graph=True on its side)."""
        if len(grad_outputs) != len(self.outputs):
            raise RuntimeError("backward sent a wrong number of output gradients")
        pairs = [(o, g) for o, g in zip(self.outputs, grad_outputs, strict=True) if g is not None]
        if not pairs:
            return [None] * len(self.inputs)
        outputs, seeds = zip(*pairs, strict=True)
        grads = torch.autograd.grad(
            outputs, self.inputs, seeds, retain_graph=True, allow_unused=True
        )
        return list(grads)


class Graphs:
    """Autograd graphs kept alive under call ids until the judge releases them."""

    def __init__(self) -> None:
        self._graphs: dict[int, Graph] = {}

    def __len__(self) -> int:
        return len(self._graphs)

    def keep(self, call_id: int, graph: Graph) -> None:
        self._graphs[call_id] = graph

    def release(self, call_ids: list) -> None:
        for call_id in call_ids:
            self._graphs.pop(call_id, None)

    def vjp(self, call_id: int, grad_outputs: list) -> list[torch.Tensor | None]:
        """Gradients w.r.t. the call's inputs; None where an output's grad is None or unused."""
        graph = self._graphs.get(call_id)
        if graph is None:
            raise RuntimeError(f"no autograd graph is kept for call {call_id}")
        return graph.vjp(grad_outputs)


@dataclass
class Inputs:
    args: list
    kwargs: dict
    seen: list[torch.Tensor]  # what the student receives, in the frame's index order
    leaves: list[torch.Tensor]  # the grad targets: inputs that require grad, in index order


def prepare_inputs(frame: Frame, args: list, kwargs: dict) -> Inputs:
    """Rebuild requires_grad as the judge had it; a judge non-leaf stays a non-leaf here."""
    swap: dict[int, torch.Tensor] = {}
    seen, leaves = [], []
    for tensor, spec in zip(frame.tensors, frame.specs, strict=True):
        shown = tensor
        if spec.requires_grad:
            tensor.requires_grad_(True)
            leaves.append(tensor)
            if not spec.leaf:
                shown = tensor.clone()  # in-place ops are then legal, as in the judge
                swap[id(tensor)] = shown
        seen.append(shown)
    if swap:
        args, kwargs = replace_tensors(args, swap), replace_tensors(kwargs, swap)
    return Inputs(args, kwargs, seen, leaves)


@dataclass
class Snapshot:
    version: int
    shape: torch.Size
    data: bytes | None  # the values, in C order; None for meta tensors (no values to change)


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A copy of the tensor's values: bitwise, so NaN equals NaN and -0.0 differs from 0.0."""
    data = t.detach()
    if not data.is_contiguous():
        data = data.contiguous()
    size = data.nbytes
    if size == 0:
        return b""
    if data.untyped_storage().nbytes() < data.storage_offset() * data.element_size() + size:
        raise RuntimeError("the function shrank the storage of one of its tensor arguments")
    return ctypes.string_at(data.data_ptr(), size)


def snapshot(t: torch.Tensor) -> Snapshot:
    return Snapshot(t._version, t.shape, None if t.device.type == "meta" else tensor_bytes(t))


def changed(t: torch.Tensor, snap: Snapshot) -> bool:
    if t._version != snap.version or t.shape != snap.shape:
        return True
    return snap.data is not None and tensor_bytes(t) != snap.data


def run_call(fn, inputs: Inputs, grad_enabled: bool) -> tuple[object, list]:
    """Run the student function; return its result and [[input index, new value], ...]."""
    snaps = [snapshot(t) for t in inputs.seen]
    with torch.set_grad_enabled(grad_enabled):
        result = fn(*inputs.args, **inputs.kwargs)
    pairs = enumerate(zip(inputs.seen, snaps, strict=True))
    mutated = [[i, t.detach()] for i, (t, snap) in pairs if changed(t, snap)]
    return result, mutated


def graph_of(result: object, inputs: Inputs) -> tuple[Graph | None, list[int]]:
    """The graph to keep for a result, and the positions (in `tensors_in(result)`) of the
    outputs that require grad, which the judge wires into its own autograd."""
    outputs = tensors_in(result)
    positions = [k for k, t in enumerate(outputs) if t.requires_grad and _differentiable(t)]
    if not positions or not inputs.leaves:
        return None, positions
    return Graph([outputs[k] for k in positions], inputs.leaves), positions


def _differentiable(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex
