"""The Faust app: topics, changelogged tables and the agents that keep them.

``create_app(settings)`` builds one worker's app. Every table write is a transition of
``streams/state.py`` caused by an event: the agents here apply submissions, telemetry and
lifecycle reports; the scheduling loop (``streams/loop.py``) applies its own decisions once
the broker has acknowledged them on the ``decisions`` topic (writing the cluster's changelog
partition itself, since it runs outside any stream), and the decisions agent applies the
ones a restarted worker finds there that its tables have not seen.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import faust
from opentelemetry import trace
from pydantic import BaseModel

from scheduling.duration_estimate import HistoryDurationPredictor
from scheduling.events import (
    DeadLetter,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decode,
    partition_for,
)
from scheduling.job import JobRequest
from streams import telemetry
from streams.settings import Settings
from streams.state import (
    DoneJob,
    PendingJob,
    RunningJob,
    Transition,
    gang_fences,
    on_decision,
    on_lifecycle,
    on_submitted,
)

log = logging.getLogger("semsched.worker")
_M = TypeVar("_M", bound=BaseModel)


@dataclass
class Counters:
    accepted: int = 0
    deadletters: int = 0
    decisions_applied: int = 0
    lifecycle: int = 0
    telemetry: int = 0
    notes: dict[str, int] = field(default_factory=dict)

    def note(self, text: str) -> None:
        if text:
            key = text.split(":")[0]
            self.notes[key] = self.notes.get(key, 0) + 1


@dataclass
class Worker:
    """Everything the agents, the loop and the web views share."""

    settings: Settings
    app: faust.App
    topics: dict[str, faust.TopicT]
    nodes: Any
    node_util: Any
    pending: Any
    running: Any
    done: Any
    counters: Counters = field(default_factory=Counters)
    # decisions being published (not yet acknowledged and applied): the loop must not
    # decide those jobs again nor give their resources away meanwhile
    inflight: dict[str, tuple[DecisionRecord, Any]] = field(default_factory=dict)
    applied_offsets: dict[int, int] = field(default_factory=dict)
    _parsed: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)
    # gangs with a rejected member (rebuilt from the done table once after recovery)
    rejected_gangs: set[str] = field(default_factory=set)
    # job id → its ingest span (the parent of the worker's later spans of that job)
    traces: telemetry.JobTraces = field(default_factory=telemetry.JobTraces)
    # run times of finished jobs, for sjf-predicted (in memory: it relearns after a restart)
    durations: HistoryDurationPredictor = field(default_factory=HistoryDurationPredictor)

    async def deadletter(self, raw: bytes, reason: str, message: Any, topic: str) -> None:
        dl = DeadLetter.of(raw, reason, topic=topic, partition=message.partition, offset=message.offset,
                           key=message.key)  # fmt: skip
        self.counters.deadletters += 1
        telemetry.count_deadletter(reason, topic=topic, source="worker")
        trace.get_current_span().set_attribute("semsched.deadletter.reason", reason[:500])
        await self.topics["deadletter"].send(key=message.key, value=dl.to_bytes(), partition=message.partition,
                                             headers=telemetry.inject() or None)  # fmt: skip
        log.warning("dead letter from %s@%s:%s: %s", topic, message.partition, message.offset, reason)

    async def apply_decision(self, rec: DecisionRecord, partition: int, *, in_stream: bool) -> Transition:
        """Apply one of this worker's decisions (first one wins; a repeat is a no-op): from the
        scheduling loop once the broker acknowledged it, or from the ``decisions`` topic when
        a restarted worker replays it. Notices go out before the tables change, so a crash
        in between repeats a notice rather than losing it."""
        t = on_decision(rec, self.read("pending", rec.job_id, PendingJob))
        await self.emit(t, partition)
        self.apply(t, partition=None if in_stream else partition)
        held = self.inflight.get(rec.job_id)
        if held is not None and held[0].decision_id == rec.decision_id:
            del self.inflight[rec.job_id]
        return t

    def wake(self) -> None:
        loop = getattr(self, "loop", None)
        if loop is not None:
            loop.wake()

    async def emit(self, t: Transition, partition: int) -> None:
        """Publish what a transition produced: lifecycle notices (e.g. a rejection) and commands
        for the agents (e.g. fencing a superseded placement)."""
        for notice in t.emit:
            await self.topics["jobs.lifecycle"].send(key=notice.job_id.encode(), value=notice.to_bytes(),
                                                     partition=partition)  # fmt: skip
        for cmd in t.commands:
            await self.topics["actions"].send(key=cmd.node_id.encode(), value=cmd.to_bytes(), partition=partition)

    def changelog_topics(self) -> tuple[str, ...]:
        return tuple(t.changelog_topic.get_topic_name() for t in self.app.tables.values())

    def apply(self, t: Transition, *, partition: int | None = None) -> None:
        """Write a transition to the tables. Inside an agent Faust sends each change to the
        changelog partition of the event being processed; the scheduling loop, which runs
        outside any stream, names the partition (its cluster's) and writes the same way
        Faust's own ``Table.__setitem__`` does: the store, then ``send_changelog``."""
        for name, table, writes in (("pending", self.pending, t.pending), ("running", self.running, t.running),
                                    ("done", self.done, t.done)):  # fmt: skip
            for key, value in writes.items():
                d = None if value is None else value.model_dump(mode="json")
                if partition is None:
                    if d is None:
                        table.pop(key, None)
                    else:
                        table[key] = d
                elif d is None:
                    if key in table.data:
                        del table.data[key]
                        table.send_changelog(partition, key, value=None, value_serializer="raw")
                else:
                    table.data[key] = d
                    table.send_changelog(partition, key, d)
                if d is None:
                    self._parsed.pop((name, key), None)
                else:
                    self._parsed[(name, key)] = (d, value)
                    if name == "done" and d["status"] == "rejected" and d.get("gang_id"):
                        self.rejected_gangs.add(d["gang_id"])
        self.counters.note(t.note)

    def read(self, name: str, key: str, model: type[_M]) -> _M | None:
        """The record at ``key`` of table ``name``, parsed once: records this process wrote are
        kept beside the table (the same dict object), others (recovered from the changelog)
        are parsed on first read."""
        d = getattr(self, name).get(key)
        if d is None:
            return None
        hit = self._parsed.get((name, key))
        if hit is not None and hit[0] is d:
            return hit[1]  # type: ignore[return-value]
        parsed = model.model_validate(d)
        self._parsed[(name, key)] = (d, parsed)
        return parsed


def _known(w: Worker, job_id: str) -> PendingJob | RunningJob | DoneJob | None:
    return (w.read("pending", job_id, PendingJob) or w.read("running", job_id, RunningJob)
            or w.read("done", job_id, DoneJob))  # fmt: skip


def create_app(settings: Settings, *, app_id: str | None = None) -> Worker:
    app = faust.App(
        app_id or f"{settings.topic_prefix}worker",
        broker=f"kafka://{settings.bootstrap}",
        store="memory://",
        topic_partitions=settings.partitions,
        topic_allow_declare=False,  # streams/topics.py creates every topic (Kafka 4.x)
        topic_disable_leader=True,
        value_serializer="raw",
        key_serializer="raw",
        web_enabled=settings.web_port > 0,
        web_port=max(settings.web_port, 1),
        web_bind="127.0.0.1",
        consumer_auto_offset_reset="earliest",
        producer_max_request_size=max(settings.max_message_bytes * 4, 1024 * 1024),
        # decisions and commands go out in bursts (one per placement): batch them
        producer_linger=0.005,
        producer_max_batch_size=256 * 1024,
        consumer_max_fetch_size=max(settings.max_message_bytes * 4, 1024 * 1024),
        datadir=str(settings.state_dir / "faust"),
        table_cleanup_interval=30.0,
        # a crashed worker's partitions move to its replacement after this long
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 4),
    )
    topics = {
        name: app.topic(settings.topic(name), key_type=bytes, value_type=bytes, partitions=settings.partitions,
                        internal=False)  # fmt: skip
        for name in ("jobs.submitted", "nodes.telemetry", "jobs.lifecycle", "decisions", "actions", "deadletter")
    }
    # keys and values as JSON on the changelog: str keys, dict values (pydantic dumps)
    schema = faust.Schema(key_type=str, value_type=None, key_serializer="json", value_serializer="json")
    tables = dict(schema=schema, partitions=settings.partitions)
    w = Worker(
        settings=settings,
        app=app,
        topics=topics,
        nodes=app.Table("nodes", default=None, help="latest telemetry per node", **tables),
        node_util=app.Table("node_util", default=list, help="GPU/CPU utilisation, hopping window", **tables)
        .hopping(size=timedelta(seconds=60), step=timedelta(seconds=30), expires=timedelta(minutes=10))
        .relative_to_stream(),
        pending=app.Table("pending", default=None, help="accepted jobs waiting for a node", **tables),
        running=app.Table("running", default=None, help="placed jobs holding resources", **tables),
        done=app.Table("done", default=None, help="finished or rejected jobs", **tables),
    )
    # Table writes queue changelog messages; past this many queued, Faust pauses every stream
    # until they drain (its default, 100, stalls ingest under a few hundred jobs/s).
    app.producer.buffer.max_messages = 2000
    _register_agents(w)
    from streams.loop import register_loop
    from streams.web import register_web

    register_loop(w)
    register_web(w)
    return w


