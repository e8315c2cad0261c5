"""The `reference` fixture: the exercise's reference module, whose declared functions
remember their results across the gradings of one judge process.

Every grading calls the reference on the same seeded inputs, and the reference never
changes, so a judge computes each call once: computing it again took about a tenth of the
judge's CPU per GSPO grading. Tier files and experiment.py still call plain functions:

    want = reference.gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2)
    want.backward()  # fills logp.grad, as the module itself does

A call is remembered under its arguments (every value; every tensor's dtype, shape,
requires_grad and leaf flags and bytes; which arguments are the same tensor), the grad mode
and the default dtype. Its first computation runs on copies of the arguments, as a worker
runs a student's call (worker/calls.py). Each later call gets fresh copies of the result,
wired into the caller's autograd as a student's result is (sandbox/remote/autograd.py). The
gradient of the outputs' sum (`loss.backward()`) is remembered too; any other backward runs
on the remembered graph.

A call goes straight to the module, every time, when an argument or the result is not made
of CPU tensors, numbers, strings, dtypes, None, lists, tuples and dicts; when it raises (the
error then comes from the plain call, with its own traceback); when it changes an argument
in place; or when it draws from torch's global random generator. A remembered call's
gradient cannot be differentiated again (create_graph=True): a test that needs higher-order
gradients calls `reference.module`, the plain module.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass
from types import ModuleType

import torch

from grader.sandbox import remote
from grader.sandbox.remote import Frame, Graph, TensorSpec, replace_tensors, tensors_in

MEMO_CALLS = 2048  # calls remembered per exercise; the least recently used go first
MEMO_BYTES = 32 << 20  # and at most this many bytes of arguments (GSPO: ~70 calls, ~0.3 MB)
DOUBLE_BACKWARD = (
    "double backward (create_graph=True) through the reference fixture's remembered calls "
    "is not supported; call reference.module, the plain module, for higher-order gradients"
)
READ_ONLY = (
    "the reference fixture is read-only: patch reference.module, the plain module, and call "
    "reference.memo.clear(), since remembered results may change with it"
)


@dataclass
class Remembered:
    """One call's first computation: what every later call with the same key gets."""

    result: object  # its tensors detached; fresh copies go out
    positions: list[int]  # outputs (in tensors_in order) that require grad
    graph: Graph | None  # kept for backward (outputs and the copies' leaves)
    sum_grads: list | None = None  # the gradient of the outputs' sum, once asked

    def replay(self, originals: list[torch.Tensor]) -> object:
        fresh = {id(t): t.clone() for t in tensors_in(self.result)}
        result = replace_tensors(self.result, fresh)
        grad_inputs = [t for t in originals if t.requires_grad]
        return remote.attach(
            result, self.positions, grad_inputs, self.vjp, _nothing, DOUBLE_BACKWARD
        )

    def vjp(self, grad_outputs: list) -> list[torch.Tensor | None]:
        if not remote.all_ones(grad_outputs):
            grads = self.graph.vjp(grad_outputs)
        else:
            if self.sum_grads is None:
                self.sum_grads = self.graph.vjp(grad_outputs)
            grads = self.sum_grads
        return [None if g is None else g.clone() for g in grads]


_PLAIN = object()  # a memo entry: this call goes straight to the module


def _nothing() -> None:
    """The release of a remembered graph: the memo keeps it."""


class _NotRemembered(Exception):
    """A value the memo does not key: the call goes straight to the module."""


_SCALARS = (int, bool, str, type(None))


class CallKey:
    """The hashable image of a call's arguments, and their distinct tensors in order."""

    def __init__(self, value: object) -> None:
        self.tensors: list[torch.Tensor] = []
        self.nbytes = 0
        self._index: dict[int, int] = {}
        self.image = self._of(value)

    def _of(self, value: object) -> object:
        kind = type(value)
        if kind is torch.Tensor:
            return self._tensor(value)
        if kind in _SCALARS:
            return kind, value
        if kind is float:  # repr: -0.0 is not 0.0, and nan equals nan
            return kind, repr(value)
        if kind is list or kind is tuple:
            return kind, tuple(self._of(v) for v in value)
        if kind is dict and all(type(k) is str for k in value):
            return kind, tuple((k, self._of(v)) for k, v in value.items())
        if kind is torch.dtype:
            return kind, str(value)
        raise _NotRemembered(kind.__name__)

    def _tensor(self, t: torch.Tensor) -> object:
        seen = self._index.get(id(t))
        if seen is not None:  # the same tensor twice: not two equal tensors
            return "same", seen
        if t.device.type != "cpu" or t.is_conj() or t.is_neg():
            raise _NotRemembered(str(t.device))
        self._index[id(t)] = len(self.tensors)
        self.tensors.append(t)
        raw = remote.tensor_bytes(t)
        self.nbytes += len(raw)
        return t.dtype, tuple(t.shape), t.requires_grad, t.is_leaf, raw


