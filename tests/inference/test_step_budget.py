"""The windows a step opens on a remote backend share what is left of its step deadline
(inference/step_budget.py): each was a blocking call of up to its own deadline, on the worker's event
loop, and with MiniLM each embedded its new texts with a local encoder (found by review)."""

import asyncio
import math

import torch
from inference_helpers import job, small_snapshot
from test_inference_policy import untrained

from inference.backends import BackendError
from inference.encoders.cache import EncoderCache
from inference.features.spec import FeatureSpec
from inference.lookahead import Lookahead
from inference.model import ModelConfig, Scorer, load_model, save_model
from inference.policy import LearnedPolicy
from inference.step_budget import StepBudget
from scheduling.assign import schedule_step

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


class Clock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


class SlowServer:
    """A remote backend (it has a step deadline) over the in-process one: each blocking call takes
    ``latency_ms`` on ``clock``, or fails at its deadline when that is shorter, as Triton's does."""

    name, computes_pairs, step_deadline_ms = "triton", False, 300.0

    def __init__(self, inner, clock: Clock, latency_ms: float, encode_ms: float = 0.0) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.loaded, self.clock, self.latency_ms = inner, inner.loaded, clock, latency_ms
        self.encode_ms = encode_ms
        self.deadlines: list[float | None] = []
        self.encoded: list[tuple[list[str], float | None]] = []

    def refresh(self, force: bool = False) -> bool:
        return False

    def _take(self, deadline_ms: float | None) -> None:
        if deadline_ms is not None and deadline_ms < self.latency_ms - 1e-6:  # (a float clock)
            self.clock.t += deadline_ms / 1000.0
            raise BackendError(f"triton policy: DEADLINE_EXCEEDED after {deadline_ms:g} ms")
        self.clock.t += self.latency_ms / 1000.0

    async def policy_async(self, inputs):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.05)  # (the first window's: awaited, the loop keeps serving; 50 ms of the real clock)
        return await self.inner.policy_async(inputs)

    def policy(self, inputs, deadline_ms=None):  # type: ignore[no-untyped-def]
        self.deadlines.append(deadline_ms)
        self._take(deadline_ms)
        return self.inner.policy(inputs)

    async def encode_async(self, texts):  # type: ignore[no-untyped-def]
        return await self.inner.encode_async(texts)

    def encode(self, texts, deadline_ms=None):  # type: ignore[no-untyped-def]
        self.encoded.append((list(texts), deadline_ms))
        self.clock.t += self.encode_ms / 1000.0
        return self.inner.encode(texts)


def small_jobs(n: int) -> list:
    return [job(f"s{i:02d}", cpu=1000, mem=1024, gpus=0, per=0, submit_time=float(i), text=f"job {i} | etl")
            for i in range(n)]  # fmt: skip


def run_step(tmp_path, latency_ms: float, jobs: int = 10, prepared: int | None = None, encode_ms: float = 0.0,
             step_deadline_ms: float | None = 300.0, lookahead: Lookahead | None = None):  # type: ignore[no-untyped-def]  # fmt: skip
    """A step of ``jobs`` in windows of 2, its first window prepared; returns (policy, server, result)."""
    clock = Clock()
    loaded = untrained(tmp_path) if lookahead is None else looking_ahead(tmp_path)
    p = LearnedPolicy(loaded=loaded, fallback="best-fit", window=2, lookahead=lookahead)
    server = p.backend = SlowServer(p.backend, clock, latency_ms, encode_ms)
    server.step_deadline_ms = step_deadline_ms
    snap, queue = small_snapshot(), small_jobs(jobs)
    asyncio.run(p.prepare_step(snap, queue[:prepared] if prepared else queue, 10.0))
    assert isinstance(p._budget, StepBudget) and p._budget.budget_ms == (step_deadline_ms or math.inf)
    assert p._budget.spent_ms >= 50.0  # the first window's call is charged
    p._budget.clock, p._budget.spent_ms = clock, 0.0  # (the rest on the test's clock)
    return p, server, schedule_step(snap, queue, p, now=10.0, in_order=True)


def looking_ahead(tmp_path):  # type: ignore[no-untyped-def]
    """A model with ψ and T (what the lookahead rolls)."""
    torch.manual_seed(0)
    config = ModelConfig(spec=SPEC, hidden=8, depth=2, head_rank=2, cost_dim=1, transition=True)
    return load_model(save_model(tmp_path / "look", Scorer(config), "look-v1"))


