"""grader.checks: failure messages that show the difference, and device checks that can be
inconclusive without ever excusing a real failure."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

import grader.checks
from grader.checks import device_note, difference, expect_close
from grader.exercise import REPO_ROOT
from grader.sandbox import StudentError, StudentTimeout

FAILED = pytest.fail.Exception


def failure(call) -> str:
    with pytest.raises(FAILED) as caught:
        call()
    return str(caught.value.msg)


def test_difference_shows_digits_that_differ_and_the_gap():
    assert difference(2.7182818012, 2.7182818285, 1e-9, 0) == (
        "came out 2.7182818; expected 2.71828183 (differs by 2.7e-08, 1.0e-08 relative; "
        "tolerance rtol 1e-09)"
    )


def test_difference_says_when_the_expected_value_is_not_finite():
    assert difference(float("nan"), float("nan"), 0, 0) == (
        "came out nan; expected nan (not a finite number: nothing matches it)"
    )
    assert difference(float("inf"), 1.5, 0, 0) == "came out inf; expected 1.5 (a finite number)"


def test_expect_close_names_the_worst_entry_and_capitalizes_the_hint():
    got, want = torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0])
    message = failure(lambda: expect_close(got, want, "ratio", 0, 0, "on case x", "check T"))
    assert message.startswith("ratio at index [1] came out 2.5; expected 2")
    assert message.endswith(". Check T; on case x")


def raises(message: str, device_only: str | None = None):
    """A check that raises a student error on every device, or only on `device_only`."""

    def check(device: str) -> None:
        if device_only is None or device == device_only:
            raise StudentError("RuntimeError", message, line=3)

    return check


def test_device_note_is_empty_when_the_check_passes():
    assert device_note(lambda device: None, "meta") == ""


def test_device_note_explains_a_failure_of_the_device_alone():
    note = device_note(raises("Tensor.item() cannot be called on meta tensors", "meta"), "meta")
    assert note.startswith("inconclusive on the meta device: your code raised RuntimeError")
    assert "ran correctly on cpu" in note


def test_device_note_lets_the_failure_on_real_data_through():
    with pytest.raises(StudentError, match="not written yet"):
        device_note(raises("not written yet"), "meta")


def test_device_note_fails_code_that_mixes_devices():
    mixed = raises("Tensor on device cpu is not on the expected device meta!", "meta")
    message = failure(lambda: device_note(mixed, "meta"))
    assert "create new tensors on the inputs' device" in message


def test_device_note_never_excuses_a_timeout_or_a_failed_check():
    def timeout(device: str) -> None:
        raise StudentTimeout("the call ran past 10 s")

    with pytest.raises(StudentTimeout):
        device_note(timeout, "meta")

    def wrong_result(device: str) -> None:
        pytest.fail("gspo_loss returned a tensor on cpu; expected meta", pytrace=False)

    assert "expected meta" in failure(lambda: device_note(wrong_result, "meta"))


def test_the_instructors_reference_lists_every_public_function_with_its_signature():
    """docs/instructors.md's reference of grader.checks cannot drift from the code: every
    public function is there with each parameter and default, and nothing else is."""
    doc = (REPO_ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    section = doc.split("## Reference: grader.checks")[1].split("\n## ")[0]
    documented = {name: entry for entry, name in re.findall(r"^- `((\w+)\(.*?\))`", section, re.M)}
    public = {
        name: f"{name}{plain_signature(function)}"
        for name, function in vars(grader.checks).items()
        if inspect.isfunction(function)
        and function.__module__ == "grader.checks"
        and not name.startswith("_")
    }
    assert sorted(documented) == sorted(public), "document each public function, only those"
    for name, signature in public.items():
        assert documented[name] == signature, f"the doc says {documented[name]}"


def plain_signature(function) -> inspect.Signature:
    """The signature as the doc writes it: parameters and defaults, no annotations."""
    signature = inspect.signature(function)
    empty = inspect.Parameter.empty
    parameters = [p.replace(annotation=empty) for p in signature.parameters.values()]
    return signature.replace(parameters=parameters, return_annotation=empty)
