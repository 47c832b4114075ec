"""The learned policy's model window: a call covers the head of the step's order, and a job
beyond it that reaches scoring opens the next window (inference/policy.py)."""

import asyncio
import dataclasses

import pytest
import torch
from inference_helpers import job, pod_mix, small_snapshot

import inference  # noqa: F401  (registers "learned")
from inference.backends import BackendError
from inference.features.spec import FeatureSpec
from inference.lookahead import Lookahead
from inference.model import ModelConfig, Scorer, load_model, save_model
from inference.model.io import LoadedModel
from inference.policy import LearnedPolicy
from inference.step_windows import WINDOW_ENV, model_window
from scheduling.assign import schedule_step
from scheduling.node import NodeView
from scheduling.orderings.compose import queue_order
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


def untrained(tmp_path, **config) -> LoadedModel:
    torch.manual_seed(3)
    save_model(tmp_path / "m", Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, **config)), "window-v1")
    return load_model(tmp_path / "m")


def small_jobs(n: int) -> list:
    return [job(f"s{i:02d}", cpu=1000, mem=1024, gpus=0, per=0, submit_time=float(i)) for i in range(n)]


def calls(policy: LearnedPolicy) -> list[list[str]]:
    """The job ids of each model call of the step just run, in call order."""
    return [sorted(s.index, key=s.index.get) for s in policy._windows.calls]


def test_a_step_calls_the_model_once_per_window_of_its_order(tmp_path):
    loaded = untrained(tmp_path)
    p = LearnedPolicy(loaded=loaded, window=4)
    jobs = small_jobs(10)
    result = schedule_step(small_snapshot(), jobs, p, now=10.0)
    assert len(result.placements) == 10 and not p.fallback_jobs and not p.last_step.fallback
    ids = [j.job_id for j in jobs]
    assert calls(p) == [ids[0:4], ids[4:8], ids[8:10]] and p.model_calls == 3


def test_a_window_as_long_as_the_queue_decides_as_no_window(tmp_path):
    loaded = untrained(tmp_path)
    jobs = pod_mix(30, seed=2)
    snap = small_snapshot()
    whole = schedule_step(snap, jobs, LearnedPolicy(loaded=loaded, window=0), now=31.0)
    windowed = LearnedPolicy(loaded=loaded, window=30)
    got = schedule_step(snap, jobs, windowed, now=31.0)
    assert windowed.model_calls == 1
    assert [(x.job_id, x.node_index, x.gpu_indices) for x in got.placements] == \
        [(x.job_id, x.node_index, x.gpu_indices) for x in whole.placements]  # fmt: skip


def test_jobs_that_fit_nowhere_are_not_scored_and_the_job_behind_them_is_the_models(tmp_path):
    """A saturated head of the queue: no call covers the jobs the filters turn away; the first
    job that reaches scoring opens the window, and the model (not the fallback) places it."""
    loaded = untrained(tmp_path)
    p = LearnedPolicy(loaded=loaded, window=3)
    huge = [job(f"h{i}", cpu=1000, mem=1024, gpus=16, per=1000, submit_time=float(i)) for i in range(5)]
    small = job("fits", cpu=1000, mem=1024, gpus=1, per=1000, submit_time=9.0)
    result = schedule_step(small_snapshot(), [*huge, small], p, now=10.0)
    assert [x.job_id for x in result.placements] == ["fits"] and len(result.unschedulable) == 5
    assert calls(p) == [["fits"]] and "fits" not in p.fallback_jobs


def nowhere(i: int) -> object:
    """A job no node takes: too many GPUs, or (resources that fit) a GPU model the cluster lacks."""
    if i % 2:
        return job(f"h{i}", cpu=1000, mem=1024, gpus=1, per=1000, gpu_models=frozenset({"H100"}), submit_time=float(i))
    return job(f"h{i}", cpu=1000, mem=1024, gpus=16, per=1000, submit_time=float(i))


