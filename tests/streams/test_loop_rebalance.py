"""A rebalance waits for the step under way, and no step starts on a revoked partition until the next
assignment (streams/loop.py ``_on_partitions_revoked``), on the real worker loop with the broker stood in.

Without it, a partition revoked while a step awaited the broker (or the model server) went to a worker
that replays the ``decisions`` topic only to the end it read at assignment: a decision published after
that read was never replayed there, and both workers placed the job."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from aiokafka import TopicPartition

from scheduling.events import JobSubmitted, NodeTelemetry, decode, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)
PART = partition_for("c1", 4)


class SlowBroker:
    """Records what it is sent; holds each decision's acknowledgement until the test lets it go."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.held: list[asyncio.Future[Any]] = []
        self.hold = True

    async def publish(self, topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        event = decode(topic, value)  # (the loop publishes by un-prefixed topic name)
        self.sent.append(event)
        if self.hold and event.kind == "decision":
            ack = asyncio.get_running_loop().create_future()
            self.held.append(ack)
            return ack
        return await delivered(topic, key, value, partition, headers)

    def release(self) -> None:
        self.hold = False
        for ack in self.held:
            ack.set_result(None)

    def placed(self) -> list[str]:
        return [e.job_id for e in self.sent if e.kind == "decision" and e.outcome == "placed"]


def add_node(w: Any, node_id: str = "n1", cluster: str = "c1") -> None:
    w.nodes.data[node_id] = NodeTelemetry(node_id=node_id, cluster=cluster, event_time=T0, cpu_milli=8000,
                                          memory_mib=16384).model_dump(mode="json")  # fmt: skip


async def step_awaiting_the_broker(loop: Any, broker: SlowBroker) -> asyncio.Future[None]:
    """A tick under way, its first decision handed over and unacknowledged."""
    step = asyncio.ensure_future(loop.tick())
    while not broker.held:
        await asyncio.sleep(0.01)
    return step


def worker_on_c1(broker: SlowBroker, job_id: str) -> tuple[Any, Any, Any]:
    """A stood-in worker on ``broker`` with one node and ``job_id`` pending in cluster c1: (worker, its
    assignment, its loop)."""
    w, assigned = stood_in_worker(broker.publish, policy="best-fit")
    add_node(w)
    submit(w, job_id)
    return w, assigned, w.loop  # type: ignore[attr-defined]


def submit(w: Any, job_id: str) -> None:
    job = JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                       memory_mib=1024)  # fmt: skip
    w.apply(on_submitted(job, None, 0.0), partition=PART)


