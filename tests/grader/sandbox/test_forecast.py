"""Calls sent ahead from a forecast: the same answers as one round trip per call, sooner.

Each test records the calls of one proxy's test (`end_test()`) and replays them as the
forecast of a second proxy's test, as the judge does from one grading to the next. The
submission counts its own calls, so a test sees exactly which calls the worker ran.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from grader.sandbox import WAITS, Limits, StudentError, StudentTimeout, WorkerPool
from grader.sandbox.remote import (
    AHEAD_CALLS,
    TOP_UP_BELOW,
    ForecastCall,
    Forecasts,
    open_student,
)
from grader.sandbox.remote.stubs import NOT_IMPLEMENTED_CALLS

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("time_guard")]
GUARD_S = 90  # per test: two worker starts on a busy machine, and a drop's wait

REFERENCE = (Path(__file__).resolve().parents[3] / "reference" / "gspo.py").read_text()
COUNTING = """
import time
import torch

CALLS = 0


def count(x):
    global CALLS
    CALLS += 1
    return x * 0 + CALLS


def scaled(x, factor):
    if float(x.flatten()[0]) == 99.0:
        while True:  # only ever called from a forecast in these tests
            time.sleep(0.01)
    return x * factor
"""
FUNCTIONS = ("sequence_ratio", "gspo_loss", "count", "scaled")
SOURCE = REFERENCE + COUNTING
LIMITS = Limits(cpu_seconds=60, call_wall_seconds=5, grading_wall_seconds=300)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(1, LIMITS) as warm:
        yield warm


def batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    old = -(0.1 + 2 * torch.rand(3, 5, generator=g, dtype=torch.float64))  # [B, L]
    logp = (old + 0.1 * torch.randn(3, 5, generator=g, dtype=torch.float64)).requires_grad_()
    mask = torch.ones(3, 5)
    mask[1, 3:] = 0
    return logp, old, torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64), mask


def losses(student, seeds) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each seed's loss and d loss / d logp, as a tier test computes them."""
    out = []
    for seed in seeds:
        logp, old, adv, mask = batch(seed)
        loss = student.gspo_loss(logp, old, adv, mask, clip_eps=0.2)
        loss.backward()
        out.append((loss.detach(), logp.grad))
    return out


def recorded(pool, calls, source: str = SOURCE) -> object:
    """The forecast that a first proxy's calls make, in one test."""
    with open_student(source, functions=FUNCTIONS, pool=pool) as first:
        first.begin_test(None)
        calls(first)
        assert first.ahead.sent == 0  # no forecast, nothing ahead
        return first.end_test()


def recorded_plans(pool, tests, source: str = SOURCE, functions=FUNCTIONS) -> list:
    """The forecasts that one proxy's consecutive tests make: `tests` calls each on it."""
    with open_student(source, functions=functions, pool=pool) as teacher:
        plans = []
        for calls in tests:
            teacher.begin_test(None)
            calls(teacher)
            plans.append(teacher.end_test())
        return plans


def counts_all(xs):
    """A test's calls: `count` on each of `xs`."""
    return lambda student: [student.count(x) for x in xs]


def test_calls_equal_to_the_forecast_are_answered_ahead_with_the_same_results(pool):
    seeds = [1, 2, 3, 4, 5]
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as plain:
        expected = losses(plain, seeds)
    forecast = recorded(pool, lambda s: losses(s, seeds))
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        got = losses(ahead, seeds)
        assert ahead.ahead.sent == ahead.ahead.answered == len(seeds)
    for (loss, grad), (want_loss, want_grad) in zip(got, expected, strict=True):
        assert torch.equal(loss, want_loss) and torch.equal(grad, want_grad)


def test_the_worker_runs_exactly_the_calls_made_while_the_forecast_holds(pool):
    xs = [torch.full((2,), float(k)) for k in range(5)]
    forecast = recorded(pool, lambda s: [s.count(x) for x in xs])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        counts = [int(ahead.count(x)[0]) for x in xs]
        assert ahead.ahead.answered == len(xs)
    assert counts == [1, 2, 3, 4, 5]  # each call saw the calls before it, and no others


