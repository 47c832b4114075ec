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
from faust.exceptions import ConsumerNotStarted
from opentelemetry import trace

from scheduling.events import (
    INTERNAL_ERROR,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
)
from streams import telemetry
from streams.admission import admit, ahead_of_clock, record_ms
from streams.app import Worker
from streams.done_retention import of_a_forgotten_job, refusal, sent_at
from streams.early_reports import EarlyReport
from streams.input_faults import ENV as FAULTS_ENV
from streams.input_faults import InputFaults
from streams.offset_watch_worker import in_order, register_offset_watch
from streams.state import (
    DoneJob,
    PendingJob,
    RunningJob,
    Transition,
    gang_fences,
    on_lifecycle,
    on_submitted,
)
from streams.uncommanded import Uncommanded

log = logging.getLogger("semsched.worker")


def known_job(w: Worker, job_id: str) -> PendingJob | RunningJob | DoneJob | None:
    return (w.read("pending", job_id, PendingJob) or w.read("running", job_id, RunningJob)
            or w.read("done", job_id, DoneJob))  # fmt: skip


def _cluster_of(known: PendingJob | RunningJob | DoneJob | None) -> str:
    """The cluster of a job the worker holds ("" for none, or a done record written before it was kept)."""
    if known is None:
        return ""
    return known.cluster if isinstance(known, DoneJob) else known.job.cluster


def lifecycle_transition(w: Worker, ev: JobLifecycle) -> Transition:
    """What a lifecycle report does to the tables (:func:`streams.state.on_lifecycle`), with the
    fences for the rest of its gang when a member leaves the gang's placement."""
    was = w.read("running", ev.job_id, RunningJob)
    pending = w.read("pending", ev.job_id, PendingJob)
    done = w.read("done", ev.job_id, DoneJob) if was is None and pending is None else None
    node = w.nodes.get(ev.node_id) if ev.node_id else None
    t = on_lifecycle(ev, was, pending=pending, done=done, max_retries=w.settings.max_retries, now=time.time(),
                     node_gpus=int(node["num_gpu"]) if node else None)  # fmt: skip
    left = t.running.get(ev.job_id, "kept") is None and ev.state != "finished"
    # (``was`` None: the report stood for its decision, adopted from ``pending``; found by review: a member's
    # failure that overtook its decision after a restart fenced none of its gang, which ran on without it)
    job = was.job if was is not None else pending.job if pending is not None else None
    if left and job is not None and job.gang_id:
        members = [w.read("running", k, RunningJob) for k, d in list(w.running.items())
                   if d is not None and d["job"].get("gang_id") == job.gang_id]  # fmt: skip
        t.commands += gang_fences(job, [m for m in members if m is not None], f"left the gang: {ev.state}")
    return t


async def apply_lifecycle(w: Worker, ev: JobLifecycle, partition: int) -> str | None:
    """Apply one lifecycle report: its transition, its notices and fences first. Returns why the report is
    refused (the caller dead-letters it; nothing applied), else None."""
    if (theirs := _cluster_of(known_job(w, ev.job_id))) and theirs != ev.cluster:  # as a submission's (found by
        # review: a report naming another cluster, or none, was applied to this cluster's job of that id, its fences
        # sent to its cluster, and archived under it)
        return (f"{ev.state} report of job {ev.job_id!r} names cluster {ev.cluster!r}: the job is cluster "
                f"{theirs!r}'s on this worker")  # fmt: skip
    was = w.read("running", ev.job_id, RunningJob)
    current = was is not None and ev.decision_id == was.decision_id and ev.node_id in (None, was.node_id)
    if ev.state == "finished" and current and was.started_ts is not None:  # (a stale one's run is not this one's)
        ran = ev.event_time.timestamp() - was.started_ts
        if ran >= 0:
            w.observe_finished(was.job, ran, ev.event_time.timestamp())
    t = lifecycle_transition(w, ev)
    if t.deadletter:
        return t.deadletter
    await w.emit(t, partition)  # before the tables change: a crash repeats it, never loses it
    w.apply(t, partition=partition)  # (named: it also runs for a held report, outside its stream)
    w.counters.lifecycle += 1
    if ev.state == "finished":
        w.traces.forget(ev.job_id)
    if any(v is None for v in t.running.values()):  # resources freed (or the job re-queued)
        w.wake()
    return None


def add_report(window: list[float] | None, report: list[float]) -> list[float]:
    """One window's ``[gpu_util sum, cpu_util sum, reports]`` with ``report`` added (Faust applies it
    to every window the report's time falls in, each from its own value)."""
    cur = window or [0.0, 0.0, 0]
    return [cur[0] + report[0], cur[1] + report[1], cur[2] + report[2]]