def test_the_worker_prepares_the_first_jobs_that_fit_somewhere_not_a_saturated_head(tmp_path):
    """The queue's head fits nowhere: the prepared call covers the jobs behind it, which the step
    places, and no call is made within the step (in the worker's loop a Triton round trip)."""
    loaded = untrained(tmp_path)
    p = LearnedPolicy(loaded=loaded, window=3)
    fits = small_jobs(3)
    queue = [*(nowhere(i) for i in range(5)), *fits]
    snap = small_snapshot()
    status = asyncio.run(p.prepare_step(snap, queue, 10.0))
    assert not status.fallback and p.model_calls == 1
    result = schedule_step(snap, queue, p, now=10.0, in_order=True)
    assert sorted(x.job_id for x in result.placements) == [j.job_id for j in fits] and not p.fallback_jobs
    assert calls(p) == [[j.job_id for j in fits]] and p.model_calls == 1


def test_a_window_opened_in_the_step_skips_the_jobs_that_fit_nowhere(tmp_path):
    loaded = untrained(tmp_path)
    p = LearnedPolicy(loaded=loaded, window=2)
    a, b, c, d = small_jobs(4)
    result = schedule_step(small_snapshot(), [a, b, nowhere(0), c, nowhere(1), d], p, now=10.0)
    assert len(result.placements) == 4 and not p.fallback_jobs
    assert calls(p) == [["s00", "s01"], ["s02", "s03"]]


def test_a_queue_where_nothing_fits_calls_no_model(tmp_path):
    loaded = untrained(tmp_path)
    p = LearnedPolicy(loaded=loaded, window=3)
    queue = [nowhere(i) for i in range(6)]
    snap = small_snapshot()
    status = asyncio.run(p.prepare_step(snap, queue, 10.0))
    result = schedule_step(snap, queue, p, now=10.0, in_order=True)
    assert not result.placements and len(result.unschedulable) == 6
    assert p.model_calls == 0 and not status.fallback and not p.fallback_jobs
    fits = small_jobs(1)  # the next step, with a job that fits: the model decides it
    asyncio.run(p.prepare_step(snap, [*queue, *fits], 11.0))
    result = schedule_step(snap, [*queue, *fits], p, now=11.0, in_order=True)
    assert [x.job_id for x in result.placements] == ["s00"] and p.model_calls == 1 and calls(p) == [["s00"]]


def test_a_window_of_one_job_opened_in_the_step_covers_that_job_alone(tmp_path):
    p = LearnedPolicy(loaded=untrained(tmp_path), window=1)
    schedule_step(small_snapshot(), small_jobs(3), p, now=10.0)
    assert calls(p) == [["s00"], ["s01"], ["s02"]]


def test_a_gang_rolled_back_gives_back_what_fit_nowhere_while_it_was_half_placed(tmp_path):
    """Two 2-GPU nodes. "a" takes a GPU of one; the gang's g1 takes the other node, g2 the last GPU and
    opens a window while "g3" (two GPUs) fits nowhere; g3 fails, the gang is rolled back and the
    2-GPU shape fits again. The window "m" opens covers "k" (that shape): no call just for "k"."""
    nodes = [NodeView(f"n{i}", cpu_milli=32_000, memory_mib=65_536, num_gpu=2, gpu_model="T4") for i in range(2)]
    gang = {"gang_id": "g", "gang_size": 3}
    queue = [job("a", gpus=1, submit_time=0.0), job("g1", gpus=2, submit_time=1.0, **gang),
             job("g2", gpus=1, submit_time=2.0, **gang), job("g3", gpus=2, submit_time=3.0, **gang),
             job("j", gpus=0, per=0, submit_time=4.0), job("m", gpus=0, per=0, submit_time=5.0),
             job("k", gpus=2, submit_time=6.0)]  # fmt: skip
    p = LearnedPolicy(loaded=untrained(tmp_path), window=2)
    result = schedule_step(ClusterSnapshot.from_nodes(nodes), queue, p, now=10.0)
    assert sorted(x.job_id for x in result.placements) == ["a", "j", "k", "m"] and not p.fallback_jobs
    assert calls(p) == [["a", "g1"], ["g2", "j"], ["m", "k"]]


