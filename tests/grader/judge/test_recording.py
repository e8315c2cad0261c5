"""Inputs of student calls are described briefly; signatures come from the source text."""

from __future__ import annotations

import inspect

import torch

from grader.judge.recording import RecordingStudent, describe_call
from grader.judge.signatures import source_signature


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


def test_recording_student_describes_before_calling_and_passes_other_attributes():
    seen = []
    student = RecordingStudent(FakeProxy(), ("sequence_ratio",), seen.append)
    x = torch.ones(2)
    assert student.sequence_ratio(x, x, x).item() == 2.0
    assert len(seen) == 1 and seen[0].startswith("sequence_ratio(")
    assert student.isolation == "test"


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