def _keyable(value: object) -> bool:
    try:
        CallKey(value)
    except _NotRemembered:
        return False
    return True


class Memo:
    """Remembered calls, least recently used first, within `max_calls` calls and `max_bytes`
    bytes of arguments (MEMO_CALLS and MEMO_BYTES unless set)."""

    def __init__(self) -> None:
        self.max_calls, self.max_bytes = MEMO_CALLS, MEMO_BYTES
        self._calls: OrderedDict[tuple, tuple[Remembered | object, int]] = OrderedDict()
        self._bytes = 0  # of the remembered calls' arguments

    def __len__(self) -> int:
        return len(self._calls)

    def clear(self) -> None:
        self._calls.clear()
        self._bytes = 0

    def get(self, key: tuple) -> Remembered | object | None:
        found = self._calls.get(key)
        if found is None:
            return None
        self._calls.move_to_end(key)
        return found[0]

    def put(self, key: tuple, entry: Remembered | object, nbytes: int) -> None:
        self._calls[key] = (entry, nbytes)
        self._bytes += nbytes
        while len(self._calls) > self.max_calls or self._bytes > self.max_bytes:
            _, (_, dropped) = self._calls.popitem(last=False)
            self._bytes -= dropped


class RememberedFunction:
    """One declared function of the reference, remembering its calls in a Memo."""

    def __init__(self, name: str, fn, memo: Memo) -> None:
        functools.update_wrapper(self, fn)  # name, docstring, signature (via __wrapped__)
        self._name, self._fn, self._memo = name, fn, memo

    def __call__(self, *args, **kwargs):
        grad = torch.is_grad_enabled()
        try:
            call = CallKey((args, kwargs))
        except _NotRemembered:
            return self._fn(*args, **kwargs)
        key = (self._name, grad, torch.get_default_dtype(), call.image)
        entry = self._memo.get(key)
        if entry is None:
            entry = self._compute(args, kwargs, call.tensors, grad)
            self._memo.put(key, entry, call.nbytes)
        if entry is _PLAIN:
            return self._fn(*args, **kwargs)
        return entry.replay(call.tensors)

    def _compute(self, args, kwargs, originals: list, grad: bool) -> Remembered | object:
        """Run the function on copies of the arguments, as a worker would; _PLAIN when the
        call cannot be remembered (the caller then makes it for real)."""
        copies = [t.detach().clone() for t in originals]
        specs = [TensorSpec(t.dtype, tuple(t.shape), "cpu", t.requires_grad, t.nbytes, t.is_leaf)
                 for t in originals]  # fmt: skip
        swap = {id(t): copy for t, copy in zip(originals, copies, strict=True)}
        args, kwargs = replace_tensors(list(args), swap), replace_tensors(kwargs, swap)
        inputs = remote.prepare_inputs(Frame(None, copies, specs), args, kwargs)  # as a worker
        rng = torch.get_rng_state()
        try:
            result, mutated = remote.run_call(self._fn, inputs, grad)
        except Exception:  # the plain call raises it again, for the test
            return _PLAIN
        finally:
            drew = not torch.equal(rng, torch.get_rng_state())
            torch.set_rng_state(rng)  # the plain call, if one follows, draws the same
        if drew or mutated or not _keyable(result):
            return _PLAIN
        graph, positions = remote.graph_of(result, inputs)
        kept = replace_tensors(result, {id(t): t.detach() for t in tensors_in(result)})
        return Remembered(kept, positions, graph)


class RememberedReference:
    """What the `reference` fixture gives: the module, its declared functions remembered.

    Every other attribute is the module's own. They are read-only here: a test that changes
    the reference (a rare thing) patches `reference.module`, the plain module, and calls
    `reference.memo.clear()`, since remembered results may change with it."""

    def __init__(self, module: ModuleType, functions: tuple[str, ...]) -> None:
        own = self.__dict__
        own["module"], own["memo"] = module, Memo()
        own["_functions"] = {
            name: RememberedFunction(name, getattr(module, name), own["memo"])
            for name in functions
            if callable(getattr(module, name, None))
        }

    def __getattr__(self, name: str):
        functions = self.__dict__.get("_functions", {})
        return functions[name] if name in functions else getattr(self.module, name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(READ_ONLY)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(READ_ONLY)

    def __dir__(self) -> list[str]:
        return sorted({*dir(self.module), "module", "memo"})
