"""An event sent twice is two Kafka messages with one event id. The worker applies the first and, in
some cases, dead-letters the second at its own position (a submission sent again after its job was
done and forgotten: ``streams/done_retention.py``; a report stamped ahead of the clock by a resend).
The ``*_accepted`` views must keep the copy the worker applied. Found by review: they read the table
``FINAL`` (one row per event id: the copy archived last) and then left out dead-lettered positions, so
the refused later copy took the accepted one with it, and an accepted job vanished from every
analytics read (storage/migrations/0020_accepted_first_copy.sql). And the tables must keep every copy:
keyed by event id, a merge kept only the copy archived last (0021_archive_keeps_every_copy.sql), so each
test merges the parts (``OPTIMIZE ... FINAL``) before it reads."""

from __future__ import annotations

from storage_scenario import at

from scheduling.events import DeadLetter, JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for
from storage.client import ArchiveClient
from storage.queries import metrics as m
from storage.queries import reconcile, summary
from storage.writer import ArchiveWriter

DID = decision_id_for("A", 0, "s-a")
def merged(client: ArchiveClient) -> None:
    """Merge every part of the event tables, as ClickHouse does in the background."""
    for table in ("jobs_submitted", "nodes_telemetry", "jobs_lifecycle", "deadletter"):
        client.query_rows(f"OPTIMIZE TABLE {table} FINAL")


FORGOTTEN = "sent at …, before …, up to which this partition's done jobs were forgotten"


def test_a_refused_later_copy_does_not_hide_the_accepted_submission(client: ArchiveClient) -> None:
    w = ArchiveWriter(client)
    sub = JobSubmitted(event_id="s-a", event_time=at(0), job_id="A", num_gpu=1)
    w.write("jobs_submitted", [sub], [(0, 0)])
    w.write("jobs_lifecycle", [JobLifecycle(event_id="l-a", event_time=at(5), job_id="A", state="started",
                                            decision_id=DID, node_id="n1"),
                               JobLifecycle(event_id="l-b", event_time=at(65), job_id="A", state="finished",
                                            decision_id=DID, node_id="n1")], [(0, 0), (0, 1)])  # fmt: skip
    w.write("jobs_submitted", [sub], [(0, 7)])  # the same event again, archived later...
    w.write("deadletter", [DeadLetter.of(sub.to_bytes(), FORGOTTEN, topic="jobs.submitted", partition=0, offset=7,
                                         key=b"A")])  # ...and refused  # fmt: skip
    merged(client)
    _, rows = client.query_rows("SELECT job_id, kafka_offset FROM jobs_submitted_accepted")
    assert rows == [("A", 0)]
    assert summary(client).submitted == 1
    jobs = m.job_metrics(client)["all"]
    assert (jobs.jobs, jobs.finished) == (1, 1)
    assert reconcile(client).ok


def test_a_refused_later_copy_does_not_hide_the_accepted_report(client: ArchiveClient) -> None:
    w = ArchiveWriter(client)
    life = JobLifecycle(event_id="l-a", event_time=at(5), job_id="A", state="started", decision_id=DID,
                        node_id="n1")
    w.write("jobs_lifecycle", [life], [(0, 3)])
    w.write("jobs_lifecycle", [life], [(0, 9)])
    w.write("deadletter", [DeadLetter.of(life.to_bytes(), "refused", topic="jobs.lifecycle", partition=0,
                                         offset=9)])  # fmt: skip
    tel = NodeTelemetry(event_id="t-1", event_time=at(0), node_id="n1", source="agent", cpu_milli=64000,
                        memory_mib=512000, num_gpu=4, gpu_model="A100")  # fmt: skip
    w.write("nodes_telemetry", [tel], [(0, 0)])
    w.write("nodes_telemetry", [tel], [(0, 4)])
    w.write("deadletter", [DeadLetter.of(tel.to_bytes(), "refused", topic="nodes.telemetry", partition=0,
                                         offset=4)])  # fmt: skip
    merged(client)
    _, lifecycle = client.query_rows("SELECT event_id, kafka_offset FROM jobs_lifecycle_accepted")
    _, telemetry = client.query_rows("SELECT event_id, kafka_offset FROM nodes_telemetry_accepted")
    assert (lifecycle, telemetry) == ([("l-a", 3)], [("t-1", 0)])


def test_copies_the_worker_applied_once_count_once(client: ArchiveClient) -> None:
    """The archiver's redelivery (one position, written twice) and a producer's resend the worker let go
    ("redelivered submission: already accepted", no dead letter) are one event, as with FINAL."""
    w = ArchiveWriter(client)
    sub = JobSubmitted(event_id="s-a", event_time=at(0), job_id="A")
    w.write("jobs_submitted", [sub], [(0, 0)])
    w.write("jobs_submitted", [sub], [(0, 0)])
    w.write("jobs_submitted", [sub], [(0, 2)])
    w.write("jobs_submitted", [sub, sub], [(0, 4), (0, 0)])  # (two copies in one insert: one part)
    merged(client)
    _, rows = client.query_rows("SELECT job_id, kafka_offset FROM jobs_submitted_accepted")
    assert rows == [("A", 0)]


def test_reconciliation_reads_a_report_sent_twice_where_the_worker_read_it_first(client: ArchiveClient) -> None:
    """J's agent reported attempt 0 ``failed`` and, its send timed out, sent it again after the retry had
    started (an at-least-once producer's resend: one event id, a later offset). The run ended at the
    first copy; read ``FINAL`` (the copy archived last), it ended after the retry started, and reconciliation
    said the job ran twice."""
    from test_queries import dec, life

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s-j", event_time=at(0), job_id="J")], [(0, 0)])
    w.write("decisions", [dec("J", 0, 1, "n1"), dec("J", 1, 40, "n2")], [(0, 0), (0, 1)])
    failed = life("J", 0, "failed", 30, "n1", event_id="l-failed")
    reports = [life("J", 0, "started", 2, "n1"), failed, life("J", 1, "started", 41, "n2")]
    w.write("jobs_lifecycle", reports, [(0, 10), (0, 11), (0, 12)])
    w.write("jobs_lifecycle", [life("J", 1, "finished", 90, "n2"), failed], [(0, 13), (0, 14)])  # (the copy)
    merged(client)
    assert reconcile(client).ok