def test_a_call_that_differs_drops_the_forecast_and_gets_its_own_answer(pool):
    xs = [torch.full((2,), float(k)) for k in range(5)]
    forecast = recorded(pool, lambda s: [s.count(x) for x in xs])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        assert int(ahead.count(xs[0])[0]) == 1
        other = ahead.scaled(torch.tensor([3.0, 4.0]), 2.0)  # not the forecast's next call
        assert torch.equal(other, torch.tensor([6.0, 8.0]))
        # the 4 calls sent ahead and dropped were run, their answers thrown away; from here
        # on, every call is one round trip
        assert int(ahead.count(xs[1])[0]) == 1 + 4 + 1
        assert ahead.ahead.answered == 1 and ahead.ahead.sent == 5
        assert ahead.restarts == 0


def test_calls_go_ahead_in_batches_of_at_most_AHEAD_CALLS(pool):
    xs = [torch.full((2,), float(k)) for k in range(3 * AHEAD_CALLS)]
    forecast = recorded(pool, lambda s: [s.count(x) for x in xs])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        assert ahead.ahead.sent == AHEAD_CALLS  # the first batch, sent once loaded
        used = AHEAD_CALLS - TOP_UP_BELOW
        for x in xs[:used]:
            ahead.count(x)
        assert ahead.ahead.sent == AHEAD_CALLS  # enough still ahead: nothing sent
        ahead.count(xs[used])  # fewer than TOP_UP_BELOW left: topped up to AHEAD_CALLS
        assert ahead.ahead.sent == used + 1 + AHEAD_CALLS
        assert ahead.round_trips == 1  # the load; every call was answered ahead
        ahead.scaled(torch.ones(2), 1.0)  # differs: AHEAD_CALLS dropped
        assert int(ahead.count(xs[used + 1])[0]) == used + 1 + AHEAD_CALLS + 1
        assert ahead.round_trips == 3


def test_a_divergence_drops_only_its_own_tests_rest(pool):
    first = [torch.full((2,), float(k)) for k in range(4)]
    second = [torch.full((2,), 10.0 + k) for k in range(4)]
    plans = recorded_plans(pool, [counts_all(first), counts_all(second)])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(plans[0])
        assert int(ahead.count(first[0])[0]) == 1
        ahead.scaled(torch.ones(2), 3.0)  # the test diverges: its 3 other calls dropped
        assert ahead.end_test() is not None
        calls_before = ahead.requests
        ahead.begin_test(plans[1])  # the next test starts from its own forecast
        assert ahead.requests == calls_before + len(second)  # all in flight at once
        counts = [int(ahead.count(x)[0]) for x in second]
        assert counts == [1 + 3 + k for k in range(1, 5)]  # after the 3 dropped, run anyway
        assert ahead.ahead.answered == 1 + len(second)
        assert ahead.round_trips == 2  # the load and the call that diverged
        assert ahead.end_test() == plans[1]  # the calls made, the next run's forecast
        assert ahead.restarts == 0


def recorded_tests(pool, sizes=(3, 4, 2)) -> tuple[list[list[torch.Tensor]], list]:
    """Inputs and recorded forecasts of consecutive tests, each calling `count` on its own
    inputs."""
    inputs = [[torch.full((2,), 10.0 * t + k) for k in range(n)] for t, n in enumerate(sizes)]
    return inputs, recorded_plans(pool, [counts_all(xs) for xs in inputs])


