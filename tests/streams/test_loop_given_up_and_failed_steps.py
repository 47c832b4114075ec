"""The loop past its failures. A placement command the broker refused is not sent again once its node was
taken for lost and the
placement fenced (``streams/loop.py``: ``resend_commands`` skips what ``lost_nodes`` moved off its node).
Found by review: the same tick fenced the placement, then sent its command again after the fence."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from scheduling.events import JobSubmitted, PlacementCommand, decision_id_for, decode
from streams.state import RunningJob, Transition
from tests.streams.loop_helpers import C1, T0, c1_node, delivered, stood_in_worker


def test_a_refused_command_of_a_placement_fenced_off_a_lost_node_is_not_sent_again() -> None:
    actions: list[Any] = []

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("actions"):
            actions.append(decode("actions", value))
        return await delivered(topic, key, value, partition, headers)

    async def go() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit", node_lost_s=0.0)
        w.nodes.data["n1"] = c1_node("n1") | {"healthy": False}
        job = JobSubmitted(job_id="a", event_id="ev-a", event_time=T0, cluster="c1", cpu_milli=1000, memory_mib=512)
        did = decision_id_for("a", 0, "ev-a")
        w.apply(Transition(running={"a": RunningJob(job=job, attempt=0, submit_ts=T0.timestamp(), decision_id=did,
                                                    node_id="n1", gpu_indices=[], reserved_ts=time.time())}),
                partition=C1)  # fmt: skip
        command = PlacementCommand(decision_id=did, job_id="a", cluster="c1", node_id="n1", policy="best-fit")
        w.unsent_commands[did] = ("a", C1, "n1", command.to_bytes(), None)  # the broker refused it at its step
        w.loop.lost_nodes.unhealthy_since["n1"] = time.time() - 3600  # type: ignore[attr-defined]
        await w.loop.tick()  # type: ignore[attr-defined]

    asyncio.run(go())
    assert [(a.kind, a.decision_id) for a in actions] == [("preempt", f"lost-{decision_id_for('a', 0, 'ev-a')}")]


def test_one_clusters_failing_step_leaves_the_others_steps_to_run() -> None:
    """Found by review: an exception in one cluster's step skipped the steps of every cluster after it in
    that tick; one that repeats would have starved them."""
    from scheduling.events import NodeTelemetry, partition_for
    from streams.state import on_submitted

    async def go() -> tuple[list[str], dict[str, int]]:
        w, _ = stood_in_worker(policy="best-fit")
        c2 = next(f"c{i}" for i in range(2, 50) if partition_for(f"c{i}", 4) != C1)
        for cluster in ("c1", c2):
            w.nodes.data[f"{cluster}-n"] = NodeTelemetry(node_id=f"{cluster}-n", cluster=cluster, event_time=T0,
                                                         cpu_milli=8000, memory_mib=16384).model_dump(mode="json")  # fmt: skip
            job = JobSubmitted(job_id=f"{cluster}-j", event_id=f"ev-{cluster}", event_time=T0, cluster=cluster,
                               cpu_milli=1000, memory_mib=512)  # fmt: skip
            w.apply(on_submitted(job, None, time.time()), partition=partition_for(cluster, 4))
        loop = w.loop  # type: ignore[attr-defined]
        real, first = loop._step_cluster, []

        async def failing_first(cluster: str, *args: Any) -> None:
            if not first or first[0] == cluster:
                first.append(cluster)
                raise RuntimeError("a bug in this cluster's step")
            await real(cluster, *args)

        loop._step_cluster = failing_first
        with pytest.raises(RuntimeError, match="a bug in this cluster's step"):  # (after the other cluster's step)
            await loop.tick()
        return sorted(w.running), dict(w.counters.notes)

    running, notes = asyncio.run(go())
    assert len(running) == 1 and notes.get("scheduling step failed") == 1  # the other cluster's job placed