def lifecycle_partitions(w: Worker, assigned: Any = None) -> set[int]:
    """The ``jobs.lifecycle`` partitions of ``assigned`` (default: the consumer's assignment now)."""
    topic = w.settings.topic("jobs.lifecycle")
    if assigned is None:
        try:
            assigned = w.app.consumer.assignment()
        except ConsumerNotStarted:  # (before the worker's consumer runs: nothing is its yet)
            return set()
    return {tp.partition for tp in assigned if tp.topic == topic}


async def expire_early_reports(w: Worker, now: float) -> None:
    """Reports whose job never came (held longer than ``EARLY_REPORT_WAIT_S``): handled as reports about
    a placement never known (a ``started`` one fenced: a run nobody accounts for must stop). Only on the
    partitions this worker holds, and none while Faust rebalances (the consumer still reports the old
    assignment until the new one: a partition about to go is not this worker's to fence on)."""
    if getattr(w.app, "rebalancing", False):
        return
    for early in w.early_reports.expired(now, lifecycle_partitions(w)):
        await apply_held(w, early)


async def apply_held(w: Worker, early: EarlyReport) -> None:
    """Apply a report that waited for its job's submission (or for its time to run out). One that
    fails is dead-lettered itself, as it would have been when it came: not the submission that
    released it (already applied), and not at the cost of the reports held after it."""
    original = early.raw if early.raw is not None else early.event.to_bytes()  # (a report read back: re-encoded)
    try:
        refused = await apply_lifecycle(w, early.event, early.partition)
    except Exception as e:  # noqa: BLE001 - as _agent's own handler: the worker goes on
        log.exception("handling the held report %s@%s:%s failed", "jobs.lifecycle", early.partition, early.offset)
        await w.deadletter(original, f"{INTERNAL_ERROR} while handling: {type(e).__name__}: {e}", early, "jobs.lifecycle")
        return
    if refused:
        await w.deadletter(original, refused, early, "jobs.lifecycle")


def register_agents(w: Worker) -> None:
    """One agent per input topic; each decodes (malformed → dead letter) then applies a
    handler. A handler that raises dead-letters its event too: the worker keeps going."""

    async def on_job(ev: JobSubmitted, raw: bytes, msg: Any) -> None:
        if reason := ahead_of_clock(ev.event_time, w.settings.max_clock_skew_s):
            await w.deadletter(raw, reason, msg, "jobs.submitted")
            return
        t = on_submitted(ev, known_job(w, ev.job_id), time.time())
        if t.pending and (reason := refusal(w, msg.partition, record_ms(msg), ev.event_time)):  # (a forgotten job's?)
            t.deadletter = reason
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
            for early in w.early_reports.take(ev.job_id):  # its reports that came first
                await apply_held(w, early)
            w.wake()

    async def on_telemetry(ev: NodeTelemetry, raw: bytes, msg: Any) -> None:
        if reason := ahead_of_clock(ev.event_time, w.settings.max_clock_skew_s):
            await w.deadletter(raw, reason, msg, "nodes.telemetry")
            if ev.source == "agent":  # its agent is alive, but not heard: said when the node is taken for silent
                w.node_refused[ev.node_id] = reason
            return
        prev = w.nodes.get(ev.node_id)
        if prev is not None and prev.get("cluster") != ev.cluster:  # (it replaced the other node, or hid behind it)
            await w.deadletter(raw, f"node id {ev.node_id!r} is cluster {prev.get('cluster')!r}'s on this worker: node "
                                    "ids must be unique across the clusters a worker serves", msg, "nodes.telemetry")  # fmt: skip
            return
        if prev is not None and (prev.get("event_id") == ev.event_id
                                 or datetime.fromisoformat(prev["event_time"]) > ev.event_time):  # fmt: skip
            # late telemetry never overwrites newer state, and the latest report redelivered (a
            # restart, a rebalance) is not counted again in the utilisation window. A new report of
            # its agent still says the agent is alive (its clock stepped back: NTP), so the node is
            # not taken for silent (streams/silent_nodes.py)
            if ev.source == "agent" and prev.get("event_id") != ev.event_id:
                w.node_heard[ev.node_id] = time.monotonic()
            w.counters.telemetry_late += 1
            log.debug("telemetry of %s at %s not applied: the node's latest is %s (%s)", ev.node_id,
                      ev.event_time.isoformat(), prev["event_time"], prev.get("event_id"))  # fmt: skip
            return
        w.nodes[ev.node_id] = ev.model_dump(mode="json")
        w.counters.telemetry += 1
        if ev.source == "agent":  # into each hopping window the report falls in, each its own sum
            w.node_heard[ev.node_id] = time.monotonic()
            w.node_refused.pop(ev.node_id, None)
            w.node_util[ev.node_id].apply(add_report, [ev.gpu_util, ev.cpu_util, 1])

    async def on_life(ev: JobLifecycle, raw: bytes, msg: Any) -> None:
        trace.get_current_span().set_attributes({"semsched.job_id": ev.job_id, "semsched.state": ev.state})
        if reason := ahead_of_clock(ev.event_time, w.settings.max_clock_skew_s):  # as a submission's (found by
            await w.deadletter(raw, reason, msg, "jobs.lifecycle")  # review: a `finished` stamped 2299 taught a
            return  # run time of 273 years to the duration estimate, and went into the archive)
        if known_job(w, ev.job_id) is None and of_a_forgotten_job(w, msg.partition, sent_at(record_ms(msg), ev.event_time)):
            w.counters.note("report of a forgotten job: let go")  # (streams/done_retention.py)
            return
        if known_job(w, ev.job_id) is None and w.early_reports.hold(
                ev, msg.partition, time.time(), msg.offset, raw, msg.timestamp):
            w.counters.early_reports += 1  # before its job's submission (streams/early_reports.py)
            return
        if refused := await apply_lifecycle(w, ev, msg.partition):
            await w.deadletter(raw, refused, msg, "jobs.lifecycle")

    async def on_decided(ev: DecisionRecord, raw: bytes, msg: Any) -> None:
        own = Uncommanded.own(w, ev)  # (before the apply, which takes it out of inflight)
        t = await w.apply_decision(ev, msg.partition, in_stream=True)
        w.counters.decisions_applied += 1
        if (loop := getattr(w, "loop", None)) is not None:  # a reservation whose command may never have gone out
            loop.uncommanded.note_applied(ev, t, own=own)

    @w.app.timer(interval=1.0)
    async def early_reports_expire() -> None:
        await expire_early_reports(w, time.time())

    async def early_reports_assigned(sender: Any = None, assigned: Any = (), **kwargs: Any) -> None:
        if dropped := w.early_reports.keep_partitions(lifecycle_partitions(w, assigned)):
            log.info("let go of %d held report(s) of partitions assigned elsewhere: their owner handles them",
                     dropped)  # fmt: skip

    w.app.on_partitions_assigned.connect(early_reports_assigned)

    handlers = {"jobs.submitted": on_job, "nodes.telemetry": on_telemetry, "jobs.lifecycle": on_life,
                "decisions": on_decided}  # fmt: skip
    faults = InputFaults.from_env()  # none unless a test asks (streams/input_faults.py)
    for topic, handler in handlers.items():
        _agent(w, topic, handler, faults)
    register_offset_watch(w)


