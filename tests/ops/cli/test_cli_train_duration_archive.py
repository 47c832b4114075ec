"""`semsched train-duration --trace archive` (ops/cli/train_duration.py): the archive's finished
jobs (storage/queries/finished_jobs.py) train the duration predictor, on a real chdb archive
filled through the archive's write path."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from inference.duration.io import load_predictor
from ops.cli.train_duration import train_duration
from scheduling.events import JobLifecycle, JobSubmitted
from storage.client import close_client, get_client
from storage.migrate import migrate
from storage.writer import ArchiveWriter

T0 = datetime(2026, 1, 1, tzinfo=UTC)
runner = CliRunner()


@pytest.fixture
def dsn(tmp_path: Path):  # noqa: ANN201
    """40 finished jobs of two apps (10 s and 5,000 s) and one still running."""
    dsn = f"chdb://{tmp_path / 'chdb'}"
    client = get_client(dsn)
    migrate(client)
    sub, life = [], []
    for i in range(41):
        app, run = ("short-app", 10.0) if i % 2 else ("long-app", 5000.0)
        t = T0 + timedelta(seconds=10 * i)
        sub.append(JobSubmitted(event_id=f"s{i}", event_time=t, job_id=f"J{i}", app=app, name=app))
        life.append(JobLifecycle(event_id=f"a{i}", event_time=t + timedelta(seconds=1), job_id=f"J{i}",
                                 decision_id="d", state="started"))  # fmt: skip
        if i < 40:
            life.append(JobLifecycle(event_id=f"b{i}", event_time=t + timedelta(seconds=1 + run), job_id=f"J{i}",
                                     decision_id="d", state="finished"))  # fmt: skip
    w = ArchiveWriter(client)
    w.write("jobs_submitted", sub, [(0, i) for i in range(len(sub))])
    w.write("jobs_lifecycle", life, [(0, i) for i in range(len(life))])
    yield dsn
    close_client(dsn)


def test_train_duration_from_the_archive(dsn: str, tmp_path: Path) -> None:
    app, out = typer.Typer(), tmp_path / "duration"
    app.command()(train_duration)
    r = runner.invoke(app, ["--trace", "archive", "--archive", dsn, "--train-fraction", "1", "--epochs", "3",
                            "--out", str(out), "--version", "from-archive"])  # fmt: skip
    assert r.exit_code == 0, r.output
    model = load_predictor(out / "latest")
    assert model.version == "from-archive" and len(model.index) == 40  # the running job is not a label
    info = json.loads((out / "from-archive" / "config.json").read_text())["config"]["train_info"]
    assert info["trace"] == "archive" and info["train"] == 40
    # it records the latest finish it read (J38: submitted at 380 s, run from 381 s for 5,000 s), so a
    # worker's warm-up knows its index holds all 40 already
    assert info["finished_through_s"] == (T0 + timedelta(seconds=5381)).timestamp()
    from streams.duration_warm_up import warm_up_durations

    done = warm_up_durations(model, get_client(dsn), latest=1000)
    assert (done.observed, done.skipped) == (0, 40) and len(model.index) == 40


def test_the_jobs_running_at_the_cut_are_those_the_archive_says_ran_then(tmp_path: Path) -> None:
    """Found by review: with ``--train-fraction`` below 1, the archive's censored rows were the jobs that
    finished after the cut (future information, without the longest: those still running). They are now
    the attempts that had started by the cut and not ended by it (storage/queries/job_runs.py)."""
    dsn = f"chdb://{tmp_path / 'chdb'}"
    client = get_client(dsn)
    migrate(client)
    sub, life = [], []
    for i in range(40):  # 15 s jobs, one every 10 s: the cut (75 %) is J30's submission, at 300 s
        t = T0 + timedelta(seconds=10 * i)
        sub.append(JobSubmitted(event_id=f"s{i}", event_time=t, job_id=f"J{i}", app="short", name="short"))
        life += [JobLifecycle(event_id=f"a{i}", event_time=t + timedelta(seconds=1), job_id=f"J{i}", decision_id="d",
                              state="started"),
                 JobLifecycle(event_id=f"b{i}", event_time=t + timedelta(seconds=16), job_id=f"J{i}", decision_id="d",
                              state="finished")]  # fmt: skip
    for i in range(3):  # long jobs that started early and never finished
        t = T0 + timedelta(seconds=10 * i + 5)
        sub.append(JobSubmitted(event_id=f"r{i}", event_time=t, job_id=f"R{i}", app="long", name="long"))
        life.append(JobLifecycle(event_id=f"ra{i}", event_time=t + timedelta(seconds=1), job_id=f"R{i}",
                                 decision_id="d", state="started"))  # fmt: skip
    w = ArchiveWriter(client)
    w.write("jobs_submitted", sub, [(0, i) for i in range(len(sub))])
    w.write("jobs_lifecycle", life, [(0, i) for i in range(len(life))])
    try:
        app, out = typer.Typer(), tmp_path / "duration"
        app.command()(train_duration)
        r = runner.invoke(app, ["--trace", "archive", "--archive", dsn, "--train-fraction", "0.75", "--epochs", "2",
                                "--out", str(out), "--version", "cut"])  # fmt: skip
        assert r.exit_code == 0, r.output
        info = json.loads((out / "cut" / "config.json").read_text())["config"]["train_info"]
        assert info["cut_s"] == (T0 + timedelta(seconds=300)).timestamp()
        assert info["running"] == 4  # R0, R1, R2 and J29 (290..306 s); the late jobs alone: J29 only
    finally:
        close_client(dsn)
