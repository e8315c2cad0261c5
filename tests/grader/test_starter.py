"""The starter a student receives: it imports, matches the reference's API, and says what to do."""

from __future__ import annotations

import inspect

import pytest
import torch

CALLS = {
    "sequence_ratio": lambda m, t: m.sequence_ratio(t, t, torch.ones_like(t, dtype=torch.bool)),
    "gspo_loss": lambda m, t: m.gspo_loss(t, t, torch.ones(2), torch.ones_like(t)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_starter_functions_match_the_reference_signatures(starter_impl, ref_impl, name):
    starter = inspect.signature(getattr(starter_impl, name))
    reference = inspect.signature(getattr(ref_impl, name))
    assert list(starter.parameters) == list(reference.parameters)
    for param in starter.parameters.values():
        assert param.default == reference.parameters[param.name].default, param.name


@pytest.mark.parametrize("name", list(CALLS))
def test_starter_functions_raise_a_friendly_not_implemented_error(starter_impl, name):
    with pytest.raises(NotImplementedError) as info:
        CALLS[name](starter_impl, torch.zeros(2, 3))
    message = str(info.value)
    assert name in message and "not written yet" in message
    assert len(message) > 40  # a hint of what to do, not a bare "TODO"


@pytest.mark.parametrize(("name", "shape"), [("sequence_ratio", "[B]"), ("gspo_loss", "()")])
def test_starter_docstrings_state_the_return_shape(starter_impl, name, shape):
    doc = inspect.getdoc(getattr(starter_impl, name)) or ""
    assert f"shape {shape}" in doc
