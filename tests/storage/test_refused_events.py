"""An event the worker refused on its own state (here: stamped a day ahead of its clock) is archived
like the rest, and its dead letter names it; every analytics read goes through the ``*_accepted`` views
(storage/migrations/0014_accepted_events.sql), so it counts nowhere as accepted. Found by review: only
reconciliation left such events out; the job metrics, the summary, the dashboards, explain and the
retraining replay counted a refused submission as a job waiting for ever, and a refused report as
the node's capacity."""

from __future__ import annotations

from datetime import datetime

from storage_scenario import at

from scheduling.events import (
    DeadLetter,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decision_id_for,
)
from storage.client import ArchiveClient
from storage.queries import explain, reconcile, summary
from storage.queries import metrics as m
from storage.queries.panels import PANELS_BY_ID, expand_macros
from storage.queries.training_events import training_events
from storage.writer import ArchiveWriter

AHEAD = "event_time … is 86,400 s ahead of the worker's clock"


def report(event_id: str, t: datetime, gpus: int) -> NodeTelemetry:
    return NodeTelemetry(event_id=event_id, event_time=t, node_id="n1", source="agent", cpu_milli=64000,
                         memory_mib=512000, num_gpu=gpus, gpu_model="A100")  # fmt: skip


def test_a_refused_submission_and_report_count_nowhere_as_accepted(client: ArchiveClient) -> None:
    w = ArchiveWriter(client)
    ok = JobSubmitted(event_id="s-ok", event_time=at(0), job_id="OK", num_gpu=4)
    future = JobSubmitted(event_id="s-fut", event_time=at(86_410), job_id="FUTURE")
    w.write("jobs_submitted", [ok, future], [(0, 0), (0, 1)])
    w.write("nodes_telemetry", [report("t-ok", at(0), 4), report("t-fut", at(86_400), 8)], [(0, 0), (0, 1)])
    did = decision_id_for("OK", 0, "sub")
    w.write("decisions", [DecisionRecord(event_id=did, decision_id=did, event_time=at(1), job_id="OK", outcome="placed",
                                         node_id="n1", gpu_indices=[0, 1, 2, 3], gpu_milli_per_gpu=1000,
                                         policy="best-fit", latency_ms=1.0)])  # fmt: skip
    w.write("jobs_lifecycle", [JobLifecycle(event_id="l1", event_time=at(2), job_id="OK", state="started",
                                            decision_id=did, node_id="n1")], [(0, 0)])  # fmt: skip
    w.write("deadletter", [DeadLetter.of(future.to_bytes(), AHEAD, topic="jobs.submitted", partition=0, offset=1,
                                         key=b"FUTURE"),
                           DeadLetter.of(report("t-fut", at(86_400), 8).to_bytes(), AHEAD, topic="nodes.telemetry",
                                         partition=0, offset=1)])  # fmt: skip

    assert reconcile(client).unaccounted == []
    jobs = m.job_metrics(client)["all"]
    assert (jobs.jobs, jobs.unfinished) == (1, 1)  # OK runs; FUTURE is not a job
    assert summary(client).submitted == 1
    pending = expand_macros(PANELS_BY_ID["queue.pending"].sql, at(0), at(3600), 600)
    assert [row[1] for row in client.query_rows(pending)[1]] == [1, 0, 0, 0, 0, 0, 0]  # OK's first second alone
    replay = training_events(client)
    assert [s.job_id for s in replay.submissions] == ["OK"] and [n.num_gpu for n in replay.nodes] == [4]
    allocation = m.gpu_allocation(client, 60)
    assert {s.capacity_milli for s in allocation} == {4000} and len(allocation) < 10  # not stretched a day on
    assert explain(client, "FUTURE").answer.startswith("Job FUTURE was never scheduled: its submission was refused")


def test_a_submission_dead_lettered_for_an_internal_error_is_counted_once(client: ArchiveClient) -> None:
    """The worker applies it again (it is accepted), so the demo's count of archived submissions must not add
    its dead letter (found by review: counted twice, it hid a submission lost before the archive)."""
    from scheduling.events import INTERNAL_ERROR

    w = ArchiveWriter(client)
    subs = [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j) for j in "ABC"]
    w.write("jobs_submitted", subs, [(0, i) for i in range(3)])
    w.write("deadletter", [DeadLetter.of(subs[2].to_bytes(), f"{INTERNAL_ERROR} while handling: RuntimeError: x",
                                         topic="jobs.submitted", partition=0, offset=2),
                           DeadLetter.of(b"{", "not JSON", topic="jobs.submitted", partition=0, offset=3)])  # fmt: skip
    s = summary(client)
    assert (s.submitted, s.refused) == (3, 1)  # A, B, C accepted; the offset-3 message refused with a reason
