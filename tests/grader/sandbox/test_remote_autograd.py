"""Remote autograd without a worker: a fake VJP stands in for the worker's answers."""

from __future__ import annotations

import gc

import pytest
import torch

from grader.sandbox.remote import (
    ProtocolError,
    attach,
    caller_device,
    check_grads,
    mirror_mutations,
)


class FakeWorker:
    """Records what backward asked for; answers 3 * grad for every input (shape [3])."""

    def __init__(self, inputs: list[torch.Tensor]) -> None:
        self.inputs, self.asked, self.released = inputs, [], 0

    def vjp(self, grad_outputs: list) -> list:
        self.asked.append(grad_outputs)
        total = sum(g.sum() for g in grad_outputs if g is not None)
        return check_grads([torch.full((3,), 3.0) * total for _ in self.inputs], self.inputs)

    def release(self) -> None:
        self.released += 1


def test_gradients_flow_to_the_inputs_that_required_them():
    x = torch.zeros(3, requires_grad=True)
    worker = FakeWorker([x])
    out = attach(torch.tensor(5.0), [0], [x], worker.vjp, worker.release)
    assert out.requires_grad and torch.equal(out.detach(), torch.tensor(5.0))
    out.backward()
    assert torch.equal(x.grad, torch.full((3,), 3.0))
    assert [g.item() for g in worker.asked[0]] == [1.0]


def test_unused_outputs_send_none_and_the_graph_is_released_when_collected():
    x = torch.zeros(3, requires_grad=True)
    worker = FakeWorker([x])
    first, second = attach((torch.ones(2), torch.ones(2)), [0, 1], [x], worker.vjp, worker.release)
    second.sum().backward()
    assert worker.asked[0][0] is None and torch.equal(worker.asked[0][1], torch.ones(2))
    assert worker.released == 0
    del first, second
    gc.collect()
    assert worker.released == 1


def test_results_without_grad_inputs_become_leaves_and_release_at_once():
    worker = FakeWorker([])
    out = attach([torch.ones(2), 3.5, None], [0], [], worker.vjp, worker.release)
    assert out[0].requires_grad and out[0].is_leaf and out[1:] == [3.5, None]
    assert worker.released == 1


def test_detached_results_stay_detached():
    x = torch.zeros(3, requires_grad=True)
    worker = FakeWorker([x])
    out = attach({"ratio": torch.ones(3)}, [], [x], worker.vjp, worker.release)
    assert not out["ratio"].requires_grad and worker.released == 0


@pytest.mark.parametrize("positions", [[5], [0, 0], ["0"], None, [1]])
def test_malformed_grad_positions_are_protocol_errors(positions):
    x = torch.zeros(3, requires_grad=True)
    worker = FakeWorker([x])
    result = (torch.ones(2), torch.ones(2, dtype=torch.int64))  # position 1 is an int tensor
    with pytest.raises(ProtocolError):
        attach(result, positions, [x], worker.vjp, worker.release)


def test_gradients_are_checked_against_the_inputs():
    x = torch.zeros(2, 3, dtype=torch.float64)
    assert check_grads([None], [x]) == [None]
    (grad,) = check_grads([torch.ones(2, 3, dtype=torch.float32)], [x])
    assert grad.dtype == torch.float64
    for bad in ([torch.ones(3)], [torch.ones(2, 3)] * 2, "grads", [1.0]):
        with pytest.raises(ProtocolError):
            check_grads(bad, [x])


def test_mutations_are_mirrored_including_new_shapes():
    a, b = torch.zeros(2), torch.zeros(2, 2, requires_grad=True)
    c = torch.zeros(3)
    mirror_mutations(
        [[0, torch.ones(2)], [1, torch.full((2, 2), 4.0)], [2, torch.ones(1, 3)]], [a, b, c]
    )
    assert torch.equal(a, torch.ones(2)) and torch.equal(b.detach(), torch.full((2, 2), 4.0))
    assert b.requires_grad and b.is_leaf and c.shape == (1, 3)
    for bad in ("x", [[3, torch.ones(2)]], [[0]], [["0", torch.ones(2)]], [[0, 1.0]]):
        with pytest.raises(ProtocolError):
            mirror_mutations(bad, [a, b, c])


def test_caller_device_prefers_an_accelerator():
    cpu, meta = torch.zeros(1), torch.zeros(1, device="meta")
    assert caller_device([cpu, meta]) is None
