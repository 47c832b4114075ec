"""The demo's last screen (ops/summary_view.py) on a chdb archive whose answers are known."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from ops.summary_view import print_summary
from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for
from storage.client import ArchiveClient
from storage.migrate import migrate
from storage.queries import Summary, summary
from storage.writer import ArchiveWriter

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def placed(job: str, attempt: int, t: float, gpus: int) -> DecisionRecord:
    did = decision_id_for(job, attempt, "sub")
    return DecisionRecord(event_id=did, decision_id=did, event_time=at(t), job_id=job, attempt=attempt,
                          outcome="placed", node_id="n1", gpu_indices=list(range(gpus)), gpu_milli_per_gpu=1000,
                          policy="best-fit", latency_ms=1.0)  # fmt: skip


def life(job: str, attempt: int, state: str, t: float) -> JobLifecycle:
    return JobLifecycle(event_id=f"{job}-{attempt}-{state}", event_time=at(t), job_id=job, attempt=attempt,
                        state=state, node_id="n1", decision_id=decision_id_for(job, attempt, "sub"))  # type: ignore[arg-type]  # fmt: skip


def screen(s: Summary) -> str:
    console = Console(file=io.StringIO(), width=200)
    print_summary(console, s, wall_s=1.0)
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.fixture
def archive(chdb_archive: ArchiveClient) -> ArchiveClient:
    migrate(chdb_archive)
    return chdb_archive


def test_the_mean_gpu_allocation_weighs_the_last_bucket_by_its_length(archive: ArchiveClient) -> None:
    """G holds the one GPU over [0, 60); the run ends at 61 s (C, without GPUs, finishes then). In
    60 s buckets: 100 % then 0 % over the last, 1 s long. The screen read "mean 50.0%" (the buckets
    averaged alike; found by review): the GPU was held 60 s of 61."""
    w = ArchiveWriter(archive)
    w.write("nodes_telemetry", [NodeTelemetry(event_id="t", event_time=at(0), node_id="n1", source="inventory",
                                              cpu_milli=8000, memory_mib=1024, num_gpu=1, gpu_model="A100")])  # fmt: skip
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, num_gpu=n)
                               for j, n in (("G", 1), ("C", 0))])  # fmt: skip
    w.write("decisions", [placed("G", 0, 0, 1), placed("C", 0, 0, 0)])
    w.write("jobs_lifecycle", [life("G", 0, "started", 0), life("G", 0, "finished", 60),
                               life("C", 0, "started", 1), life("C", 0, "finished", 61)])  # fmt: skip
    s = summary(archive, bucket_s=60.0)
    assert [x.ratio for x in s.gpu_allocation] == pytest.approx([1.0, 0.0])
    assert s.gpu_allocation_mean == pytest.approx(60 / 61)
    assert "peak 100.0%, mean 98.4%" in screen(s)


def test_failed_attempts_are_attempts_not_jobs(archive: ArchiveClient) -> None:
    """F failed twice and finished at its third attempt: two failed attempts. The row counted the jobs
    with a failure (1; found by review)."""
    w = ArchiveWriter(archive)
    w.write("nodes_telemetry", [NodeTelemetry(event_id="t", event_time=at(0), node_id="n1", source="inventory",
                                              cpu_milli=8000, memory_mib=1024, num_gpu=1, gpu_model="A100")])  # fmt: skip
    w.write("jobs_submitted", [JobSubmitted(event_id="s-F", event_time=at(0), job_id="F", num_gpu=1)])
    w.write("decisions", [placed("F", a, 10 * a, 1) for a in range(3)])
    w.write("jobs_lifecycle", [life("F", 0, "started", 1), life("F", 0, "failed", 2), life("F", 1, "started", 11),
                               life("F", 1, "failed", 12), life("F", 2, "started", 21),
                               life("F", 2, "finished", 30)])  # fmt: skip
    s = summary(archive)
    assert (s.submitted, s.finished, s.failed) == (1, 1, 2)
    (row,) = [line for line in screen(s).splitlines() if "failed attempts" in line]
    assert row.split("│")[2].strip() == "2"


def test_finished_counts_submitted_jobs_as_the_job_metrics(archive: ArchiveClient) -> None:
    """X was never submitted (its submission lost or refused), yet an agent reported it finished: the
    summary counted it (2 finished of 1 submitted), the job metrics did not (found by review)."""
    from storage.queries.metrics import job_metrics

    w = ArchiveWriter(archive)
    w.write("jobs_submitted", [JobSubmitted(event_id="s-A", event_time=at(0), job_id="A", num_gpu=1)])
    w.write("decisions", [placed("A", 0, 1, 1)])
    w.write("jobs_lifecycle", [life("A", 0, "started", 2), life("A", 0, "finished", 3),
                               life("X", 0, "started", 2), life("X", 0, "finished", 4)])  # fmt: skip
    s = summary(archive)
    assert (s.submitted, s.finished) == (1, 1) and s.finished == job_metrics(archive)["all"].finished
