"""Restoring what the tables lost: the input logs read back at an assignment, applied again.

Faust may commit an event's offset before the changelog write of the transition it caused
reaches the broker (:mod:`streams.catchup`). A worker killed in between comes back with tables
that miss the transition, and the event lies behind the committed offset, so no replay
brings it: an accepted submission would be gone, a decided job decided again, a started job
timed out and placed a second time, a finished one holding its resources for good.

So before the first step of each assignment, the loop reads the assigned partitions of
``jobs.submitted``, ``decisions`` and ``jobs.lifecycle`` back up to the group's committed offsets
(:meth:`streams.catchup.CatchUp.logged`) and :func:`restore` applies every event that moves
a job on from where the tables hold it, with the same idempotent transitions the agents make:

- a submission whose job the tables do not know at all (done records are never deleted);
- a decision whose job is pending at that attempt (``unschedulable`` ones are archive only);
- a lifecycle report that moves the job's current placement on (or stands for the decision
  of its pending attempt, :func:`streams.state.on_lifecycle`). Reports about placements the
  tables have already moved past change nothing and are left alone (the fence such a report
  may call for went out when its agent handled it).

The topics are applied in that order, in passes, until a pass changes nothing (a lost
decision, then a lost failure, then the next attempt's decision each need the one before).
Malformed, misplaced or refused events are skipped here: their agent dead-letters them.
What a transition publishes (a rejection notice, fences for the rest of a gang) is published
again before the tables change, as the agents do; ids are deterministic, so a repeat is the
same message to the agents and the archive.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted
from streams.agents import _decode_or_none, _known, _misplaced, lifecycle_transition
from streams.app import Worker
from streams.catchup import RESTORED_TOPICS
from streams.state import PendingJob, Transition, on_submitted

log = logging.getLogger("semsched.restore")

MAX_PASSES = 8  # each pass moves every lagging job at least one transition on; more is a bug, logged


def _events(w: Worker, topic: str, logged: list[tuple[int, bytes]]) -> list[tuple[int, Any]]:
    out = []
    for partition, raw in logged:
        ev = _decode_or_none(raw, topic, w.settings)
        if not isinstance(ev, str) and _misplaced(ev, partition, w.settings) is None:
            out.append((partition, ev))
    return out


def _changes_tables(t: Transition) -> bool:
    return bool(t.pending or t.running or t.done)


async def _submission(w: Worker, partition: int, ev: JobSubmitted) -> bool:
    if _known(w, ev.job_id) is not None:
        return False
    t = on_submitted(ev, None, time.time())
    w.apply(t, partition=partition)
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
    if t.emit or t.commands:
        await w.emit(t, partition)  # before the tables change, as the agent does
        t = lifecycle_transition(w, ev)  # (unless its agent applied it meanwhile)
        if not _changes_tables(t):
            return False
    w.apply(t, partition=partition)
    return True


_APPLY = {"jobs.submitted": _submission, "decisions": _decision, "jobs.lifecycle": _report}


async def restore(w: Worker, logged: dict[str, list[tuple[int, bytes]]]) -> Counter[str]:
    """Apply the logged events the tables lack (see the module's text); returns how many of each
    topic were applied, and adds them to the worker's counters (``restored``)."""
    events = {topic: _events(w, topic, logged.get(topic, [])) for topic in RESTORED_TOPICS}
    applied: Counter[str] = Counter()
    for n in range(1, MAX_PASSES + 1):
        moved = 0
        for topic in RESTORED_TOPICS:
            for partition, ev in events[topic]:
                if await _APPLY[topic](w, partition, ev):
                    applied[topic] += 1
                    moved += 1
        if not moved:
            break
        if n == MAX_PASSES:
            log.error("restoring from the logs still moved %d jobs on after %d passes: stopped there", moved, n)
    for topic, n in applied.items():
        w.counters.restored[topic] = w.counters.restored.get(topic, 0) + n
    log.info("logs read back (%s): applied %s that the tables had lost",
             ", ".join(f"{t} {len(events[t])}" for t in RESTORED_TOPICS),
             ", ".join(f"{t} {applied[t]}" for t in RESTORED_TOPICS))  # fmt: skip
    return applied
