"""A new duration model version is picked up without restarting the worker (streams/duration_reload.py):
``models/duration/latest`` repointed, the next check loads the version, teaches it what the worker
learned since its start, and swaps it in for the ordering and the worker's estimate."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import streams.duration_reload as reload_module
from inference.duration.config import DurationConfig
from inference.duration.io import point_latest, save_predictor
from inference.duration.ordering import MODEL_DIR_ENV
from inference.duration.predictor import LearnedDurationPredictor
from scheduling.events import JobSubmitted
from scheduling.job import JobRequest
from streams.web import status
from tests.streams.loop_helpers import stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _job(app: str, i: int = 0) -> JobRequest:
    return JobRequest(job_id=f"{app}-{i}", app=app, text=app, cpu_milli=1000, submit_time=0.0)


def _submitted(app: str, i: int) -> JobSubmitted:
    return JobSubmitted(job_id=f"{app}-{i}", event_id=f"ev-{app}-{i}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, app=app)  # fmt: skip


def _publish(root: Path, version: str, seconds: dict[str, float]) -> Path:
    """A duration model that knows each app's run time, saved as ``root/version`` and made latest."""
    p = LearnedDurationPredictor(DurationConfig(version=version, encoder="hashed-ngram-32", text_dim=32,
                                                mode="retrieval", k=1))  # fmt: skip
    p.observe_many([_job(app) for app in seconds], list(seconds.values()))
    save_predictor(root / version, p)
    point_latest(root, version)
    return root / version


def _order(w: object) -> list[str]:
    ordering = w.loop.policy.ordering  # type: ignore[attr-defined]
    return [j.app for j in ordering.order([_job("etl", 1), _job("tests", 1)], 1.0, None)]


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "duration"
    root.mkdir()
    monkeypatch.setenv(MODEL_DIR_ENV, str(root / "latest"))
    return root


def test_a_new_version_is_taught_what_the_worker_learned_and_swapped_in(models: Path) -> None:
    _publish(models, "v1", {"etl": 20_000.0, "tests": 30.0})
    w, _ = stood_in_worker(policy="sjf-learned+best-fit")
    reload = w.duration_reload  # type: ignore[attr-defined]
    assert "duration_model_watch" in [t.__name__ for t in w.app._app_tasks]  # the timer that calls check()
    assert w.durations is w.loop.policy.ordering.predictor and reload.version == "v1"  # type: ignore[attr-defined]
    assert _order(w) == ["tests", "etl"]
    w.observe_finished(_submitted("web", 0), 50.0, (T0 + timedelta(seconds=60)).timestamp())  # seen finishing
    assert asyncio.run(reload.check()) is False  # latest has not moved

    v2 = _publish(models, "v2", {"etl": 10.0, "tests": 40_000.0})
    assert asyncio.run(reload.check()) is True
    ordering = w.loop.policy.ordering  # type: ignore[attr-defined]
    assert reload.version == "v2" and ordering.model_path == v2.resolve() and reload.swaps == 1
    assert w.durations is ordering.predictor  # the worker feeds (and its decision records read) the new one
    assert len(ordering.predictor.index) == 3  # its two jobs, and the one the worker saw finish
    assert ordering.predictor.predict(_job("web", 9)) == pytest.approx(50.0)
    assert _order(w) == ["etl", "tests"]  # the old version's answers are not reused
    shown = status(w)["duration_model"]  # the worker's /status
    assert shown["version"] == "v2" and shown["swaps"] == 1 and shown["error"] is None
    assert shown["taught"].startswith("1 finished job(s) the worker had learned")
    assert asyncio.run(reload.check()) is False


