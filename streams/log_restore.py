"""Restoring what the tables lost: the input logs read back at an assignment, applied again.

Faust may commit an event's offset before the changelog write of the transition it caused
reaches the broker. A worker killed in between comes back with tables that miss the
transition, and the event lies behind the committed offset, so no live consumption brings it
again: an accepted submission would be gone, a decided job decided again, a started job timed
out and placed a second time, a finished one holding its resources for good.

So at every assignment, once the tables are recovered and while the input streams are still
paused (Faust awaits ``app.on_rebalance_complete`` before it resumes them), the worker reads
the assigned partitions of ``jobs.submitted``, ``decisions`` and ``jobs.lifecycle`` back up to
the group's committed offsets (:func:`streams.log_readback.read_back`), and :func:`restore`
applies every event that moves a job on from where the tables hold it, with the agents'
own idempotent transitions:

- a submission whose job the tables do not know at all (done records are never deleted);
- a decision whose job is pending at that attempt (``unschedulable`` ones are archive only);
- a lifecycle report that moves the job's current placement on (or stands for the decision
  of its pending attempt, :func:`streams.state.on_lifecycle`). Reports about placements the
  tables have already moved past change nothing and are left alone (the fence such a report
  may call for went out when its agent handled it).

Nothing past the committed offsets has been handled yet in this assignment, so the live
events that depend on a restored one (a decision on a restored submission) find it in place.
The topics are applied in that order, in passes, until a pass changes nothing (a lost
decision, then a lost failure, then the next attempt's decision each need the one before).
Malformed, misplaced or refused events are skipped: their agent dead-lettered them. What a
transition publishes (a rejection notice, fences for the rest of a gang) is published again
before the tables change, as the agents do; the ids are deterministic, so a repeat is the same
message to the agents and the archive. A restore does not wake the scheduling loop (it is not
stepping yet) nor teach the duration estimate (no run time is observed twice).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted
from streams.agents import decode_or_reason, known_job, lifecycle_transition, misplaced_reason
from streams.app import Worker
from streams.log_readback import RESTORED_TOPICS, Logged, read_back
from streams.state import PendingJob, Transition, on_submitted

log = logging.getLogger("semsched.restore")

READ_TIMEOUT_S = 60.0  # a read-back that does not finish by then is given up (the tables stay as they are)


def _events(w: Worker, topic: str, logged: list[tuple[int, bytes]]) -> list[tuple[int, Any]]:
    out = []
    for partition, raw in logged:
        ev = decode_or_reason(raw, topic, w.settings)
        if not isinstance(ev, str) and misplaced_reason(ev, partition, w.settings) is None:
            out.append((partition, ev))
    return out


def _changes_tables(t: Transition) -> bool:
    return bool(t.pending or t.running or t.done)


async def _submission(w: Worker, partition: int, ev: JobSubmitted) -> bool:
    if known_job(w, ev.job_id) is not None:
        return False
    w.apply(on_submitted(ev, None, time.time()), partition=partition)
    return True


async def _decision(w: Worker, partition: int, rec: DecisionRecord) -> bool:
    pending = w.read("pending", rec.job_id, PendingJob)
    if rec.outcome == "unschedulable" or pending is None or pending.attempt != rec.attempt:
        return False
    await w.apply_decision(rec, partition, in_stream=False)
    return True


async def _report(w: Worker, partition: int, ev: JobLifecycle) -> bool:
    t = lifecycle_transition(w, ev)  # a report about a placement the tables moved past changes nothing
    if not _changes_tables(t):
        return False
    await w.emit(t, partition)  # notices and the gang's fences, before the tables change
    w.apply(t, partition=partition)
    return True


_APPLY = {"jobs.submitted": _submission, "decisions": _decision, "jobs.lifecycle": _report}


async def _apply_one(w: Worker, topic: str, partition: int, ev: Any) -> bool:
    try:
        return await _APPLY[topic](w, partition, ev)
    except Exception:  # one bad event must not keep the others (or the worker) from coming back
        log.exception("restoring %s event %s failed: left as it is", topic, getattr(ev, "event_id", "?"))
        return False


async def restore(w: Worker, logged: Logged) -> Counter[str]:
    """Apply the logged events the tables lack (see the module's text); returns how many of each
    topic were applied, and adds them to the worker's counters (``restored``)."""
    events = {topic: _events(w, topic, logged.get(topic, [])) for topic in RESTORED_TOPICS}
    applied: Counter[str] = Counter()
    # an event changes the tables at most once (after, its job has moved past it): the passes end
    for _ in range(1 + sum(len(e) for e in events.values())):
        moved = 0
        for topic in RESTORED_TOPICS:
            for partition, ev in events[topic]:
                if await _apply_one(w, topic, partition, ev):
                    applied[topic] += 1
                    moved += 1
        if not moved:
            break
    else:
        log.error("restoring from the logs did not settle: stopped after one pass per event")
    for topic, n in applied.items():
        w.counters.restored[topic] = w.counters.restored.get(topic, 0) + n
    log.info("logs read back (%s events): applied %s that the tables had lost",
             ", ".join(f"{t} {len(events[t])}" for t in RESTORED_TOPICS),
             ", ".join(f"{t} {applied[t]}" for t in RESTORED_TOPICS))  # fmt: skip
    return applied


async def restore_assignment(w: Worker, partitions: set[int]) -> None:
    """Read the logs of ``partitions`` back and restore them (bounded by ``READ_TIMEOUT_S``): a
    read that fails or hangs is logged, and the worker goes on with the tables as they are."""
    if not partitions:
        return
    try:
        logged = await asyncio.wait_for(read_back(w.settings, w.app.conf.id, partitions), READ_TIMEOUT_S)
    except Exception as e:  # (a timeout too) the broker is the agents' as well: they will say more
        log.error("could not read the input logs back (%s: %s); going on with the tables as they are",
                  type(e).__name__, e)  # fmt: skip
        return
    try:
        await restore(w, logged)
    except Exception:  # never take the worker's recovery down with it
        log.exception("restoring from the logs failed; going on with the tables as they are")


def register_log_restore(w: Worker) -> None:
    """Restore at every assignment, after table recovery, before the input streams resume."""
    inputs = {w.settings.topic(t) for t in RESTORED_TOPICS}

    async def on_rebalance_complete(sender: Any, **kwargs: Any) -> None:
        assigned = {tp.partition for tp in w.app.consumer.assignment() if tp.topic in inputs}
        await restore_assignment(w, assigned)

    w.app.on_rebalance_complete.connect(on_rebalance_complete)
