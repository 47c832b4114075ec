"""SimulatedAgents._handle without Kafka: the producer is replaced by a recorder."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ops.agents.simulated import SimulatedAgents
from scheduling.events import (
    Event,
    IsolateNodeCommand,
    JobLifecycle,
    NodeTelemetry,
    PlacementCommand,
    PreemptCommand,
    decision_id_for,
)
from streams.settings import Settings


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Event]] = []
        self.flushes = 0

    async def send(self, topic: str, event: Event, **kw: Any) -> None:
        self.sent.append((topic, event))

    async def flush(self) -> None:
        self.flushes += 1

    def lifecycle(self) -> list[JobLifecycle]:
        return [e for t, e in self.sent if t == "jobs.lifecycle"]  # type: ignore[misc]


@pytest.fixture
async def agents(tmp_path: Path) -> AsyncIterator[tuple[SimulatedAgents, Recorder]]:
    s = Settings(bootstrap="127.0.0.1:1", topic_prefix=f"u{uuid.uuid4().hex[:8]}.", state_dir=tmp_path)
    a = SimulatedAgents(s, default_duration_s=3600.0)
    rec = Recorder()
    a._producer = rec  # type: ignore[assignment]
    yield a, rec
    for h in a._timers.values():
        h.cancel()


def inventory(node_id: str = "n1", *, cpu: int = 4000, mem: int = 16_384, gpus: int = 2,
              source: str = "inventory") -> bytes:  # fmt: skip
    return NodeTelemetry(node_id=node_id, cluster="c1", source=source, cpu_milli=cpu, memory_mib=mem,
                         num_gpu=gpus, gpu_model="T4" if gpus else None).to_bytes()  # fmt: skip


def place(job_id: str = "j1", *, node_id: str = "n1", attempt: int = 0, cpu: int = 1000, mem: int = 1024,
          gpus: tuple[int, ...] = (), per_gpu: int = 0, duration: float | None = None,
          at: datetime | None = None) -> PlacementCommand:  # fmt: skip
    return PlacementCommand(decision_id=decision_id_for(job_id, attempt, "sub"), job_id=job_id, cluster="c1",
                            attempt=attempt, node_id=node_id, gpu_indices=list(gpus), cpu_milli=cpu,
                            memory_mib=mem, gpu_milli_per_gpu=per_gpu, policy="best-fit",
                            trace_duration_s=duration,
                            **({"event_time": at} if at else {}))  # fmt: skip


async def test_inventory_creates_the_node_and_agent_telemetry_does_not(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory("n1"))
    await a._handle("nodes.telemetry", inventory("n2", source="agent"))
    assert set(a.nodes) == {("c1", "n1")}
    assert a.nodes[("c1", "n1")].cpu_milli == 4000 and a.nodes[("c1", "n1")].gpu_alloc == [0, 0]
    assert rec.sent == []


async def test_placement_starts_the_job(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory())
    c = place(cpu=1500, mem=2048, gpus=(1,), per_gpu=1000)
    await a._handle("actions", c.to_bytes())
    [ev] = rec.lifecycle()
    assert (ev.state, ev.job_id, ev.cluster, ev.attempt, ev.decision_id, ev.node_id) == (
        "started", "j1", "c1", 0, c.decision_id, "n1",
    )  # fmt: skip
    n = a.nodes[("c1", "n1")]
    assert (n.cpu_alloc, n.mem_alloc, n.gpu_alloc) == (1500, 2048, [0, 1000])
    assert a.stats.commands == 1 and a.stats.started == 1 and a.stats.refused == 0
    assert ("c1", "n1") in a.dirty
    assert ("c1", c.decision_id) in a._timers  # it runs for its duration


async def test_duplicate_decision_id_is_ignored(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory())
    raw = place(cpu=1000).to_bytes()
    await a._handle("actions", raw)
    await a._handle("actions", raw)
    assert [e.state for e in rec.lifecycle()] == ["started"]
    assert a.stats.duplicates == 1 and a.stats.started == 1 and a.stats.commands == 2
    assert a.nodes[("c1", "n1")].cpu_alloc == 1000  # allocated once


async def test_overcommitting_command_yields_failed_with_the_reason(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory(cpu=4000))
    await a._handle("actions", place("j1", cpu=3000).to_bytes())
    big = place("j2", cpu=1500)
    await a._handle("actions", big.to_bytes())
    first, second = rec.lifecycle()
    assert first.state == "started" and first.job_id == "j1"
    assert second.state == "failed" and second.job_id == "j2"
    assert second.decision_id == big.decision_id and second.exit_code == -1
    assert second.reason == "agent refused: cpu over-commit on n1: 3000+1500 > 4000 milli"
    assert a.nodes[("c1", "n1")].cpu_alloc == 3000  # the refused job holds nothing
    assert a.stats.refused == 1 and a.stats.started == 1
    assert a.stats.first_refusals == ["j2: cpu over-commit on n1: 3000+1500 > 4000 milli"]


async def test_gpu_overcommit_is_refused(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory(gpus=1))
    await a._handle("actions", place("j1", gpus=(0,), per_gpu=600).to_bytes())
    await a._handle("actions", place("j2", gpus=(0,), per_gpu=500).to_bytes())
    assert [e.state for e in rec.lifecycle()] == ["started", "failed"]
    assert rec.lifecycle()[1].reason == "agent refused: GPU 0 over-commit on n1: 600+500 > 1000 milli"


async def test_command_for_an_unknown_node_waits_for_its_inventory(agents) -> None:
    a, rec = agents
    c = place("j1", node_id="late")
    await a._handle("actions", c.to_bytes())
    assert rec.sent == [] and a.stats.unknown_node_waits == 1
    assert a.unknown_node_grace_s > 0
    await a._handle("nodes.telemetry", inventory("late"))
    [ev] = rec.lifecycle()
    assert (ev.state, ev.decision_id, ev.node_id) == ("started", c.decision_id, "late")
    assert a.nodes[("c1", "late")].cpu_alloc == 1000
    assert a._waiting == {}
    # the waiting command counted as executed: a redelivery is a duplicate
    await a._handle("actions", c.to_bytes())
    assert a.stats.duplicates == 1 and len(rec.lifecycle()) == 1


async def test_a_command_waiting_for_its_node_holds_its_partition_commit_back(agents) -> None:
    """Offsets are committed by hand once a batch is handled (``_commit``): a command still waiting
    for its node's inventory is not executed yet, so its partition is committed only up to it."""
    from aiokafka import TopicPartition

    a, rec = agents
    actions, telemetry = TopicPartition("x.actions", 0), TopicPartition("x.nodes.telemetry", 1)
    committed: list[dict[TopicPartition, int]] = []

    class Consumer:
        async def commit(self, offsets: dict[TopicPartition, int]) -> None:
            committed.append(offsets)

    a._reading = (actions, 7)
    await a._handle("actions", place("j1", node_id="late").to_bytes())
    await a._commit(Consumer(), {actions: 12, telemetry: 5})  # type: ignore[arg-type]
    assert committed == [{actions: 7, telemetry: 5}] and rec.flushes == 1  # (reports delivered first)
    a._reading = (telemetry, 5)
    await a._handle("nodes.telemetry", inventory("late"))  # it runs now
    await a._commit(Consumer(), {actions: 12, telemetry: 6})  # type: ignore[arg-type]
    assert committed[-1] == {actions: 12, telemetry: 6}


