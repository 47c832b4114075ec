"""Rows from ClickHouse's ``JSONCompact`` output: chdb's fallback for a result that Arrow cannot
carry (a UUID, a bare NULL's ``Nothing``). The session writes decimals and NaN/±inf quoted
(``output_format_json_quote_decimals``, ``…_quote_denormals``), and the column types in the
answer's ``meta`` turn them back into ``Decimal``, ``float``, ``date`` and ``datetime``, so the rows
hold what the Arrow path gives for those types: exact decimals, NaN apart from NULL, times."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

#: the session settings the conversion relies on (set once per chdb connection)
JSON_SETTINGS = {
    "output_format_json_quote_64bit_integers": 0,  # Int64/UInt64/Int128/… as numbers (Python's are exact)
    "output_format_json_quote_decimals": 1,
    "output_format_json_quote_denormals": 1,
    "output_format_json_validate_utf8": 1,  # invalid UTF-8 replaced, as rows_from_arrow decodes it
}


def _unwrap(type_: str, *wrappers: str) -> str | None:
    for w in wrappers:
        if type_.startswith(f"{w}(") and type_.endswith(")"):
            return type_[len(w) + 1 : -1]
    return None


def _typed(value: Any, type_: str, zone: str = "UTC") -> Any:
    if value is None:
        return None
    inner = _unwrap(type_, "Nullable", "LowCardinality")
    if inner is not None:
        return _typed(value, inner, zone)
    element = _unwrap(type_, "Array")
    if element is not None and isinstance(value, list):
        return [_typed(v, element, zone) for v in value]
    if type_.startswith("Float") and isinstance(value, str):
        return float(value)  # "nan", "inf", "-inf"
    if type_.startswith("Decimal") and isinstance(value, str):
        return Decimal(value)
    if type_.startswith(("DateTime", "Date")) and isinstance(value, str):
        return _time(value, type_, zone)
    return value  # (maps and tuples as ClickHouse's JSON gives them)


def _time(value: str, type_: str, session_zone: str = "UTC") -> date | datetime | int:
    """A time as the Arrow path gives it (a result with a UUID column came back with its times as
    text before): a ``Date``/``Date32`` as a ``date``, a ``DateTime64`` as an aware ``datetime`` in its
    column's time zone (the session's without one, which ClickHouse writes it in), a ``DateTime`` as
    epoch seconds (Arrow's UInt32)."""
    if not type_.startswith("DateTime"):
        return date.fromisoformat(value)
    zone = re.search(r"'([^']+)'", type_)
    t = datetime.fromisoformat(value).replace(tzinfo=ZoneInfo(zone.group(1) if zone else session_zone))
    if not zone:
        t = t.astimezone(UTC)
    return t if type_.startswith("DateTime64") else int(t.timestamp())


def rows_from_json_compact(raw: bytes, zone: str = "UTC") -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and row tuples of a ``JSONCompact`` answer; ``zone``: the session's time zone, in which
    ClickHouse writes a time whose type names none."""
    answer = json.loads(raw)
    meta = answer["meta"]
    return [c["name"] for c in meta], [tuple(_typed(v, c["type"], zone) for v, c in zip(r, meta, strict=True))
                                       for r in answer["data"]]  # fmt: skip