def _agent(w: Worker, topic: str, handler: Any, faults: InputFaults) -> None:
    async def one(raw: bytes | None, msg: Any) -> None:
        if topic == "nodes.telemetry":
            w.telemetry_offsets[msg.partition] = msg.offset
        try:
            await handle(raw, msg)
        finally:  # handled, not merely read: the restart gates open on these (found by review: recorded before,
            # a replayed rejection still waiting on the broker let the gate open with its job pending)
            if topic == "decisions":
                w.applied_offsets[msg.partition] = msg.offset
            elif topic == "jobs.lifecycle":  # (and what a step's snapshot has handled: its decisions record it)
                w.lifecycle_offsets[msg.partition] = msg.offset
                w.lifecycle_handled[msg.partition] = max(w.lifecycle_handled.get(msg.partition, 0), msg.offset + 1)

    async def handle(raw: bytes | None, msg: Any) -> None:
        stamp = record_ms(msg)
        ev = admit(raw, topic, msg.partition, w.settings, offset=msg.offset, timestamp_ms=stamp)
        if isinstance(ev, str):
            await w.deadletter(raw or b"", ev, msg, topic)
            return
        try:
            await handler(ev, raw, msg)
        except Exception as e:  # never crash the agent on one event: dead-letter it
            log.exception("handling %s@%s:%s failed", topic, msg.partition, msg.offset)
            await w.deadletter(raw, f"{INTERNAL_ERROR} while handling: {type(e).__name__}: {e}", msg, topic)

    async def consume(stream: faust.StreamT) -> None:
        async for event in stream.events():
            # submissions and traced lifecycle reports are handled inside their span (the
            # trace context rides in the message headers; Faust gives them as a dict)
            msg = event.message
            if faults.drop(topic, msg.offset):
                log.warning("%s partition %d: offset %d dropped (%s)", topic, msg.partition, msg.offset, FAULTS_ENV)
                continue
            if not await in_order(w, topic, msg):
                continue  # it comes again, after the offsets skipped before it
            with telemetry.consume_span(msg.topic, topic, event.headers, msg.partition, msg.offset):
                await one(event.value, msg)

    w.app.agent(w.topics[topic], name=f"ingest-{topic.replace('.', '-')}")(consume)
