"""Where the worker group's consumption of each input partition starts: its committed offset,
else the partition's first (the worker reads with ``auto_offset_reset=earliest``), and never
before the first record retention has left on the broker.

:mod:`streams.offset_watch` takes the first event it sees on a partition as the start; with
this, a first event past the start (Faust dropped what it fetched first, faust-streaming/faust#216)
is a gap like any other and is sought back to. Looked up once per assignment for every
assigned input partition together (an admin round trip), when the first event arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.settings import Settings

log = logging.getLogger("semsched.worker")


async def start_offsets(settings: Settings, group_id: str, tps: Iterable[TopicPartition]) -> dict[Hashable, int]:
    """``{partition: offset}``: the group's committed offset, else the partition's first; never
    before the first still on the broker (retention may have deleted past a committed offset,
    and the consumer then starts at the first)."""
    tps = list(tps)
    done = await committed_offsets(settings, group_id, tps)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        first = await consumer.beginning_offsets(tps)
    finally:
        await consumer.stop()
    return {tp: max(done.get(tp, 0), first[tp]) for tp in tps}


async def committed_offsets(settings: Settings, group_id: str, tps: list[TopicPartition], *,
                            marked: str | None = None) -> dict[TopicPartition, int]:  # fmt: skip
    """``{partition: offset}`` the group has committed, for those of ``tps`` it has (the restart
    gate, :mod:`streams.catchup`, reads it too); with ``marked``, only those committed with that metadata."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group_id, partitions=tps)
    finally:
        await admin.close()
    return {tp: m.offset for tp, m in committed.items()
            if m is not None and m.offset >= 0 and (marked is None or m.metadata == marked)}  # fmt: skip


class OffsetStarts:
    """The starts of the current assignment, looked up once (together) and dropped on revocation."""

    def __init__(self, settings: Settings, group_id: str, topics: set[str]) -> None:
        self.settings, self.group_id, self.topics = settings, group_id, topics
        self._known: dict[Hashable, int] = {}
        self._lookup: asyncio.Task[dict[Hashable, int]] | None = None
        self._revocations = 0  # a lookup that saw one start may be stale (another worker moved the offsets)
        self._lookup_after = 0  # the revocations before the current lookup began

    async def of(self, tp: Hashable, assigned: Iterable[Hashable]) -> int | None:
        """``tp``'s start, or ``None`` when it cannot be looked up (the first event is then the start).
        A lookup that partitions were revoked during is not kept: it is made once more."""
        assigned = list(assigned)
        for _ in range(2):
            if tp in self._known:
                return self._known[tp]
            if self._lookup is None or self._lookup.done():
                wanted = [TopicPartition(t.topic, t.partition) for t in assigned if t.topic in self.topics]  # type: ignore[attr-defined]
                if tp not in wanted:
                    wanted.append(TopicPartition(tp.topic, tp.partition))  # type: ignore[attr-defined]
                self._lookup = asyncio.ensure_future(start_offsets(self.settings, self.group_id, wanted))
                self._lookup_after = self._revocations
            lookup, after = self._lookup, self._lookup_after
            try:
                found = await asyncio.shield(lookup)
            except Exception as e:
                log.warning("could not look up where consumption starts (%s): the first event is taken as the start", e)
                return None
            if after == self._revocations:
                self._known.update(found)
                return self._known.get(tp)
        return None  # revoked during both lookups: the first event is the start

    def forget(self, tps: Iterable[Hashable]) -> None:
        self._revocations += 1
        for tp in tps:
            self._known.pop(tp, None)
