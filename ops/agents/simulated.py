"""Simulated cluster agents: one process that plays the node agents of every node.

At start it reads back the inventory and the lifecycle reports (:mod:`ops.agents.recovery`:
a restarted process knows the nodes, skips the decisions already executed and reports the runs
its predecessor lost ``preempted``). It learns the nodes from the inventory telemetry, executes commands from ``actions``
(ignoring a decision id it has already executed: remembered until ``SEMSCHED_DONE_RETENTION`` after
the decision is over, :mod:`ops.agents.decision_memory`), refuses any command that would
over-commit a node (a ``failed`` lifecycle event with the reason), runs each job for its
trace duration divided by ``speed``, reports ``started`` / ``finished``, and publishes
telemetry for the nodes whose allocation changed every ``telemetry_s`` seconds, and for every node
at least every 10 s (``AGENT_REPORT_EVERY_S``: a node not heard from is marked unhealthy by the worker,
``streams/silent_nodes.py``).

Offsets are committed by hand, after each batch of commands has been executed and its reports
delivered (a command waiting for its node's inventory holds its partition's commit back): with
aiokafka's auto-commit, a batch counted as consumed once it was fetched, and agents that stopped
on an error mid-batch never executed or reported the rest of it. A command read again after a
restart is skipped when its decision was already reported on (:mod:`ops.agents.recovery`). A
``nodes.telemetry`` offset is committed only up to where a full round of reports (every node known,
delivered) began: a successor reads the telemetry back from there, not from the beginning, and finds
every node its predecessor knew reported past it.

A broker outage of up to ``BROKER_WAIT_S`` (5 min) is ridden out: the reports wait in the producer
and go when it is back (with aiokafka's 40 s the agents stopped 40 s into an outage, and the runs
they played were lost with them). A longer one stops them with the error; their successor recovers.

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
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError
from opentelemetry.trace import Span
from pydantic import ValidationError

from ops.agents.decision_memory import DecisionMemory
from ops.agents.node_ledger import NodeLedger
from ops.agents.recovery import FULL_ROUND_MARK, LOST_REASON, recover
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
from streams.kafka_backoff import pace_failed_metadata_updates
from streams.kafka_logs import tame_kafka_client_logs, tell_untold_repeats
from streams.producer import EventProducer
from streams.settings import AGENT_REPORT_EVERY_S, Settings, no_broker
from streams.stop_deadline import arm_stop_deadline
from streams.telemetry import (
    TelemetryConfigError,
    configure,
    count_deadletter,
    end_execute,
    inject,
    start_execute,
)
from streams.topics import TopicSetupError

log = logging.getLogger("semsched.agents")

BROKER_WAIT_S = 300.0  # how long a report may wait for the broker (an outage) before the agents give up


class CannotExecute(Exception):
    """A well-formed command the agents will not carry out: dead-lettered with the reason."""


Key = tuple[str, str]  # (cluster, node id or decision id)


def scoped(cluster: str, name: str) -> Key:
    return (cluster, name)


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
        # keyed by (cluster, node id) and (cluster, decision id): one process plays every cluster of its
        # topics, and the worker requires job and node names to be unique only within what one worker serves
        self.nodes: dict[Key, NodeLedger] = {}
        # the decisions executed, and the placements fenced before they came (ops/agents/decision_memory.py)
        self.decisions = DecisionMemory(settings.done_retention_s + settings.max_clock_skew_s
                                        if settings.done_retention_s > 0 else 0.0)  # fmt: skip
        self.dirty: set[Key] = set()
        self.stats = AgentStats()
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._waiting: dict[Key, list[PlacementCommand]] = {}  # by the node it waits for
        self._waiting_at: dict[Key, tuple[TopicPartition, int]] = {}  # waiting decision -> where it was read
        self._spans: dict[Key, Span] = {}  # decision → its open ``execute job`` span
        self._tasks: set[asyncio.Future[Any]] = set()  # telemetry and completions: a failure stops the agents
        self._failure: BaseException | None = None
        self.unknown_node_grace_s = 10.0
        # a broker outage of up to BROKER_WAIT_S is ridden out: the reports wait in the producer (with
        # aiokafka's 40 s they failed, and the agents stopped, their runs lost with them)
        self._producer = EventProducer(settings, answer_timeout_s=BROKER_WAIT_S,
                                       request_timeout_ms=int(BROKER_WAIT_S * 1000))  # fmt: skip
        self._stopping = asyncio.Event()
        self._reported_all = 0.0  # when every node was last reported (streams/silent_nodes.py)
        self._reading: tuple[TopicPartition, int] | None = None  # the message being handled
        # nodes.telemetry partition -> the offset after the last record handled there; and the offsets up to
        # which every node known was reported after them, a full round delivered (the most it commits there:
        # ops/agents/recovery.py reads back from the committed offset)
        self._telemetry_read: dict[TopicPartition, int] = {}
        self._telemetry_summarised: dict[TopicPartition, int] = {}
        self._telemetry_committed: dict[TopicPartition, int] = {}

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
        telemetry: asyncio.Future[Any] | None = None
        try:
            await self._recover()
            await consumer.start()
            telemetry = self._background(self._telemetry_loop())
            while not self._stopping.is_set():
                self._raise_background_failure()
                batch = await consumer.getmany(timeout_ms=200, max_records=2000)
                for tp, msgs in batch.items():
                    topic = tp.topic.removeprefix(self.settings.topic_prefix)
                    for m in msgs:
                        self._reading = (tp, m.offset)
                        await self._handle(topic, m.value, partition=m.partition, offset=m.offset, key=m.key,
                                           headers=m.headers, timestamp_ms=m.timestamp)  # fmt: skip
                        if topic == "nodes.telemetry":
                            self._telemetry_read[tp] = m.offset + 1
                if batch:
                    self._raise_background_failure()  # (a report lost with it: not committed past it)
                    await self._commit(consumer, {tp: msgs[-1].offset + 1 for tp, msgs in batch.items() if msgs})
        finally:
            if telemetry is not None:
                telemetry.cancel()
            for h in self._timers.values():
                h.cancel()
            for span in self._spans.values():
                end_execute(span, "agent stopped")
            self._spans.clear()
            await consumer.stop()
            await self._producer.__aexit__(None, None, None)

    def _background(self, work: Coroutine[Any, Any, None]) -> asyncio.Future[Any]:
        """Run ``work`` beside the command loop; if it fails (a report the broker refused, say), the
        agents stop with its error at the loop's next turn, and their successor recovers (found by
        review: the telemetry loop died silently, and with it every node's report and every command
        waiting for its node)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
            log.error("agents: background work failed, stopping: %r", self._failure)

    def _raise_background_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

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
        marked: dict[TopicPartition, int | tuple[int, str]] = dict(offsets)
        for tp in [tp for tp in offsets if tp.topic == self.settings.topic("nodes.telemetry")]:
            del marked[tp]
        # telemetry: not past the last full round of reports, and marked so (ops/agents/recovery.py); also a
        # partition not in this batch (found by review: one no report goes to was read back at every start)
        for tp, summarised in self._telemetry_summarised.items():
            upto = min(offsets.get(tp, summarised), summarised)
            if upto > self._telemetry_committed.get(tp, -1):
                marked[tp] = (upto, FULL_ROUND_MARK)
        if marked:
            await consumer.commit(marked)
            self._telemetry_committed.update((tp, v[0]) for tp, v in marked.items() if isinstance(v, tuple))

    async def _recover(self) -> None:
        """Read back the nodes and what a predecessor executed (ops/agents/recovery.py); report
        each run it left unfinished ``preempted``, so the worker decides that job again."""
        got = await recover(self.settings)
        for node, inventory in got.inventory.items():
            self.nodes.setdefault(node, NodeLedger.from_inventory(inventory))
        now = time.time()
        for decision in got.reported:  # (each over, or its lost run reported below)
            self.decisions.execute(decision)
            self.decisions.over(decision, now)
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
                      key: bytes | None = None, headers: object = None, timestamp_ms: int | None = None) -> None:  # fmt: skip
        where = (partition, offset, key, timestamp_ms)
        try:
            if raw is None:
                raise ValueError("empty message (null value)")
            ev = decode(topic, raw)
        except ValueError as e:
            if topic == "actions":  # no worker reads this topic: the agents are its last reader
                await self._malformed(raw, f"invalid actions command: {e}", *where)
            return  # malformed telemetry: the worker, which reads that topic, dead-letters it
        try:
            await self._execute(topic, ev, headers)
        except CannotExecute as e:
            await self._malformed(raw, f"cannot execute actions command: {e}", *where)
        except ValidationError as e:  # a report it cannot make (its commit would re-read it at every restart)
            if topic != "actions":
                raise
            await self._malformed(raw, f"cannot execute actions command: {e}", *where)

    async def _malformed(self, raw: bytes | None, reason: str, partition: int, offset: int, key: bytes | None,
                         timestamp_ms: int | None) -> None:  # fmt: skip
        self.stats.malformed_commands += 1
        count_deadletter(reason, topic="actions", source="agents")
        log.warning("dead-lettering a malformed command at %s:%s: %s", partition, offset, reason)
        await self._producer.send("deadletter", DeadLetter.of(raw or b"", reason, topic="actions", partition=partition,
                                                              offset=offset, key=key, timestamp_ms=timestamp_ms))  # fmt: skip

    async def _execute(self, topic: str, ev: Any, headers: object) -> None:
        if isinstance(ev, NodeTelemetry):
            node = scoped(ev.cluster, ev.node_id)
            if ev.source == "inventory" and node not in self.nodes:
                self.nodes[node] = NodeLedger.from_inventory(ev)
                for cmd in self._waiting.pop(node, []):
                    await self._place(cmd)
            return
        self.stats.commands += 1
        decision = scoped(ev.cluster, ev.decision_id)
        if decision in self.decisions:
            self.stats.duplicates += 1
            return
        if isinstance(ev, PlacementCommand):
            self.decisions.execute(decision)
            self._spans[decision] = start_execute(self.settings.topic(topic), headers, job_id=ev.job_id,
                                                  decision_id=ev.decision_id, node_id=ev.node_id)  # fmt: skip
            await self._place(ev)
        elif isinstance(ev, PreemptCommand):
            self.decisions.execute(decision)
            self.decisions.over(decision, time.time())
            await self._preempt(ev)
        elif isinstance(ev, IsolateNodeCommand) and (node := self.nodes.get(scoped(ev.cluster, ev.node_id))):
            self.decisions.execute(decision)
            self.decisions.over(decision, time.time())
            node.healthy = False  # reported now, not at the next telemetry tick: a restart reads it back
            await self._producer.send("nodes.telemetry", node.telemetry())
        else:  # never executed, and said so (found by review: these were counted executed and dropped)
            raise CannotExecute(f"no node {ev.node_id} in cluster {ev.cluster} (no inventory)"
                                if isinstance(ev, IsolateNodeCommand) else
                                f"the simulated agents do not carry out {ev.kind} commands")  # fmt: skip

    async def _lifecycle(self, cmd: PlacementCommand, state: str, **kw: object) -> None:
        """Report ``state`` in the command's ``execute job`` span (ended unless ``started``)."""
        ev = JobLifecycle(job_id=cmd.job_id, cluster=cmd.cluster, state=state, attempt=cmd.attempt,  # type: ignore[arg-type]
                          decision_id=cmd.decision_id, node_id=cmd.node_id, gpu_indices=list(cmd.gpu_indices),
                          **kw)  # type: ignore[arg-type]
        decision = scoped(cmd.cluster, cmd.decision_id)
        span = self._spans.get(decision) if state == "started" else self._spans.pop(decision, None)
        if span is not None and state == "started":
            span.add_event("started")
        try:
            await self._producer.send("jobs.lifecycle", ev, headers=inject(span) if span is not None else [])
        finally:
            if state != "started":
                end_execute(span, state, str(kw.get("reason") or "") or None)
                self.decisions.over(decision, time.time())

    async def _place(self, cmd: PlacementCommand) -> None:
        decision = scoped(cmd.cluster, cmd.decision_id)
        if (reason := self.decisions.take_fence(decision)) is not None:  # preempted before it could run
            self._waiting_at.pop(decision, None)
            self.stats.preempted += 1
            await self._lifecycle(cmd, "preempted", reason=reason)
            return
        node = self.nodes.get(scoped(cmd.cluster, cmd.node_id))
        if node is None and time.time() - cmd.event_time.timestamp() < self.unknown_node_grace_s:
            # the inventory of this node may still be on its way (another topic)
            self.stats.unknown_node_waits += 1
            self._waiting.setdefault(scoped(cmd.cluster, cmd.node_id), []).append(cmd)
            if self._reading is not None:
                self._waiting_at.setdefault(decision, self._reading)
            return
        self._waiting_at.pop(decision, None)
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
        self.dirty.add(scoped(cmd.cluster, cmd.node_id))
        self.stats.started += 1
        await self._lifecycle(cmd, "started")
        fails = self.fail_rate > 0 and self.rng.random() < self.fail_rate
        delay = self.run_seconds(cmd) * (0.5 if fails else 1.0)
        loop = asyncio.get_running_loop()
        self._timers[scoped(cmd.cluster, cmd.decision_id)] = loop.call_later(
            delay, lambda: self._background(self._complete(cmd, failed=fails))
        )

    async def _complete(self, cmd: PlacementCommand, *, failed: bool) -> None:
        self._timers.pop(scoped(cmd.cluster, cmd.decision_id), None)
        node = self.nodes[scoped(cmd.cluster, cmd.node_id)]
        if node.release(cmd.decision_id) is None:
            return
        self.dirty.add(scoped(cmd.cluster, cmd.node_id))
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
        where = scoped(cmd.cluster, cmd.node_id)
        node = self.nodes.get(where)
        held = node.decisions_of(cmd.job_id) if node is not None else []
        if cmd.target_decision_id is not None:
            held = [d for d in held if d == cmd.target_decision_id]
            if not held:  # not running here (yet): it must not run later, and it is reported when it comes
                self.decisions.fence(scoped(cmd.cluster, cmd.target_decision_id), cmd.reason, time.time())
                waiting = [c for c in self._waiting.get(where, []) if c.decision_id == cmd.target_decision_id]
                for c in waiting:  # (waiting for its node's inventory)
                    self._waiting[where].remove(c)
                    await self._place(c)
                if not self._waiting.get(where, True):
                    del self._waiting[where]
        for decision_id in held:
            placed = node.release(decision_id)  # type: ignore[union-attr]
            if (h := self._timers.pop(scoped(cmd.cluster, decision_id), None)) is not None:
                h.cancel()
            self.stats.preempted += 1
            self.dirty.add(where)
            if placed is not None:
                await self._lifecycle(placed, "preempted", reason=cmd.reason)

    async def _telemetry_loop(self) -> None:
        while True:  # (every node is due at least every AGENT_REPORT_EVERY_S, whatever telemetry_s says)
            await asyncio.sleep(min(self.telemetry_s, AGENT_REPORT_EVERY_S))
            now = time.time()
            self.decisions.forget_old(now)
            tell_untold_repeats()  # (aiokafka's lines that stopped repeating: streams/kafka_logs.py)
            for node in list(self._waiting):  # read again at each node: while a refusal's report is sent, the
                # command loop may place a node's waiting commands (its inventory came) or fence them
                # (found by review: the stale snapshot's KeyError or empty list stopped the agents)
                cmds = self._waiting.get(node)
                if cmds and now - min(c.event_time.timestamp() for c in cmds) >= self.unknown_node_grace_s:
                    for cmd in self._waiting.pop(node):
                        await self._place(cmd)
            covers = None
            if now - self._reported_all >= AGENT_REPORT_EVERY_S:  # each node at least this often: it is alive
                self._reported_all, self.dirty = now, set(self.nodes)
                covers = dict(self._telemetry_read)  # every node learned from before these offsets is reported
            dirty, self.dirty = self.dirty, set()
            for node in dirty:
                await self._producer.send("nodes.telemetry", self.nodes[node].telemetry())
            if dirty:
                await self._producer.flush()
            if covers is not None:  # delivered: past these offsets (ops/agents/recovery.py)
                self._telemetry_summarised = covers


def run_agents(settings: Settings, **kw: object) -> None:
    tame_kafka_client_logs()
    pace_failed_metadata_updates()
    try:
        log.warning(configure(settings, "semsched-agents"))
    except TelemetryConfigError as e:
        raise SystemExit(f"semsched agents: {e}") from None
    agents = SimulatedAgents(settings, **kw)  # type: ignore[arg-type]
    import signal

    async def main() -> None:
        loop = asyncio.get_running_loop()
        def stop() -> None:
            arm_stop_deadline(settings.stop_timeout_s, "agents")
            agents.stop()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        t0 = time.time()
        try:
            await agents.run()
        except (AgentsAlreadyRunning, TopicSetupError) as e:
            raise SystemExit(f"semsched agents: {e}") from None
        except KafkaConnectionError as e:  # one line, not a 150-line traceback (the ops review)
            raise SystemExit(no_broker("agents", settings.bootstrap, e)) from None
        log.warning("agents stopped after %.0fs: %s", time.time() - t0, agents.stats)

    asyncio.run(main())
