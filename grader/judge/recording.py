"""Remember what each tier test passed to the student's functions.

A visible test that fails shows the student the inputs of its last call, so the student can
reproduce the failure locally. Inputs are described before the call (the student might change
them in place) and kept short: shape and dtype always, values only for small tensors.
Hidden tests never reveal their inputs; the judge drops the record for them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from grader.judge.signatures import source_signature

MAX_VALUES = 32  # tensors with more elements show only dtype and shape
MAX_DESCRIPTION_CHARS = 2000


def describe_value(value: Any) -> str:
    """One short line for a call argument."""
    if isinstance(value, torch.Tensor):
        return describe_tensor(value)
    if isinstance(value, float | int | bool | str | type(None)):
        return repr(value)
    return type(value).__name__


def describe_tensor(tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype).removeprefix("torch.")
    head = f"tensor({dtype}, shape {list(tensor.shape)}"
    if tensor.device.type != "cpu":
        head += f", device {tensor.device.type}"
    if tensor.requires_grad:
        head += ", requires_grad"
    if tensor.device.type == "meta" or tensor.numel() > MAX_VALUES:
        return head + ")"
    values = tensor.detach().cpu()
    if values.is_floating_point():
        values = values.double()
        return head + f", values {_round(values.tolist())})"
    return head + f", values {values.tolist()})"


def _round(values: Any) -> Any:
    if isinstance(values, list):
        return [_round(item) for item in values]
    return float(f"{values:.4g}")


def describe_call(name: str, args: tuple, kwargs: dict) -> str:
    """`name(arg=..., ...)` with one line per argument."""
    parts = [describe_value(value) for value in args]
    parts += [f"{key}={describe_value(value)}" for key, value in kwargs.items()]
    text = f"{name}(\n  " + ",\n  ".join(parts) + "\n)" if parts else f"{name}()"
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[:MAX_DESCRIPTION_CHARS] + "..."


class RecordingStudent:
    """Wraps the sandbox proxy: same attributes, but calls to the declared functions are
    described to `on_call(description)` before they go to the worker."""

    def __init__(
        self,
        proxy: Any,
        functions: tuple[str, ...],
        on_call: Callable[[str], None],
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
        if name not in self._functions:
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            self._on_call(describe_call(name, args, kwargs))
            return attribute(*args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"<student submission: {', '.join(self._functions)}>"