async def test_command_for_an_unknown_node_past_the_grace_is_refused(agents) -> None:
    a, rec = agents
    old = datetime.now(UTC) - timedelta(seconds=a.unknown_node_grace_s + 5)
    await a._handle("actions", place("j1", node_id="ghost", at=old).to_bytes())
    [ev] = rec.lifecycle()
    assert ev.state == "failed" and ev.reason == "agent refused: unknown node ghost"
    assert a.stats.unknown_node_waits == 0 and a.stats.refused == 1


async def test_waiting_command_is_refused_by_the_telemetry_loop_after_the_grace(agents) -> None:
    a, rec = agents
    a.unknown_node_grace_s = 0.05
    a.telemetry_s = 0.02
    await a._handle("actions", place("j1", node_id="ghost").to_bytes())
    assert rec.sent == []
    task = asyncio.create_task(a._telemetry_loop())
    try:
        deadline = time.time() + 5
        while not rec.lifecycle() and time.time() < deadline:
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    [ev] = rec.lifecycle()
    assert ev.state == "failed" and "unknown node ghost" in ev.reason
    assert a._waiting == {}


async def test_an_inventory_taken_while_the_telemetry_loop_refuses_does_not_stop_the_agents(agents) -> None:
    """Found by review: the loop walked a snapshot of the waiting commands and awaited each refusal's
    report; the command loop meanwhile placed node B's (its inventory came), and the loop's pop of B
    raised KeyError: the agents stopped, and every run they held was lost."""
    a, rec = agents
    entered, handled = asyncio.Event(), asyncio.Event()

    async def send(topic: str, event: Event, **kw: Any) -> None:  # a send that yields (a full batch, say)
        if not entered.is_set():  # the refusal's: it yields until B's inventory is handled (not for 10 ms, which
            entered.set()  # a stall of the loop could outlast: found by the flakiness review)
            await asyncio.wait_for(handled.wait(), 5)
        rec.sent.append((topic, event))

    rec.send = send  # type: ignore[method-assign]
    a.unknown_node_grace_s, a.telemetry_s = 0.05, 0.02
    await a._handle("actions", place("ja", node_id="A").to_bytes())  # A never comes
    await a._handle("actions", place("jb", node_id="B").to_bytes())  # B's inventory is late
    await asyncio.sleep(0.1)  # both past the grace
    loop = asyncio.create_task(a._telemetry_loop())
    try:
        await asyncio.wait_for(entered.wait(), 5)  # refusing A's command
        await a._handle("nodes.telemetry", inventory("B"))
        handled.set()
        await asyncio.sleep(0.1)
        assert not loop.done(), loop.exception()
    finally:
        loop.cancel()
    states = {e.job_id: e.state for e in rec.lifecycle()}
    assert states == {"ja": "failed", "jb": "started"} and a._waiting == {}