def test_the_windows_a_step_opens_are_given_what_is_left_and_the_fallback_the_rest(tmp_path) -> None:
    p, server, result = run_step(tmp_path, latency_ms=120.0)
    # 300 ms in all: the 2nd window gets 300 and takes 120, the 3rd 180 and takes 120, the 4th 60, misses
    assert [round(d) for d in server.deadlines] == [300, 180, 60]
    assert len(result.placements) == 10  # nothing lost: the fallback placed the rest
    assert p.fallback_jobs == {f"s{i:02d}" for i in range(6, 10)}  # the 4th window's jobs and the 5th's
    assert p.last_step.fallback and "DEADLINE_EXCEEDED after 60 ms" in p.last_step.reason
    assert p.backoff.failures == 0  # (a window's 60 ms is not the server's fault: the next step's call tells)


def test_once_the_step_deadline_is_spent_no_window_calls_and_the_records_say_why(tmp_path) -> None:
    p, server, result = run_step(tmp_path, latency_ms=150.0)
    assert [round(d) for d in server.deadlines] == [300, 150]  # the 3rd call ends on the deadline: answered
    assert len(result.placements) == 10 and p.fallback_jobs == {f"s{i:02d}" for i in range(6, 10)}
    assert "took its whole 300 ms step deadline (SEMSCHED_TRITON_STEP_DEADLINE_MS) in 3 window(s)" in p.last_step.reason
    assert p.backoff.failures == 0  # the server answered every call it was given


def test_a_window_the_step_opens_has_its_new_texts_embedded_by_the_server_within_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(EncoderCache, "serve_remotely", property(lambda self: True))  # as MiniLM's
    p, server, result = run_step(tmp_path, latency_ms=10.0, jobs=6, prepared=2)  # nothing embedded ahead
    assert [len(texts) for texts, _ in server.encoded] == [2, 2]  # each later window's two new texts
    assert [round(d) for _, d in server.encoded] == [300, 290]  # within what is left of the step's deadline
    assert p.encoder().misses == 0  # none embedded by the local encoder (MiniLM, loaded on the event loop)
    assert len(result.placements) == 6 and not p.fallback_jobs


def test_a_window_whose_texts_took_what_was_left_makes_no_call(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(EncoderCache, "serve_remotely", property(lambda self: True))
    p, server, result = run_step(tmp_path, latency_ms=10.0, jobs=6, prepared=2, encode_ms=300.0)
    assert len(server.encoded) == 1 and server.deadlines == []  # no policy call with nothing left to answer in
    assert "took its whole 300 ms step deadline" in p.last_step.reason and p.backoff.failures == 0
    assert len(result.placements) == 6 and p.fallback_jobs == {"s02", "s03", "s04", "s05"}


def test_without_a_step_deadline_a_window_is_bounded_by_its_call_and_its_texts_go_to_the_server(tmp_path, monkeypatch):
    monkeypatch.setattr(EncoderCache, "serve_remotely", property(lambda self: True))
    p, server, result = run_step(tmp_path, latency_ms=10.0, jobs=6, prepared=2, step_deadline_ms=None)
    assert server.deadlines == [math.inf, math.inf]  # (the backend's own call deadline applies)
    assert [len(texts) for texts, _ in server.encoded] == [2, 2] and p.encoder().misses == 0
    assert len(result.placements) == 6 and not p.fallback_jobs


def test_the_lookahead_rolls_no_job_whose_text_the_server_has_not_embedded(tmp_path, monkeypatch):
    """Found by review: on a remote served encoder, the rollouts' later jobs past the window had their
    texts embedded by a local encoder (MiniLM, on the event loop), outside the step's deadline."""
    monkeypatch.setattr(EncoderCache, "serve_remotely", property(lambda self: True))
    p, server, result = run_step(tmp_path, latency_ms=10.0, jobs=6, prepared=2, lookahead=Lookahead(depth=2, width=2))
    assert p.encoder().misses == 0 and len(result.placements) == 6 and not p.fallback_jobs
    assert p.lookahead.stats.rollouts > 0  # (it looked ahead, over the jobs it could)


def test_in_process_the_windows_have_no_budget(tmp_path) -> None:
    p = LearnedPolicy(loaded=untrained(tmp_path), fallback="best-fit", window=2)
    snap, queue = small_snapshot(), small_jobs(10)
    asyncio.run(p.prepare_step(snap, queue, 10.0))
    assert p._budget is None
    result = schedule_step(snap, queue, p, now=10.0, in_order=True)
    assert len(result.placements) == 10 and not p.fallback_jobs and p.model_calls == 5
