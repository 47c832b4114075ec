"""A step whose decisions cannot be handed to the producer (streams/loop.py ``_step_cluster``), on
the real worker app and loop with the broker stood in: the producer refuses the second decision
of a step as it is handed over (aiokafka raises at ``send`` when, say, the topic's metadata
does not come in time). No job may stay hidden: each goes back to the queue and the next step
places every one of them, once (found by review: the job whose hand-over failed stayed in
``inflight`` for good, out of the queue, holding its GPU)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError

from scheduling.events import JobSubmitted, NodeTelemetry, decode, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def job(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip


def test_a_decision_the_producer_refuses_leaves_no_job_hidden_and_the_next_step_places_all_once() -> None:
    decisions: list[Any] = []
    refuse = {"left": 1}

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("decisions"):
            if decisions and refuse["left"]:  # the step's second decision
                refuse["left"] -= 1
                raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
            decisions.append(decode("decisions", value))
        return await delivered(topic, key, value, partition, headers)

    async def run() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000, memory_mib=16384,
                                           num_gpu=2, gpu_model="A100").model_dump(mode="json")  # fmt: skip
        for name in ("j1", "j2"):
            w.apply(on_submitted(job(name), None, 0.0), partition=part)
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        assert w.inflight == {}  # neither job hidden from the queue, nor holding a GPU
        assert sorted(w.pending) == ["j1", "j2"] and not list(w.running)
        await loop.tick()
        placed = [d for d in decisions if d.outcome == "placed"]
        assert sorted(d.job_id for d in placed[1:]) == ["j1", "j2"]  # the second step decided both
        assert placed[0].decision_id in {d.decision_id for d in placed[1:]}  # j1 again under the same id
        gpus = {k: (v["node_id"], tuple(v["gpu_indices"])) for k, v in w.running.items()}
        assert sorted(gpus) == ["j1", "j2"] and len(set(gpus.values())) == 2, gpus
        assert not list(w.pending) and w.inflight == {}

    asyncio.run(run())