def test_the_next_tests_calls_go_ahead_once_this_tests_are_all_sent(pool):
    (first, second, _), plans = recorded_tests(pool)
    assert len(first) + len(second) <= AHEAD_CALLS
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(plans[0], then=plans[1])
        assert ahead.requests == 1 + len(first) + len(second)  # the load, then both tests'
        assert [int(ahead.count(x)[0]) for x in first] == [1, 2, 3]
        assert ahead.end_test() == plans[0]
        ahead.begin_test(plans[1])  # its calls are on their way: nothing sent again
        assert ahead.requests == 1 + len(first) + len(second)
        assert [int(ahead.count(x)[0]) for x in second] == [4, 5, 6, 7]  # in the tests' order
        assert ahead.end_test() == plans[1]
        assert ahead.ahead.answered == ahead.ahead.sent == len(first) + len(second)
        assert ahead.round_trips == 1 and ahead.restarts == 0  # the load alone


def test_a_divergence_drops_the_next_tests_calls_too_and_that_test_sends_them_again(pool):
    (first, second, _), plans = recorded_tests(pool)
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(plans[0], then=plans[1])
        assert int(ahead.count(first[0])[0]) == 1
        # not predicted: the first test's 2 other calls and the second's 4 are dropped, and
        # the worker runs no call of the next test before this one
        ahead.scaled(torch.ones(2), 3.0)
        assert ahead.end_test() is not None
        sent = ahead.requests
        ahead.begin_test(plans[1])  # sent again, from its first call
        assert ahead.requests == sent + len(second)
        assert [int(ahead.count(x)[0]) for x in second] == [1 + 2 + 4 + k for k in range(1, 5)]
        assert ahead.ahead.answered == 1 + len(second)
        assert ahead.end_test() == plans[1]
        assert ahead.restarts == 0


def test_calls_sent_for_a_next_test_that_does_not_come_are_dropped(pool):
    (first, _, third), plans = recorded_tests(pool)
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(plans[0], then=plans[1])
        assert [int(ahead.count(x)[0]) for x in first] == [1, 2, 3]
        assert ahead.end_test() == plans[0]
        ahead.begin_test(plans[2])  # another test runs next: the second's 4 calls dropped
        assert [int(ahead.count(x)[0]) for x in third] == [3 + 4 + 1, 3 + 4 + 2]
        assert ahead.ahead.answered == len(first) + len(third)
        assert ahead.end_test() == plans[2]
        assert ahead.round_trips == 1 and ahead.restarts == 0


def test_a_test_counts_the_requests_of_its_own_it_waited_for(pool):
    """What decides whether the next test's calls may follow a test's (Forecasts.leads): a
    backward with weights, or a call not predicted, waits for its own reply; the load and
    calls answered ahead do not count."""
    (first, _, _), plans = recorded_tests(pool)
    logp, old, _, mask = batch(1)
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=plans[0]) as ahead:
        ahead.begin_test(plans[0])
        for x in first:
            ahead.count(x)
        ahead.end_test()
        assert ahead.test_round_trips == 0  # all answered ahead; the load is no test's
        ahead.begin_test(None)
        ratio = ahead.sequence_ratio(logp, old, mask)
        ratio.backward(torch.tensor([1.0, 2.0, 3.0], dtype=ratio.dtype))  # asks the worker
        ahead.end_test()
        assert ahead.test_round_trips == 2  # the call (no forecast) and its backward


def test_a_test_leads_the_next_ones_calls_only_if_its_last_passing_run_waited_for_none():
    forecasts = Forecasts()
    calls = (ForecastCall(b"{}", 2),)
    assert not forecasts.leads(("submit", "t"))  # nothing kept
    forecasts.keep(("submit", "t"), calls, round_trips=0)
    assert forecasts.leads(("submit", "t"))
    forecasts.keep(("submit", "t"), calls, round_trips=1)  # a backward of its own waited
    assert not forecasts.leads(("submit", "t")) and forecasts.get(("submit", "t")) == calls
    forecasts.keep(("submit", "t"), calls)
    assert forecasts.leads(("submit", "t"))