def test_the_cost_of_a_job_placed_from_an_earlier_window_stays_readable(tmp_path):
    loaded = untrained(tmp_path, cost_dim=2, transition=True)
    p = LearnedPolicy(loaded=loaded, window=2)
    jobs = small_jobs(5)
    result = schedule_step(small_snapshot(), jobs, p, now=5.0)
    assert len(calls(p)) == 3
    for pl in result.placements:  # what the worker writes on each decision record
        assert p.predicted_cost(pl.job_id, pl.node_index) is not None, pl.job_id


def test_the_worker_prepares_the_head_of_a_composed_ordering(tmp_path):
    """``queue_order`` gives ``prepare_step`` the ordering's head, so the step's first window
    is the prepared call; FIFO would have prepared the wrong jobs."""
    loaded = untrained(tmp_path)
    p = get_policy("sjf-oracle+learned", loaded=loaded, window=4)
    jobs = [dataclasses.replace(j, trace_duration_s=float(100 - i)) for i, j in enumerate(small_jobs(10))]
    head = queue_order(p, jobs, 0.0)
    assert [j.job_id for j in head] == [j.job_id for j in reversed(jobs)]
    assert p.placement.model_calls == 0 and not p.placement._in_step  # no step started, no call
    snap = small_snapshot()
    asyncio.run(p.prepare_step(snap, head, 0.0))
    prepared = p.placement._prepared
    result = schedule_step(snap, head, p, now=0.0, in_order=True)  # as the worker: ordered once
    assert p.placement._windows.calls[0] is prepared  # the step's first window is the prepared call
    assert sorted(prepared.index, key=prepared.index.get) == result.order[:4] == calls(p.placement)[0]
    assert p.placement.model_calls == 3  # the prepared window, then two opened within the step
    fifo = LearnedPolicy(loaded=loaded, window=4)
    assert [j.job_id for j in queue_order(fifo, jobs, 0.0)] == [j.job_id for j in jobs] and not fifo._in_step


def test_the_window_comes_from_the_environment_and_a_bad_one_says_so(monkeypatch):
    monkeypatch.delenv(WINDOW_ENV, raising=False)
    assert model_window() == 256 and model_window(0) == 0 and model_window(7) == 7
    monkeypatch.setenv(WINDOW_ENV, "64")
    assert model_window() == 64 and model_window(8) == 8
    monkeypatch.setenv(WINDOW_ENV, "many")
    with pytest.raises(ValueError, match=f"{WINDOW_ENV}='many'"):
        model_window()
    with pytest.raises(ValueError, match=">= 0"):
        model_window(-1)
    monkeypatch.setenv(WINDOW_ENV, "-5")
    with pytest.raises(ValueError, match=f"{WINDOW_ENV}='-5': expected >= 0"):
        model_window()


def test_a_job_an_earlier_window_covers_is_scored_from_it_and_its_cost_read_from_the_call_that_scored_it(tmp_path):
    """FIFO puts a gang's second member far down the order; placing the gang opens a window there,
    and the jobs the first window covers are then still scored from it (re-scored where the gang's
    placements moved the nodes), not from a call jumping back."""
    loaded = untrained(tmp_path, cost_dim=2, transition=True)
    p = LearnedPolicy(loaded=loaded, window=4)
    jobs = small_jobs(10)
    gang = [dataclasses.replace(jobs[i], job_id=f"g{i}", gang_id="g", gang_size=2) for i in (1, 8)]
    jobs[1], jobs[8] = gang
    result = schedule_step(small_snapshot(), jobs, p, now=10.0)
    assert len(result.placements) == 10 and not p.fallback_jobs
    ids = [j.job_id for j in jobs]
    # the gang's member at 8 opened the second window; s02, s03 came from the first, s04 opened the third
    assert calls(p) == [ids[0:4], ids[8:10], ids[4:8]]
    for pl in result.placements:
        step = p._windows.scored_by[pl.job_id]
        assert pl.job_id in step.index and p.predicted_cost(pl.job_id, pl.node_index) is not None