def _register_agents(w: Worker) -> None:
    """One agent per input topic; each decodes (malformed → dead letter) then applies a
    handler. A handler that raises dead-letters its event too: the worker keeps going."""
    s = w.settings

    async def on_job(ev: JobSubmitted, raw: bytes, msg: Any) -> None:
        t = on_submitted(ev, _known(w, ev.job_id), time.time())
        if t.deadletter:
            await w.deadletter(raw, t.deadletter, msg, "jobs.submitted")
            return
        if t.pending:
            w.counters.accepted += 1
            span = trace.get_current_span()
            span.set_attribute("semsched.job_id", ev.job_id)
            w.traces.remember(ev.job_id, span)
        w.apply(t)
        if t.pending:
            w.wake()

    async def on_telemetry(ev: NodeTelemetry, raw: bytes, msg: Any) -> None:
        prev = w.nodes.get(ev.node_id)
        if prev is not None and datetime.fromisoformat(prev["event_time"]) > ev.event_time:
            return  # late telemetry never overwrites newer state
        w.nodes[ev.node_id] = ev.model_dump(mode="json")
        w.counters.telemetry += 1
        if ev.source == "agent":
            cur = w.node_util[ev.node_id].value() or [0.0, 0.0, 0]
            w.node_util[ev.node_id] = [cur[0] + ev.gpu_util, cur[1] + ev.cpu_util, cur[2] + 1]

    async def on_life(ev: JobLifecycle, raw: bytes, msg: Any) -> None:
        was = w.read("running", ev.job_id, RunningJob)
        if ev.state == "finished" and was is not None and was.started_ts is not None:
            ran = ev.event_time.timestamp() - was.started_ts
            if ran >= 0:
                w.durations.observe(JobRequest.from_event(was.job), ran)
        t = on_lifecycle(ev, was,
                         pending=w.read("pending", ev.job_id, PendingJob),
                         max_retries=s.max_retries, now=time.time())  # fmt: skip
        left = t.running.get(ev.job_id, "kept") is None and ev.state != "finished"
        if left and (gone := w.read("running", ev.job_id, RunningJob)) is not None and gone.job.gang_id:
            members = [w.read("running", k, RunningJob) for k, d in list(w.running.items())
                       if d is not None and d["job"].get("gang_id") == gone.job.gang_id]  # fmt: skip
            t.commands += gang_fences(gone.job, [m for m in members if m is not None], f"left the gang: {ev.state}")
        await w.emit(t, msg.partition)  # before the tables change: a crash repeats it, never loses it
        w.apply(t)
        w.counters.lifecycle += 1
        trace.get_current_span().set_attributes({"semsched.job_id": ev.job_id, "semsched.state": ev.state})
        if ev.state == "finished":
            w.traces.forget(ev.job_id)
        if any(v is None for v in t.running.values()):  # resources freed (or the job re-queued)
            w.wake()

    async def on_decided(ev: DecisionRecord, raw: bytes, msg: Any) -> None:
        await w.apply_decision(ev, msg.partition, in_stream=True)
        w.counters.decisions_applied += 1

    handlers = {"jobs.submitted": on_job, "nodes.telemetry": on_telemetry, "jobs.lifecycle": on_life,
                "decisions": on_decided}  # fmt: skip
    for topic, handler in handlers.items():
        _agent(w, topic, handler)


