"""The `reference` fixture's object: the reference module, remembering what tests derive
from it alone, so a warm judge computes each reference result once, not once per grading."""

from __future__ import annotations

import importlib
import sys
import types

import pytest
import torch

from grader.exercise import default_exercise
from grader.judge.plugin import TrustedReference, load_trusted


def test_attributes_pass_through_and_each_key_is_computed_once():
    module = types.ModuleType("fake_reference")
    module.answer = 42
    reference = TrustedReference(module)
    computed = []

    def compute():
        computed.append(1)
        return [len(computed)]

    assert reference.answer == 42
    first = reference.remember(("ratio", b"\x00\x01"), compute)
    assert reference.remember(("ratio", b"\x00\x01"), compute) is first
    assert reference.remember(("loss", b"\x00\x01"), compute) == [2]
    with pytest.raises(AttributeError):
        _ = reference.missing


def test_the_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(TrustedReference, "MAX_RESULTS", 2)
    reference = TrustedReference(types.ModuleType("fake_reference"))
    for key in range(5):
        reference.remember((key,), lambda: None)
    assert len(reference._results) <= 2


@pytest.fixture
def checks():
    """The tier helpers module, imported the way a grading imports it."""
    tiers = str(default_exercise().tiers_dir)
    sys.path.insert(0, tiers)
    try:
        yield importlib.import_module("_checks")
    finally:
        sys.path.remove(tiers)
        sys.modules.pop("_checks", None)


def test_tier_helpers_get_fresh_copies_of_remembered_results(checks):
    module = load_trusted("gspo_reference", default_exercise().reference)
    reference = TrustedReference(module)
    batch = checks.make_batch(5, B=3, L=4, spread=0.3)
    weights = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
    ratio, grad = checks.reference_ratio(reference, batch, weights)
    ratio.mul_(0), grad.mul_(0)  # a careless caller must not change what is remembered
    again, again_grad = checks.reference_ratio(reference, batch, weights)
    direct, direct_grad = checks.call_ratio(module, batch, weights)
    assert torch.equal(again, direct) and torch.equal(again_grad, direct_grad)
    for _ in range(2):
        checks.reference_loss(reference, batch)
    assert len(reference._results) == 2  # one ratio, one loss