def test_a_test_whose_worker_restarted_gives_no_forecast(pool):
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as proxy:
        proxy.begin_test(None)
        proxy.count(torch.ones(2))
        with pytest.raises(StudentTimeout):
            proxy.scaled(torch.full((2,), 99.0), 1.0)  # never returns: the worker is stopped
        assert proxy.end_test() is None
        proxy.begin_test(None)
        assert int(proxy.count(torch.ones(2))[0]) == 1  # a fresh worker
        assert len(proxy.end_test()) == 1


def test_a_tests_forecast_reaches_the_worker_only_when_that_test_begins(pool):
    """The rule that keeps hidden tests' inputs out of a Run: a forecast is sent at its own
    test's start, or as the `then` of the test that runs before it in the same grading
    (the judge names only a test its request runs), so a grading that does not run the test
    never receives it."""
    visible = [torch.full((2,), float(k)) for k in range(3)]
    plan = recorded(pool, lambda s: [s.count(x) for x in visible])
    secret = recorded(pool, lambda s: [s.count(torch.full((2,), 77.0)) for _ in range(5)])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as proxy:
        proxy.begin_test(plan)
        assert [int(proxy.count(x)[0]) for x in visible] == [1, 2, 3]
        assert proxy.end_test() == plan
        assert proxy.requests == 1 + len(visible)  # the load and this test's calls, no more
        proxy.begin_test(secret)
        assert proxy.requests == 1 + len(visible) + len(secret)


def test_a_dropped_call_that_never_returns_costs_one_short_wait(pool):
    # recorded from another submission (the judge keeps forecasts across students)
    safe = SOURCE.replace("== 99.0", "== -1.0")
    calls = [(1.0, 2.0), (99.0, 2.0)]
    forecast = recorded(pool, lambda s: [s.scaled(torch.full((2,), v), f) for v, f in calls], safe)
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        assert torch.equal(ahead.scaled(torch.full((2,), 1.0), 2.0), torch.full((2,), 2.0))
        start = time.monotonic()
        # differs from the forecast's `scaled(99)`, in which the worker is stuck for ever
        assert torch.equal(ahead.scaled(torch.full((2,), 5.0), 2.0), torch.full((2,), 10.0))
        waited = time.monotonic() - start
        assert ahead.restarts == 1  # the stuck worker was stopped, a fresh one answered
        assert ahead.ahead.answered == 1
    assert waited >= WAITS.forecast_drop_s


def test_a_function_no_longer_run_is_not_sent_ahead_to_hold_up_the_others(pool):
    """Once `scaled` timed out twice it is not run again; a forecast that calls it, then
    `count`, must not send it ahead, or `count`'s reply would wait behind a worker stuck in
    it, and `count` would be blamed with a timeout of its own."""
    safe = SOURCE.replace("== 99.0", "== -1.0")
    stuck, x = torch.full((2,), 99.0), torch.full((2,), 3.0)
    forecast = recorded(pool, lambda s: [s.scaled(stuck, 2.0), s.count(x)], safe)
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as proxy:
        for _ in range(2):
            with pytest.raises(StudentTimeout, match="did not finish"):
                proxy.scaled(stuck, 2.0)
        assert torch.equal(proxy.count(x), torch.full((2,), 1.0))  # a fresh worker
        sent = proxy.ahead.sent
        proxy.begin_test(forecast)
        assert proxy.ahead.sent == sent  # the forecast stops at `scaled`: nothing goes ahead
        with pytest.raises(StudentTimeout, match="not run: scaled timed out earlier"):
            proxy.scaled(stuck, 2.0)
        assert torch.equal(proxy.count(x), torch.full((2,), 2.0))


def test_calls_larger_than_the_unread_bound_go_ahead_one_at_a_time(pool):
    """Large calls: a batch never passes AHEAD_BYTES (but one call alone may), so the judge
    never waits to send while the worker waits to send a reply."""
    xs = [torch.full((40_000,), float(k)) for k in range(6)]  # 160 kB each
    forecast = recorded(pool, lambda s: [s.scaled(x, 2.0) for x in xs])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(forecast)
        assert ahead.requests == 1 + 1  # the load, and one call alone
        for x in xs:
            assert torch.equal(ahead.scaled(x, 2.0), x * 2)
        assert ahead.ahead.answered == len(xs) and ahead.restarts == 0
        assert ahead.end_test() == forecast