async def test_job_finishes_after_its_duration_and_frees_the_node(agents) -> None:
    a, rec = agents
    a.speed = 100.0
    await a._handle("nodes.telemetry", inventory())
    await a._handle("actions", place("j1", cpu=4000, duration=1.0).to_bytes())  # 10 ms at speed 100
    deadline = time.time() + 5
    while len(rec.lifecycle()) < 2 and time.time() < deadline:
        await asyncio.sleep(0.01)
    started, finished = rec.lifecycle()
    assert (started.state, finished.state, finished.exit_code) == ("started", "finished", 0)
    assert finished.decision_id == started.decision_id
    assert a.nodes[("c1", "n1")].cpu_alloc == 0 and a.nodes[("c1", "n1")].jobs == {}
    assert a.stats.finished == 1


async def test_preempt_releases_and_reports(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory())
    c = place("j1", cpu=2000)
    await a._handle("actions", c.to_bytes())
    p = PreemptCommand(decision_id="p1", job_id="j1", cluster="c1", node_id="n1", reason="make room")
    await a._handle("actions", p.to_bytes())
    started, preempted = rec.lifecycle()
    assert preempted.state == "preempted" and preempted.reason == "make room"
    assert preempted.decision_id == c.decision_id  # reported against the placement it ends
    assert a.nodes[("c1", "n1")].cpu_alloc == 0 and ("c1", c.decision_id) not in a._timers
    assert a.stats.preempted == 1


async def test_isolated_node_refuses_new_work(agents) -> None:
    a, rec = agents
    await a._handle("nodes.telemetry", inventory())
    await a._handle("actions", IsolateNodeCommand(decision_id="iso", cluster="c1", node_id="n1",
                                                  reason="ECC errors").to_bytes())  # fmt: skip
    await a._handle("actions", place("j1").to_bytes())
    [ev] = rec.lifecycle()
    assert ev.state == "failed" and ev.reason == "agent refused: node n1 is not healthy"


