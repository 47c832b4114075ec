"""A node whose agent falls silent is marked unhealthy (streams/silent_nodes.py), then its placements
are moved off by lost_nodes: on the real worker loop with the broker stood in. Found by the ingest
review: an agent that died with its node said nothing, and the node stayed schedulable, its jobs
``running``, for ever."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduling.events import JobSubmitted, NodeTelemetry, decode, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)
PART = partition_for("c1", 4)


def node(node_id: str, source: str = "agent") -> dict:
    return NodeTelemetry(node_id=node_id, cluster="c1", source=source, event_time=T0, cpu_milli=8000,
                         memory_mib=16384, num_gpu=2, gpu_model="A100").model_dump(mode="json")  # fmt: skip


class Run:
    """A stood-in worker whose loop passes can be run by hand; what it published."""

    def __init__(self, **settings: Any) -> None:
        self.sent: list[Any] = []

        async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
            self.sent.append((topic, partition, decode(topic, value)))
            return await delivered(topic, key, value, partition, headers)

        self.w, _ = stood_in_worker(publish, policy="best-fit", **settings)
        self.loop = self.w.loop  # type: ignore[attr-defined]
        self.end = 10  # the telemetry partitions' end, as the consumer knows it
        self.w.app.consumer.highwater = lambda tp: self.end  # type: ignore[method-assign]
        self.w.telemetry_offsets[PART] = 9  # handled up to it
        self.loop.silent_nodes._owned = set(range(4))  # owned since before the test (a new partition: see below)
        self.committed: int | None = None  # the group's committed offset on the telemetry partition

        async def committed(tp: Any) -> int | None:
            return self.committed

        self.loop.silent_nodes._committed_offset = committed

    async def passes(self, n: int = 1) -> None:
        for _ in range(n):
            self.loop.silent_nodes._checked = self.loop.lost_nodes._checked = 0.0  # (at most once a second)
            await self.loop.tick()

    def heard(self, node_id: str, ago_s: float) -> None:
        self.w.node_heard[node_id] = time.monotonic() - ago_s

    def reports(self) -> list[NodeTelemetry]:
        return [e for t, _, e in self.sent if t == "nodes.telemetry"]


def test_a_node_not_heard_from_is_marked_unhealthy_once_with_its_last_state() -> None:
    async def go() -> Run:
        r = Run(node_silent_s=40.0, node_lost_s=-1.0)
        r.w.nodes.data["n1"] = node("n1")
        r.w.nodes.data["n2"] = node("n2")  # heard a moment ago
        r.w.nodes.data["inv"] = node("inv", source="inventory")  # no agent ever reported it: nothing promised
        r.heard("n1", 41.0)
        r.heard("n2", 5.0)
        r.heard("inv", 3600.0)
        await r.passes(2)  # the second finds it marked (its report not back yet): not again
        return r

    r = asyncio.run(go())
    [report] = r.reports()
    assert (report.node_id, report.source, report.healthy) == ("n1", "worker", False)
    assert report.event_time == T0 + timedelta(milliseconds=1)  # any later report of its agent supersedes it
    assert (report.cpu_milli, report.num_gpu, report.gpu_model) == (8000, 2, "A100")
    assert [p for t, p, _ in r.sent if t == "nodes.telemetry"] == [PART]
    assert r.w.counters.nodes_silent == 1


def test_a_worker_behind_on_the_telemetry_or_with_the_check_off_marks_nothing() -> None:
    async def go(behind: bool, silent_s: float) -> Run:
        r = Run(node_silent_s=silent_s, node_lost_s=-1.0)
        r.w.nodes.data["n1"] = node("n1")
        r.heard("n1", 3600.0)
        if behind:  # its agent's reports may be in the backlog
            r.w.telemetry_offsets[PART] = 7
        await r.passes()
        return r

    assert asyncio.run(go(behind=True, silent_s=40.0)).reports() == []
    assert asyncio.run(go(behind=False, silent_s=0.0)).reports() == []
    assert len(asyncio.run(go(behind=False, silent_s=40.0)).reports()) == 1  # (the same, caught up)


def test_a_worker_that_starts_gives_every_node_the_whole_interval() -> None:
    async def go() -> Run:
        r = Run(node_silent_s=40.0, node_lost_s=-1.0)
        r.w.nodes.data["n1"] = node("n1")  # (from the table's recovery: never heard by this worker)
        await r.passes()
        return r

    r = asyncio.run(go())
    assert r.reports() == [] and "n1" in r.w.node_heard


def test_a_silent_nodes_placements_are_moved_off_and_it_comes_back_when_its_agent_reports() -> None:
    def job(job_id: str) -> JobSubmitted:
        return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                            memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip

    async def go() -> tuple[Run, list[Any]]:
        r = Run(node_silent_s=40.0, node_lost_s=0.0)
        r.w.nodes.data["n1"] = node("n1")
        r.heard("n1", 1.0)
        r.w.apply(on_submitted(job("j1"), None, 0.0), partition=PART)
        await r.passes()  # j1 placed on n1
        assert r.w.running["j1"]["node_id"] == "n1"
        r.heard("n1", 60.0)
        await r.passes()
        [marked] = r.reports()
        r.w.nodes.data["n1"] = marked.model_dump(mode="json")  # the worker's report came back
        await r.passes(2)
        preempted = [e for t, _, e in r.sent if t == "jobs.lifecycle" and e.state == "preempted"]
        # its agent reports again: healthy, heard now, and a later silence is marked again
        r.w.nodes.data["n1"] = node("n1") | {"event_time": (T0 + timedelta(seconds=5)).isoformat()}
        r.heard("n1", 0.0)
        await r.passes()
        assert len(r.reports()) == 1
        r.heard("n1", 41.0)
        await r.passes()
        return r, preempted

    r, preempted = asyncio.run(go())
    [ev] = preempted
    assert ev.job_id == "j1" and ev.node_id == "n1"
    assert "node n1 silent (no report from its agent), marked unhealthy" in ev.reason, ev.reason
    assert len(r.reports()) == 2 and r.reports()[1].event_time == T0 + timedelta(seconds=5, milliseconds=1)


def test_a_node_whose_agents_reports_are_refused_says_so_when_its_jobs_are_moved_off() -> None:
    """Its agent reports with a clock far ahead of the worker's: each report is dead-lettered, and the node,
    not heard from, is marked. The reason said its agent was silent; it says the reports were refused."""
    refused = "event_time 2026-03-02T00:00:00+00:00 is 86,400 s ahead of the worker's clock"

    async def go() -> list[Any]:
        r = Run(node_silent_s=40.0, node_lost_s=0.0)
        r.w.nodes.data["n1"] = node("n1")
        r.heard("n1", 1.0)
        r.w.apply(on_submitted(JobSubmitted(job_id="j1", event_id="ev-j1", event_time=T0, cluster="c1", cpu_milli=1000,
                                            memory_mib=1024), None, 0.0), partition=PART)  # fmt: skip
        await r.passes()
        r.w.node_refused["n1"] = refused  # (streams/agents.py: on a report it dead-letters for its clock)
        r.heard("n1", 60.0)
        await r.passes()
        [marked] = r.reports()
        r.w.nodes.data["n1"] = marked.model_dump(mode="json")
        await r.passes(2)
        return [e for t, _, e in r.sent if t == "jobs.lifecycle" and e.state == "preempted"]

    [ev] = asyncio.run(go())
    assert f"node n1 silent (its agent's reports were refused: {refused}), marked unhealthy" in ev.reason, ev.reason


def test_a_partition_given_back_gives_its_nodes_the_whole_interval_again() -> None:
    """What this worker heard of a node before it lost its partition says nothing of now: the nodes
    of a partition that came back were marked at once (found by the review of the change)."""

    async def go() -> Run:
        r = Run(node_silent_s=40.0, node_lost_s=-1.0)
        r.w.nodes.data["n1"] = node("n1")
        r.heard("n1", 900.0)  # heard while it owned the partition the first time
        r.loop.silent_nodes._owned = set(range(4)) - {PART}  # (given back just now)
        await r.passes()
        assert r.reports() == [] and r.w.node_heard["n1"] > time.monotonic() - 5
        r.heard("n1", 41.0)  # then silent for the whole interval: marked
        r.w.telemetry_offsets[PART] = 9
        await r.passes()
        return r

    assert [x.node_id for x in asyncio.run(go()).reports()] == ["n1"]


def test_a_restarted_worker_with_nothing_new_to_read_is_caught_up_by_the_committed_offset() -> None:
    """A worker restarted after its agents died reads nothing more on the telemetry partition: by the
    offsets it handled it was never caught up, so it never marked (found by the review of the change).
    The group's committed offset at the end says it is; one short of it, not."""

    async def go(committed: int) -> Run:
        r = Run(node_silent_s=40.0, node_lost_s=-1.0)
        r.w.nodes.data["n1"] = node("n1")
        r.heard("n1", 41.0)
        r.w.telemetry_offsets.pop(PART)  # nothing handled there since the start
        r.committed = committed
        await r.passes()
        return r

    assert len(asyncio.run(go(committed=10)).reports()) == 1
    assert asyncio.run(go(committed=9)).reports() == []


