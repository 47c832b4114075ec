"""The decisions as the worker applied them (storage/migrations/0016_decisions_applied.sql, over 0017's table): a worker that
re-decided an attempt after a restart published a second record under the same decision id, on another
node; the worker applied the first and the agents executed its command. ``decisions FINAL`` kept the
latest, so ``explain``, the metrics and retraining named the node that was never used (the archive
review's "left alone" item)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduling.events import DecisionRecord, JobSubmitted, decision_id_for
from storage.client import ArchiveClient
from storage.queries.explain import explain
from storage.queries.training_events import training_events
from storage.writer import ArchiveWriter

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_a_re_decided_attempt_is_the_record_the_worker_applied(client: ArchiveClient) -> None:
    did = decision_id_for("j1", 0, "sub")

    def placed(node: str, s: float) -> DecisionRecord:
        return DecisionRecord(event_id=did, decision_id=did, event_time=T0 + timedelta(seconds=s), job_id="j1",
                              outcome="placed", node_id=node, gpu_indices=[0], policy="best-fit", latency_ms=1.0,
                              reason=f"best-fit: {node}")  # fmt: skip

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s1", event_time=T0, job_id="j1", cpu_milli=100)], [(0, 0)])
    w.write("decisions", [placed("n1", 1), placed("n2", 9)], [(0, 4), (0, 7)])  # the second: after a restart
    w.write("decisions", [placed("n1", 1)], [(0, 4)])  # a redelivery of the first
    # both records are kept, in one batch and after a merge (found by review: 0004's table kept the
    # latest of the two per decision id, at insert within a batch or at the next merge, so the view
    # above it named n2 as soon as the parts merged; 0017 keys the table by the record's offset)
    client.command("OPTIMIZE TABLE decisions FINAL")
    assert client.query_rows("SELECT node_id, kafka_offset FROM decisions FINAL ORDER BY kafka_offset")[1] == [
        ("n1", 4), ("n2", 7)]  # fmt: skip  # (the redelivery collapsed)
    assert client.query_rows("SELECT node_id FROM decisions_applied")[1] == [("n1",)]
    assert [d.node_id for d in training_events(client).placed] == ["n1"]
    assert [d["node_id"] for d in explain(client, "j1").decisions] == ["n1"]
