"""What a grading could leave behind in a collected pytest session, in one comparable value.

A judge runs one collected session for many gradings (pytest_session.py), so a grading must
leave the session as it found it: nothing one student's grading stored may be seen by the
next. Fixtures of every scope are torn down after each grading; what outlives it is the tier
folder's modules (a test module, its conftest.py, a helper it imports), the values of
parametrized tests, the instances of test classes, and the tier files on disk.

`TierState.of(...)` reads all of that into a fingerprint; the session compares the one taken
after collecting with the one after each grading, and a grading that changed anything ends
the session (the next grading collects a new one, as if the first had never run). What the
fingerprint sees, two levels deep from every module global, parameter value and test
instance attribute:

- every binding: which object a name holds (a rebinding, `global COUNT; COUNT += 1`);
- the contents of containers (dict, list, set, deque, bytearray; tuples through), which a
  cache or a log grows;
- a tensor's in-place version, its `requires_grad` and its `.grad` (a backward through a
  module-level tensor accumulates there);
- a torch.Generator's state (every draw advances it);
- a function's defaults, closure cells and `functools` cache size;
- the attributes of plain objects, and of classes defined in the tier folder;
- each file's size and modification time under the tier folder (an instructor edited the
  tiers).

State it cannot see (three levels down, or inside a C extension's object) is the tier's own:
docs/instructors.md asks tier modules to hold constants only.
"""

from __future__ import annotations

import collections
import hashlib
import os
import types
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

_DEPTH = 2  # levels below a global (a dict of lists of tensors: every tensor is seen)
_CONTAINERS = (dict, list, set, frozenset, tuple, collections.deque, bytearray)
_OPAQUE = (types.ModuleType, types.BuiltinFunctionType, str, bytes, int, float, complex, bool)


@dataclass(frozen=True)
class TierState:
    """A fingerprint of everything a grading could change in a collected session."""

    value: tuple

    @classmethod
    def of(cls, tiers_dir: Path, modules: Iterable[types.ModuleType], items: list) -> TierState:
        """The state of the tier folder's `modules` and files, and of the collected `items`."""
        modules = sorted(modules, key=lambda m: m.__name__)
        tier_modules = {module.__name__ for module in modules}
        seen = []
        for module in modules:
            names = {k: v for k, v in vars(module).items() if not k.startswith("__")}
            seen.append((module.__name__, _namespace(names, tier_modules, _DEPTH)))
        for item in items:
            callspec = getattr(item, "callspec", None)
            if callspec is not None:
                seen.append((item.nodeid, _namespace(callspec.params, tier_modules, _DEPTH)))
            instance = getattr(item, "instance", None)
            if instance is not None and hasattr(instance, "__dict__"):
                seen.append((item.nodeid, _namespace(vars(instance), tier_modules, _DEPTH)))
        return cls((tuple(seen), _files(tiers_dir)))


def _files(folder: Path) -> tuple:
    """Every file under `folder` (subfolders too, caches aside): its size and mtime."""
    found = []
    for where, folders, names in os.walk(folder):
        folders[:] = [name for name in folders if name != "__pycache__"]
        for name in names:
            stat = os.stat(os.path.join(where, name))
            found.append((where, name, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


def _namespace(names: dict, tier_modules: set[str], depth: int) -> tuple:
    return tuple((str(name), _sign(value, tier_modules, depth)) for name, value in names.items())


def _sign(value: object, tier_modules: set[str], depth: int) -> tuple:
    """What identifies `value` and, `depth` levels down, what it holds."""
    if isinstance(value, _OPAQUE) or value is None:
        return (id(value),)
    if isinstance(value, torch.Tensor):
        return (id(value), *_tensor(value))
    if isinstance(value, torch.Generator):
        return (id(value), hashlib.sha1(value.get_state().numpy().tobytes()).hexdigest())
    if depth == 0:
        return (id(value),)
    below = depth - 1
    if isinstance(value, _CONTAINERS):
        if isinstance(value, dict):
            entries = [(id(key), _sign(item, tier_modules, below)) for key, item in value.items()]
        elif isinstance(value, set | frozenset):
            entries = sorted(map(id, value))
        else:
            entries = [_sign(item, tier_modules, below) for item in value]
        return (id(value), len(value), tuple(entries))
    if isinstance(value, types.FunctionType | types.MethodType):
        if _owner(value) not in tier_modules:  # a library's function: the tiers do not own it
            return (id(value),)
        return (id(value), *_function(value, tier_modules, below))
    if isinstance(value, type):
        if value.__module__ not in tier_modules:  # a library's class: the tiers do not own it
            return (id(value),)
        return (id(value), _namespace(dict(vars(value)), tier_modules, below))
    signs: tuple = (id(value),)
    wrapped = getattr(value, "__wrapped__", None)  # functools.cache, lru_cache, wraps
    if isinstance(wrapped, types.FunctionType) and _owner(wrapped) in tier_modules:
        cache_info = getattr(value, "cache_info", None)
        signs += (cache_info().currsize if callable(cache_info) else None,)
        signs += _function(wrapped, tier_modules, below)
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and not isinstance(value, pytest.Item):
        signs += (_namespace(attributes, tier_modules, below),)
    return signs


def _owner(function) -> str:
    return getattr(function, "__module__", None) or ""


def _tensor(tensor: torch.Tensor) -> tuple:
    try:
        grad = tensor.grad if tensor.is_leaf else None
        grad_sign = None if grad is None else (id(grad), grad._version)
        return (tensor._version, tensor.requires_grad, grad_sign)
    except RuntimeError:  # an inference tensor keeps no version: count it as changed
        return (object(),)


def _function(function, tier_modules: set[str], depth: int) -> tuple:
    function = getattr(function, "__func__", function)  # a bound method's function
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append(_sign(cell.cell_contents, tier_modules, depth))
        except ValueError:  # a cell not yet filled
            cells.append(None)
    defaults = function.__defaults__ or ()
    keywords = function.__kwdefaults__ or {}
    return (
        tuple(_sign(default, tier_modules, depth) for default in defaults),
        _namespace(keywords, tier_modules, depth),
        tuple(cells),
    )
