"""Inputs of student calls are described briefly; signatures come from the source text."""

from __future__ import annotations

import inspect

import pytest
import torch

from grader.judge.engine import RecordedCall, RecordingStudent, source_signature


def describe_call(name: str, args: tuple, kwargs: dict) -> str:
    return RecordedCall(name, args, kwargs).describe()


def test_small_tensors_show_values_large_ones_only_their_shape():
    small = torch.tensor([[0.5, -1.0]], dtype=torch.float64, requires_grad=True)
    big = torch.zeros(10, 10)
    text = describe_call("f", (small,), {"mask": big, "clip_eps": 0.2})
    assert "tensor(float64, shape [1, 2], requires_grad, values [[0.5, -1.0]])" in text
    assert "mask=tensor(float32, shape [10, 10])" in text
    assert "clip_eps=0.2" in text


def test_meta_tensors_show_no_values():
    text = describe_call("f", (torch.empty(2, 3, device="meta"),), {})
    assert "device meta" in text and "values" not in text


class FakeProxy:
    isolation = "test"

    def sequence_ratio(self, logp, old_logp, mask):
        return logp.sum()

    def gspo_loss(self, logp, old_logp, advantages, mask, clip_eps=0.2):
        return logp.sum()


def test_recording_student_reports_each_call_and_offers_only_the_declared_functions():
    seen = []
    student = RecordingStudent(
        FakeProxy(), ("sequence_ratio",), lambda *call: seen.append(call), source=""
    )
    x = torch.ones(2)
    assert student.sequence_ratio(x, x, mask=x).item() == 2.0
    assert student.sequence_ratio(x, x, mask=x).item() == 2.0
    assert [name for name, _, _ in seen] == ["sequence_ratio"] * 2
    assert seen[0][1] == (x, x) and seen[0][2] == {"mask": x}
    with pytest.raises(AttributeError):
        _ = student.isolation  # the proxy's machinery is not the tier tests' business


def test_a_recorded_call_describes_its_inputs_as_they_were_before_the_call():
    x = torch.tensor([0.5, 2.0])
    call = RecordedCall("sequence_ratio", (x,), {"clip_eps": 0.2})
    x.mul_(10)  # what a student's in-place edit does to the judge's tensor
    text = call.describe()
    assert text.startswith("sequence_ratio(") and "values [0.5, 2.0]" in text
    assert "clip_eps=0.2" in text


def test_signature_is_read_without_running_the_code():
    source = (
        "raise SystemExit('never run')\n"
        "def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2, *, scale=1.0):\n"
        "    pass\n"
    )
    signature = source_signature(source, "gspo_loss")
    assert list(signature.parameters) == [
        "logp",
        "old_logp",
        "advantages",
        "mask",
        "clip_eps",
        "scale",
    ]
    assert signature.parameters["clip_eps"].default == 0.2
    assert signature.parameters["scale"].kind is inspect.Parameter.KEYWORD_ONLY
    assert source_signature(source, "sequence_ratio") is None
    assert source_signature("def broken(:\n", "broken") is None
    student = RecordingStudent(FakeProxy(), ("gspo_loss",), print, source)
    assert student.signature("gspo_loss") == signature
