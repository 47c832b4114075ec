"""The dead-letter panel groups by the same class as the worker's counter (``scheduling/deadletter_classes.py``):
a reason names ids, and grouped by its text every message was a series of its own (found by review: 50
duplicate jobs, 52 series)."""

from __future__ import annotations

from scheduling.deadletter_classes import reason_class, reason_class_sql
from storage.client import ArchiveClient

REASONS = [
    "empty message (null value)", "  Not UTF-8: 'utf-8' codec", "event of cluster 'x' arrived on partition 1",
    "internal error while handling: KeyError", "job id 'a' was already submitted (event e)",
    "job id 'b' was already submitted (event f)", "invalid actions command: bad", "message of 2,000,000 bytes",
    "started report of j (d) on n: gpu_indices [] name 0 GPU(s), the job asks for 2", "something new",
]  # fmt: skip


def test_the_panels_class_is_the_counters(client: ArchiveClient) -> None:
    values = ", ".join("'" + r.replace("'", "\\'") + "'" for r in REASONS)
    _, rows = client.query_rows(f"SELECT {reason_class_sql('r')} FROM (SELECT arrayJoin([{values}]) AS r)")
    assert [row[0] for row in rows] == [reason_class(r) for r in REASONS]
    assert len({reason_class(r) for r in REASONS if r.startswith("job id")}) == 1  # two ids, one series
