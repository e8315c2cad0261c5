"""The `reference` fixture's memo: a remembered call behaves as the plain call, and is made
once; a call it cannot remember goes to the module every time."""

from __future__ import annotations

import types

import pytest
import torch

from grader.exercise import default_exercise, load_module
from grader.judge.engine import DOUBLE_BACKWARD, READ_ONLY, RememberedReference


def counted_module(**functions) -> tuple[types.ModuleType, dict[str, int]]:
    """A module of `functions`, each counting its calls."""
    module, counts = types.ModuleType("fake_reference"), {}

    def counting(name, fn):
        def call(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        return call

    for name, fn in functions.items():
        setattr(module, name, counting(name, fn))
    return module, counts


def gspo_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(3, 5, generator=gen, dtype=torch.float64) * 4 - 0.1  # [B, L]
    logp = old + 0.1 * torch.randn(3, 5, generator=gen, dtype=torch.float64)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    advantages = torch.tensor([1.0, -0.5, 0.25], dtype=torch.float64)  # [B]
    return logp, old, advantages, mask


def loss_and_grad(reference, seed: int, clip_eps: float = 0.2):
    logp, old, advantages, mask = gspo_inputs(seed)
    logp.requires_grad_(True)
    loss = reference.gspo_loss(logp, old, advantages, mask, clip_eps=clip_eps)
    loss.backward()
    return loss.detach(), logp.grad


def test_a_remembered_gspo_call_gives_the_plain_value_and_gradient_every_time():
    exercise = default_exercise()
    module = load_module(exercise.reference, "memo_test_reference")
    remembered = RememberedReference(module, exercise.function_names)
    want, want_grad = loss_and_grad(module, seed=1)
    for _ in range(3):  # the first call computes, the next two replay
        got, got_grad = loss_and_grad(remembered, seed=1)
        assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
    assert len(remembered.memo) == 1
    other, _ = loss_and_grad(remembered, seed=2)  # other inputs: another call
    assert not torch.equal(other, want) and len(remembered.memo) == 2
    loss_and_grad(remembered, seed=1, clip_eps=0.3)  # another number: another call
    assert len(remembered.memo) == 3


def test_a_remembered_call_is_made_once_and_backward_with_any_seed_is_right():
    module, counts = counted_module(scaled=lambda x, w: (x * w).sum(dim=1))
    remembered = RememberedReference(module, ("scaled",))
    w = torch.tensor([1.0, 2.0, 3.0])
    for seed in (torch.ones(2), torch.tensor([2.0, -1.0]), torch.ones(2)):
        x = torch.arange(6.0).reshape(2, 3).requires_grad_(True)
        out = remembered.scaled(x, w)
        out.backward(seed)
        assert torch.equal(out.detach(), torch.tensor([8.0, 26.0]))
        assert torch.equal(x.grad, seed[:, None] * w)
    assert counts == {"scaled": 1}


def test_the_result_is_a_fresh_copy_the_caller_may_change():
    module, counts = counted_module(pair=lambda x: (x + 1, [x * 2]))
    remembered = RememberedReference(module, ("pair",))
    first, (second,) = remembered.pair(torch.zeros(2))
    first.add_(100)
    second.add_(100)
    again, (again_second,) = remembered.pair(torch.zeros(2))
    assert torch.equal(again, torch.ones(2)) and torch.equal(again_second, torch.zeros(2))
    assert counts == {"pair": 1}


def test_grad_mode_requires_grad_and_aliasing_are_part_of_the_call():
    module, counts = counted_module(add=lambda a, b: a + b)
    remembered = RememberedReference(module, ("add",))
    x = torch.ones(2)
    remembered.add(x, x)
    remembered.add(x, torch.ones(2))  # equal values, but not the same tensor twice
    remembered.add(x.clone().requires_grad_(True), x)
    with torch.no_grad():
        out = remembered.add(x.clone().requires_grad_(True), x)
    assert not out.requires_grad
    assert counts == {"add": 4}


def test_calls_it_cannot_remember_go_to_the_module_every_time():
    def noisy(x):
        return x + torch.rand(())

    def in_place(x):
        return x.mul_(2)

    def raising(x):
        raise ValueError("logp must be [B, L]")

    module, counts = counted_module(
        noisy=noisy, in_place=in_place, raising=raising, apply=lambda f, x: f(x)
    )
    remembered = RememberedReference(module, ("noisy", "in_place", "raising", "apply"))
    torch.manual_seed(0)
    plain = [noisy(torch.zeros(())) for _ in range(2)]
    torch.manual_seed(0)
    assert [remembered.noisy(torch.zeros(())) for _ in range(2)] == plain  # the same draws
    x, y = torch.ones(2), torch.ones(2)
    remembered.in_place(x)
    remembered.in_place(y)  # the same call again
    assert torch.equal(x, torch.full((2,), 2.0)) and torch.equal(y, x)  # each one changed
    for _ in range(2):
        with pytest.raises(ValueError, match="must be"):
            remembered.raising(torch.ones(2))
    remembered.apply(torch.neg, torch.ones(2))  # a callable argument: never remembered
    remembered.apply(torch.neg, torch.ones(2))
    # noisy, in_place and raising ran once more for the first computation on copies
    assert counts == {"noisy": 3, "in_place": 3, "raising": 3, "apply": 2}


def test_double_backward_through_a_remembered_call_says_what_to_use_instead():
    module, _ = counted_module(cube=lambda x: (x**3).sum())
    remembered = RememberedReference(module, ("cube",))
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (grad,) = torch.autograd.grad(remembered.cube(x), x, create_graph=True)
    assert torch.equal(grad.detach(), torch.tensor([3.0, 12.0]))
    with pytest.raises(RuntimeError) as error:
        grad.sum().backward()
    assert str(error.value) == DOUBLE_BACKWARD
    (plain,) = torch.autograd.grad(remembered.module.cube(x), x, create_graph=True)
    plain.sum().backward()  # the plain module differentiates twice
    assert torch.equal(x.grad, torch.tensor([6.0, 12.0]))


def test_attributes_are_the_modules_and_read_only_with_a_way_to_change_them(monkeypatch):
    module, counts = counted_module(shift=lambda x: x + module.OFFSET)
    module.OFFSET = 1.0
    remembered = RememberedReference(module, ("shift",))
    assert remembered.OFFSET == 1.0 and remembered.shift.__wrapped__ is module.shift
    assert torch.equal(remembered.shift(torch.zeros(1)), torch.ones(1))
    with pytest.raises(AttributeError) as error:
        monkeypatch.setattr(remembered, "OFFSET", 5.0)
    assert str(error.value) == READ_ONLY and module.OFFSET == 1.0
    monkeypatch.setattr(remembered.module, "OFFSET", 5.0)  # what the message says to do
    remembered.memo.clear()
    assert torch.equal(remembered.shift(torch.zeros(1)), torch.full((1,), 5.0))
    assert counts == {"shift": 2} and "module" in dir(remembered)


def test_the_memo_keeps_the_most_recent_calls_within_its_bounds():
    module, counts = counted_module(double=lambda x: x * 2)
    remembered = RememberedReference(module, ("double",))
    remembered.memo.max_calls = 3
    for value in (1.0, 2.0, 3.0, 1.0, 4.0):  # 1.0 is used again, so 2.0 goes first
        remembered.double(torch.tensor(value))
    assert len(remembered.memo) == 3 and counts == {"double": 4}
    remembered.double(torch.tensor(1.0))
    remembered.double(torch.tensor(2.0))  # forgotten: computed again
    assert counts == {"double": 5}
    remembered.memo.max_bytes = 8  # two float32 scalars' bytes
    remembered.double(torch.tensor(9.0))
    assert len(remembered.memo) == 2
