"""The scheduling loop orders the pending jobs once per step (streams/loop.py,
``scheduling.orderings.compose.queue_order``) and hands that order both to a model-backed
placement's ``prepare_step`` (the learned policy calls its model for the head of the order, its
window, so FIFO would prepare the wrong jobs) and to ``schedule_step``, which does not order again
(an ordering may have state: ``sjf-learned``'s refresh budget)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from scheduling.events import JobSubmitted, NodeTelemetry, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_prepare_step_gets_the_queue_in_the_orderings_order() -> None:
    prepared: list[list[str]] = []

    async def prepare_step(snapshot: object, jobs: list, now: float, **kwargs: object) -> None:
        prepared.append([j.job_id for j in jobs])

    async def run() -> None:
        loop.policy.prepare_step = prepare_step
        ordering = loop.policy.ordering
        real = ordering.order

        def order(*args: object, **kwargs: object) -> list:
            orders.append(1)
            return real(*args, **kwargs)

        ordering.order = order
        await loop.tick()

    orders: list[int] = []
    w, _ = stood_in_worker(policy="priority+best-fit")
    loop = w.loop  # type: ignore[attr-defined]
    part = partition_for("c1", 4)
    w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=64000,
                                       memory_mib=65536, num_gpu=8, gpu_model="A100").model_dump(mode="json")  # fmt: skip
    for job_id, priority in (("low", 0), ("high", 5), ("mid", 1)):  # submitted in this (FIFO) order
        submitted = JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                                 memory_mib=1024, num_gpu=1, gpu_milli=1000, priority=priority)  # fmt: skip
        w.apply(on_submitted(submitted, None, 0.0), partition=part)
    asyncio.run(run())
    assert prepared == [["high", "mid", "low"]] and len(orders) == 1
    assert set(w.running) == {"low", "high", "mid"}
