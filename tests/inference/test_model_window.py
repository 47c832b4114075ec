"""The learned policy's model window: a call covers the head of the step's order, and a job
beyond it that reaches scoring opens the next window (inference/policy.py)."""

import asyncio
import dataclasses

import pytest
import torch
from inference_helpers import job, pod_mix, small_snapshot

import inference  # noqa: F401  (registers "learned")
from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, load_model, save_model
from inference.model.io import LoadedModel
from inference.policy import WINDOW_ENV, LearnedPolicy, model_window
from scheduling.assign import schedule_step
from scheduling.orderings.compose import queue_order
from scheduling.policies import get_policy

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


def untrained(tmp_path, **config) -> LoadedModel:
    torch.manual_seed(3)
    save_model(tmp_path / "m", Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, **config)), "window-v1")
    return load_model(tmp_path / "m")


def small_jobs(n: int) -> list:
    return [job(f"s{i:02d}", cpu=1000, mem=1024, gpus=0, per=0, submit_time=float(i)) for i in range(n)]


def calls(policy: LearnedPolicy) -> list[list[str]]:
    """The job ids of each model call of the step just run, in call order."""
    steps = [*policy._earlier, policy._step]
    return [sorted(s.index, key=s.index.get) for s in steps if s is not None]


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
    result = schedule_step(snap, jobs, p, now=0.0)
    assert p.placement._earlier[0] is prepared  # the step's first window is the prepared call
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
