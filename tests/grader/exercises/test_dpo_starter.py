"""The DPO starter a student receives: it imports, matches the reference's API, and says what
to do."""

from __future__ import annotations

import inspect

import pytest
import torch

CALLS = {
    "sequence_logp": lambda m: m.sequence_logp(torch.zeros(2, 3), torch.ones(2, 3)),
    "dpo_loss": lambda m: m.dpo_loss(*(torch.zeros(2) for _ in range(4))),
}
SHAPES = {"sequence_logp": "[B]", "dpo_loss": "()"}


@pytest.mark.parametrize("name", list(CALLS))
def test_starter_functions_match_the_reference_signatures(dpo_starter, dpo_reference, name):
    starter = inspect.signature(getattr(dpo_starter, name))
    reference = inspect.signature(getattr(dpo_reference, name))
    assert list(starter.parameters) == list(reference.parameters)
    for param in starter.parameters.values():
        assert param.default == reference.parameters[param.name].default, param.name


@pytest.mark.parametrize("name", list(CALLS))
def test_starter_functions_raise_a_friendly_not_implemented_error(dpo_starter, name):
    with pytest.raises(NotImplementedError) as info:
        CALLS[name](dpo_starter)
    message = str(info.value)
    assert name in message and "not written yet" in message
    assert len(message) > 40  # a hint of what to do, not a bare "TODO"


@pytest.mark.parametrize("name", list(CALLS))
def test_starter_docstrings_state_the_return_shape(dpo_starter, name):
    doc = inspect.getdoc(getattr(dpo_starter, name)) or ""
    assert f"shape {SHAPES[name]}" in doc