def test_a_later_window_that_fails_leaves_the_earlier_jobs_the_models_with_their_cost(tmp_path):
    loaded = untrained(tmp_path, cost_dim=2, transition=True)
    p = LearnedPolicy(loaded=loaded, window=4)
    jobs = small_jobs(8)
    snap = small_snapshot()
    asyncio.run(p.prepare_step(snap, p.queue_order(jobs, 10.0), 10.0))

    def down(inputs):
        raise BackendError("triton policy: DEADLINE_EXCEEDED after 500 ms")

    p.backend.policy = down  # the in-step (synchronous) call of the second window
    result = schedule_step(snap, jobs, p, now=10.0)
    assert len(result.placements) == 8 and p.last_step.fallback and "DEADLINE" in p.last_step.reason
    assert p.fallback_jobs == {j.job_id for j in jobs[4:]}
    for pl in result.placements:
        cost = p.predicted_cost(pl.job_id, pl.node_index)
        assert (cost is None) == (pl.job_id in p.fallback_jobs), pl.job_id


def test_one_model_version_decides_the_whole_step(tmp_path):
    """Only the step's first call looks for a new version: a version published while the step
    runs decides from the next step on, so every record of the step names the one that decided."""
    loaded = untrained(tmp_path)
    p = LearnedPolicy(loaded=loaded, window=2)
    looked = []
    p.backend.refresh = lambda *a, **k: looked.append(1)
    schedule_step(small_snapshot(), small_jobs(6), p, now=10.0)
    assert p.model_calls == 3 and len(looked) == 1


def test_the_lookahead_reads_past_the_end_of_a_window(tmp_path):
    loaded = untrained(tmp_path, cost_dim=2, transition=True)
    jobs = pod_mix(12, seed=2)
    rolled = {}
    for window in (0, 4):
        la = Lookahead(depth=2, per_step=0)
        p = LearnedPolicy(loaded=loaded, window=window, lookahead=la)
        schedule_step(small_snapshot(), jobs, p, now=13.0)
        rolled[window] = (la.stats.decisions, dict(p.decision_notes))
    assert rolled[4][0] == rolled[0][0] > 0
    assert rolled[4][1].keys() == rolled[0][1].keys()


class ServedEncoder:
    """A text encoder the backend embeds for (as MiniLM on Triton): embedding here is a failure."""

    serve_remotely = True
    name, dim = SPEC.encoder, SPEC.text_dim

    def encode(self, texts):
        raise AssertionError(f"{len(texts)} texts embedded in the worker, not by the backend")


def test_a_served_encoder_embeds_the_whole_queue_before_the_step_so_later_windows_embed_nothing_here(tmp_path):
    from inference.encoders import EncoderCache, get_encoder

    p = LearnedPolicy(loaded=untrained(tmp_path), window=4)
    p.caches.encoders[SPEC.encoder] = EncoderCache(ServedEncoder())
    sent: list[str] = []

    async def encode_async(texts):
        sent.extend(texts)
        return get_encoder(SPEC.encoder).encode(texts)

    p.backend.encode_async = encode_async
    p.backend.step_deadline_ms = 30_000.0  # a remote backend's (in-process, the windows embed their own texts)
    jobs = [dataclasses.replace(j, text=f"train model {i}") for i, j in enumerate(small_jobs(10))]
    snap = small_snapshot()
    asyncio.run(p.prepare_step(snap, p.queue_order(jobs, 10.0), 10.0))
    assert len(sent) == 10  # the whole queue's texts, not the window's 4
    result = schedule_step(snap, jobs, p, now=10.0)
    assert len(result.placements) == 10 and p.model_calls == 3 and not p.fallback_jobs