async def test_an_isolation_is_reported_at_once_so_a_restart_reads_it_back(agents) -> None:
    """(Found by review: it waited for the telemetry tick, and agents restarted before it ran the node's
    placements again.)"""
    a, rec = agents
    await a._handle("nodes.telemetry", inventory())
    await a._handle("actions", IsolateNodeCommand(decision_id="iso", cluster="c1", node_id="n1",
                                                  reason="ECC errors").to_bytes())  # fmt: skip
    [(topic, ev)] = rec.sent
    assert topic == "nodes.telemetry" and ev.node_id == "n1" and ev.source == "agent" and ev.healthy is False


async def test_commands_the_agents_cannot_carry_out_are_dead_lettered_with_the_reason(agents) -> None:
    """A checkpoint restart, and an isolation of a node the agents do not know (found by review: both
    were counted executed and dropped without a word)."""
    from scheduling.events import DeadLetter, RestartFromCheckpointCommand

    a, rec = agents
    await a._handle("actions", IsolateNodeCommand(decision_id="iso", cluster="c1", node_id="ghost",
                                                  reason="ECC errors").to_bytes(), offset=3)  # fmt: skip
    await a._handle("actions", RestartFromCheckpointCommand(decision_id="r1", job_id="j1", cluster="c1", node_id="n1",
                                                            checkpoint_uri="s3://c/j1", reason="node lost").to_bytes(),
                    offset=4)  # fmt: skip
    dead = [e for t, e in rec.sent if t == "deadletter"]
    assert [(d.offset, d.reason) for d in dead] == [  # type: ignore[attr-defined]
        (3, "cannot execute actions command: no node ghost in cluster c1 (no inventory)"),
        (4, "cannot execute actions command: the simulated agents do not carry out restart_from_checkpoint commands")]
    assert isinstance(dead[0], DeadLetter) and a.decisions.executed == set()


async def test_two_clusters_with_the_same_job_and_node_names_are_kept_apart(agents) -> None:
    """One agents process plays every cluster (found by review: cluster b's placement of a job named
    as cluster a's was skipped as a duplicate, or charged to a's node)."""
    a, rec = agents
    for cluster in ("c1", "c2"):
        await a._handle("nodes.telemetry", NodeTelemetry(node_id="n1", cluster=cluster, source="inventory",
                                                         cpu_milli=4000, memory_mib=16_384).to_bytes())  # fmt: skip
        await a._handle("actions", place("j1", cpu=3000).model_copy(update={"cluster": cluster}).to_bytes())
    assert [(e.cluster, e.state) for e in rec.lifecycle()] == [("c1", "started"), ("c2", "started")]
    assert a.nodes[("c1", "n1")].cpu_alloc == a.nodes[("c2", "n1")].cpu_alloc == 3000 and a.stats.duplicates == 0


async def test_a_failed_report_of_a_completion_stops_the_agents(agents) -> None:
    """Work beside the command loop (the telemetry loop, a run's completion) that fails stops the agents at
    the loop's next turn, so their successor recovers (found by review: the telemetry loop died silently)."""
    from aiokafka.errors import KafkaTimeoutError

    a, rec = agents
    await a._handle("nodes.telemetry", inventory())

    async def refuse(topic: str, event: Event, **kw: Any) -> None:
        if getattr(event, "state", None) == "finished":
            raise KafkaTimeoutError("not delivered")
        rec.sent.append((topic, event))

    rec.send = refuse  # type: ignore[method-assign]
    await a._handle("actions", place("j1", duration=0.0).to_bytes())
    for _ in range(50):
        await asyncio.sleep(0.01)
        if a._failure is not None:
            break
    with pytest.raises(KafkaTimeoutError):
        a._raise_background_failure()


async def test_a_failing_telemetry_loop_stops_the_agents(agents) -> None:
    a, rec = agents
    a.telemetry_s = 0.01
    await a._handle("nodes.telemetry", inventory())

    async def broken_flush() -> None:
        raise RuntimeError("broker gone")

    rec.flush = broken_flush  # type: ignore[method-assign]
    task = a._background(a._telemetry_loop())
    for _ in range(100):
        await asyncio.sleep(0.01)
        if task.done():
            break
    with pytest.raises(RuntimeError, match="broker gone"):
        a._raise_background_failure()


