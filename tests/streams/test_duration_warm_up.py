"""The worker's duration estimate warmed from the archive at start (``streams/duration_warm_up.py``),
on a real chdb archive filled through the archive's write path."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inference.duration.config import DurationConfig
from inference.duration.predictor import LearnedDurationPredictor
from scheduling.duration_estimate import HistoryDurationPredictor
from scheduling.events import JobLifecycle, JobSubmitted
from scheduling.job import JobRequest
from storage.client import ArchiveClient, close_client, get_client
from storage.migrate import migrate
from storage.writer import ArchiveWriter
from streams.duration_warm_up import warm_up_durations

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[ArchiveClient]:
    """Jobs j0..j5 of app "etl", submitted 10 s apart, each started 1 s later and run 100·(i+1) s;
    a job k that never finished."""
    dsn = f"chdb://{tmp_path / 'chdb'}"
    client = get_client(dsn)
    migrate(client)
    subs, life = [], []
    for i in range(6):
        j = f"j{i}"
        start = T0 + timedelta(seconds=10 * i + 1)
        subs.append(JobSubmitted(event_id=f"s-{j}", event_time=T0 + timedelta(seconds=10 * i), job_id=j, app="etl"))
        life += [JobLifecycle(event_id=f"l-{j}-{s}", event_time=t, job_id=j, decision_id=f"d-{j}", state=s,
                              node_id="n1")
                 for s, t in (("started", start), ("finished", start + timedelta(seconds=100 * (i + 1))))]  # fmt: skip
    subs.append(JobSubmitted(event_id="s-k", event_time=T0, job_id="k", app="etl"))
    life.append(JobLifecycle(event_id="l-k", event_time=T0, job_id="k", decision_id="d-k", state="started",
                             node_id="n1"))  # fmt: skip
    w = ArchiveWriter(client)
    w.write("jobs_submitted", subs, [(0, i) for i in range(len(subs))])
    w.write("jobs_lifecycle", life, [(0, i) for i in range(len(life))])
    yield client
    close_client(dsn)


def _etl() -> JobRequest:
    return JobRequest.from_event(JobSubmitted(job_id="new", app="etl"))


def test_the_history_learns_the_latest_finished_jobs(archive: ArchiveClient) -> None:
    history = HistoryDurationPredictor()
    assert history.predict(_etl()) is None  # cold, as after a restart before
    done = warm_up_durations(history, archive, latest=4)
    # the 4 that finished last (j2..j5: 300..600 s), not the first 4 submitted
    assert (done.observed, done.skipped, done.job_ids) == (4, 0, {("default", f"j{i}") for i in (2, 3, 4, 5)})
    assert history.predict(_etl()) == pytest.approx(450.0)  # their median
    assert "4 finished job(s)" in done.note


def test_off_at_zero(archive: ArchiveClient) -> None:
    history = HistoryDurationPredictor()
    done = warm_up_durations(history, archive, latest=0)
    assert done.observed == 0 and history.predict(_etl()) is None and "off" in done.note


def _learned(**train_info: object) -> LearnedDurationPredictor:
    return LearnedDurationPredictor(DurationConfig(version="d1", mode="retrieval", train_info=dict(train_info)))


def _at(s: float) -> float:
    return (T0 + timedelta(seconds=s)).timestamp()


def test_a_model_trained_on_the_archive_skips_the_jobs_in_its_index(archive: ArchiveClient) -> None:
    """Trained when j0..j3 had finished (the latest at 431 s) at a cut of 400 s: it learned j0..j2 (each
    submitted before the cut and ended by it by submission + run time); j3 ended past the cut, j4 and
    j5 finished after it read the archive. The warm-up adds exactly those three, and remembers all six."""
    model = _learned(trace="archive", cut_s=_at(400), finished_through_s=_at(431), limit=None)
    done = warm_up_durations(model, archive, latest=100)
    assert (done.observed, done.skipped, len(model.index)) == (3, 3, 3) and "3 skipped" in done.note
    assert done.job_ids == {("default", f"j{i}") for i in range(6)}  # a skipped job's finish, read again, is not taught either
    # a model trained on a trace file holds none of the archive's jobs
    other = _learned(trace="openb", cut_s=_at(400))
    assert warm_up_durations(other, archive, latest=100).observed == 6 and len(other.index) == 6


def test_a_model_trained_on_every_job_it_read_skips_those_only(archive: ArchiveClient) -> None:
    """--train-fraction 1, trained when j0..j2 had finished (the latest at 321 s): j3..j5 were submitted
    before that but ran on past it, so it never saw them (the long ones: skipping them would bias an SJF
    index short). A job finished exactly at the latest finish it read is one it saw."""
    model = _learned(trace="archive", cut_s=None, finished_through_s=_at(321))
    done = warm_up_durations(model, archive, latest=100)
    assert (done.observed, done.skipped) == (3, 3) and len(model.index) == 3
    assert model.predict(_etl()) >= 400.0  # it retrieves the long runs it learned now


@pytest.mark.parametrize("info", [{"cut_s": None}, {"cut_s": None, "finished_through_s": 1e12, "limit": 50}])
def test_a_model_that_cannot_say_what_it_holds_is_not_warmed(archive: ArchiveClient, info: dict) -> None:
    """Trained before it recorded the latest finish it read, or on a --limit subset: not warmed, and says why."""
    old = _learned(trace="archive", **info)
    done = warm_up_durations(old, archive, latest=100)
    assert done.observed == 0 and len(old.index) == 0 and "not warmed" in done.note and done.job_ids == set()


def test_the_worker_warms_its_estimate_at_start_and_a_failed_read_does_not_stop_it(
        archive: ArchiveClient, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """What ``streams.worker`` does after migrating the archive: the worker's own estimate (the one its
    agents teach) learns, and remembers which jobs; an archive it cannot read only costs a warning."""
    from streams.app import create_app
    from streams.settings import Settings
    from streams.worker import _attach_archiver, _warm_up_durations

    # the worker's embedded archive is the one the fixture filled (<state dir>/chdb)
    w = create_app(Settings(bootstrap="127.0.0.1:1", topic_prefix="warm.", web_port=0, state_dir=tmp_path,
                            duration_warm_up=2))  # fmt: skip
    _attach_archiver(w)
    assert w.durations_warmed == {("default", "j4"), ("default", "j5")} and w.durations.predict(_etl()) == pytest.approx(550.0)
    assert "2 finished job(s) from the archive in" in caplog.text

    class Unreadable:
        def query_rows(self, *_: object) -> None:
            raise RuntimeError("the archive is gone")

    fresh = create_app(Settings(bootstrap="127.0.0.1:1", topic_prefix="warm2.", web_port=0, state_dir=tmp_path))
    _warm_up_durations(fresh, Unreadable())
    assert fresh.durations_warmed == set() and fresh.durations.predict(_etl()) is None
    assert "not warmed from the archive: RuntimeError: the archive is gone" in caplog.text
