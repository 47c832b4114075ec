"""Placements on a node that reports itself unhealthy are moved off it (streams/lost_nodes.py), on
the real worker loop with the broker stood in. Found by review: a job running on a node whose
telemetry turned unhealthy (or whose agent died with it) stayed in ``running`` for ever, its
GPUs held, never finished, re-queued or rejected."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from scheduling.events import JobSubmitted, NodeTelemetry, decode, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def node(node_id: str, healthy: bool = True) -> dict:
    return NodeTelemetry(node_id=node_id, cluster="c1", event_time=T0, cpu_milli=8000, memory_mib=16384, num_gpu=2,
                         gpu_model="A100", healthy=healthy).model_dump(mode="json")  # fmt: skip


def job(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip


def run(grace: float) -> dict[str, list[Any]]:
    sent: dict[str, list[Any]] = {}

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        name = topic  # (un-prefixed: the worker adds its prefix below publish)
        sent.setdefault(name, []).append(decode(name, value))
        return await delivered(topic, key, value, partition, headers)

    async def go() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit", node_lost_s=grace)
        loop = w.loop  # type: ignore[attr-defined]
        w.nodes.data["n1"] = node("n1")
        w.apply(on_submitted(job("j1"), None, 0.0), partition=partition_for("c1", 4))
        await loop.tick()  # j1 placed on n1 (reserved until its agent says 'started')
        assert w.running["j1"]["node_id"] == "n1"
        w.nodes.data["n1"] = node("n1", healthy=False)
        for _ in range(2):  # the second pass finds it done
            loop.lost_nodes._checked = 0.0  # (a pass at most once a second)
            await loop.tick()

    asyncio.run(go())
    return sent


def test_a_placement_on_a_node_unhealthy_past_the_grace_is_fenced_and_preempted_once() -> None:
    sent = run(grace=0.0)
    [fence] = [c for c in sent.get("actions", []) if c.kind == "preempt"]
    [ev] = [e for e in sent.get("jobs.lifecycle", []) if e.state == "preempted"]
    assert (fence.node_id, fence.job_id) == ("n1", "j1") and fence.target_decision_id == ev.decision_id
    assert ev.job_id == "j1" and "node n1 reported unhealthy" in ev.reason and ev.node_id == "n1"


def test_within_the_grace_or_disabled_nothing_moves() -> None:
    for grace in (3600.0, -1.0):
        sent = run(grace=grace)
        assert not [e for e in sent.get("jobs.lifecycle", []) if e.state == "preempted"], grace
