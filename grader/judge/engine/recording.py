"""The student as tier tests see it: the proxy's functions, each call noted before it runs.

A visible test that fails shows the student the inputs of its last call, so the student can
reproduce the failure locally. Inputs are captured before the call (the student might change
them in place) and kept short: shape and dtype always, values only for small tensors. The
text is written only for a test that failed, since a grading makes ~200 calls and most tests
pass. Hidden tests never reveal their inputs; the judge does not even capture them.

Through the sandbox the judge holds only proxies, so `inspect` cannot see a function's
parameters: `signature(name)` reads them from the source with `ast`, executing nothing.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

MAX_VALUES = 32  # tensors with more elements show only dtype and shape
MAX_DESCRIPTION_CHARS = 2000


class TensorShot:
    """What a message says about a tensor argument, frozen at capture time."""

    __slots__ = ("device", "dtype", "requires_grad", "shape", "values")

    def __init__(self, tensor: torch.Tensor):
        self.dtype, self.shape = tensor.dtype, list(tensor.shape)
        self.device, self.requires_grad = tensor.device.type, tensor.requires_grad
        small = self.device != "meta" and tensor.numel() <= MAX_VALUES
        self.values = tensor.detach().clone() if small else None  # None: shape only

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        head = f"tensor({dtype}, shape {self.shape}"
        if self.device != "cpu":
            head += f", device {self.device}"
        if self.requires_grad:
            head += ", requires_grad"
        if self.values is None:
            return head + ")"
        values = self.values.cpu()
        if values.is_floating_point():
            return head + f", values {_round(values.double().tolist())})"
        return head + f", values {values.tolist()})"


def _shot(value: Any) -> TensorShot | str:
    """A tensor's snapshot, or at once the short text of any other argument."""
    if isinstance(value, torch.Tensor):
        return TensorShot(value)
    if isinstance(value, float | int | bool | str | type(None)):
        return repr(value)
    return type(value).__name__


def _text(shot: TensorShot | str) -> str:
    return shot if isinstance(shot, str) else shot.describe()


def _round(values: Any) -> Any:
    if isinstance(values, list):
        return [_round(item) for item in values]
    return float(f"{values:.4g}")


class RecordedCall:
    """One call's arguments as they were just before it ran; `describe()` writes the text."""

    __slots__ = ("args", "kwargs", "name")

    def __init__(self, name: str, args: tuple, kwargs: dict):
        self.name = name
        self.args = [_shot(value) for value in args]
        self.kwargs = {key: _shot(value) for key, value in kwargs.items()}

    def describe(self) -> str:
        """`name(arg=..., ...)` with one line per argument."""
        parts = [_text(shot) for shot in self.args]
        parts += [f"{key}={_text(shot)}" for key, shot in self.kwargs.items()]
        text = f"{self.name}(\n  " + ",\n  ".join(parts) + "\n)" if parts else f"{self.name}()"
        return text if len(text) <= MAX_DESCRIPTION_CHARS else text[:MAX_DESCRIPTION_CHARS] + "..."


class RecordingStudent:
    """The `student` fixture: the proxy's declared functions, each call reported to
    `on_call(name, args, kwargs)` before it goes to the worker; `signature(name)` too."""

    def __init__(
        self,
        proxy: Any,
        functions: tuple[str, ...],
        on_call: Callable[[str, tuple, dict], None],
        source: str,
    ):
        self._proxy, self._functions = proxy, functions
        self._on_call, self._source = on_call, source
        for name in functions:
            setattr(self, name, self._recorded(name, getattr(proxy, name)))

    def _recorded(self, name: str, function: Callable) -> Callable:
        on_call = self._on_call

        def call(*args: Any, **kwargs: Any) -> Any:
            on_call(name, args, kwargs)
            return function(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        return call

    def signature(self, name: str) -> inspect.Signature | None:
        """The parameters of the student's `name`, read from the source (never executed)."""
        return source_signature(self._source, name)

    def __repr__(self) -> str:
        return f"<student submission: {', '.join(self._functions)}>"


def source_signature(source: str, name: str) -> inspect.Signature | None:
    """The signature of the last top-level `def name(...)` in `source`, or None."""
    tree = _parsed(source)
    if tree is None:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return _signature(found.args) if found is not None else None


@functools.lru_cache(maxsize=4)  # a grading asks for each function's signature: parse once
def _parsed(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


_EMPTY = inspect.Parameter.empty


def _signature(args: ast.arguments) -> inspect.Signature:
    kinds = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    defaults = [_EMPTY] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parameters = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        only = index < len(args.posonlyargs)
        kind = kinds.POSITIONAL_ONLY if only else kinds.POSITIONAL_OR_KEYWORD
        parameters.append(kinds(arg.arg, kind, default=_literal(default)))
    if args.vararg is not None:
        parameters.append(kinds(args.vararg.arg, kinds.VAR_POSITIONAL))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parameters.append(kinds(arg.arg, kinds.KEYWORD_ONLY, default=_literal(default)))
    if args.kwarg is not None:
        parameters.append(kinds(args.kwarg.arg, kinds.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _literal(node: ast.expr | object) -> object:
    """A literal default as its value; anything else as its source text (never evaluated)."""
    if node is _EMPTY or node is None:
        return _EMPTY
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
