"""A model server that keeps failing is left alone for a growing while (inference/server_backoff.py): with it
hung, every step of every cluster waited out the whole deadline before the fallback decided (found by review)."""

import asyncio

from inference_helpers import pod_mix, small_snapshot
from test_inference_policy import FailingBackend, untrained

from inference.backends import BackendError
from inference.policy import LearnedPolicy
from inference.server_backoff import BACKOFF_AFTER, BACKOFF_MAX_S, ServerBackoff


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_wait_grows_after_failures_in_a_row_and_an_answer_ends_it() -> None:
    clock = Clock()
    b = ServerBackoff(clock=clock)
    for _ in range(BACKOFF_AFTER - 1):
        b.failed("DEADLINE_EXCEEDED")
        assert b.holding() is None  # a failure or two: the next step asks again
    waits = []
    for _ in range(8):
        b.failed("DEADLINE_EXCEEDED")
        waits.append(b.until - clock.t)
        assert "DEADLINE_EXCEEDED" in (b.holding() or "")
    assert waits[:3] == [1.0, 2.0, 4.0] and waits[-1] == BACKOFF_MAX_S
    clock.t = b.until  # the wait is over: one step asks
    assert b.holding() is None
    b.answered()
    b.failed("x")
    assert b.holding() is None and b.failures == 1


class CountingFailingBackend(FailingBackend):
    """A remote backend (it has a step deadline) that fails every call, counting them."""

    step_deadline_ms = 30_000.0  # (an answer in time, whatever the machine)

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        super().__init__(inner)
        self.calls = 0
        self.failing = True

    async def policy_async(self, inputs):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.failing:
            raise BackendError("triton: DEADLINE_EXCEEDED after 50 ms")
        return await self.inner.policy_async(inputs)


def test_a_policy_stops_asking_a_failing_server_then_asks_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    p = LearnedPolicy(loaded=untrained(tmp_path), fallback="best-fit")
    backend = p.backend = CountingFailingBackend(p.backend)
    p.backoff = ServerBackoff(clock=clock)
    snap, jobs = small_snapshot(), pod_mix(12)

    def step() -> str:
        status = asyncio.run(p.prepare_step(snap, jobs, clock.t))
        return status.reason if status.fallback else ""

    reasons = [step() for _ in range(BACKOFF_AFTER + 3)]
    assert backend.calls == BACKOFF_AFTER  # the steps after the third failure did not ask
    assert all("DEADLINE_EXCEEDED" in r for r in reasons)
    assert "not asked again" in reasons[-1]
    clock.t += 1.0  # the first wait is over: one step asks, and the server answers
    backend.failing = False
    assert step() == "" and backend.calls == BACKOFF_AFTER + 1
    assert step() == "" and backend.calls == BACKOFF_AFTER + 2  # and every step again


def test_inputs_this_worker_could_not_build_do_not_count_against_the_server(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import inference.step_call

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise ValueError("a text the encoder refuses")

    p = LearnedPolicy(loaded=untrained(tmp_path), fallback="best-fit")
    p.backend = CountingFailingBackend(p.backend)
    monkeypatch.setattr(inference.step_call, "build_inputs", refuse)
    for _ in range(BACKOFF_AFTER + 1):
        assert asyncio.run(p.prepare_step(small_snapshot(), pod_mix(12), 1.0)).fallback
    assert p.backoff.failures == 0
