"""Restoring what the tables lost: the input logs read back at an assignment, applied again.

Faust may commit an event's offset before the changelog write of the transition it caused
reaches the broker. A worker killed in between comes back with tables that miss the
transition, and the event lies behind the committed offset, so no live consumption brings it
again: an accepted submission would be gone, a decided job decided again, a started job timed
out and placed a second time, a finished one holding its resources for good.

So when partitions are assigned to this worker that it did not hold (its start, a partition
moved from another worker), once the tables are recovered and while the input streams are
still paused (Faust awaits ``app.on_rebalance_complete`` before it resumes them), the worker
reads those partitions of ``jobs.submitted``, ``decisions`` and ``jobs.lifecycle`` back up to
the group's committed offsets (:func:`streams.log_readback.read_back`), and :func:`restore`
applies every event that moves a job on from where the tables hold it, with the agents'
own idempotent transitions:

- a submission whose job the tables do not know at all, sent after its partition's forgotten
  watermark (an older one may be of a job done and forgotten since: :mod:`streams.done_retention`);
- a decision whose job is pending at that attempt (``unschedulable`` ones are archive only);
- a lifecycle report that moves the job's current placement on (or stands for the decision
  of its pending attempt, :func:`streams.state.on_lifecycle`). Reports about placements the
  tables have already moved past change nothing and are left alone.

Nothing past the committed offsets has been handled yet on those partitions, so the live
events that depend on a restored one (a decision on a restored submission) find it in place.
A partition the worker kept needs none of this: its tables are the process's own, every write
flushed before Faust recovers (it reads back its own changelog writes and nothing else).

The topics are applied in that order, in passes, each after the first only over the jobs the
one before moved (a lost decision, then a lost failure, then the next attempt's decision each
need the one before), yielding to the event loop as it goes (heartbeats, the web status).
Each event applied is logged with its offset. Malformed and misplaced events are skipped:
their agent dead-lettered them. So is every event whose dead letter (read back on the same
partitions) refuses it for its content or the worker's state then: a submission stamped too far
ahead of the worker's clock stays refused once that clock has caught up (found by review: the
restore scheduled it, while the archive's views, which read the same dead letters, counted it
refused). An event its agent dead-lettered for an internal error (the handler raised) is applied
like any other: that is the repair it was waiting for. What a
transition publishes (a rejection notice, fences for the rest of a gang) is published again
before the tables change, as the agents do; the ids are deterministic, so a repeat is the same
message to the agents and the archive. A restore does not teach the duration estimate.

No step runs from an assignment that brings new partitions until their restore is over
(:func:`restore_due`, ``Worker.restore_due``, set at the assignment and cleared when
``on_rebalance_complete`` has restored them; :func:`restore_partitions` counts itself too): Faust
may end its table recovery before it sends ``on_rebalance_complete``, and a catch-up gate whose
partition the old owner had committed to its end opens at once. Found by review: a step placed a
job the old owner had placed (its command sent, its changelog write lost) again on another node,
under the same decision id. The gate is a deadline (:data:`DUE_S`), so a signal that never comes
cannot hold the loop for ever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from scheduling.events import INTERNAL_ERROR, DeadLetter, JobLifecycle, JobSubmitted, decode
from streams.admission import admit, ahead_of_clock
from streams.agents import known_job, lifecycle_transition
from streams.app import Worker
from streams.done_retention import of_a_forgotten_job, refusal, sent_at
from streams.log_readback import REFUSALS, RESTORED_TOPICS, Logged, read_back
from streams.state import PendingJob, Transition, on_submitted

log = logging.getLogger("semsched.restore")

TIMEOUT_S = 120.0  # reading back and applying, per assignment: past it, the worker goes on as it is
YIELD_EVERY = 500  # events applied or checked between turns given to the event loop


@dataclass(frozen=True)
class LoggedEvent:
    topic: str
    partition: int
    offset: int
    event: Any
    raw: bytes | None = None  # its record's bytes and Kafka timestamp (ms): a held report's dead letter names them
    timestamp_ms: int | None = None


def _refused(dead_letters: list[tuple[int, int, bytes, int | None]]) -> set[tuple[str, int, int]]:
    """``(topic, partition, offset)`` of the events the dead letters refuse, but for an internal error
    (the rule of the archive's ``*_accepted`` views, migration 0014)."""
    out = set()
    for _, _, raw, _ in dead_letters:
        try:
            dl = decode(REFUSALS, raw)
        except ValueError:  # not a dead letter of ours: it refuses nothing
            continue
        if isinstance(dl, DeadLetter) and not dl.reason.startswith(INTERNAL_ERROR):
            out.add((dl.topic, dl.partition, dl.offset))
    return out


def _events(w: Worker, topic: str, logged: list[tuple[int, int, bytes, int | None]],
            refused: set[tuple[str, int, int]]) -> list[LoggedEvent]:  # fmt: skip
    out, refused_now = [], 0
    for partition, offset, raw, timestamp_ms in logged:
        if (topic, partition, offset) in refused:
            continue
        ev = admit(raw, topic, partition, w.settings, offset=offset, timestamp_ms=timestamp_ms)
        if isinstance(ev, str):
            continue
        if isinstance(ev, JobSubmitted | JobLifecycle) and known_job(w, ev.job_id) is None and (
                refusal(w, partition, timestamp_ms, ev.event_time) if isinstance(ev, JobSubmitted)
                else of_a_forgotten_job(w, partition, sent_at(timestamp_ms, ev.event_time))):  # fmt: skip
            refused_now += 1  # (the live agents let them go too)
            continue
        out.append(LoggedEvent(topic, partition, offset, ev, raw, timestamp_ms))
    if refused_now:
        log.info("%d %s event(s) read back not restored: sent before their partition's forgotten watermark, they "
                 "may be of jobs done and forgotten since (streams/done_retention.py)", refused_now, topic)  # fmt: skip
    return out


def _changes_tables(t: Transition) -> bool:
    return bool(t.pending or t.running or t.done)


async def _submission(w: Worker, e: LoggedEvent) -> bool:
    partition, ev = e.partition, e.event
    if known_job(w, ev.job_id) is not None:
        return False
    if ahead_of_clock(ev.event_time, w.settings.max_clock_skew_s) is not None:
        return False  # refused live (dead-lettered) for its clock: not to be scheduled from the log either
    w.apply(on_submitted(ev, None, ev.event_time.timestamp()), partition=partition)  # queued when submitted
    return True


async def _decision(w: Worker, e: LoggedEvent) -> bool:
    partition, rec = e.partition, e.event
    pending = w.read("pending", rec.job_id, PendingJob)
    if rec.outcome == "unschedulable" or pending is None or pending.attempt != rec.attempt:
        return False
    await w.apply_decision(rec, partition, in_stream=False)
    return True


async def _report(w: Worker, e: LoggedEvent) -> bool:
    partition, ev = e.partition, e.event
    stamp = None if e.timestamp_ms is None else e.timestamp_ms / 1000  # (in s, as Faust gives it live)
    if known_job(w, ev.job_id) is None and w.early_reports.hold(ev, partition, time.time(), e.offset, e.raw, stamp):
        return False  # its submission comes live, after the restore: the report waits for it (early_reports.py)
    t = lifecycle_transition(w, ev)  # a report about a placement the tables moved past changes nothing
    if not _changes_tables(t):
        return False
    await w.emit(t, partition)  # notices and the gang's fences, before the tables change
    w.apply(t, partition=partition)
    return True


_APPLY = {"jobs.submitted": _submission, "decisions": _decision, "jobs.lifecycle": _report}


async def _apply_one(w: Worker, e: LoggedEvent) -> bool:
    try:
        moved = await _APPLY[e.topic](w, e)
    except Exception:  # one bad event must not keep the others (or the worker) from coming back
        log.exception("restoring %s@%d:%d failed: left as it is", e.topic, e.partition, e.offset)
        return False
    if moved:
        state = getattr(e.event, "state", None) or getattr(e.event, "outcome", None) or "submitted"
        log.warning("restored %s@%d:%d (job %s, %s): the tables had lost it", e.topic, e.partition, e.offset,
                    e.event.job_id, state)  # fmt: skip
        w.counters.restored[e.topic] = w.counters.restored.get(e.topic, 0) + 1
    return moved


async def restore(w: Worker, logged: Logged) -> Counter[str]:
    """Apply the logged events the tables lack (see the module's text); returns how many of each
    topic were applied (also added to the worker's counters, ``restored``, as they are)."""
    refused = _refused(logged.get(REFUSALS, []))
    per_topic = {topic: _events(w, topic, logged.get(topic, []), refused) for topic in RESTORED_TOPICS}
    todo = [e for topic in RESTORED_TOPICS for e in per_topic[topic]]  # topic by topic, each in offset order
    applied: Counter[str] = Counter()
    seen = 0
    while todo:
        moved: set[str] = set()
        for e in todo:
            if await _apply_one(w, e):
                applied[e.topic] += 1
                moved.add(e.event.job_id)
            seen += 1
            if seen % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        # an event changes the tables at most once (then its job has moved past it): this ends
        todo = [e for e in todo if e.event.job_id in moved]
    for partition, offset, *_ in logged.get("jobs.lifecycle", []):  # the tables hold these reports now
        w.lifecycle_handled[partition] = max(w.lifecycle_handled.get(partition, 0), offset + 1)
    log.info("logs read back (%s events): applied %s that the tables had lost",
             ", ".join(f"{t} {len(per_topic[t])}" for t in RESTORED_TOPICS),
             ", ".join(f"{t} {applied[t]}" for t in RESTORED_TOPICS))  # fmt: skip
    return applied


async def restore_partitions(w: Worker, partitions: set[int]) -> None:
    """Read the logs of ``partitions`` back and restore them, within ``TIMEOUT_S``: a read or a
    restore that fails or runs over is logged, and the worker goes on with the tables as they are
    (what was applied stays: every step of it is a transition of its own)."""
    async def read_and_restore() -> None:
        await restore(w, await read_back(w.settings, w.app.conf.id, partitions))

    w.restoring += 1  # the scheduling loop waits (found by review: Faust may have ended its recovery
    try:  # before it sends on_rebalance_complete, so a step decided a job the restore was about to place)
        await asyncio.wait_for(read_and_restore(), TIMEOUT_S)
    except Exception as e:  # (a timeout too) the broker is the agents' as well: they will say more
        log.error("could not restore partitions %s from the input logs (%s: %s); going on with the tables "
                  "as they are", sorted(partitions), type(e).__name__, e)  # fmt: skip
    finally:
        w.restoring -= 1


DUE_S = 2 * TIMEOUT_S + 60.0  # the longest an assignment holds the loop for its restore


def restore_due(w: Worker) -> bool:
    """Whether the loop waits for a restore: one under way, or one an assignment made due."""
    return w.restoring > 0 or (w.restore_due is not None and time.monotonic() < w.restore_due)


class LogRestore:
    """Restores the input partitions newly assigned to this worker, at each assignment."""

    def __init__(self, w: Worker) -> None:
        self.w = w
        self.inputs = {w.settings.topic(t) for t in RESTORED_TOPICS}
        self.held: set[int] = set()  # input partitions restored (or held since) and assigned ever since

    def _assigned(self) -> set[int]:
        return {tp.partition for tp in self.w.app.consumer.assignment() if tp.topic in self.inputs}

    async def on_partitions_assigned(self, sender: Any = None, *args: Any, **kwargs: Any) -> None:
        assigned = self._assigned()
        self.held &= assigned  # a partition that left (even for a generation) comes back new
        if assigned - self.held:  # no step until on_rebalance_complete has restored them
            self.w.restore_due = time.monotonic() + DUE_S

    async def on_rebalance_complete(self, sender: Any = None, *args: Any, **kwargs: Any) -> None:
        try:
            assigned = self._assigned()
            new = assigned - self.held
            if new:
                await restore_partitions(self.w, new)
            self.held = assigned  # (a cancelled restore, by a rebalance under way, leaves them new)
        finally:  # (not while a newer assignment's new partitions still wait: the deadline bounds it)
            if not self._assigned() - self.held:
                self.w.restore_due = None

    def register(self) -> None:
        self.w.app.on_partitions_assigned.connect(self.on_partitions_assigned)
        self.w.app.on_rebalance_complete.connect(self.on_rebalance_complete)


def register_log_restore(w: Worker) -> LogRestore:
    """Restore at every assignment, after table recovery, before the input streams resume."""
    restorer = LogRestore(w)
    restorer.register()
    return restorer