async def test_a_malformed_command_is_dead_lettered_and_malformed_telemetry_left_to_the_worker(agents) -> None:
    a, rec = agents
    await a._handle("actions", b"{not json", partition=2, offset=7, key=b"n1")
    await a._handle("nodes.telemetry", b'{"node_id": ""}')  # the worker reads this topic and dead-letters it
    [(topic, dl)] = rec.sent
    assert topic == "deadletter" and dl.topic == "actions" and (dl.partition, dl.offset, dl.key) == (2, 7, "n1")
    assert dl.original() == b"{not json" and dl.reason.startswith("invalid actions command: ")
    assert a.stats.malformed_commands == 1 and a.stats.commands == 0 and a.nodes == {}


async def test_a_command_whose_report_could_not_be_made_is_dead_lettered_and_the_agents_go_on(agents) -> None:
    """An empty decision id (or a job id longer than a report may carry) is refused as a malformed command
    (found by review: the report's validation ended the agents, whose hand-made commits then re-read the
    command at every restart, and the commands behind it never ran)."""
    a, rec = agents
    await a._handle("nodes.telemetry", inventory())
    bad = place("j1").model_dump(mode="json") | {"decision_id": ""}
    long = place("j2").model_dump(mode="json") | {"job_id": "j" * 300}
    for cmd in (bad, long):
        await a._handle("actions", json.dumps(cmd).encode(), partition=0, offset=3)
    await a._handle("actions", place("j3").to_bytes())
    dead = [e for t, e in rec.sent if t == "deadletter"]
    assert len(dead) == 2 and all(d.reason.startswith("invalid actions command: ") for d in dead)
    assert [(e.job_id, e.state) for e in rec.lifecycle()] == [("j3", "started")]


async def test_a_placement_preempted_before_it_could_run_never_runs_and_is_reported(agents) -> None:
    """A gang fence for a member whose placement waits for its node's inventory (found by review: the
    fence was forgotten, and the member ran alone once the inventory came; the worker never fences twice)."""
    a, rec = agents
    waiting, later = place("b", node_id="late"), place("c", node_id="n1")
    await a._handle("actions", waiting.to_bytes())
    for c in (waiting, later):
        await a._handle("actions", PreemptCommand(decision_id=f"gang-{c.decision_id}", job_id=c.job_id, cluster="c1",
                                                  node_id=c.node_id, target_decision_id=c.decision_id,
                                                  reason="gang g: member a left the gang: failed").to_bytes())  # fmt: skip
    await a._handle("nodes.telemetry", inventory("late"))
    await a._handle("nodes.telemetry", inventory("n1"))
    await a._handle("actions", later.to_bytes())  # (its fence came first: reordered, or sent again)
    reports = [(e.job_id, e.state, e.reason) for e in rec.lifecycle()]
    assert reports == [("b", "preempted", "gang g: member a left the gang: failed"),
                       ("c", "preempted", "gang g: member a left the gang: failed")]  # fmt: skip
    assert a.nodes[("c1", "late")].jobs == {} and a.nodes[("c1", "n1")].jobs == {} and a._waiting == {}


async def test_two_attempts_of_one_job_on_one_node_are_both_accounted(agents) -> None:
    # attempt 0 was confirmed too late (the worker timed it out and re-queued the job), so
    # both placements reach the agent
    a, rec = agents
    await a._handle("nodes.telemetry", inventory(cpu=4000))
    c0, c1 = place("j1", attempt=0, cpu=1000), place("j1", attempt=1, cpu=1000)
    await a._handle("actions", c0.to_bytes())
    await a._handle("actions", c1.to_bytes())
    assert a.nodes[("c1", "n1")].cpu_alloc == 2000
    await a._complete(c0, failed=False)
    await a._complete(c1, failed=False)
    ends = {(e.decision_id, e.state) for e in rec.lifecycle() if e.state != "started"}
    assert ends == {(c0.decision_id, "finished"), (c1.decision_id, "finished")}
    assert a.nodes[("c1", "n1")].cpu_alloc == 0


