"""Training the duration predictor on the archive's finished jobs, read by
``storage.queries.finished_jobs`` (what ``semsched train-duration --trace archive`` does)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inference.duration.archive import as_records, train_from_finished
from inference.duration.config import DurationConfig
from scheduling.events import JobLifecycle, JobSubmitted
from storage.client import ArchiveClient
from storage.queries.finished_jobs import finished_jobs
from storage.writer import ArchiveWriter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def _write(client: ArchiveClient, n_apps: int = 0) -> None:
    sub = [
        JobSubmitted(event_id="s-a", event_time=at(0), job_id="A", app="etl", user="u1", cpu_milli=2000,
                     trace_duration_s=123456.0),  # the replay's answer: must never be read
        JobSubmitted(event_id="s-b", event_time=at(1), job_id="B", app="web"),
        JobSubmitted(event_id="s-c", event_time=at(2), job_id="C", app="web"),
    ]
    life = [
        # A: attempt 0 failed after 10 s, attempt 1 ran 40 s
        JobLifecycle(event_id="l1", event_time=at(5), job_id="A", decision_id="d", state="started", attempt=0),
        JobLifecycle(event_id="l2", event_time=at(15), job_id="A", decision_id="d", state="failed", attempt=0),
        JobLifecycle(event_id="l3", event_time=at(20), job_id="A", decision_id="d", state="started", attempt=1),
        JobLifecycle(event_id="l4", event_time=at(60), job_id="A", decision_id="d", state="finished", attempt=1),
        # B still running, C never started
        JobLifecycle(event_id="l5", event_time=at(3), job_id="B", decision_id="d", state="started"),
    ]
    for i in range(n_apps * 10):  # more finished jobs: two apps of very different run times
        app, run = ("short-app", 10.0) if i % 2 else ("long-app", 5000.0)
        t = 100.0 + 10 * i
        sub.append(JobSubmitted(event_id=f"s{i}", event_time=at(t), job_id=f"J{i}", app=app, name=app))
        life += [JobLifecycle(event_id=f"a{i}", event_time=at(t + 1), job_id=f"J{i}", decision_id="d", state="started"),
                 JobLifecycle(event_id=f"b{i}", event_time=at(t + 1 + run), job_id=f"J{i}", decision_id="d", state="finished")]
    w = ArchiveWriter(client)
    for table, events in (("jobs_submitted", sub), ("jobs_lifecycle", life)):
        w.write(table, events, [(0, i) for i in range(len(events))])
        w.write(table, events, [(0, i) for i in range(len(events))])  # redelivered: counts once


def test_finished_runs_become_requests_with_their_submit_time(archive: ArchiveClient) -> None:
    _write(archive)
    [a] = as_records(finished_jobs(archive))
    assert (a.job.job_id, a.duration) == ("A", pytest.approx(40.0))
    assert a.submit == a.job.submit_time == pytest.approx(T0.timestamp())
    assert a.job.trace_duration_s is None  # the replay's answer is not read
    assert (a.job.app, a.job.user, a.job.cpu_milli, a.job.text) == ("etl", "u1", 2000, "etl")


def test_trains_from_the_archive(archive: ArchiveClient) -> None:
    _write(archive, n_apps=4)
    cfg = DurationConfig(encoder="hashed-ngram-32", text_dim=32, hidden=16, epochs=5, version="archive")
    model = train_from_finished(finished_jobs(archive), cfg)
    assert len(model.index) == 41
    from scheduling.job import JobRequest

    short = model.predict(JobRequest(job_id="new1", app="short-app", text="short-app | short-app"))
    long = model.predict(JobRequest(job_id="new2", app="long-app", text="long-app | long-app"))
    assert short is not None and long is not None and long > 10 * short


def test_the_last_job_a_model_read_is_known_at_the_archives_precision() -> None:
    """Found by review: the archive keeps milliseconds (cut off), the worker's live log the microseconds; the
    last job a model trained from the archive read counted as finished after it, and was taught again."""
    from inference.duration.archive import trained_on

    through = 1767225601.999  # what the archive gave back for a finish at ...01.9997
    config = DurationConfig(train_info={"trace": "archive", "finished_through_s": through, "limit": None})
    assert trained_on(config, submit_s=1767225500.0, run_s=60.0, finish_s=1767225601.9997) is True
    assert trained_on(config, submit_s=1767225500.0, run_s=60.0, finish_s=1767225602.0001) is False
    cut = DurationConfig(train_info={"trace": "archive", "finished_through_s": through + 10, "cut_s": through})
    assert trained_on(cut, submit_s=1767225500.0, run_s=60.0, finish_s=1767225601.9997) is False  # at the cut
    assert trained_on(cut, submit_s=1767225500.0, run_s=60.0, finish_s=1767225601.9985) is True
