"""What the worker's scheduling loop tells the orderings each step (streams/loop.py's OrderContext): a
re-queued job's attained service, kept in the pending table (streams/state.py), which 2D-LAS ranks by.
Found by review: the worker never kept it, so its ``las+…`` ordered as FIFO."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from scheduling.events import JobLifecycle, JobSubmitted, NodeTelemetry, partition_for
from streams.agents import lifecycle_transition
from streams.state import on_submitted
from tests.streams.loop_helpers import stood_in_worker


def at(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def job(job_id: str, t: float) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=at(t), cluster="c1", cpu_milli=1000,
                        memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip


def test_las_in_the_worker_ranks_a_requeued_job_by_the_service_it_received() -> None:
    """A ran 2 h on one GPU (7,200 GPU-s, past las's first threshold of 3,600) and went back to the queue
    (its agent restarted); B never ran. 2D-LAS puts B first on the one free GPU; FIFO would put A."""
    now = time.time()
    t_a, t_b = now - 3 * 3600, now - 3 * 3600 + 60

    async def go() -> tuple[list[str], list[str], dict[str, float]]:
        w, _ = stood_in_worker(policy="las+best-fit", max_retries=3)
        loop = w.loop  # type: ignore[attr-defined]
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=at(now), cpu_milli=8000,
                                           memory_mib=16384, num_gpu=1, gpu_model="A100").model_dump(mode="json")  # fmt: skip
        seen = []
        order = loop.policy.ordering.order
        loop.policy.ordering.order = lambda jobs, t, ctx=None: (seen.append(ctx), order(jobs, t, ctx))[1]
        w.apply(on_submitted(job("a", t_a), None, t_a), partition=part)
        await loop.tick()
        assert list(w.running) == ["a"]
        w.apply(on_submitted(job("b", t_b), None, t_b), partition=part)
        for state, t in (("started", now - 2 * 3600 - 10), ("preempted", now - 10)):
            r = w.running["a"]
            ev = JobLifecycle(job_id="a", cluster="c1", state=state, attempt=r["attempt"], event_time=at(t),
                              decision_id=r["decision_id"], node_id=r["node_id"], reason="agent restarted")  # fmt: skip
            w.apply(lifecycle_transition(w, ev), partition=part)
        assert {"a", "b"} <= set(w.pending)
        await loop.tick()
        return sorted(w.running), sorted(w.pending), dict(seen[-1].attained_service)

    running, pending, attained = asyncio.run(go())
    assert attained == {"a": 7200.0}
    assert (running, pending) == (["b"], ["a"])