def test_a_partition_revoked_and_given_back_between_two_passes_is_new_again() -> None:
    """Owned, revoked, given back, all between two passes: the pass saw the same set both times and took
    the partition for one it had kept, so what it heard before marked its nodes at once (found by review)."""

    async def go() -> Run:
        r = Run(node_silent_s=40.0, node_lost_s=-1.0)
        r.w.nodes.data["n1"] = node("n1")
        everything = r.w.app.consumer.assignment()
        await r.passes()  # (the pass before)
        r.heard("n1", 900.0)  # heard before the partition left
        for given in ({tp for tp in everything if tp.partition != PART}, everything):  # it leaves, it comes back
            r.w.app.consumer.assignment = lambda given=given: given
            await r.loop._on_partitions_assigned(r.w.app)
        await r.passes()
        assert r.reports() == [] and r.w.node_heard["n1"] > time.monotonic() - 5  # given the whole interval again
        r.heard("n1", 900.0)  # a rebalance that gives every partition back (the consumer revokes them all first)
        r.w.telemetry_offsets[PART] = 9  # (handled up to the end again)
        await r.w.app.on_partitions_revoked.send(set(everything))
        await r.loop._on_partitions_assigned(r.w.app)
        await r.passes()
        return r

    r = asyncio.run(go())
    assert [x.node_id for x in r.reports()] == ["n1"]  # not a new interval for every node at every rebalance
