"""The archiver's offsets: what it has read of each partition, and what it may commit.

The archiver commits a topic's partitions only up to what it has written (or refused as
undecodable) to the topic's table. :class:`ArchiveOffsets` keeps, per partition, the next
offset read and the last one this member committed, and commits one snapshot at a time and
only forward: a flush's commit and the empty-buffer one can be in flight together (aiokafka
retries a commit after a pause), and an older snapshot landing last would move the group back
(re-reads, counted once by ``FINAL``, but needless).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

log = logging.getLogger("streams.archiver")


class ArchiveOffsets:
    def __init__(self, table_of: Callable[[TopicPartition], str]) -> None:
        """``table_of``: the archive table a partition's topic is written to."""
        self._table_of = table_of
        self.consumed: dict[TopicPartition, int] = {}  # next offset to read, not yet committed
        self.committed: dict[TopicPartition, int] = {}  # the last offset this member committed
        self._lock = asyncio.Lock()  # one commit at a time: an older one never lands after a newer one

    def read(self, tp: TopicPartition, offset: int) -> None:
        """The record at ``offset`` of ``tp`` was read (buffered or refused)."""
        self.consumed[tp] = offset + 1

    def of_table(self, table: str) -> dict[TopicPartition, int]:
        """The next offset to read of each partition of ``table``'s topic, as read so far."""
        return {tp: off for tp, off in self.consumed.items() if self._table_of(tp) == table}

    async def commit(self, consumer: AIOKafkaConsumer | None, upto: dict[TopicPartition, int]) -> bool:
        """Commit ``upto`` (offsets of one topic's partitions, all written or undecodable) on the
        partitions ``consumer`` still holds, past what was committed; True if a commit was sent."""
        if consumer is None or not upto:
            return False
        async with self._lock:
            assigned = consumer.assignment()
            offsets = {tp: OffsetAndMetadata(off, "") for tp, off in upto.items()
                       if tp in assigned and off > self.committed.get(tp, -1)}  # fmt: skip
            try:
                if offsets:
                    await consumer.commit(offsets)
            except Exception as e:  # noqa: BLE001 - a rebalance mid-commit: data is written, re-read is harmless
                log.warning("archiver: commit of %s failed (%s); those rows may be re-archived",
                            sorted({tp.topic for tp in offsets}), e)  # fmt: skip
                return False
            for tp, o in offsets.items():
                self.committed[tp] = o.offset
            for tp, off in upto.items():
                if self.consumed.get(tp) == off and off <= self.committed.get(tp, -1):
                    del self.consumed[tp]
            return bool(offsets)

    def forget(self, revoked: Any) -> None:
        """Partitions another member owns now: their read and committed offsets are no longer
        this member's to commit (rows of theirs still buffered are written, twice at worst)."""
        for tp in revoked:
            self.consumed.pop(tp, None)
            self.committed.pop(tp, None)
