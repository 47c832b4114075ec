"""The batched archive writer: one column-wise insert per (table, batch)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from scheduling.events import Event
from storage.client import ArchiveClient
from storage.rows import TABLES, Position, to_arrow


class ArchiveWriter:
    """Writes batches of events into their archive table as one Arrow insert each.

    Idempotent by construction: every table is a ``ReplacingMergeTree`` whose sorting key
    ends in ``event_id``, so writing the same events again (a redelivery after a crash
    between insert and offset commit) adds rows that queries (``FINAL``) count once.
    """

    def __init__(self, client: ArchiveClient) -> None:
        self.client = client
        self.rows_written: dict[str, int] = dict.fromkeys(TABLES, 0)
        self.inserts = 0

    def write(
        self,
        table: str,
        events: Sequence[Event],
        positions: Sequence[Position] | None = None,
    ) -> int:
        """Insert ``events`` (with their Kafka ``(partition, offset)``) into ``table``;
        returns the number of rows sent. Raises whatever the client raises: the caller
        decides about retries (and must not commit offsets past a failed write)."""
        if not events:
            return 0
        batch = to_arrow(table, events, positions, datetime.now(UTC))
        n = self.client.insert_arrow(table, batch)
        self.rows_written[table] += n
        self.inserts += 1
        return n