def weighted_ratios(student, cases) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per (seed, weights): sequence_ratio and d(sum(w * ratio)) / d logp, as a tier test
    checks every response's gradient at once (a backward the worker must be asked for)."""
    out = []
    for seed, weights in cases:
        logp, old, _, mask = batch(seed)
        ratio = student.sequence_ratio(logp, old, mask)
        (ratio * weights).sum().backward()
        out.append((ratio.detach(), logp.grad))
    return out


WEIGHTED = [(seed, torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)) for seed in (1, 2, 3)]


def test_backwards_with_weights_are_sent_ahead_with_their_calls_and_answer_the_same(pool):
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as plain:
        expected = weighted_ratios(plain, WEIGHTED)
    forecast = recorded(pool, lambda s: weighted_ratios(s, WEIGHTED))
    assert [call.target for call in forecast] == [None, 0, None, 2, None, 4]
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        got = weighted_ratios(ahead, WEIGHTED)
        assert ahead.round_trips == 1  # the load: every call and backward was answered ahead
        assert ahead.ahead.answered == ahead.ahead.sent == len(WEIGHTED)  # calls only
        assert ahead.end_test() == forecast
    for (ratio, grad), (want_ratio, want_grad) in zip(got, expected, strict=True):
        assert torch.equal(ratio, want_ratio) and torch.equal(grad, want_grad)


def test_a_backward_with_other_weights_drops_the_forecast_and_keeps_the_calls_graph(pool):
    """The backward sent ahead is thrown away unused; the call's graph, which it shared, is
    not released with it: the judge's own backward, and another, still get the right
    gradients."""
    forecast = recorded(pool, lambda s: weighted_ratios(s, WEIGHTED))
    other = [(1, torch.tensor([3.0, 0.25, -2.0], dtype=torch.float64)), *WEIGHTED[1:]]
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as plain:
        expected = weighted_ratios(plain, other)
        logp, old, _, mask = batch(1)
        plain_ratio = plain.sequence_ratio(logp, old, mask)
        (plain_ratio * WEIGHTED[0][1]).sum().backward()
        second_grad = logp.grad
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool, forecast=forecast) as ahead:
        logp, old, _, mask = batch(1)
        ratio = ahead.sequence_ratio(logp, old, mask)
        (ratio * other[0][1]).sum().backward(retain_graph=True)  # not the forecast's weights
        assert torch.equal(logp.grad, expected[0][1])
        assert ahead.round_trips == 2  # the load, and this backward's own request
        logp.grad = None
        (ratio * WEIGHTED[0][1]).sum().backward()  # the graph is still kept in the worker
        assert torch.equal(logp.grad, second_grad)
        rest = weighted_ratios(ahead, other[1:])  # the forecast is dropped: round trips
        assert ahead.round_trips == 3 + 2 * len(rest)
        assert ahead.restarts == 0 and ahead.ahead.answered == 1
    for (ratio, grad), (want_ratio, want_grad) in zip(rest, expected[1:], strict=True):
        assert torch.equal(ratio, want_ratio) and torch.equal(grad, want_grad)


def test_a_backward_of_an_earlier_tests_call_is_asked_for_and_never_forecast(pool):
    logp, old, _, mask = batch(2)
    weights = WEIGHTED[0][1]
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as plain:
        (plain.sequence_ratio(logp, old, mask) * weights).sum().backward()
        expected = logp.grad
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as proxy:
        logp, old, _, mask = batch(2)
        proxy.begin_test(None)
        ratio = proxy.sequence_ratio(logp, old, mask)
        assert proxy.end_test() is not None
        proxy.begin_test(None)
        (ratio * weights).sum().backward()
        assert torch.equal(logp.grad, expected)
        assert proxy.end_test() == ()  # the backward belongs to no call of this test