def test_jobs_that_finish_while_it_loads_are_taught_too(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _publish(models, "v1", {"etl": 20_000.0})
    w, _ = stood_in_worker(policy="sjf-learned+best-fit")
    real = reload_module._load_and_teach

    def slow_load(path: Path, rows: list) -> tuple:
        out = real(path, rows)
        w.observe_finished(_submitted("web", 1), 70.0, T0.timestamp() + 90)  # on the loop, while this one loads
        return out

    monkeypatch.setattr(reload_module, "_load_and_teach", slow_load)
    _publish(models, "v2", {"etl": 10.0})
    assert asyncio.run(w.duration_reload.check()) is True  # type: ignore[attr-defined]
    assert w.durations.predict(_job("web", 9)) == pytest.approx(70.0)
    assert len(w.durations.index) == 2  # type: ignore[attr-defined]


def test_a_broken_version_is_reported_once_and_the_current_one_keeps_ordering(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish(models, "v1", {"etl": 20_000.0, "tests": 30.0})
    w, _ = stood_in_worker(policy="sjf-learned+best-fit")
    reload = w.duration_reload  # type: ignore[attr-defined]
    broken = models / "v2"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    point_latest(models, "v2")
    assert asyncio.run(reload.check()) is False
    assert reload.version == "v1" and "v2" in reload.error and _order(w) == ["tests", "etl"]
    loads: list[Path] = []
    monkeypatch.setattr(reload_module, "_load_and_teach", lambda path, rows: loads.append(path))
    assert asyncio.run(reload.check()) is False and loads == []  # not loaded again until its files change
    monkeypatch.undo()
    monkeypatch.setenv(MODEL_DIR_ENV, str(models / "latest"))
    _publish(models, "v2", {"etl": 10.0, "tests": 40_000.0})  # written again, whole
    assert asyncio.run(reload.check()) is True and reload.error is None and _order(w) == ["etl", "tests"]


def test_an_ordering_that_started_without_a_model_takes_the_first_published(models: Path) -> None:
    w, _ = stood_in_worker(policy="sjf-learned+best-fit")
    ordering = w.loop.policy.ordering  # type: ignore[attr-defined]
    assert ordering.fell_back
    w.observe_finished(_submitted("web", 0), 50.0, T0.timestamp() + 60)  # taught to the history meanwhile
    assert asyncio.run(w.duration_reload.check()) is False  # type: ignore[attr-defined]  # nothing published
    _publish(models, "v1", {"etl": 10.0, "tests": 40_000.0})
    assert asyncio.run(w.duration_reload.check()) is True  # type: ignore[attr-defined]
    assert not ordering.fell_back and w.durations is ordering.predictor and len(ordering.predictor.index) == 3
    assert _order(w) == ["etl", "tests"]


def test_a_policy_without_a_duration_model_has_no_watch() -> None:
    w, _ = stood_in_worker(policy="sjf-predicted+best-fit")
    assert getattr(w, "duration_reload", None) is None


def test_without_the_archive_warm_up_a_new_version_is_still_taught_what_finished(models: Path) -> None:
    """Found by review: the log was sized by SEMSCHED_DURATION_WARM_UP, so 0 kept nothing to teach."""
    _publish(models, "v1", {"etl": 20_000.0})
    w, _ = stood_in_worker(policy="sjf-learned+best-fit", duration_warm_up=0)
    w.observe_finished(_submitted("web", 0), 50.0, T0.timestamp() + 60)
    _publish(models, "v2", {"etl": 10.0})
    assert asyncio.run(w.duration_reload.check()) is True  # type: ignore[attr-defined]
    assert w.durations.predict(_job("web", 9)) == pytest.approx(50.0)


def test_other_policies_keep_no_log_of_finished_jobs() -> None:
    """(~2.5 KB a job, found by review: every worker kept 20,000.)"""
    w, _ = stood_in_worker(policy="fifo+best-fit")
    w.observe_finished(_submitted("web", 0), 50.0, T0.timestamp() + 60)
    assert len(w.finished_log) == 0


def test_pointing_latest_back_after_a_refused_version_clears_the_error(models: Path) -> None:
    _publish(models, "v1", {"etl": 20_000.0})
    w, _ = stood_in_worker(policy="sjf-learned+best-fit")
    reload = w.duration_reload  # type: ignore[attr-defined]
    (models / "v2").mkdir()
    (models / "v2" / "config.json").write_text("{not json")
    point_latest(models, "v2")
    assert asyncio.run(reload.check()) is False and reload.error is not None
    point_latest(models, "v1")
    assert asyncio.run(reload.check()) is False and reload.error is None


def test_a_reload_leaves_torch_threads_alone(tmp_path: Path) -> None:
    """A reload runs mid-run, beside the placement model's thread: load_predictor's default (1 intra-op thread,
    process-wide, for the small MLP at start) must not be applied then (found by review; no test until now)."""
    import torch

    from inference.duration.io import load_predictor
    from inference.duration.train import train_predictor

    jobs = [_job(app, i) for i in range(20) for app in ("etl", "tests")]
    config = DurationConfig(version="r1", encoder="hashed-ngram-16", text_dim=16, hidden=8, epochs=2)
    path = save_predictor(tmp_path / "r1", train_predictor(jobs, [3600.0 if j.app == "etl" else 30.0 for j in jobs],
                                                            config, tune=False))  # fmt: skip
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        predictor, _ = reload_module._load_and_teach(path, [])
        assert predictor.regressor is not None and torch.get_num_threads() == 2
        load_predictor(path)  # (at a start: the default does set it, so the assertion above can fail)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