async def test_a_targeted_preemption_ends_only_that_placement(agents) -> None:  # type: ignore[no-untyped-def]
    a, rec = agents
    await a._handle("nodes.telemetry", inventory(cpu=4000))
    c0, c1 = place("j1", attempt=0, cpu=1000), place("j1", attempt=1, cpu=1000)
    await a._handle("actions", c0.to_bytes())
    await a._handle("actions", c1.to_bytes())
    fence = PreemptCommand(decision_id="fence", job_id="j1", cluster="c1", node_id="n1",
                           target_decision_id=c0.decision_id, reason="superseded")  # fmt: skip
    await a._handle("actions", fence.to_bytes())
    assert a.nodes[("c1", "n1")].cpu_alloc == 1000 and set(a.nodes[("c1", "n1")].jobs) == {c1.decision_id}
    assert [(e.state, e.decision_id) for e in rec.lifecycle() if e.state == "preempted"] == [("preempted", c0.decision_id)]


async def test_every_node_is_reported_at_least_every_ten_seconds_changed_or_not(agents) -> None:
    """The worker marks a node its agent has gone quiet about unhealthy (streams/silent_nodes.py): a
    node the agents hold is reported whether or not anything changed on it."""
    from streams.settings import AGENT_REPORT_EVERY_S

    a, rec = agents
    a.telemetry_s = 0.01
    for n in ("n1", "n2"):
        await a._handle("nodes.telemetry", inventory(n))
    task = asyncio.create_task(a._telemetry_loop())
    try:
        deadline = time.time() + 5
        while len(rec.sent) < 2 and time.time() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # ten more rounds: nothing changed, nothing due
        first = sorted(e.node_id for t, e in rec.sent if t == "nodes.telemetry")
        a._reported_all -= AGENT_REPORT_EVERY_S  # ten seconds on
        while len(rec.sent) < 4 and time.time() < deadline:
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert first == ["n1", "n2"]
    reports = [e for t, e in rec.sent if t == "nodes.telemetry"]
    assert sorted(e.node_id for e in reports) == ["n1", "n1", "n2", "n2"]
    assert all(e.source == "agent" and e.healthy for e in reports)


async def test_decisions_over_for_longer_than_the_retention_are_forgotten_and_running_ones_kept(agents) -> None:
    """The agents remembered every decision they ever executed (ops/agents/decision_memory.py): one whose run
    ended, and a fence whose placement never came, are forgotten SEMSCHED_DONE_RETENTION + the clock skew
    later; a run still going is remembered however long it runs, so its command read again is not run twice."""
    a, rec = agents
    keep = a.settings.done_retention_s + a.settings.max_clock_skew_s
    await a._handle("nodes.telemetry", inventory(cpu=4000))
    ended, running = place("ended", cpu=1000), place("running", cpu=1000)
    for c in (ended, running):
        await a._handle("actions", c.to_bytes())
    await a._complete(ended, failed=False)
    fence = PreemptCommand(decision_id="fence-x", job_id="x", cluster="c1", node_id="n1", target_decision_id="never",
                           reason="gang g: member left")  # fmt: skip
    await a._handle("actions", fence.to_bytes())
    now = time.time()
    assert a.decisions.forget_old(now + keep - 60) == 0  # within the retention: all remembered
    await a._handle("actions", ended.to_bytes())
    assert a.stats.duplicates == 1
    # ended's decision, the fence's own, and the fence waiting for "never"
    assert a.decisions.forget_old(now + keep + 60) == 3
    assert ("c1", ended.decision_id) not in a.decisions and ("c1", "never") not in a.decisions.fenced
    assert a.decisions.executed == {("c1", running.decision_id)}
    await a._handle("actions", running.to_bytes())  # read again while it runs: not run twice
    assert a.stats.duplicates == 2 and a.nodes[("c1", "n1")].cpu_alloc == 1000


async def test_a_retention_of_0_keeps_every_decision(tmp_path: Path) -> None:
    s = Settings(bootstrap="127.0.0.1:1", state_dir=tmp_path, done_retention_s=0)
    a = SimulatedAgents(s)
    a.decisions.execute(("c1", "d"))
    a.decisions.over(("c1", "d"), 0.0)
    assert a.decisions.forget_old(time.time() + 10 * 365 * 86400) == 0 and ("c1", "d") in a.decisions
