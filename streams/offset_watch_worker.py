"""The worker's side of the offset watch (:mod:`streams.offset_watch`): every input event goes
through :func:`in_order` before its agent handles it, and a timer (:func:`register_offset_watch`)
begins newly assigned partitions, seeks back to what was skipped and to stalled partitions, and
gives up a wait after a minute. Consumption held up on purpose (the tables recovering, a dead
letter being retried) holds the watch's clocks: nothing is stalled or lost meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from streams.app import Worker
from streams.offset_starts import OffsetStarts
from streams.offset_watch import Verdict

log = logging.getLogger("semsched.worker")


async def in_order(w: Worker, topic: str, msg: Any) -> bool:
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
    """Forget revoked partitions; every ``retry_s`` begin the newly assigned ones at their start,
    seek again the partitions still waiting for a rewind's target, and every ``stall_s / 2`` seek
    back the stalled ones (all held while consumption is held up on purpose)."""

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
    # the start lookups and the end-offset reads are round trips to the broker (about a second under
    # load): they run beside the timer, one of each at a time, so re-seeks keep their pace
    beginning: list[asyncio.Future[None]] = []
    checking: list[asyncio.Future[None]] = []

    @w.app.timer(interval=w.offsets.retry_s)
    async def seek_back() -> None:
        if unbegun and not _running(beginning):
            beginning[:] = [asyncio.ensure_future(_begin_assigned(w, unbegun))]
        now = time.monotonic()
        if _held_up(w):  # consumption is held up on purpose meanwhile: no partition is stalled or lost
            w.offsets.hold_clocks(now)
            return
        for tp, target in w.offsets.give_up(now):
            w.counters.offsets_lost += 1
            log.error("%s partition %d: offset %d did not come back within %g s of seeking: given up, LOST",
                      tp.topic, tp.partition, target, w.offsets.give_up_s)  # fmt: skip
        for tp in w.offsets.due_reseeks(now):
            log.info("%s partition %d: offset %d not back yet: seeking back again", tp.topic, tp.partition,
                     w.offsets.rewind_to(tp))  # fmt: skip
            await _seek_back(w, tp)
        tps = w.offsets.partitions()
        if tps and now - ends_read[0] >= w.offsets.stall_s / 2 and not _running(checking):
            ends_read[0] = now
            checking[:] = [asyncio.ensure_future(_seek_stalled(w, tps))]


def _running(task: list[asyncio.Future[None]]) -> bool:
    return bool(task) and not task[0].done()


async def _seek_stalled(w: Worker, tps: list[Any]) -> None:
    """Seek back the partitions whose end offset has stayed past what was handled (:meth:`OffsetWatch.stalled`)."""
    try:
        ends = await w.app.consumer.highwaters(*tps)
    except Exception as e:  # e.g. a rebalance under way: the next round
        log.debug("offset watch: no end offsets now: %s", e)
        return
    if _held_up(w):  # (while the ends were on their way)
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
        if start is None and tp not in w.offsets:  # the lookup failed (logged): not one round trip per partition
            unbegun.clear()  # their first events are their starts
            break


def _held_up(w: Worker) -> bool:
    """Consumption held up on purpose: Faust pauses the input partitions while it recovers the
    tables, and an agent waits while a dead letter is retried (``Worker.deadletter``)."""
    app = w.app
    recovering = bool(getattr(app, "in_recovery", False)) or not app.tables.recovery.completed.is_set()
    return recovering or w.deadletters_retrying > 0


async def _seek_back(w: Worker, tp: Any) -> bool:
    to = w.offsets.rewind_to(tp)
    try:
        await w.app.consumer.seek(tp, to)
    except Exception as e:  # e.g. the partition just moved: forgotten, its next owner reads it
        log.error("%s partition %d: could not seek back to %d: %s", tp.topic, tp.partition, to, e)
        w.offsets.forget([tp])
        return False
    return True
