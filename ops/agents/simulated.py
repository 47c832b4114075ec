"""Simulated cluster agents: one process that plays the node agents of every node.

At start it reads back the inventory and the lifecycle reports (:mod:`ops.agents.recovery`:
a restarted process knows the nodes, skips the decisions already executed and reports the runs
its predecessor lost ``preempted``). It learns the nodes from the inventory telemetry, executes commands from ``actions``
(ignoring a decision id it has already executed), refuses any command that would
over-commit a node (a ``failed`` lifecycle event with the reason), runs each job for its
trace duration divided by ``speed``, reports ``started`` / ``finished``, and publishes
telemetry for the nodes whose allocation changed every ``telemetry_s`` seconds, and for every node
at least every 10 s (``AGENT_REPORT_EVERY_S``: a node not heard from is marked unhealthy by the worker,
``streams/silent_nodes.py``).

Offsets are committed by hand, after each batch of commands has been executed and its reports
delivered (a command waiting for its node's inventory holds its partition's commit back): with
aiokafka's auto-commit, a batch counted as consumed once it was fetched, and agents that stopped
on an error mid-batch never executed or reported the rest of it. A command read again after a
restart is skipped when its decision was already reported on (:mod:`ops.agents.recovery`).

Tracing: each placement command is executed inside an ``execute job`` span, a child of the
trace context the command carries in its headers (the worker's ``schedule job`` span); it
lasts from the command's receipt to finished / failed / preempted / refused, and the lifecycle
events it publishes carry its context back (``streams/telemetry/spans.py``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError
from opentelemetry.trace import Span
from pydantic import ValidationError

from ops.agents.node_ledger import NodeLedger
from ops.agents.recovery import LOST_REASON, recover
from ops.agents.single_instance import (
    PREDECESSOR_WAIT_S,
    AgentsAlreadyRunning,
    agents_group,
    wait_until_alone,
)
from scheduling.events import (
    DeadLetter,
    IsolateNodeCommand,
    JobLifecycle,
    NodeTelemetry,
    PlacementCommand,
    PreemptCommand,
    decode,
    derived_event_id,
)
from streams.kafka_logs import quiet_retried_coordinator_lookups
from streams.producer import EventProducer
from streams.settings import AGENT_REPORT_EVERY_S, Settings, no_broker
from streams.telemetry import (
    TelemetryConfigError,
    configure,
    count_deadletter,
    end_execute,
    inject,
    start_execute,
)

log = logging.getLogger("semsched.agents")


@dataclass
class AgentStats:
    commands: int = 0
    started: int = 0
    finished: int = 0
    refused: int = 0
    duplicates: int = 0
    failed_injected: int = 0
    preempted: int = 0
    unknown_node_waits: int = 0
    malformed_commands: int = 0
    lost_on_restart: int = 0  # runs a predecessor left unfinished, reported preempted at start
    first_refusals: list[str] = field(default_factory=list)


class SimulatedAgents:
    def __init__(self, settings: Settings, *, speed: float = 1.0, default_duration_s: float = 60.0,
                 max_duration_s: float | None = None, telemetry_s: float = 5.0, fail_rate: float = 0.0,
                 seed: int = 0, predecessor_wait_s: float = PREDECESSOR_WAIT_S) -> None:  # fmt: skip
        self.settings = settings
        self.predecessor_wait_s = predecessor_wait_s
        self.speed = speed
        self.default_duration_s = default_duration_s
        self.max_duration_s = max_duration_s
        self.telemetry_s = telemetry_s
        self.fail_rate = fail_rate
        self.rng = random.Random(seed)
        self.nodes: dict[str, NodeLedger] = {}
        self.executed: set[str] = set()
        self.dirty: set[str] = set()
        self.stats = AgentStats()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._waiting: dict[str, list[PlacementCommand]] = {}
        self._waiting_at: dict[str, tuple[TopicPartition, int]] = {}  # waiting decision id -> where it was read
        self._fenced: dict[str, str] = {}  # placements preempted before the agents held them -> the reason
        self._spans: dict[str, Span] = {}  # decision id → its open ``execute job`` span
        self.unknown_node_grace_s = 10.0
        self._producer = EventProducer(settings)
        self._stopping = asyncio.Event()
        self._reported_all = 0.0  # when every node was last reported (streams/silent_nodes.py)
        self._reading: tuple[TopicPartition, int] | None = None  # the message being handled

    def run_seconds(self, cmd: PlacementCommand) -> float:
        d = cmd.trace_duration_s if cmd.trace_duration_s is not None else self.default_duration_s
        if self.max_duration_s is not None:
            d = min(d, self.max_duration_s)
        return d / self.speed if self.speed > 0 else 0.0

    async def run(self) -> None:
        await wait_until_alone(self.settings, self.predecessor_wait_s)  # before the read-back: it reports the runs it finds lost
        consumer = AIOKafkaConsumer(
            self.settings.topic("actions"), self.settings.topic("nodes.telemetry"),
            bootstrap_servers=self.settings.bootstrap, group_id=agents_group(self.settings),
            auto_offset_reset="earliest", enable_auto_commit=False,
        )  # fmt: skip
        await self._producer.__aenter__()
        await self._recover()
        await consumer.start()
        telemetry = asyncio.create_task(self._telemetry_loop())
        try:
            while not self._stopping.is_set():
                batch = await consumer.getmany(timeout_ms=200, max_records=2000)
                for tp, msgs in batch.items():
                    topic = tp.topic.removeprefix(self.settings.topic_prefix)
                    for m in msgs:
                        self._reading = (tp, m.offset)
                        await self._handle(topic, m.value, partition=m.partition, offset=m.offset, key=m.key,
                                           headers=m.headers)  # fmt: skip
                if batch:
                    await self._commit(consumer, {tp: msgs[-1].offset + 1 for tp, msgs in batch.items() if msgs})
        finally:
            telemetry.cancel()
            for h in self._timers.values():
                h.cancel()
            for span in self._spans.values():
                end_execute(span, "agent stopped")
            self._spans.clear()
            await consumer.stop()
            await self._producer.__aexit__(None, None, None)

    def stop(self) -> None:
        self._stopping.set()

    async def _commit(self, consumer: AIOKafkaConsumer, read: dict[TopicPartition, int]) -> None:
        """Commit ``read`` (partition -> the offset after its last handled message) once the reports
        are delivered, each partition only up to its earliest command still waiting for its node (as it
        was before the flush: one resolved meanwhile is reported after it began)."""
        held = list(self._waiting_at.values())
        await self._producer.flush()
        offsets = dict(read)
        for tp, offset in held:
            if tp in offsets:
                offsets[tp] = min(offsets[tp], offset)
        await consumer.commit(offsets)

    async def _recover(self) -> None:
        """Read back the nodes and what a predecessor executed (ops/agents/recovery.py); report
        each run it left unfinished ``preempted``, so the worker decides that job again."""
        got = await recover(self.settings)
        for node_id, inventory in got.inventory.items():
            self.nodes.setdefault(node_id, NodeLedger.from_inventory(inventory))
        self.executed |= got.reported
        for started in got.lost:
            await self._producer.send("jobs.lifecycle", started.model_copy(update={
                "state": "preempted", "reason": LOST_REASON,
                "event_id": derived_event_id(started.event_id, "lost-run"),
                "event_time": datetime.now(UTC)}))  # fmt: skip
        self.stats.lost_on_restart = len(got.lost)
        if got.lost:
            await self._producer.flush()
        log.warning("agents: %d nodes known from the inventory, %d decisions already executed, %d lost runs "
                    "reported preempted", len(self.nodes), len(got.reported), len(got.lost))  # fmt: skip

    async def _handle(self, topic: str, raw: bytes | None, *, partition: int = -1, offset: int = -1,
                      key: bytes | None = None, headers: object = None) -> None:  # fmt: skip
        try:
            if raw is None:
                raise ValueError("empty message (null value)")
            ev = decode(topic, raw)
        except ValueError as e:
            if topic == "actions":  # no worker reads this topic: the agents are its last reader
                await self._malformed(raw, f"invalid actions command: {e}", partition, offset, key)
            return  # malformed telemetry: the worker, which reads that topic, dead-letters it
        try:
            await self._execute(topic, ev, headers)
        except ValidationError as e:  # a report it cannot make (its commit would re-read it at every restart)
            if topic != "actions":
                raise
            await self._malformed(raw, f"cannot execute actions command: {e}", partition, offset, key)

    async def _malformed(self, raw: bytes | None, reason: str, partition: int, offset: int, key: bytes | None) -> None:
        self.stats.malformed_commands += 1
        count_deadletter(reason, topic="actions", source="agents")
        log.warning("dead-lettering a malformed command at %s:%s: %s", partition, offset, reason)
        await self._producer.send("deadletter", DeadLetter.of(raw or b"", reason, topic="actions", partition=partition,
                                                              offset=offset, key=key))  # fmt: skip

    async def _execute(self, topic: str, ev: Any, headers: object) -> None:
        if isinstance(ev, NodeTelemetry):
            if ev.source == "inventory" and ev.node_id not in self.nodes:
                self.nodes[ev.node_id] = NodeLedger.from_inventory(ev)
                for cmd in self._waiting.pop(ev.node_id, []):
                    await self._place(cmd)
            return
        self.stats.commands += 1
        if ev.decision_id in self.executed:
            self.stats.duplicates += 1
            return
        self.executed.add(ev.decision_id)
        if isinstance(ev, PlacementCommand):
            self._spans[ev.decision_id] = start_execute(self.settings.topic(topic), headers, job_id=ev.job_id,
                                                        decision_id=ev.decision_id, node_id=ev.node_id)  # fmt: skip
            await self._place(ev)
        elif isinstance(ev, PreemptCommand):
            await self._preempt(ev)
        elif isinstance(ev, IsolateNodeCommand) and ev.node_id in self.nodes:
            self.nodes[ev.node_id].healthy = False
            self.dirty.add(ev.node_id)

    async def _lifecycle(self, cmd: PlacementCommand, state: str, **kw: object) -> None:
        """Report ``state`` in the command's ``execute job`` span (ended unless ``started``)."""
        ev = JobLifecycle(job_id=cmd.job_id, cluster=cmd.cluster, state=state, attempt=cmd.attempt,  # type: ignore[arg-type]
                          decision_id=cmd.decision_id, node_id=cmd.node_id, gpu_indices=list(cmd.gpu_indices),
                          **kw)  # type: ignore[arg-type]
        span = self._spans.get(cmd.decision_id) if state == "started" else self._spans.pop(cmd.decision_id, None)
        if span is not None and state == "started":
            span.add_event("started")
        try:
            await self._producer.send("jobs.lifecycle", ev, headers=inject(span) if span is not None else [])
        finally:
            if state != "started":
                end_execute(span, state, str(kw.get("reason") or "") or None)

    async def _place(self, cmd: PlacementCommand) -> None:
        if (reason := self._fenced.pop(cmd.decision_id, None)) is not None:  # preempted before it could run
            self._waiting_at.pop(cmd.decision_id, None)
            self.stats.preempted += 1
            await self._lifecycle(cmd, "preempted", reason=reason)
            return
        node = self.nodes.get(cmd.node_id)
        if node is None and time.time() - cmd.event_time.timestamp() < self.unknown_node_grace_s:
            # the inventory of this node may still be on its way (another topic)
            self.stats.unknown_node_waits += 1
            self._waiting.setdefault(cmd.node_id, []).append(cmd)
            if self._reading is not None:
                self._waiting_at.setdefault(cmd.decision_id, self._reading)
            return
        self._waiting_at.pop(cmd.decision_id, None)
        reason = f"unknown node {cmd.node_id}" if node is None else node.refuse(cmd)
        if reason is not None:
            self.stats.refused += 1
            if len(self.stats.first_refusals) < 5:
                self.stats.first_refusals.append(f"{cmd.job_id}: {reason}")
            log.warning("refused %s: %s", cmd.decision_id, reason)
            await self._lifecycle(cmd, "failed", exit_code=-1, reason=f"agent refused: {reason}")
            return
        assert node is not None
        node.allocate(cmd)
        self.dirty.add(node.node_id)
        self.stats.started += 1
        await self._lifecycle(cmd, "started")
        fails = self.fail_rate > 0 and self.rng.random() < self.fail_rate
        delay = self.run_seconds(cmd) * (0.5 if fails else 1.0)
        loop = asyncio.get_running_loop()
        self._timers[cmd.decision_id] = loop.call_later(
            delay, lambda: asyncio.ensure_future(self._complete(cmd, failed=fails))
        )

    async def _complete(self, cmd: PlacementCommand, *, failed: bool) -> None:
        self._timers.pop(cmd.decision_id, None)
        node = self.nodes[cmd.node_id]
        if node.release(cmd.decision_id) is None:
            return
        self.dirty.add(node.node_id)
        if failed:
            self.stats.failed_injected += 1
            await self._lifecycle(cmd, "failed", exit_code=137,
                                  reason="simulated failure (--fail-rate)",
                                  log_tail="Traceback (most recent call last):\n  ...\nRuntimeError: CUDA error: "
                                  "an illegal memory access was encountered (simulated)")  # fmt: skip
        else:
            self.stats.finished += 1
            await self._lifecycle(cmd, "finished", exit_code=0)

    async def _preempt(self, cmd: PreemptCommand) -> None:
        node = self.nodes.get(cmd.node_id)
        held = node.decisions_of(cmd.job_id) if node is not None else []
        if cmd.target_decision_id is not None:
            held = [d for d in held if d == cmd.target_decision_id]
            if not held:  # not running here (yet): it must not run later, and it is reported when it comes
                self._fenced[cmd.target_decision_id] = cmd.reason
                waiting = [c for c in self._waiting.get(cmd.node_id, []) if c.decision_id == cmd.target_decision_id]
                for c in waiting:  # (waiting for its node's inventory)
                    self._waiting[cmd.node_id].remove(c)
                    await self._place(c)
                if not self._waiting.get(cmd.node_id, True):
                    del self._waiting[cmd.node_id]
        for decision_id in held:
            placed = node.release(decision_id)  # type: ignore[union-attr]
            if (h := self._timers.pop(decision_id, None)) is not None:
                h.cancel()
            self.stats.preempted += 1
            self.dirty.add(cmd.node_id)
            if placed is not None:
                await self._lifecycle(placed, "preempted", reason=cmd.reason)

    async def _telemetry_loop(self) -> None:
        while True:  # (every node is due at least every AGENT_REPORT_EVERY_S, whatever telemetry_s says)
            await asyncio.sleep(min(self.telemetry_s, AGENT_REPORT_EVERY_S))
            now = time.time()
            for node_id, cmds in list(self._waiting.items()):
                if now - min(c.event_time.timestamp() for c in cmds) >= self.unknown_node_grace_s:
                    for cmd in self._waiting.pop(node_id):
                        await self._place(cmd)
            if now - self._reported_all >= AGENT_REPORT_EVERY_S:  # each node at least this often: it is alive
                self._reported_all, self.dirty = now, set(self.nodes)
            dirty, self.dirty = self.dirty, set()
            for node_id in dirty:
                await self._producer.send("nodes.telemetry", self.nodes[node_id].telemetry())
            if dirty:
                await self._producer.flush()


def run_agents(settings: Settings, **kw: object) -> None:
    quiet_retried_coordinator_lookups()
    try:
        log.warning(configure(settings, "semsched-agents"))
    except TelemetryConfigError as e:
        raise SystemExit(f"semsched agents: {e}") from None
    agents = SimulatedAgents(settings, **kw)  # type: ignore[arg-type]
    import signal

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, agents.stop)
        t0 = time.time()
        try:
            await agents.run()
        except AgentsAlreadyRunning as e:
            raise SystemExit(f"semsched agents: {e}") from None
        except KafkaConnectionError as e:  # one line, not a 150-line traceback (the ops review)
            raise SystemExit(no_broker("agents", settings.bootstrap, e)) from None
        log.warning("agents stopped after %.0fs: %s", time.time() - t0, agents.stats)

    asyncio.run(main())
