"""Remember what each tier test passed to the student's functions.

A visible test that fails shows the student the inputs of its last call, so the student can
reproduce the failure locally. Inputs are captured before the call (the student might change
them in place) and kept short: shape and dtype always, values only for small tensors.
Capturing copies only what a message can show; the text is written only for a test that
failed, since a grading makes ~180 calls and most tests pass. Hidden tests never reveal
their inputs; the judge does not even capture them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from grader.judge.signatures import source_signature

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


def capture_value(value: Any) -> TensorShot | str:
    """A tensor's snapshot, or at once the short text of any other argument."""
    if isinstance(value, torch.Tensor):
        return TensorShot(value)
    if isinstance(value, float | int | bool | str | type(None)):
        return repr(value)
    return type(value).__name__


def describe_value(value: Any) -> str:
    """One short line for a call argument."""
    return _text(capture_value(value))


def describe_tensor(tensor: torch.Tensor) -> str:
    return TensorShot(tensor).describe()


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
        self.args = [capture_value(value) for value in args]
        self.kwargs = {key: capture_value(value) for key, value in kwargs.items()}

    def describe(self) -> str:
        """`name(arg=..., ...)` with one line per argument."""
        parts = [_text(shot) for shot in self.args]
        parts += [f"{key}={_text(shot)}" for key, shot in self.kwargs.items()]
        name = self.name
        text = f"{name}(\n  " + ",\n  ".join(parts) + "\n)" if parts else f"{name}()"
        return text if len(text) <= MAX_DESCRIPTION_CHARS else text[:MAX_DESCRIPTION_CHARS] + "..."


def describe_call(name: str, args: tuple, kwargs: dict) -> str:
    """`name(arg=..., ...)` with one line per argument."""
    return RecordedCall(name, args, kwargs).describe()


class RecordingStudent:
    """Wraps the sandbox proxy: same attributes, but each call to a declared function is
    reported to `on_call(name, args, kwargs)` before it goes to the worker."""

    def __init__(
        self,
        proxy: Any,
        functions: tuple[str, ...],
        on_call: Callable[[str, tuple, dict], None],
        source: str = "",
    ):
        self._proxy = proxy
        self._functions = functions
        self._on_call = on_call
        self._source = source

    def signature(self, name: str) -> inspect.Signature | None:
        """The parameters of the student's `name`, read from the source (never executed)."""
        probe = getattr(self._proxy, "signature", None)
        if callable(probe):
            return probe(name)
        return source_signature(self._source, name)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._proxy, name)
        if name == "call_many":
            return self._recorded_many(attribute)
        if name not in self._functions:
            return attribute
        on_call = self._on_call

        def call(*args: Any, **kwargs: Any) -> Any:
            on_call(name, args, kwargs)
            return attribute(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        self.__dict__[name] = call  # made once: later look-ups skip __getattr__
        return call

    def _recorded_many(self, call_many: Callable) -> Callable:
        """The proxy's call_many (several calls sent at once), each call reported first."""

        def recorded(name: str, arguments: list[tuple[tuple, dict]]) -> list:
            if name not in self._functions:
                raise ValueError(f"{name!r} is not one of the submission's functions")
            for args, kwargs in arguments:
                self._on_call(name, args, kwargs)
            return call_many(name, arguments)

        return recorded

    def __repr__(self) -> str:
        return f"<student submission: {', '.join(self._functions)}>"