def _agent(w: Worker, topic: str, handler: Any) -> None:
    async def one(raw: bytes | None, msg: Any) -> None:
        if topic == "decisions":
            w.applied_offsets[msg.partition] = msg.offset
        ev = _decode_or_none(raw, topic, w.settings)
        if not isinstance(ev, str):
            ev = _misplaced(ev, msg.partition, w.settings) or ev
        if isinstance(ev, str):
            await w.deadletter(raw or b"", ev, msg, topic)
            return
        try:
            await handler(ev, raw, msg)
        except Exception as e:  # never crash the agent on one event: dead-letter it
            log.exception("handling %s@%s:%s failed", topic, msg.partition, msg.offset)
            await w.deadletter(raw, f"internal error while handling: {type(e).__name__}: {e}", msg, topic)

    async def consume(stream: faust.StreamT) -> None:
        async for event in stream.events():
            # submissions and traced lifecycle reports are handled inside their span (the
            # trace context rides in the message headers; Faust gives them as a dict)
            msg = event.message
            with telemetry.consume_span(msg.topic, topic, event.headers, msg.partition, msg.offset):
                await one(event.value, msg)

    w.app.agent(w.topics[topic], name=f"ingest-{topic.replace('.', '-')}")(consume)


def _misplaced(ev: Any, partition: int, s: Settings) -> str | None:
    """Every topic is partitioned by cluster (tables and their changelogs rely on it): an
    event on another partition is refused with a reason rather than split the state."""
    cluster = getattr(ev, "cluster", None)
    if cluster is None or partition < 0:
        return None
    want = partition_for(cluster, s.partitions)
    if partition == want:
        return None
    return (f"event of cluster {cluster!r} arrived on partition {partition}, but that cluster's events "
            f"belong on partition {want} (crc32(cluster) % {s.partitions}): publish with "
            "scheduling.events.partition_for, as streams.producer.EventProducer does")  # fmt: skip


def _decode_or_none(raw: bytes | None, topic: str, s: Settings) -> Any:
    """The decoded event, or a human-readable reason string when it is malformed."""
    if raw is None:
        return "empty message (null value)"
    if len(raw) > s.max_message_bytes:
        return f"message of {len(raw)} bytes exceeds the {s.max_message_bytes}-byte limit"
    try:
        return decode(topic, raw)
    except ValueError as e:
        return f"invalid {topic} event: {e}"
    except UnicodeDecodeError as e:
        return f"not UTF-8: {e}"
