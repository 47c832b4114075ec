"""The scheduling loop's kept snapshot across a rebalance (streams/loop.py, streams/snapshot_cache.py),
on the real worker app and loop with the broker stood in: a partition that went to another
worker for one generation and came back between two steps (the same assignment) comes back
with that worker's placements, written by Faust's table recovery, not ``Worker.apply``. The
next step must see them (found by review: it placed a job on a GPU the other worker had given)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from scheduling.events import DecisionRecord, JobSubmitted, NodeTelemetry, decision_id_for, partition_for
from streams.state import on_decision, on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def job(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip


def test_placements_recovered_at_a_rebalance_that_gave_back_the_same_partitions_are_held() -> None:
    async def run() -> dict[str, tuple[str, list[int]]]:
        w, assigned = stood_in_worker(policy="best-fit", snapshot_verify_s=3600)
        loop = w.loop  # type: ignore[attr-defined]
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000, memory_mib=16384,
                                           num_gpu=2, gpu_model="A100").model_dump(mode="json")  # fmt: skip
        w.apply(on_submitted(job("j1"), None, 0.0), partition=part)
        await loop.tick()  # j1 on one of n1's two GPUs
        # away for a generation: the other worker placed k1 on the other GPU; recovery reads it back
        other = "1" if w.running["j1"]["gpu_indices"] == [0] else "0"
        rec = DecisionRecord(event_id=decision_id_for("k1", 0, "ev-k1"), decision_id=decision_id_for("k1", 0, "ev-k1"), job_id="k1",
                             cluster="c1", attempt=0, outcome="placed", node_id="n1", gpu_indices=[int(other)],
                             policy="best-fit", latency_ms=1.0, reason="", event_time=T0)  # fmt: skip
        w.running.data["k1"] = on_decision(rec, on_submitted(job("k1"), None, 0.0).pending["k1"]).running["k1"] \
            .model_dump(mode="json")  # fmt: skip
        await loop.catchup.on_partitions_assigned(None, assigned)
        await loop.lifecycle_catchup.on_partitions_assigned(None, assigned)
        w.apply(on_submitted(job("j2"), None, 0.0), partition=part)
        await loop.tick()
        return {k: (v["node_id"], v["gpu_indices"]) for k, v in w.running.items()}

    rows = asyncio.run(run())
    gpus = [tuple(g) for _, g in rows.values()]
    assert set(rows) == {"j1", "k1"} and len(gpus) == len(set(gpus)), rows  # j2 waits: n1 is full


def test_a_placement_records_the_lifecycle_reports_its_step_had_applied() -> None:
    """``lifecycle_through`` (what ``train --from-archive`` rebuilds each decision's state from): the
    cluster partition's ``lifecycle_handled`` when the step took its snapshot, not when it published."""
    sent: list[DecisionRecord] = []

    async def capture(topic: str, key: object, value: bytes, partition: int, headers: object = None) -> object:
        if topic == "decisions":
            sent.append(DecisionRecord.model_validate_json(value))
            w.lifecycle_handled[part] = 99  # a report handled while the step publishes
        return await delivered(topic, key, value, partition, headers)

    async def prepare_step(*args: object, **kwargs: object) -> None:  # a model call: reports are handled meanwhile
        w.lifecycle_handled[part] = w.lifecycle_handled.get(part, 0) + 50

    async def run() -> None:
        await loop.tick()  # no report handled yet
        w.lifecycle_handled[part] = 42
        w.apply(on_submitted(job("j2"), None, 0.0), partition=part)
        loop.policy.prepare_step = prepare_step
        await loop.tick()

    w, _ = stood_in_worker(capture, policy="best-fit")
    loop = w.loop  # type: ignore[attr-defined]
    part = partition_for("c1", 4)
    w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000, memory_mib=16384,
                                       num_gpu=2, gpu_model="A100").model_dump(mode="json")  # fmt: skip
    w.apply(on_submitted(job("j1"), None, 0.0), partition=part)
    asyncio.run(run())
    assert [(r.job_id, r.lifecycle_through) for r in sent] == [("j1", None), ("j2", 42)]