def test_large_calls_go_ahead_once_the_replies_a_failed_test_left_are_read(pool):
    """A test that failed left calls of its forecast unanswered; the next test's calls too
    large to go behind their replies (AHEAD_BYTES) are sent once those are read, at its
    start, not one round trip each."""
    small = [torch.full((2,), float(k)) for k in range(4)]
    large = [torch.full((40_000,), float(k)) for k in range(3)]  # 160 kB each
    first = recorded(pool, lambda s: [s.count(x) for x in small])
    second = recorded(pool, lambda s: [s.scaled(x, 2.0) for x in large])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(first)
        ahead.count(small[0])  # then the test fails: its other calls stay unanswered
        ahead.end_test()
        ahead.begin_test(second)
        for x in large:
            assert torch.equal(ahead.scaled(x, 2.0), x * 2)
        assert ahead.end_test() == second
        assert ahead.round_trips == 1  # the load: every call was answered ahead
        assert ahead.ahead.answered == 1 + len(large) and ahead.restarts == 0


def test_a_next_tests_backwards_go_ahead_with_its_calls(pool):
    """The `then` forecast carries its backwards too, each under the id its own call was
    sent with."""
    cases = [WEIGHTED[:2], WEIGHTED[2:]]
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as plain:
        expected = [weighted_ratios(plain, group) for group in cases]
    plans = recorded_plans(pool, [lambda s, g=group: weighted_ratios(s, g) for group in cases])
    with open_student(SOURCE, functions=FUNCTIONS, pool=pool) as ahead:
        ahead.begin_test(plans[0], then=plans[1])
        assert ahead.requests == 1 + len(plans[0]) + len(plans[1])  # the load, both tests'
        got = [weighted_ratios(ahead, cases[0])]
        assert ahead.end_test() == plans[0]
        ahead.begin_test(plans[1])
        got.append(weighted_ratios(ahead, cases[1]))
        assert ahead.end_test() == plans[1]
        assert ahead.round_trips == 1 and ahead.restarts == 0  # the load alone
    for group, want_group in zip(got, expected, strict=True):
        for (ratio, grad), (want_ratio, want_grad) in zip(group, want_group, strict=True):
            assert torch.equal(ratio, want_ratio) and torch.equal(grad, want_grad)


UNWRITTEN = """
UNWRITTEN_CALLS = 0


def unwritten(x):
    global UNWRITTEN_CALLS
    UNWRITTEN_CALLS += 1
    raise NotImplementedError("unwritten is not written yet")


def unwritten_calls(x):
    return x * 0 + UNWRITTEN_CALLS
"""


def test_a_stubs_calls_are_not_sent_ahead(pool):
    """Once a function is a stub (stubs.py), the proxy answers its calls itself: a forecast
    of them is not sent, so the worker does not run them for nothing."""
    source, functions = SOURCE + UNWRITTEN, (*FUNCTIONS, "unwritten", "unwritten_calls")
    xs = [torch.full((2,), float(k)) for k in range(5)]

    def calls(student, n: int) -> None:
        for x in xs[:n]:
            with pytest.raises(StudentError, match="unwritten is not written yet"):
                student.unwritten(x)

    sizes = (NOT_IMPLEMENTED_CALLS, len(xs))
    tests = [lambda s, n=n: calls(s, n) for n in sizes]
    plans = recorded_plans(pool, tests, source, functions)
    with open_student(source, functions=functions, pool=pool) as ahead:
        for plan, n in zip(plans, sizes, strict=True):
            ahead.begin_test(plan)
            calls(ahead, n)
            ahead.end_test()
        ran = int(ahead.unwritten_calls(torch.zeros(2))[0])
        assert ran == NOT_IMPLEMENTED_CALLS  # the first test's calls; not the second's
        assert ahead.ahead.sent == NOT_IMPLEMENTED_CALLS
