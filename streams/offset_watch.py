"""Every input offset is handled: where the worker's consumption skips one, it goes back for it.

Faust drops records it has fetched in several places and counts on a later seek to the
committed offsets to fetch them again (on a rebalance, when flow stops, when the consumer
generation changes between fetch and delivery: faust-streaming/faust#216, #596). aiokafka's
``seek_to_committed`` leaves a partition without a committed offset where it is, so on a
group's first consumption (or after a worker died before its first commit, as in the restart
test) such a record would be gone. The input topics are written without transactions or
compaction, so their offsets are contiguous and a skipped one is an event the worker never saw.

:class:`OffsetWatch` keeps, per input partition, the last offset handled and says what to do
with each event (:meth:`OffsetWatch.seen`):

- the next offset, or an earlier one (a rebalance re-reads from the committed offset; every
  handler is idempotent): handle it;
- a jump past offsets never handled: seek back to the first of them and do not handle this
  one; until the first missing offset comes back, the events already queued past it are let
  go unhandled (they come again after it, in order). A seek can be undone: Faust delivers what
  it has already fetched and moves its read offset past the target again, then drops the
  records fetched anew as already read. So while the target has not come back,
  :meth:`OffsetWatch.due_reseeks` asks for the seek again every ``retry_s``;
- a wait that lasts ``give_up_s`` (60 s) ends (:meth:`OffsetWatch.give_up`): the partition
  must not stall for good; the loss is logged as an error and counted;
- :meth:`OffsetWatch.stalled` covers the last event of a burst, which no later event reveals
  as skipped: a partition whose end offset stays past what was handled for ``stall_s``, with
  nothing arriving on it meanwhile, is sought back too. A false alarm (a stream held up that long) costs a
  re-read.

Where consumption starts is looked up per assignment (:mod:`streams.offset_starts`, :meth:`begin`),
so a skip before the first event is a gap too; when the lookup fails, the first event is the start.
The worker begins each assigned partition as soon as the lookup answers, before any event, so
a partition whose every fetched record was dropped, with nothing else arriving, stalls too.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum


class Verdict(Enum):
    HANDLE = "handle"
    REWIND = "rewind"  # seek back to ``OffsetWatch.rewind_to(tp)``; this event comes again
    AWAIT = "await"  # past a rewind's target that has not come back yet: comes again too


@dataclass
class _Partition:
    last: int  # the last offset handled
    seen_at: float  # when an event last arrived on it
    waiting_for: int | None = None  # a rewind's target, until it arrives
    sought_at: float = 0.0  # when the seek back to it was last asked for
    waiting_since: float = 0.0  # when the wait for it began
    resync: bool = False  # after giving up a wait: the next event is taken as the start
    behind_since: float | None = None  # when its end offset was first seen past what was handled


class OffsetWatch:
    def __init__(self, stall_s: float = 10.0, retry_s: float = 1.0, give_up_s: float = 60.0) -> None:
        self.stall_s, self.retry_s, self.give_up_s = stall_s, retry_s, give_up_s
        self._parts: dict[Hashable, _Partition] = {}

    def seen(self, tp: Hashable, offset: int, now: float) -> Verdict:
        """What to do with the event at ``offset`` on ``tp`` (see the module docstring)."""
        p = self._parts.get(tp)
        if p is None:
            self._parts[tp] = _Partition(offset, now)
            return Verdict.HANDLE
        p.seen_at, p.behind_since = now, None  # progress
        if p.resync:
            p.resync = False
        elif p.waiting_for is not None:
            if offset > p.waiting_for:
                return Verdict.AWAIT
            p.waiting_for = None  # the target, or earlier still (a rebalance's re-read): on from here
        elif offset > p.last + 1:
            p.waiting_for, p.sought_at, p.waiting_since = p.last + 1, now, now
            return Verdict.REWIND
        p.last = offset
        return Verdict.HANDLE

    def begin(self, tp: Hashable, start: int, now: float) -> None:
        """Where ``tp``'s consumption starts (:mod:`streams.offset_starts`), before its first event:
        a first event past it is then a gap like any other."""
        self._parts[tp] = _Partition(start - 1, now)

    def rewind_to(self, tp: Hashable) -> int:
        """The offset to seek ``tp`` back to after a ``REWIND`` (or a stall)."""
        p = self._parts[tp]
        return p.waiting_for if p.waiting_for is not None else p.last + 1

    def stalled(self, ends: Mapping[Hashable, int], now: float) -> list[Hashable]:
        """The partitions to seek back (:meth:`rewind_to`): ``ends`` (each partition's end offset,
        the next to be written) has been past what was handled for ``stall_s``, with nothing
        arriving meanwhile. (Measured from when this saw it behind, not from the last arrival: a
        record published a moment ago after a quiet spell is on its way, not lost.)"""
        out = []
        for tp, end in ends.items():
            p = self._parts.get(tp)
            if p is None or p.resync:  # (after a give-up, the next event is the new start: nothing to compare with)
                continue
            if end <= self.rewind_to(tp):
                p.behind_since = None
            elif p.behind_since is None:
                p.behind_since = now
            elif now - p.behind_since >= self.stall_s:
                if p.waiting_for is None:  # a new wait; an old one keeps its give-up clock (found by review:
                    p.waiting_for, p.waiting_since = self.rewind_to(tp), now  # restarted at every stall, it
                p.sought_at = now  # never gave up on a partition where nothing arrived, stalled for good)
                p.behind_since = None  # once per stall_s at most
                out.append(tp)
        return out

    def hold_clocks(self, now: float) -> None:
        """Nothing is stalled or lost while consumption is held up on purpose (Faust pauses the
        input partitions while it recovers the tables; an agent waits for a dead letter): every
        partition's stall clock starts over, and a wait for a rewind's target starts again from
        ``now`` (its next seek ``retry_s`` after the hold ends, its give-up ``give_up_s`` after)."""
        for p in self._parts.values():
            p.behind_since = None
            if p.waiting_for is not None:
                p.sought_at = p.waiting_since = now

    def due_reseeks(self, now: float) -> list[Hashable]:
        """The partitions still waiting for a rewind's target ``retry_s`` after the seek: seek
        them back again (:meth:`rewind_to`)."""
        out = []
        for tp, p in self._parts.items():
            if p.waiting_for is not None and now - p.sought_at >= self.retry_s:
                p.sought_at = now
                out.append(tp)
        return out

    def give_up(self, now: float) -> list[tuple[Hashable, int]]:
        """``(partition, target)`` of the waits past ``give_up_s``: stop waiting, and handle the next
        events as they come. A partition must not stall for good; the caller reports the loss."""
        out = []
        for tp, p in self._parts.items():
            if p.waiting_for is not None and now - p.waiting_since >= self.give_up_s:
                out.append((tp, p.waiting_for))
                p.waiting_for, p.resync = None, True
        return out

    def forget(self, tps: Iterable[Hashable]) -> None:
        """Partitions taken away: another worker may handle more of them meanwhile."""
        for tp in tps:
            self._parts.pop(tp, None)

    def partitions(self) -> list[Hashable]:
        return list(self._parts)

    def __contains__(self, tp: Hashable) -> bool:
        return tp in self._parts
