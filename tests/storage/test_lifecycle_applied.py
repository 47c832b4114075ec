"""The lifecycle reports as the worker applied them (storage/migrations/0018_lifecycle_applied.sql): after
a worker re-decided an attempt on another node under the same decision id, the agents ran it twice; the
first ``started`` says where it runs, the worker fenced the other run and ignored its reports. Read raw,
they moved the job back to the queue in ``explain`` while it ran, counted a reversal, shortened its run
time and ended its GPU holding early (found by review)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for
from storage.client import ArchiveClient
from storage.queries import explain, summary
from storage.queries.finished_jobs import finished_jobs
from storage.queries.metrics import gpu_allocation, stability
from storage.writer import ArchiveWriter

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_the_reports_of_a_fenced_second_execution_count_nowhere(client: ArchiveClient) -> None:
    did = decision_id_for("j1", 0, "sub")
    w = ArchiveWriter(client)
    w.write("nodes_telemetry", [NodeTelemetry(event_id=f"n{x}", event_time=T0, node_id=x, cpu_milli=1000,
                                              memory_mib=1000, num_gpu=1, gpu_model="V100") for x in "AB"],
            [(0, 0), (0, 1)])  # fmt: skip
    w.write("jobs_submitted", [JobSubmitted(event_id="s1", event_time=T0, job_id="j1", cpu_milli=100, num_gpu=1)],
            [(0, 0)])  # fmt: skip
    w.write("decisions", [DecisionRecord(event_id=did, decision_id=did, event_time=at(1), job_id="j1", outcome="placed",
                                         node_id="A", gpu_indices=[0], gpu_milli_per_gpu=1000, policy="best-fit",
                                         latency_ms=1.0)], [(0, 4)])  # fmt: skip

    def report(i: int, s: float, state: str, node: str, **kw: object) -> JobLifecycle:
        return JobLifecycle(event_id=f"l{i}", event_time=at(s), job_id="j1", state=state, attempt=0,  # type: ignore[arg-type]
                            decision_id=did, node_id=node, **kw)  # fmt: skip

    # it started on A; a second execution started on B and was fenced there
    w.write("jobs_lifecycle", [report(1, 2, "started", "A"), report(2, 5, "started", "B"),
                               report(3, 6, "preempted", "B", reason="a second execution")], [(0, 1), (0, 2), (0, 3)])  # fmt: skip
    assert summary(client).running == 1
    assert explain(client, "j1").answer.startswith("Job j1 is running on node A")
    assert stability(client)["all"].reversals == 0
    assert client.query_rows("SELECT count() FROM jobs_lifecycle_accepted")[1] == [(3,)]  # (all archived)
    w.write("jobs_lifecycle", [report(4, 100, "finished", "A")], [(0, 5)])
    assert [f.run_s for f in finished_jobs(client)] == [pytest.approx(98.0)]  # from A's start, not B's
    assert [round(s.ratio, 3) for s in gpu_allocation(client)] == [0.483, 0.5]  # A held its GPU to t = 100


def test_an_end_from_another_node_before_the_attempt_started_counts(client: ArchiveClient) -> None:
    """The worker applies an end from any node while the job is only reserved (found by the review of the
    view): B's ``failed`` re-queued the attempt; A's late ``started`` was fenced. Both stay in the view."""
    did = decision_id_for("j2", 0, "sub")
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s2", event_time=T0, job_id="j2", cpu_milli=100)], [(0, 0)])
    reports = [JobLifecycle(event_id=f"m{i}", event_time=at(i), job_id="j2", state=state, attempt=0,  # type: ignore[arg-type]
                            decision_id=did, node_id=node) for i, (state, node) in enumerate([("failed", "B"),
                                                                                               ("started", "A")])]  # fmt: skip
    w.write("jobs_lifecycle", reports, [(0, 1), (0, 2)])
    rows = client.query_rows("SELECT state, node_id FROM jobs_lifecycle_applied WHERE job_id = 'j2' "
                             "ORDER BY kafka_offset")[1]  # fmt: skip
    assert rows == [("failed", "B"), ("started", "A")]
    # a session that reads joins with NULLs keeps attempts that never started (found by the same review)
    _, never = client.query_rows("SELECT count() FROM jobs_lifecycle_applied WHERE job_id = 'j2' "
                                 "SETTINGS join_use_nulls = 1")  # fmt: skip
    assert never == [(2,)]
