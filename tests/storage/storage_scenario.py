"""A hand-made event set whose right answers are known (see ``test_queries.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduling.events import (
    Candidate,
    DeadLetter,
    DecisionRecord,
    Event,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    PlacementCommand,
    decision_id_for,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def scenario() -> dict[str, list[Event]]:
    """Jobs: A finished (JCT 65 s, queued 5 s), B rejected with a reason, C submitted and
    never decided, D running (queued 5 s), F pending after an unschedulable decision."""
    sub = [
        JobSubmitted(event_id="s-a", event_time=at(0), job_id="A", num_gpu=1, cpu_milli=1000),
        JobSubmitted(event_id="s-b", event_time=at(1), job_id="B", num_gpu=8),
        JobSubmitted(event_id="s-c", event_time=at(2), job_id="C"),
        JobSubmitted(event_id="s-d", event_time=at(3), job_id="D", num_gpu=1),
        JobSubmitted(event_id="s-f", event_time=at(4), job_id="F", num_gpu=4),
    ]
    cand = [Candidate(node_id="n1", score=0.9), Candidate(node_id="n2", score=0.4)]
    dec = [
        DecisionRecord(event_id=decision_id_for("A", 0, "sub"), decision_id=decision_id_for("A", 0, "sub"),
                       event_time=at(2), job_id="A", outcome="placed", node_id="n1", gpu_indices=[0],
                       policy="best-fit", candidates=cand, feasible_nodes=2, latency_ms=20.0,
                       reason="tightest GPU fit", gpu_milli_per_gpu=1000, submit_time=at(0)),
        DecisionRecord(event_id="d-b-1", decision_id="d-b-1", event_time=at(3), job_id="B",
                       outcome="rejected", policy="best-fit", latency_ms=5.0,
                       reason="insufficient GPU: no node has 8 free GPUs"),
        DecisionRecord(event_id=decision_id_for("D", 0, "sub"), decision_id=decision_id_for("D", 0, "sub"),
                       event_time=at(6), job_id="D", outcome="placed", node_id="n1", gpu_indices=[1],
                       policy="best-fit", candidates=cand[:1], feasible_nodes=1, latency_ms=40.0,
                       reason="tightest GPU fit", gpu_milli_per_gpu=1000),
        DecisionRecord(event_id="d-f-1", decision_id="d-f-1", event_time=at(7), job_id="F",
                       outcome="unschedulable", policy="best-fit", latency_ms=3.0, feasible_nodes=0,
                       reason="insufficient GPU: 4 GPUs on one node needed"),
    ]  # fmt: skip
    life = [
        JobLifecycle(event_id="l-a-1", event_time=at(5), job_id="A", decision_id="d", state="started", node_id="n1"),
        JobLifecycle(event_id="l-a-2", event_time=at(65), job_id="A", decision_id="d", state="finished", node_id="n1",
                     exit_code=0),
        JobLifecycle(event_id="l-b-1", event_time=at(30), job_id="B", state="rejected",
                     reason="gave up after 3 retries: no node has 8 GPUs"),
        JobLifecycle(event_id="l-d-1", event_time=at(8), job_id="D", decision_id="d", state="started", node_id="n1"),
    ]  # fmt: skip
    tel = [
        NodeTelemetry(event_id="t1", event_time=at(10), node_id="n1", cpu_milli=64000, memory_mib=512000,
                      num_gpu=4, gpu_model="A100", gpu_alloc_milli=[1000, 0, 0, 0]),
        NodeTelemetry(event_id="t2", event_time=at(50), node_id="n1", cpu_milli=64000, memory_mib=512000,
                      num_gpu=4, gpu_model="A100", gpu_alloc_milli=[1000, 1000, 0, 0]),
        NodeTelemetry(event_id="t3", event_time=at(70), node_id="n1", cpu_milli=64000, memory_mib=512000,
                      num_gpu=4, gpu_model="A100", gpu_alloc_milli=[0, 1000, 0, 0]),
    ]  # fmt: skip
    act = [
        PlacementCommand(event_id="a-a", event_time=at(2), decision_id=decision_id_for("A", 0, "sub"),
                         job_id="A", node_id="n1", policy="best-fit", gpu_indices=[0]),
        PlacementCommand(event_id="a-d", event_time=at(6), decision_id=decision_id_for("D", 0, "sub"),
                         job_id="D", node_id="n1", policy="best-fit", gpu_indices=[1]),
    ]  # fmt: skip
    dl1 = DeadLetter.of(b"{not json", "bad json", topic="jobs.submitted", partition=0, offset=7)
    dl1_again = dl1.model_copy(update={"event_id": "dl-again"})  # the same message dead-lettered twice
    dl2 = DeadLetter.of(b"x" * 10, "message too large", topic="nodes.telemetry", partition=1, offset=3)
    return {
        "jobs_submitted": sub,
        "decisions": dec,
        "jobs_lifecycle": life,
        "nodes_telemetry": tel,
        "actions": act,
        "deadletter": [dl1, dl1_again, dl2],
    }
