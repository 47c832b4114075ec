"""Every event type lands in its table with the right values."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from scheduling.events import (
    Candidate,
    DeadLetter,
    DecisionRecord,
    Event,
    IsolateNodeCommand,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    PlacementCommand,
    PreemptCommand,
    RestartFromCheckpointCommand,
)
from storage.client import ArchiveClient
from storage.rows import SCHEMAS, table_for_event
from storage.writer import ArchiveWriter

T = datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)

EVENTS: list[Event] = [
    JobSubmitted(event_time=T, job_id="j1", cluster="c1", tenant="t", user="u", priority=-5, qos="LS",
                 cpu_milli=1500, memory_mib=2048, num_gpu=1, gpu_milli=500, gpu_models=["A100", "H100"],
                 gang_id="g", gang_size=2, dag_parents=["j0"], app="app", max_instances_per_node=3,
                 name="n", command="python x.py", labels={"team": "ml"}, runtime_estimate_s=12.5,
                 trace_duration_s=11.0),
    NodeTelemetry(event_time=T, node_id="n1", cluster="c1", source="inventory", cpu_milli=96000,
                  memory_mib=1024, num_gpu=2, gpu_model="H100", cpu_alloc_milli=1000, memory_alloc_mib=10,
                  gpu_alloc_milli=[500, 1000], cpu_util=0.25, gpu_util=0.5, healthy=False,
                  topology={"rack": "r1"}),
    NodeTelemetry(event_time=T, node_id="n2", cluster="c1", source="worker", cpu_milli=8000, memory_mib=1024, topology={"zone": "z"},
                  healthy=False),  # the worker's mark of a node whose agent fell silent (migration 0013)
    JobLifecycle(event_time=T, job_id="j1", cluster="c1", state="failed", attempt=2, decision_id="d1",
                 node_id="n1", exit_code=137, reason="OOMKilled", log_tail="Killed\n"),
    DecisionRecord(event_time=T, decision_id="d1", job_id="j1", cluster="c1", attempt=2, outcome="placed",
                   node_id="n1", gpu_indices=[0, 1], policy="learned", model_version="v3",
                   candidates=[Candidate(node_id="n1", score=0.75), Candidate(node_id="n2", score=0.25)],
                   feasible_nodes=7, predicted_duration_s=60.0, predicted_cost=1.5, predicted_run_time_s=7200.0,
                   latency_ms=12.25,
                   step_compute_ms=3.5, submit_time=T, reason="best score", cpu_milli=1500, memory_mib=2048,
                   gpu_milli_per_gpu=500, trace_duration_s=11.0, fallback=True),
    PlacementCommand(event_time=T, decision_id="d1", job_id="j1", cluster="c1", attempt=2, node_id="n1",
                     gpu_indices=[0], cpu_milli=1500, memory_mib=2048, gpu_milli_per_gpu=500,
                     policy="learned", model_version="v3", reason="r", trace_duration_s=11.0),
    PreemptCommand(event_time=T, decision_id="d2", job_id="j2", cluster="c1", node_id="n1", reason="prio"),
    IsolateNodeCommand(event_time=T, decision_id="d3", cluster="c1", node_id="n9", reason="xid 79"),
    RestartFromCheckpointCommand(event_time=T, decision_id="d4", job_id="j3", cluster="c1", node_id="n2",
                                 checkpoint_uri="s3://b/ckpt", reason="node lost"),
    DeadLetter.of(b"\x00\xff not json", "invalid JSON", topic="jobs.lifecycle", partition=2, offset=99,
                  key=b"j1"),
]  # fmt: skip

# event field → archive column, where the names differ
RENAMED = {"partition": "topic_partition", "offset": "topic_offset", "key": "message_key"}


def _expected(e: Event) -> dict[str, object]:
    d = e.model_dump()
    if isinstance(e, DeadLetter):
        d["original"] = base64.b64decode(d.pop("original_b64"))
    if isinstance(e, DecisionRecord):
        d["candidates"] = [{"node_id": c["node_id"], "score": c["score"]} for c in d["candidates"]]
    return {RENAMED.get(k, k): v for k, v in d.items()}


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_event_roundtrip(client: ArchiveClient, event: Event) -> None:
    table = table_for_event(event)
    ArchiveWriter(client).write(table, [event], [(3, 42)])
    data = client.query_arrow(f"SELECT * FROM {table} FINAL")
    assert data.num_rows == 1
    row = {k: v[0] for k, v in data.to_pydict().items()}
    assert row.pop("kafka_partition") == 3 and row.pop("kafka_offset") == 42
    assert row.pop("archived_at").tzinfo is not None
    assert set(row) == {f.name for f in SCHEMAS[table]} - {"kafka_partition", "kafka_offset", "archived_at"}
    for col, want in _expected(event).items():
        if col == "kind" and table != "actions":
            continue  # the event's discriminator; the table says it
        got = row[col]
        if isinstance(got, bytes) and not isinstance(want, bytes):
            got = got.decode()
        if isinstance(got, list) and got and isinstance(got[0], tuple):  # Map → pairs
            got = {k.decode(): v.decode() for k, v in got}
        if isinstance(got, list) and got and isinstance(got[0], bytes):
            got = [g.decode() for g in got]
        if isinstance(want, datetime):  # DateTime64(3): millisecond precision
            want = want.replace(microsecond=want.microsecond // 1000 * 1000)
        if isinstance(want, float):
            assert got == pytest.approx(want), col
        elif isinstance(got, list) and got and isinstance(got[0], dict):
            got = [{k: (v.decode() if isinstance(v, bytes) else v) for k, v in x.items()} for x in got]
            assert got == want, col
        else:
            assert got == want, col