def test_a_revocation_waits_for_the_step_under_way_and_fences_its_partitions_until_the_next_assignment() -> None:
    broker = SlowBroker()

    async def go() -> None:
        w, assigned, loop = worker_on_c1(broker, "j1")
        step = await step_awaiting_the_broker(loop, broker)  # its decision handed over, unacknowledged
        revoked = {tp for tp in assigned if tp.partition == PART}
        revocation = asyncio.ensure_future(loop._on_partitions_revoked(w.app, revoked))
        await asyncio.sleep(0.3)
        assert not revocation.done(), "the rebalance went on while the step's decision was unacknowledged"
        assert w.running.get("j1") is None
        broker.release()
        await revocation
        assert step.done() and w.running["j1"]["state"] == "reserved"  # applied before the rebalance goes on

        # the consumer may still report the revoked partition until the group's next generation: no step on it
        submit(w, "j2")
        await loop.tick()
        assert broker.placed() == ["j1"]
        assert not loop.views.owns("c1", loop.owned)

        other = {TopicPartition(tp.topic, tp.partition) for tp in assigned if tp.partition != PART}
        await loop._on_partitions_revoked(w.app, other)  # nothing under way: returns at once
        await loop._on_partitions_assigned(w.app, assigned)  # the next generation gives it back
        await loop.tick()
        assert broker.placed() == ["j1", "j2"]

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_revocation_during_one_clusters_step_keeps_the_same_tick_off_the_other_revoked_clusters() -> None:
    """Found by the review of the change: the fence was read once per tick, so a tick went on to step the
    other revoked clusters (a model call and a publication each) while the rebalance waited."""
    broker = SlowBroker()
    second = next(f"c{i}" for i in range(2, 50) if partition_for(f"c{i}", 4) != PART)

    async def go() -> None:
        w, assigned = stood_in_worker(broker.publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        for cluster in ("c1", second):
            add_node(w, f"{cluster}-n", cluster)
            job = JobSubmitted(job_id=f"j-{cluster}", event_id=f"ev-{cluster}", event_time=T0, cluster=cluster,
                               cpu_milli=1000, memory_mib=1024)  # fmt: skip
            w.apply(on_submitted(job, None, 0.0), partition=partition_for(cluster, 4))
        step = await step_awaiting_the_broker(loop, broker)
        first = broker.placed()
        revocation = asyncio.ensure_future(loop._on_partitions_revoked(w.app, set(assigned)))  # all of them
        await asyncio.sleep(0.1)
        broker.release()
        await revocation
        assert step.done() and broker.placed() == first and len(first) == 1

    asyncio.run(asyncio.wait_for(go(), 30))


def test_the_gates_records_are_handed_over_together_and_a_revocation_meanwhile_places_nothing() -> None:
    """Jobs waiting for their DAG parents: their waiting records were awaited one by one (5 s per 1,000
    jobs, found by review), and a step that outlasted a rebalance's wait went on to place jobs on the
    revoked partition. Now every record is handed over before the first acknowledgement, and a step
    revoked meanwhile stops there."""
    broker = SlowBroker()

    async def go() -> None:
        w, assigned, loop = worker_on_c1(broker, "parent")
        for i in range(3):
            job = JobSubmitted(job_id=f"child{i}", event_id=f"ev-child{i}", event_time=T0, cluster="c1",
                               cpu_milli=1000, memory_mib=1024, dag_parents=["parent"])  # fmt: skip
            w.apply(on_submitted(job, None, 0.0), partition=PART)
        step = asyncio.ensure_future(loop.tick())
        while len(broker.held) < 3:  # all three handed over, none acknowledged yet
            await asyncio.sleep(0.01)
        assert not step.done() and broker.placed() == []
        loop.fenced.add(PART)  # a rebalance revokes the partition meanwhile
        broker.release()
        await step
        assert broker.placed() == [] and "parent" in w.pending  # nothing decided on the revoked partition

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_step_the_rebalance_stopped_waiting_for_sends_no_command_and_applies_nothing(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """(Found by review: past the revocation's wait, the step applied its decisions, writing the changelog
    of a partition it no longer owned, and sent their commands, racing the new owner's.)"""
    import streams.loop

    monkeypatch.setattr(streams.loop, "REVOKE_WAIT_S", 0.2)
    broker = SlowBroker()

    async def go() -> None:
        w, assigned, loop = worker_on_c1(broker, "j1")
        step = await step_awaiting_the_broker(loop, broker)
        await loop._on_partitions_revoked(w.app, {tp for tp in assigned if tp.partition == PART})  # gives up
        # the rebalance completes, the partition another worker's, before the step settles (found by the review
        # of the change: the assignment cleared the mark, and the step applied and commanded after all)
        await loop._on_partitions_assigned(w.app)
        broker.release()
        await step
        assert broker.placed() == ["j1"] and [e for e in broker.sent if e.kind == "place"] == []
        assert w.running.get("j1") is None and w.inflight == {}  # the new owner applies it from the topic

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_step_the_rebalance_stopped_waiting_for_decides_nothing_more_in_its_tick(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The rebalance gave up every partition while c1's step waited, and completed before it ended: the same
    tick went on to the next cluster and published its DAG gate's records there, on a partition another
    worker owned by then (found by the review of the change)."""
    import streams.loop

    monkeypatch.setattr(streams.loop, "REVOKE_WAIT_S", 0.2)
    broker = SlowBroker()
    second = next(f"c{i}" for i in range(2, 50) if partition_for(f"c{i}", 4) != PART)

    async def go() -> list[Any]:
        w, assigned = stood_in_worker(broker.publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        for cluster in ("c1", second):
            add_node(w, f"{cluster}-n", cluster)
        submit(w, "j-c1")
        child = JobSubmitted(job_id="child", event_id="ev-child", event_time=T0, cluster=second, cpu_milli=1000,
                             memory_mib=1024, dag_parents=["ghost"])  # fmt: skip
        w.apply(on_submitted(child, None, 0.0), partition=partition_for(second, 4))
        w.done.data["ghost"] = {"status": "rejected", "job_id": "ghost", "cluster": second}  # the child's parent
        step = await step_awaiting_the_broker(loop, broker)
        await loop._on_partitions_revoked(w.app, set(assigned))  # gives up on every partition
        await loop._on_partitions_assigned(w.app)  # and completes before the step ends
        n = len(broker.sent)
        broker.release()
        await step
        return broker.sent[n:]

    after = asyncio.run(asyncio.wait_for(go(), 30))
    assert not [e for e in after if getattr(e, "job_id", None) == "child"], after


def test_no_step_while_faust_rebalances_before_the_loops_revocation_receiver_has_run() -> None:
    """Faust marks the app rebalancing in aiokafka's revocation callback and dispatches its
    ``on_partitions_revoked`` signal (this loop's fence) later: a tick in between stepped on partitions
    about to go (found by review). No step until the rebalance's recovery is done."""
    broker = SlowBroker()
    broker.hold = False

    async def go() -> None:
        w, _, loop = worker_on_c1(broker, "j1")
        w.app.rebalancing = True
        await loop.tick()
        assert broker.placed() == [] and "j1" in w.pending
        w.app.rebalancing = False  # Faust's on_rebalance_end, once the recovery is done
        await loop.tick()
        assert broker.placed() == ["j1"]

    asyncio.run(asyncio.wait_for(go(), 30))