def test_texts_past_the_window_are_embedded_in_what_the_deadline_leaves_and_kept_chunk_by_chunk(tmp_path, monkeypatch):
    """The queue past the window is embedded after the answer, within the step's deadline: a chunk
    that does not come in time fails nothing (the step is the model's), the chunks that came are
    kept, and the windows opened later have only what is still missing embedded, by the server again
    (within what is left of the step's deadline: inference/step_budget.py), none by the worker."""
    from inference import step_call
    from inference.encoders import EncoderCache, get_encoder

    monkeypatch.setattr(step_call, "EMBED_CHUNK", 2)
    local: list[str] = []

    class CountingServed(ServedEncoder):
        def encode(self, texts):
            local.extend(texts)
            return get_encoder(SPEC.encoder).encode(texts)

    p = LearnedPolicy(loaded=untrained(tmp_path), window=4)
    p.caches.encoders[SPEC.encoder] = encoder = EncoderCache(CountingServed())
    p.backend.step_deadline_ms = 1500.0
    sent: list[list[str]] = []

    async def encode_async(texts):
        sent.append(list(texts))
        if len(sent) == 4:  # the second chunk past the window never comes in time
            await asyncio.sleep(30)
        return get_encoder(SPEC.encoder).encode(texts)

    p.backend.encode_async = encode_async
    blocking: list[list[str]] = []

    def encode(texts, deadline_ms=None):
        blocking.append(list(texts))
        assert deadline_ms is not None and deadline_ms <= 1500.0
        return get_encoder(SPEC.encoder).encode(texts)

    p.backend.encode = encode
    jobs = [dataclasses.replace(j, text=f"train model {i}") for i, j in enumerate(small_jobs(10))]
    snap = small_snapshot()
    status = asyncio.run(p.prepare_step(snap, p.queue_order(jobs, 10.0), 10.0))
    assert not status.fallback  # the window's texts (two chunks) and the answer came in time
    held = [t for t in (encoder._clean(j.text) for j in jobs) if not encoder.missing([t])]
    assert len(sent) == 4 and held == [encoder._clean(j.text) for j in jobs[:6]]
    result = schedule_step(snap, jobs, p, now=10.0)
    assert len(result.placements) == 10 and not p.fallback_jobs
    assert sorted(sum(blocking, [])) == sorted(encoder._clean(j.text) for j in jobs[6:])  # only the missing ones
    assert not local  # (the worker's own MiniLM is never loaded)


