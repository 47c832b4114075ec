"""The event contracts: wire round trips, the validators that turn bad input into reasons,
and the deterministic helpers (partitioning, decision ids)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from scheduling.events import (
    TOPIC_EVENTS,
    DeadLetter,
    DecisionRecord,
    IsolateNodeCommand,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    PlacementCommand,
    PreemptCommand,
    RestartFromCheckpointCommand,
    decision_id_for,
    decode,
    json_schemas,
    partition_for,
)

SAMPLES = {
    "jobs.submitted": JobSubmitted(job_id="j", cpu_milli=6000, memory_mib=12288, num_gpu=1, gpu_milli=460,
                                   gpu_models=["T4", "V100M16"], labels={"phase": "Running"}, qos="LS"),
    "nodes.telemetry": NodeTelemetry(node_id="n", cpu_milli=64000, memory_mib=262144, num_gpu=2, gpu_model="P100",
                                     gpu_alloc_milli=[500, 0], topology={"rack": "r1"}),
    "jobs.lifecycle": JobLifecycle(job_id="j", state="failed", decision_id="d-j", exit_code=137, log_tail="OOM",
                                   gpu_indices=[1]),
    "decisions": DecisionRecord(event_id="d1", decision_id="d1", job_id="j", outcome="placed", node_id="n",
                                gpu_indices=[0], policy="best-fit", latency_ms=12.5),
    "deadletter": DeadLetter.of(b"\xffnot json", "bad", topic="jobs.submitted", partition=1, offset=7, key=b"k"),
}  # fmt: skip
COMMANDS = [
    PlacementCommand(decision_id="d", job_id="j", node_id="n", gpu_indices=[0, 1], gpu_milli_per_gpu=1000,
                     policy="best-fit"),
    PreemptCommand(decision_id="p", job_id="j", node_id="n", reason="priority"),
    IsolateNodeCommand(decision_id="i", node_id="n", reason="ECC errors"),
    RestartFromCheckpointCommand(decision_id="r", job_id="j", node_id="n", checkpoint_uri="s3://b/ck", reason="x"),
]  # fmt: skip


@pytest.mark.parametrize("topic", list(SAMPLES))
def test_round_trip_on_the_wire(topic: str) -> None:
    ev = SAMPLES[topic]
    assert decode(topic, ev.to_bytes()) == ev


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.kind)
def test_actions_topic_carries_every_command_kind(cmd: object) -> None:
    back = decode("actions", cmd.to_bytes())  # type: ignore[attr-defined]
    assert type(back) is type(cmd) and back == cmd


def test_every_topic_has_a_schema() -> None:
    schemas = json_schemas()
    assert set(schemas) == set(TOPIC_EVENTS)
    assert "oneOf" in json.dumps(schemas["actions"]) or "anyOf" in json.dumps(schemas["actions"])


def test_event_time_is_utc_and_ids_are_unique() -> None:
    t = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=8)))
    ev = JobSubmitted(job_id="j", event_time=t)
    assert ev.event_time.tzinfo == UTC and ev.event_time == t
    assert JobSubmitted(job_id="a").event_id != JobSubmitted(job_id="a").event_id
    with pytest.raises(ValueError, match="timezone"):
        JobSubmitted.model_validate({"job_id": "j", "event_time": "2026-01-01T00:00:00"})


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        ({"cpu_milli": -1}, "greater than or equal to 0"),
        ({"memory_mib": 10**12}, "less than or equal"),
        ({"num_gpu": 65}, "less than or equal"),
        ({"gpu_milli": 1001, "num_gpu": 1}, "less than or equal to 1000"),
        ({"num_gpu": 2, "gpu_milli": 500}, "fractional gpu_milli is only allowed with num_gpu == 1"),
        ({"num_gpu": 0, "gpu_milli": 500}, "asks for no GPU"),
        ({"gpu_models": ["TPU"]}, "unknown GPU model"),
        ({"gang_size": 4}, "needs a gang_id"),
        ({"dag_parents": ["a", "j"]}, "job 'j' names itself among its dag_parents"),
        ({"qos": "Gold"}, "qos"),
        ({"surprise": 1}, "Extra inputs are not permitted"),
        ({"schema_version": 2}, "schema_version 2 is not one this worker reads \\(it reads 1\\): publish version 1"),
        ({"job_id": ""}, "at least 1 character"),
        # the wire is strict: a field of the wrong JSON type is refused, not coerced
        ({"num_gpu": True}, "num_gpu: Input should be a valid integer"),
        ({"cpu_milli": "1000"}, "cpu_milli: Input should be a valid integer"),
        ({"priority": 1.5}, "priority: Input should be a valid integer"),
        ({"labels": {"team": 7}}, "labels.team: Input should be a valid string"),
        # found by review: a blank parent id was accepted (the child waited for it), and NaN was refused as
        # "less than or equal to 315360000"
        ({"dag_parents": ["a", ""]}, "dag_parents.1: String should have at least 1 character"),
        ({"runtime_estimate_s": float("nan")}, "runtime_estimate_s: Input should be a finite number"),
        ({"trace_duration_s": float("inf")}, "trace_duration_s: Input should be a finite number"),
    ],
)
def test_bad_submissions_are_rejected_with_a_reason(patch: dict, words: str) -> None:
    raw = json.dumps({"job_id": "j", **patch}).encode()
    with pytest.raises(ValueError, match=words):
        decode("jobs.submitted", raw)


def test_not_json_is_a_reason_not_a_crash() -> None:
    with pytest.raises(ValueError, match="^Invalid JSON"):  # no field to name: the reason alone
        decode("jobs.submitted", b"{nope")


def test_the_strict_wire_still_takes_what_json_cannot_type() -> None:
    raw = json.dumps({"job_id": "j", "event_time": "2026-01-01T00:00:00Z", "gpu_models": ["V100M16"],
                      "runtime_estimate_s": 60, "dag_parents": ["p"]}).encode()  # fmt: skip
    ev = decode("jobs.submitted", raw)
    assert isinstance(ev, JobSubmitted) and ev.event_time.year == 2026 and ev.runtime_estimate_s == 60.0
    assert list(ev.gpu_models) == ["V100M16"] and list(ev.dag_parents) == ["p"]


def test_an_integral_number_with_a_decimal_point_is_an_integer_on_the_wire() -> None:
    """Python's json.dumps writes cpu_milli = 4 * 1000.0 as 4000.0, and the JSON Schema producers
    validate against (``semsched schema``) says "integer", which admits it; the worker refused it."""
    raw = json.dumps({"job_id": "j", "cpu_milli": 4 * 1000.0, "num_gpu": 1.0, "gpu_milli": 500.0,
                      "max_instances_per_node": 2.0}).encode()  # fmt: skip
    assert b"4000.0" in raw
    ev = decode("jobs.submitted", raw)
    assert (ev.cpu_milli, ev.num_gpu, ev.gpu_milli, ev.max_instances_per_node) == (4000, 1, 500, 2)
    assert all(type(v) is int for v in (ev.cpu_milli, ev.num_gpu, ev.gpu_milli, ev.max_instances_per_node))
    node = decode("nodes.telemetry", json.dumps({"kind": "node_telemetry", "node_id": "n", "cpu_milli": 8000.0,
                                                 "memory_mib": 1024.0, "num_gpu": 2, "gpu_model": "T4",
                                                 "gpu_alloc_milli": [0.0, 500.0]}).encode())  # fmt: skip
    assert node.cpu_milli == 8000 and node.gpu_alloc_milli == [0, 500]
    done = decode("jobs.lifecycle", json.dumps({"kind": "job_lifecycle", "job_id": "j", "state": "finished", "decision_id": "d",
                                                "attempt": 1.0, "exit_code": 0.0, "gpu_indices": [3.0]}).encode())  # fmt: skip
    assert (done.attempt, done.exit_code, done.gpu_indices) == (1, 0, [3])
    schema = json_schemas()["jobs.submitted"]["properties"]["cpu_milli"]
    assert schema["type"] == "integer"


def test_node_telemetry_consistency() -> None:
    with pytest.raises(ValueError, match="needs a gpu_model"):
        NodeTelemetry(node_id="n", cpu_milli=1, memory_mib=1, num_gpu=1)
    with pytest.raises(ValueError, match="one entry per GPU"):
        NodeTelemetry(node_id="n", cpu_milli=1, memory_mib=1, num_gpu=2, gpu_model="T4", gpu_alloc_milli=[0])
    with pytest.raises(ValueError, match="exceeds capacity"):
        NodeTelemetry(node_id="n", cpu_milli=1000, memory_mib=1, cpu_alloc_milli=2000)


def test_gpu_demand() -> None:
    assert JobSubmitted(job_id="j", num_gpu=1, gpu_milli=460).gpu_demand_milli == 460
    assert JobSubmitted(job_id="j", num_gpu=4).gpu_demand_milli == 4000
    assert JobSubmitted(job_id="j", num_gpu=4, gpu_milli=1000).per_gpu_milli == 1000
    assert JobSubmitted(job_id="j").gpu_demand_milli == 0


def test_partitioning_and_decision_ids_are_deterministic() -> None:
    assert partition_for("openb", 4) == partition_for("openb", 4)
    assert {partition_for(f"c{i}", 4) for i in range(50)} == {0, 1, 2, 3}
    assert decision_id_for("j", 0, "s") == decision_id_for("j", 0, "s")
    assert decision_id_for("j", 0, "s") != decision_id_for("j", 1, "s") != decision_id_for("k", 1, "s")
    # a job id used again once its first job was forgotten: another submission, other decisions
    assert decision_id_for("j", 0, "s") != decision_id_for("j", 0, "s2")


def test_dead_letter_keeps_the_original_bytes() -> None:
    dl = SAMPLES["deadletter"]
    assert isinstance(dl, DeadLetter)
    assert dl.original() == b"\xffnot json" and dl.original_size == 9 and dl.key == "k"
    big = DeadLetter.of(b"x" * 100_000, "too big", topic="t", keep=1000)
    assert big.original_size == 100_000 and len(big.original()) == 1000


def test_a_dead_letter_is_named_by_the_record_it_refuses() -> None:
    """Its id from the record's place, its time from the record's timestamp: the same record refused again
    is the same event. Without a place, each is its own; a timestamp the archive cannot hold is left out."""
    sent = datetime(2026, 3, 1, 12, tzinfo=UTC)
    one = DeadLetter.of(b"{", "bad", topic="t", partition=1, offset=5, timestamp_ms=int(sent.timestamp() * 1000))
    again = DeadLetter.of(b"{", "bad again", topic="t", partition=1, offset=5, timestamp_ms=int(sent.timestamp() * 1000))
    assert (one.event_id, one.event_time) == (again.event_id, sent)
    assert DeadLetter.of(b"{", "bad", topic="t", partition=1, offset=6).event_id != one.event_id
    assert DeadLetter.of(b"{", "bad", topic="u", partition=1, offset=5).event_id != one.event_id
    assert DeadLetter.of(b"{", "bad", topic="t").event_id != DeadLetter.of(b"{", "bad", topic="t").event_id
    before = datetime.now(UTC)
    for unusable in (-1, 10**15, None):  # none, beyond the archive's range, not given: the time of refusal
        assert DeadLetter.of(b"{", "bad", topic="t", partition=1, offset=5, timestamp_ms=unusable).event_time >= before


@pytest.mark.parametrize("field", ["latency_ms", "step_compute_ms", "predicted_duration_s", "trace_duration_s",
                                   "predicted_cost", "predicted_run_time_s"])
@pytest.mark.parametrize("value", ["Infinity", "NaN"])
def test_a_decision_with_an_infinite_or_nan_time_is_refused(field: str, value: str) -> None:
    """The decisions topic is ingested: an infinite latency was archived, and every mean and
    maximum over it read inf (found by the archive review). The worker's own model gives ``None``
    where its estimate is not finite (``LearnedPolicy.predicted_cost`` / ``predicted_run_time``)."""
    raw = json.loads(SAMPLES["decisions"].to_bytes())
    text = json.dumps({**raw, field: 0.0}).replace(f'"{field}": 0.0', f'"{field}": {value}')
    with pytest.raises(ValueError, match=field):
        decode("decisions", text.encode())


def test_the_lost_node_reason_is_what_reconciliation_recognises() -> None:
    """The worker's own ``preempted`` of a lost node's run is told from its agent's by this reason
    (storage/queries/reconcile.py): one definition, so a changed text cannot silently stop matching."""
    import re

    from scheduling.events import NODE_LOST_REASON_RE, node_lost_reason

    for how in ("reported", "silent (no report from its agent), marked",
                "silent (its agent's reports were refused: a clock 400 s ahead), marked"):  # fmt: skip
        assert re.match(NODE_LOST_REASON_RE, node_lost_reason("n1", how, 70.4, 60.0))
    assert not re.match(NODE_LOST_REASON_RE, "agent restarted: the run in progress was lost")


def test_a_record_timestamp_of_0_or_minus_1_is_no_timestamp() -> None:
    """Found by review: a record stamped -1 (none, in Kafka's terms) gave an event without a time 1969 as its
    time, which put the job ahead of every other in FIFO order; DeadLetter.of already took it for none."""
    from scheduling.events import with_record_identity

    bare = decode("jobs.submitted", b'{"job_id": "j"}')
    for ts in (-1, 0):
        ev = with_record_identity(bare, "jobs.submitted", 0, 5, ts)
        assert ev.event_time.year >= 2026, (ts, ev.event_time)
    assert with_record_identity(bare, "jobs.submitted", 0, 5, 1_767_225_600_000).event_time.year == 2026


def test_a_dead_letter_offset_beyond_the_archives_int64_is_refused() -> None:
    with pytest.raises(ValueError, match="less than or equal to 9223372036854775807"):
        DeadLetter(topic="jobs.submitted", offset=2**63, original_b64="", reason="x")
