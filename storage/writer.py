"""The batched archive writer: one column-wise insert per (table, batch)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pyarrow as pa

from scheduling.events import DeadLetter, Event
from storage.client import ArchiveClient
from storage.rows import TABLES, TOPIC_TABLES, Position, to_arrow

log = logging.getLogger(__name__)

_TOPICS = {table: topic for topic, table in TOPIC_TABLES.items()}


class ArchiveWriter:
    """Writes batches of events into their archive table as one Arrow insert each.

    Idempotent by construction: every table is a ``ReplacingMergeTree`` whose sorting key
    ends in ``event_id`` or, for the event tables and ``decisions``, in the Kafka position (each copy of
    an event sent twice is its own row: migrations 0017, 0021), so writing the same events again (a
    redelivery after a crash between insert and offset commit) adds rows that ``FINAL`` counts once.

    A row that cannot be converted to its table's columns (the event models refuse what the
    columns cannot hold, so this is a gap in them) does not hold up its batch: the rest is
    written, and it goes to the ``deadletter`` table with the reason, as a dead letter of its
    topic (a batch that failed on it would be retried for ever, every topic stalled behind it).
    """

    def __init__(self, client: ArchiveClient) -> None:
        self.client = client
        self.rows_written: dict[str, int] = dict.fromkeys(TABLES, 0)
        self.inserts = 0
        self.unarchivable = 0  # rows sent to the deadletter table instead of their own

    def write(
        self,
        table: str,
        events: Sequence[Event],
        positions: Sequence[Position] | None = None,
    ) -> int:
        """Insert ``events`` (with their Kafka ``(partition, offset)``) into ``table``;
        returns the number of rows sent (dead letters of unconvertible rows included). Raises
        whatever the client raises: the caller decides about retries (and must not commit
        offsets past a failed write)."""
        if not events:
            return 0
        now = datetime.now(UTC)
        where = list(positions) if positions is not None else [(-1, -1)] * len(events)
        try:
            batch, refused = to_arrow(table, events, where, now), []
        except Exception:  # noqa: BLE001 - which rows? each on its own
            batch, refused = self._split(table, events, where, now)
        n = self.client.insert_arrow(table, batch)
        if refused:
            log.warning("archive: %d row(s) of %s cannot be archived there; written to deadletter: %s",
                        len(refused), table, refused[0].reason)  # fmt: skip
            n += self.client.insert_arrow("deadletter", to_arrow("deadletter", refused, None, now))
            self.unarchivable += len(refused)
        self.rows_written[table] += n
        self.inserts += 1
        return n

    @staticmethod
    def _split(table: str, events: Sequence[Event], where: list[Position],
               now: datetime) -> tuple[pa.Table, list[DeadLetter]]:  # fmt: skip
        """The convertible rows as one batch, and a dead letter for each of the others."""
        kept: list[int] = []
        refused: list[DeadLetter] = []
        for i, (event, (partition, offset)) in enumerate(zip(events, where, strict=True)):
            try:
                to_arrow(table, [event], [where[i]], now)
            except Exception as e:  # noqa: BLE001
                raw = event.to_bytes()
                # the whole event: this dead letter goes to the archive, not through Kafka (found by review: cut at 64 KiB)
                letter = DeadLetter.of(raw, f"the archive cannot hold it in {table}: {type(e).__name__}: {e}",
                                       topic=_TOPICS.get(table, table), partition=partition, offset=offset,
                                       keep=len(raw))  # fmt: skip
                # the same id and time when written again (a redelivery): counted once; a copy at another
                # position is another dead letter (found by review: two copies shared one id and one was lost)
                place = f"{partition}:{offset}:".encode() if offset >= 0 else b""
                identity = {"event_id": "unarchivable-" + hashlib.sha1(place + raw).hexdigest()[:24],
                            "event_time": event.event_time}  # fmt: skip
                refused.append(letter.model_copy(update=identity))
            else:
                kept.append(i)
        return to_arrow(table, [events[i] for i in kept], [where[i] for i in kept], now), refused
