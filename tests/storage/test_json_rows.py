"""chdb's ``JSONCompact`` fallback (``storage/json_rows.py``): a time whose type names no zone is written in
the session's zone. Found by review: it was read as UTC, and on a host off UTC an ad-hoc query with a UUID
column (``semsched sql``) got its times hours off."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from storage.json_rows import rows_from_json_compact


def answer(value: str, type_: str) -> bytes:
    return json.dumps({"meta": [{"name": "t", "type": type_}], "data": [[value]]}).encode()


def test_a_time_without_a_zone_is_read_in_the_sessions_zone() -> None:
    instant = datetime.fromtimestamp(1_700_000_000, UTC)
    _, [(t64,)] = rows_from_json_compact(answer("2023-11-14 17:13:20.000", "DateTime64(3)"), "America/New_York")
    _, [(t,)] = rows_from_json_compact(answer("2023-11-14 17:13:20", "DateTime"), "America/New_York")
    assert t64 == instant and t == 1_700_000_000
    _, [(utc,)] = rows_from_json_compact(answer("2023-11-14 22:13:20.000", "DateTime64(3)"))  # a UTC session
    _, [(named,)] = rows_from_json_compact(answer("2023-11-14 22:13:20.000", "DateTime64(3, 'UTC')"), "Asia/Tokyo")
    assert utc == named == instant  # a zone the type names wins
