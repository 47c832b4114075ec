"""The worker's Faust agents, one per input topic (``jobs.submitted``, ``nodes.telemetry``,
``jobs.lifecycle``, ``decisions``): each decodes its event — a malformed one, or one on
another cluster's partition, goes to the dead-letter topic with its reason — then applies
the ``streams/state.py`` transition it causes to the worker's tables (``streams/app.py``).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

import faust
from opentelemetry import trace

from scheduling.events import (
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decode,
    partition_for,
)
from scheduling.job import JobRequest
from streams import telemetry
from streams.app import Worker
from streams.input_faults import ENV as FAULTS_ENV
from streams.input_faults import InputFaults
from streams.offset_starts import OffsetStarts
from streams.offset_watch import Verdict
from streams.settings import Settings
from streams.state import (
    DoneJob,
    PendingJob,
    RunningJob,
    gang_fences,
    on_lifecycle,
    on_submitted,
)

log = logging.getLogger("semsched.worker")


def _known(w: Worker, job_id: str) -> PendingJob | RunningJob | DoneJob | None:
    return (w.read("pending", job_id, PendingJob) or w.read("running", job_id, RunningJob)
            or w.read("done", job_id, DoneJob))  # fmt: skip


def register_agents(w: Worker) -> None:
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
    faults = InputFaults.from_env()  # none unless a test asks (streams/input_faults.py)
    for topic, handler in handlers.items():
        _agent(w, topic, handler, faults)
    register_offset_watch(w)


def _agent(w: Worker, topic: str, handler: Any, faults: InputFaults) -> None:
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
            if faults.drop(topic, msg.offset):
                log.warning("%s partition %d: offset %d dropped (%s)", topic, msg.partition, msg.offset, FAULTS_ENV)
                continue
            if not await _in_order(w, topic, msg):
                continue  # it comes again, after the offsets skipped before it
            with telemetry.consume_span(msg.topic, topic, event.headers, msg.partition, msg.offset):
                await one(event.value, msg)

    w.app.agent(w.topics[topic], name=f"ingest-{topic.replace('.', '-')}")(consume)


async def _in_order(w: Worker, topic: str, msg: Any) -> bool:
    """Whether to handle ``msg`` now (:mod:`streams.offset_watch`): logs where each partition's
    consumption starts, and seeks back to offsets it skipped."""
    if msg.tp not in w.offsets:
        start = None if w.offset_starts is None else await w.offset_starts.of(msg.tp, _assignment(w, msg.tp))
        log.info("%s partition %d: first offset handled %d (consumption starts at %s)", topic, msg.partition,
                 msg.offset, start)  # fmt: skip
        if start is not None and start < msg.offset:
            w.offsets.begin(msg.tp, start, time.monotonic())
    verdict = w.offsets.seen(msg.tp, msg.offset, time.monotonic())
    if verdict is Verdict.REWIND:
        to = w.offsets.rewind_to(msg.tp)
        w.counters.offset_gaps += 1
        log.warning("%s partition %d: offsets %d..%d were skipped (never handled): seeking back to %d",
                    topic, msg.partition, to, msg.offset - 1, to)  # fmt: skip
        if not await _seek_back(w, msg.tp):
            w.offsets.seen(msg.tp, msg.offset, time.monotonic())  # the watch starts over from here
            return True
    return verdict is Verdict.HANDLE


def _assignment(w: Worker, tp: Any) -> set[Any]:
    try:
        return set(w.app.consumer.assignment())
    except Exception:  # not started (Faust's test mode): this partition alone
        return {tp}


def register_offset_watch(w: Worker) -> None:
    """Forget revoked partitions; every ``retry_s`` seek again the partitions still waiting for a
    rewind's target, and every ``stall_s / 2`` seek back the stalled ones."""

    w.offset_starts = OffsetStarts(w.settings, w.app.conf.id, {t.get_topic_name() for t in w.topics.values()})

    unbegun: set[Any] = set()  # assigned input partitions the watch has not begun yet

    def forget(sender: Any, revoked: Any, **_: Any) -> None:
        w.offsets.forget(revoked)  # another worker may handle more of them meanwhile: no gap
        w.offset_starts.forget(revoked)
        unbegun.difference_update(revoked)

    def assigned(sender: Any, assigned: Any, **_: Any) -> None:
        unbegun.update(tp for tp in assigned if tp.topic in w.offset_starts.topics)

    w.app.on_partitions_revoked.connect(forget)
    w.app.on_partitions_assigned.connect(assigned)
    ends_read = [0.0]

    @w.app.timer(interval=w.offsets.retry_s)
    async def seek_back() -> None:
        await _begin_assigned(w, unbegun)
        now = time.monotonic()
        for tp, target in w.offsets.give_up(now):
            w.counters.offsets_lost += 1
            log.error("%s partition %d: offset %d did not come back within %g s of seeking: given up, LOST",
                      tp.topic, tp.partition, target, w.offsets.give_up_s)  # fmt: skip
        for tp in w.offsets.due_reseeks(now):
            log.info("%s partition %d: offset %d not back yet: seeking back again", tp.topic, tp.partition,
                     w.offsets.rewind_to(tp))  # fmt: skip
            await _seek_back(w, tp)
        tps = w.offsets.partitions()
        if _recovering(w):  # the input partitions are paused on purpose meanwhile
            w.offsets.hold_stall_clocks()
            return
        if not tps or now - ends_read[0] < w.offsets.stall_s / 2:
            return
        ends_read[0] = now
        try:
            ends = await w.app.consumer.highwaters(*tps)
        except Exception as e:  # e.g. a rebalance under way: the next round
            log.debug("offset watch: no end offsets now: %s", e)
            return
        for tp in w.offsets.stalled(ends, time.monotonic()):
            w.counters.offset_stalls += 1
            log.warning("%s partition %d: ends at %d but only %d was handled, nothing arriving: seeking back",
                        tp.topic, tp.partition, ends[tp], w.offsets.rewind_to(tp) - 1)  # fmt: skip
            await _seek_back(w, tp)


async def _begin_assigned(w: Worker, unbegun: set[Any]) -> None:
    """Begin the watch on assigned partitions no event has come from yet, at where their
    consumption starts: if Faust drops every record it fetches first there and nothing else
    arrives, the stall check still sees the partition's end past its start."""
    for tp in list(unbegun):
        start = None if tp in w.offsets else await w.offset_starts.of(tp, _assignment(w, tp))
        if tp in unbegun and tp not in w.offsets and start is not None:  # (an event or a revocation may have come meanwhile)
            w.offsets.begin(tp, start, time.monotonic())
            log.info("%s partition %d: assigned; consumption starts at %d", tp.topic, tp.partition, start)
        unbegun.discard(tp)


def _recovering(w: Worker) -> bool:
    app = w.app
    try:
        return bool(app.in_recovery) or not app.tables.recovery.completed.is_set()
    except AttributeError:  # not started (Faust's test mode)
        return False


async def _seek_back(w: Worker, tp: Any) -> bool:
    to = w.offsets.rewind_to(tp)
    try:
        await w.app.consumer.seek(tp, to)
    except Exception as e:  # e.g. the partition just moved: forgotten, its next owner reads it
        log.error("%s partition %d: could not seek back to %d: %s", tp.topic, tp.partition, to, e)
        w.offsets.forget([tp])
        return False
    return True


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