class Relabelled:
    """The in-process backend with its answers labelled as a server that swaps in a new version
    between two calls labels them: served-v1, then served-v2."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.loaded, self.calls = inner, "triton", inner.loaded, 0

    def refresh(self, force: bool = False) -> bool:
        return False

    def policy(self, inputs):
        self.calls += 1
        return self.inner.policy(inputs) | {"version": f"served-v{self.calls}"}


def test_each_decision_record_names_the_version_whose_call_scored_its_job(tmp_path):
    """Found by review: every record of a step took ``last_step``'s version, the last window's, so
    the jobs an earlier window scored named a version that never saw them (or, after a later window
    failed, the local one)."""
    from streams.decision_records import StepModel, placed_record
    from streams.state import PendingJob

    p = LearnedPolicy(loaded=untrained(tmp_path), window=2)
    p.backend = Relabelled(p.backend)
    jobs = small_jobs(4)
    result = schedule_step(small_snapshot(), jobs, p, now=10.0)
    assert len(result.placements) == 4 and len(calls(p)) == 2 and p.last_step.version == "served-v2"
    model = StepModel.of(p)
    versions = {}
    for pl in result.placements:
        pending = PendingJob(job=pl_event(pl.job_id), submit_ts=0.0, queued_ts=0.0)
        rec = placed_record(pending, pl, cluster="default", policy="learned", step_id="s", compute_ms=1.0,
                            model=model, durations={})  # fmt: skip
        versions[pl.job_id] = rec.model_version
    first, second = calls(p)
    assert versions == {**dict.fromkeys(first, "served-v1"), **dict.fromkeys(second, "served-v2")}
    # this worker holds neither version, so it cannot re-score the nodes the window's first placement
    # moved: the second job of each window is decided on its call's scores, and its record says so
    skipped = {first[1], second[1]}
    assert set(p.decision_notes) == skipped
    assert all(n.startswith("in-step re-scoring skipped: local model window-v1 != served-v") for n in p.decision_notes.values())


def pl_event(job_id: str):
    from datetime import UTC, datetime

    from scheduling.events import JobSubmitted

    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=datetime(2026, 3, 1, tzinfo=UTC),
                        cluster="default", cpu_milli=1000, memory_mib=1024, num_gpu=0, gpu_milli=0)  # fmt: skip


class RefusesText:
    """The spec's hashed encoder, refusing any text that says "bad" (as an encoder can fail on one text)."""

    serve_remotely = False

    def __init__(self, name: str) -> None:
        from inference.encoders import get_encoder

        self.inner = get_encoder(name)
        self.name, self.dim = self.inner.name, self.inner.dim

    def encode(self, texts):
        if any("bad" in t for t in texts):
            raise RuntimeError("the encoder failed on one text")
        return self.inner.encode(texts)


def refusing(policy: LearnedPolicy) -> LearnedPolicy:
    from inference.encoders import EncoderCache

    policy.caches.encoders[policy.spec.encoder] = EncoderCache(RefusesText(policy.spec.encoder))
    return policy


def test_a_later_window_whose_inputs_fail_hands_the_rest_of_the_step_to_the_fallback(tmp_path):
    """Found by review: only the backend's failure (BackendError) was caught in a window opened within
    the step; building its inputs raised out of ``schedule_step``, so the worker's whole tick failed, and
    again at every tick while that job was queued. ``prepare_step`` already fell back for the same failure."""
    p = refusing(LearnedPolicy(loaded=untrained(tmp_path), window=2, fallback="best-fit"))
    jobs = [dataclasses.replace(j, text="bad pod" if j.job_id == "s03" else "a pod") for j in small_jobs(4)]
    snap = small_snapshot()
    assert not asyncio.run(p.prepare_step(snap, p.queue_order(jobs, 10.0), 10.0)).fallback  # s00, s01: fine
    result = schedule_step(snap, jobs, p, now=10.0, in_order=True)
    assert len(result.placements) == 4
    assert p.fallback_jobs == {"s02", "s03"}  # the window that failed: decided by the fallback, and said so
    assert p.last_step.fallback and "the encoder failed on one text" in p.last_step.reason


def test_a_lookahead_whose_later_job_fails_to_encode_leaves_the_plain_scores_to_decide(tmp_path):
    """The lookahead reads the feature rows of later jobs past the call's window; one that fails to encode
    raised out of ``schedule_step`` (found by review). The job's own scores now decide, and the failure is counted."""
    loaded = untrained(tmp_path, cost_dim=2, transition=True)
    la = Lookahead(depth=2, per_step=0)
    p = refusing(LearnedPolicy(loaded=loaded, window=1, lookahead=la))
    jobs = [dataclasses.replace(j, text="bad pod" if j.job_id == "s02" else "a pod") for j in small_jobs(3)]
    result = schedule_step(small_snapshot(), jobs, p, now=10.0)
    assert [x.job_id for x in result.placements[:2]] == ["s00", "s01"] and la.stats.errors >= 1
    assert {"s00", "s01"}.isdisjoint(p.fallback_jobs)  # the model decided them, without the lookahead's say
