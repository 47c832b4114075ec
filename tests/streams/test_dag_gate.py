"""The gate in front of the policy (``streams/dag_gate.py``): DAG parents that wait on each other
in a cycle are rejected with the cycle, not left waiting for ever (found by review: a job naming
its child as its parent was accepted and waited with it indefinitely)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from scheduling.events import JobSubmitted, NodeTelemetry, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_a_cycle_of_parents_is_rejected_and_the_rest_waits_or_runs() -> None:
    async def go() -> dict[str, object]:
        w, _ = stood_in_worker(policy="best-fit", max_retries=3)
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000,
                                           memory_mib=16384).model_dump(mode="json")  # fmt: skip
        for job_id, parents in (("a", ["b"]), ("b", ["a"]), ("c", ["a"]), ("p", []), ("q", ["p"])):
            ev = JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                              memory_mib=1024, dag_parents=parents)  # fmt: skip
            w.apply(on_submitted(ev, None, 0.0), partition=part)
        await w.loop.tick()  # type: ignore[attr-defined]
        return {"done": {k: v["reason"] for k, v in w.done.items()}, "running": sorted(w.running),
                "pending": sorted(w.pending)}  # fmt: skip

    out = asyncio.run(go())
    done = out["done"]
    assert isinstance(done, dict) and sorted(done) == ["a", "b", "c"]
    assert "its DAG parents wait on a cycle (a -> b -> a)" in done["a"]
    assert "(b -> a -> b)" in done["b"] and "(a -> b -> a)" in done["c"]
    assert out["running"] == ["p"] and out["pending"] == ["q"]  # q waits for p to finish


def test_a_child_queued_before_a_long_downtime_waits_for_its_parent_from_the_workers_start() -> None:
    """Found by review: the wait for a parent never submitted counted from when the child was queued, so
    after a downtime longer than SEMSCHED_DAG_PARENT_WAIT a child whose parent was still in the
    submissions' backlog was rejected at the restart's first step. The wait now runs from the worker's start."""
    import time

    async def go() -> tuple[dict[str, object], list[str]]:
        w, _ = stood_in_worker(policy="best-fit", dag_parent_wait_s=600)
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000,
                                           memory_mib=16384).model_dump(mode="json")  # fmt: skip
        child = JobSubmitted(job_id="child", event_id="ev-child", event_time=T0, cluster="c1", cpu_milli=1000,
                             memory_mib=1024, dag_parents=["parent"])  # fmt: skip
        w.apply(on_submitted(child, None, time.time() - 3600), partition=part)  # queued an hour ago, before the downtime
        await w.loop.tick()  # type: ignore[attr-defined]
        first = dict(w.done.items())
        w.started_at -= 3600  # the same worker an hour on, the parent still unseen: now it is given up
        await w.loop.tick()  # type: ignore[attr-defined]
        return first, sorted(w.done)

    first, later = asyncio.run(go())
    assert first == {} and later == ["child"]


def test_a_fan_in_names_a_few_of_its_parents() -> None:
    """A job with 400 parents held (waiting, or rejected for a rejected parent) names five and how many
    more (found by review: a reason naming every parent was 6 kB; over the wire's 4 KiB its notice was
    refused and its cluster's every step failed)."""
    from streams.dag_gate import _parents_verdict
    from streams.state import PendingJob

    async def go() -> tuple[str, str]:
        w, _ = stood_in_worker(policy="best-fit")
        parents = [f"map-task-{i:05d}" for i in range(400)]
        child = PendingJob(job=JobSubmitted(job_id="reduce", event_id="e", event_time=T0, cluster="c1",
                                            dag_parents=parents), submit_ts=0.0, queued_ts=0.0)  # fmt: skip
        for q in parents:
            w.pending.data[q] = {"job": {"job_id": q}}
        waiting = _parents_verdict(w, child, parents, 0.0, 600.0)
        w.done.data[parents[0]] = {"status": "rejected"}
        rejected = _parents_verdict(w, child, parents, 0.0, 600.0)
        assert waiting is not None and rejected is not None
        return waiting[1], rejected[1]

    waiting, rejected = asyncio.run(go())
    assert waiting == ("waiting for DAG parent(s) map-task-00000, map-task-00001, map-task-00002, map-task-00003, "
                       "map-task-00004 and 395 more to finish")  # fmt: skip
    assert rejected == "DAG parent(s) map-task-00000 were rejected"


def test_a_partition_given_to_a_long_running_worker_gives_its_children_the_whole_wait() -> None:
    """A worker up for hours is given a partition whose submissions lag: a child queued an hour ago
    whose parent is still in that backlog waits SEMSCHED_DAG_PARENT_WAIT from when the partition came,
    not from the worker's start (found by review: rejected at once)."""
    import time

    async def go() -> tuple[dict[str, object], list[str]]:
        w, _ = stood_in_worker(policy="best-fit", dag_parent_wait_s=600)
        w.started_at -= 7200  # up for two hours
        part = partition_for("c1", 4)
        await w.loop._on_partitions_assigned(w.app)  # type: ignore[attr-defined]  # (the stood-in consumer's assignment)
        assert w.holds_since[part] > time.time() - 5
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000,
                                           memory_mib=16384).model_dump(mode="json")  # fmt: skip
        child = JobSubmitted(job_id="child", event_id="ev-child", event_time=T0, cluster="c1", cpu_milli=1000,
                             memory_mib=1024, dag_parents=["parent"])  # fmt: skip
        w.apply(on_submitted(child, None, time.time() - 3600), partition=part)
        await w.loop.tick()  # type: ignore[attr-defined]
        first = dict(w.done.items())
        w.holds_since[part] -= 3600  # an hour on, the parent still unseen: now it is given up
        await w.loop.tick()  # type: ignore[attr-defined]
        return first, sorted(w.done)

    first, later = asyncio.run(go())
    assert first == {} and later == ["child"]
